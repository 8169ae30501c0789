//! Building, signing and serializing orders: exact integer amounts from (price ticks, whole
//! shares), the EIP-712 `Order` signature, and the POST /order body.

use ladder_protocol::wire::{OrderType, PostOrderRequest};
use ladder_protocol::{
    amounts_from_price_and_size, Address, Bytes16, ExchangeDomain, Order, Side, SignatureType,
    SignedOrder, B256, U256,
};

use crate::client::error::ClientError;
use crate::client::wallet::Wallet;

/// An order to sign: what to trade, at what price, and the order parameters.
///
/// Defaults: the maker is the signing wallet itself, the beneficiary is the maker, the signature
/// type is 3 (smart account, the only one the service accepts for orders), a random salt, no
/// expiration, nonce 0, zero identifier and metadata.
#[derive(Debug, Clone)]
pub struct OrderBuilder {
    token_id: U256,
    side: Side,
    price_ticks: u32,
    shares: u64,
    maker: Option<Address>,
    beneficiary: Option<Address>,
    salt: Option<U256>,
    expiration_s: u64,
    nonce: U256,
    identifier: Bytes16,
    metadata: B256,
    signature_type: SignatureType,
}

impl OrderBuilder {
    /// An order for `shares` whole shares of `token_id` at `price_ticks` (0.0001 each).
    pub fn new(token_id: U256, side: Side, price_ticks: u32, shares: u64) -> OrderBuilder {
        OrderBuilder {
            token_id,
            side,
            price_ticks,
            shares,
            maker: None,
            beneficiary: None,
            salt: None,
            expiration_s: 0,
            nonce: U256::ZERO,
            identifier: Bytes16::ZERO,
            metadata: B256::ZERO,
            signature_type: SignatureType::SmartAccount,
        }
    }

    /// The trading account (the smart account the signing EOA controls).
    pub fn maker(mut self, maker: Address) -> OrderBuilder {
        self.maker = Some(maker);
        self
    }

    /// Who receives the proceeds (default: the maker).
    pub fn beneficiary(mut self, beneficiary: Address) -> OrderBuilder {
        self.beneficiary = Some(beneficiary);
        self
    }

    /// A fixed salt (default: random).
    pub fn salt(mut self, salt: U256) -> OrderBuilder {
        self.salt = Some(salt);
        self
    }

    /// Unix seconds after which the order is void (required for GTD; 0 = none).
    pub fn expiration_s(mut self, expiration_s: u64) -> OrderBuilder {
        self.expiration_s = expiration_s;
        self
    }

    /// Exchange nonce.
    pub fn nonce(mut self, nonce: U256) -> OrderBuilder {
        self.nonce = nonce;
        self
    }

    /// Client identifier.
    pub fn identifier(mut self, identifier: Bytes16) -> OrderBuilder {
        self.identifier = identifier;
        self
    }

    /// Client metadata.
    pub fn metadata(mut self, metadata: B256) -> OrderBuilder {
        self.metadata = metadata;
        self
    }

    /// Signature type (default 3, smart account).
    pub fn signature_type(mut self, signature_type: SignatureType) -> OrderBuilder {
        self.signature_type = signature_type;
        self
    }

    /// The unsigned order, signed by `signer`, with amounts from
    /// [`amounts_from_price_and_size`].
    pub fn build(&self, signer: Address) -> Result<Order, ClientError> {
        let (maker_amount, taker_amount) =
            amounts_from_price_and_size(self.side, self.price_ticks, self.shares)?;
        let maker = self.maker.unwrap_or(signer);
        Ok(Order {
            salt: self
                .salt
                .unwrap_or_else(|| U256::from_u64(rand::random::<u64>())),
            maker,
            signer,
            beneficiary: self.beneficiary.unwrap_or(maker),
            token_id: self.token_id,
            maker_amount: U256::from_u64(maker_amount),
            taker_amount: U256::from_u64(taker_amount),
            expiration: U256::from_u64(self.expiration_s),
            nonce: self.nonce,
            identifier: self.identifier,
            metadata: self.metadata,
            side: self.side,
            signature_type: self.signature_type,
        })
    }

    /// The order signed by `wallet` under `domain`.
    pub fn sign(
        &self,
        wallet: &Wallet,
        domain: &ExchangeDomain,
    ) -> Result<SignedOrder, ClientError> {
        let order = self.build(wallet.address())?;
        Ok(sign_order(order, wallet, domain))
    }
}

/// Signs an order with `wallet` (which should be the order's `signer`).
pub fn sign_order(order: Order, wallet: &Wallet, domain: &ExchangeDomain) -> SignedOrder {
    let signature = wallet.sign_digest(&order.digest(domain));
    SignedOrder { order, signature }
}

