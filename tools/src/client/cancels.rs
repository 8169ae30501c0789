//! Signed cancel bodies: DELETE /order, DELETE /orders and DELETE /cancel-market-orders.

use ladder_protocol::wire::{CancelMarketOrdersRequest, CancelOrderRequest};
use ladder_protocol::{
    cancel_market_orders_digest, cancel_order_digest, ExchangeDomain, SignatureType, B256, U256,
};

use crate::client::wallet::Wallet;

/// The signer field of a cancel: the wallet for a smart-account signature, absent for an EOA.
fn signer_field(
    wallet: &Wallet,
    signature_type: SignatureType,
) -> Option<ladder_protocol::Address> {
    match signature_type {
        SignatureType::SmartAccount => Some(wallet.address()),
        SignatureType::Eoa | SignatureType::Other(_) => None,
    }
}

/// A DELETE /order body signed as `CancelOrder(orderId, marketId)`; write it with
/// [`CancelOrderRequest::to_json`].
pub fn cancel_order_request(
    wallet: &Wallet,
    domain: &ExchangeDomain,
    order_id: u64,
    market_id: B256,
    signature_type: SignatureType,
) -> CancelOrderRequest {
    let signature = wallet.sign_digest(&cancel_order_digest(order_id, &market_id, domain));
    CancelOrderRequest {
        order_id,
        market_id,
        signature,
        signature_type,
        signer: signer_field(wallet, signature_type),
    }
}

/// The DELETE /orders body: an array of DELETE /order bodies.
pub fn cancel_orders_body(requests: &[CancelOrderRequest]) -> String {
    // Serializing strings and integers into a String cannot fail.
    serde_json::to_string(requests).unwrap_or_default()
}

/// A DELETE /cancel-market-orders body signed as `CancelMarketOrders(marketId)`, optionally
/// limited to one token; write it with [`CancelMarketOrdersRequest::to_json`].
pub fn cancel_market_orders_request(
    wallet: &Wallet,
    domain: &ExchangeDomain,
    market_id: B256,
    token_id: Option<U256>,
    signature_type: SignatureType,
) -> CancelMarketOrdersRequest {
    let signature = wallet.sign_digest(&cancel_market_orders_digest(&market_id, domain));
    CancelMarketOrdersRequest {
        market_id,
        signature,
        signature_type,
        signer: signer_field(wallet, signature_type),
        token_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_protocol::wire::parse_cancel_orders;

    const EOA0_KEY: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    const MARKET: &str = "0x3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b";

    /// The CancelOrder vector of `protocol/tests/data/signing.json`.
    #[test]
    fn cancel_order_matches_the_known_answer() {
        let wallet = Wallet::from_hex(EOA0_KEY).unwrap();
        let domain = ExchangeDomain::default();
        let request = cancel_order_request(
            &wallet,
            &domain,
            42,
            MARKET.parse().unwrap(),
            SignatureType::SmartAccount,
        );
        assert_eq!(
            request.signature.to_string(),
            "0xfc7b3575ac376285221ded348e51c4e7ded666bc836adf70a5aa5519ab7eb3ec6810d58ee3882f2ceeba7883e369ff46f9b344aee2ee578ecd508a038905face1b"
        );
        let parsed = CancelOrderRequest::parse(request.to_json().as_bytes()).unwrap();
        assert_eq!(parsed, request);
        assert_eq!(
            parsed.signature.recover_address(&parsed.digest(&domain)),
            Ok(wallet.address())
        );
    }

    #[test]
    fn eoa_cancels_carry_no_signer() {
        let wallet = Wallet::random();
        let request = cancel_order_request(
            &wallet,
            &ExchangeDomain::default(),
            1,
            B256::ZERO,
            SignatureType::Eoa,
        );
        assert!(!request.to_json().contains("signer"));
        let body = cancel_orders_body(&[request, request]);
        assert_eq!(
            parse_cancel_orders(body.as_bytes()).unwrap(),
            vec![request, request]
        );
    }

    #[test]
    fn cancel_market_orders_parses_back_and_recovers() {
        let wallet = Wallet::random();
        let domain = ExchangeDomain::default();
        let request = cancel_market_orders_request(
            &wallet,
            &domain,
            MARKET.parse().unwrap(),
            Some(U256::from_u64(5)),
            SignatureType::SmartAccount,
        );
        let parsed = CancelMarketOrdersRequest::parse(request.to_json().as_bytes()).unwrap();
        assert_eq!(parsed, request);
        assert_eq!(
            parsed.signature.recover_address(&parsed.digest(&domain)),
            Ok(wallet.address())
        );
    }
}