/// The POST /order body `{"order":{...},"orderType":"GTC","postOnly":false}`.
pub fn post_order_body(order: &SignedOrder, order_type: OrderType, post_only: bool) -> String {
    PostOrderRequest {
        order: *order,
        order_type,
        post_only,
    }
    .to_json()
}

/// The POST /orders body: an array of POST /order bodies.
pub fn post_orders_body(requests: &[PostOrderRequest]) -> String {
    // Serializing strings, integers and booleans into a String cannot fail.
    serde_json::to_string(requests).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_protocol::wire::parse_post_orders;
    use ladder_protocol::{price_and_size_from_amounts, CHAIN_ID, DEFAULT_EXCHANGE_ADDRESS};

    const EOA0_KEY: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    const YES_TOKEN: &str =
        "52114319501245915516055106046884209969926127482827954674443846427813813222426";

    /// The first order of `protocol/tests/data/signing.json`: BUY 10 Yes at 0.55.
    #[test]
    fn builds_the_known_answer_order_exactly() {
        let wallet = Wallet::from_hex(EOA0_KEY).unwrap();
        let maker = Address::parse("0x5a11c0C0a000000000000000000000000000A001").unwrap();
        let order = OrderBuilder::new(YES_TOKEN.parse().unwrap(), Side::Buy, 5500, 10)
            .maker(maker)
            .salt(U256::from_u64(1_234_567))
            .identifier(Bytes16::from_hex("0x00112233445566778899aabbccddeeff").unwrap())
            .sign(
                &wallet,
                &ExchangeDomain::new(CHAIN_ID, DEFAULT_EXCHANGE_ADDRESS),
            )
            .unwrap();
        assert_eq!(order.order.maker_amount, U256::from_u64(5_500_000));
        assert_eq!(order.order.taker_amount, U256::from_u64(10_000_000));
        assert_eq!(order.order.beneficiary, maker);
        assert_eq!(
            order.signature.to_string(),
            "0x54554ff3357d0512c7225c528998a6739bdc90c947c3f28f49dfdd904d00862d78cc173a734690ab28ec40508c74219399df817d8199dabd1158d62ef6fb9c811c"
        );
    }

    #[test]
    fn body_parses_on_the_server_and_recovers_to_the_wallet() {
        let wallet = Wallet::random();
        let domain = ExchangeDomain::default();
        let order = OrderBuilder::new(U256::from_u64(9), Side::Sell, 4200, 25)
            .expiration_s(1_893_456_000)
            .sign(&wallet, &domain)
            .unwrap();
        let body = post_order_body(&order, OrderType::Gtd, true);
        assert!(body.contains("\"side\":1,\"signatureType\":3,"), "{body}");
        assert!(
            body.ends_with(",\"orderType\":\"GTD\",\"postOnly\":true}"),
            "{body}"
        );
        let request = PostOrderRequest::parse(body.as_bytes()).unwrap();
        assert_eq!(request.order, order);
        let verified = request.order.verify(&domain).unwrap();
        assert_eq!(verified.order().signer, wallet.address());
        let (price_ticks, size_units) = price_and_size_from_amounts(
            Side::Sell,
            verified.order().maker_amount,
            verified.order().taker_amount,
        )
        .unwrap();
        assert_eq!((price_ticks, size_units), (4200, 25_000_000));
    }

    #[test]
    fn batch_body_parses_back() {
        let wallet = Wallet::random();
        let domain = ExchangeDomain::default();
        let requests: Vec<PostOrderRequest> = (1..=3)
            .map(|shares| PostOrderRequest {
                order: OrderBuilder::new(U256::from_u64(1), Side::Buy, 100, shares)
                    .sign(&wallet, &domain)
                    .unwrap(),
                order_type: OrderType::Fak,
                post_only: false,
            })
            .collect();
        assert_eq!(
            parse_post_orders(post_orders_body(&requests).as_bytes()).unwrap(),
            requests
        );
    }

    #[test]
    fn invalid_price_or_size_is_an_error() {
        let wallet = Wallet::random();
        let domain = ExchangeDomain::default();
        let result =
            OrderBuilder::new(U256::from_u64(1), Side::Buy, 10_000, 1).sign(&wallet, &domain);
        assert!(matches!(result, Err(ClientError::Amount(_))));
        let result =
            OrderBuilder::new(U256::from_u64(1), Side::Buy, 5000, 0).sign(&wallet, &domain);
        assert!(matches!(result, Err(ClientError::Amount(_))));
    }
}
