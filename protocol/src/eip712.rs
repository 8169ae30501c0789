//! EIP-712 typed-data hashing for the four signed structs of API.md §4: `Order`, `CancelOrder`,
//! `CancelMarketOrders` (exchange domain) and `ClobAuth` (auth domain).
//!
//! digest = keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(message)). Domain separators are
//! computed once when a domain is built; type hashes once per process.

use std::sync::LazyLock;

use crate::address::Address;
use crate::fixed_bytes::B256;
use crate::keccak::{keccak256, keccak256_concat};
use crate::order::Order;
use crate::u256::U256;

/// The chain id of the service (API.md §1).
pub const CHAIN_ID: u64 = 3223;
/// The default exchange contract, the exchange domain's `verifyingContract` (API.md §4).
pub const DEFAULT_EXCHANGE_ADDRESS: Address = Address([
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc1, 0x0b,
]);
/// `name` of the order-signing (exchange) domain.
pub const EXCHANGE_DOMAIN_NAME: &str = "SVC Market CLOB";
/// `name` of the L1 authentication domain.
pub const AUTH_DOMAIN_NAME: &str = "ClobAuthDomain";
/// `version` of both domains.
pub const DOMAIN_VERSION: &str = "1";
/// The fixed `message` of every `ClobAuth` struct.
pub const CLOB_AUTH_MESSAGE: &str = "This message attests that I control the given wallet";

/// EIP-712 type of the exchange domain (with a verifying contract).
pub const EXCHANGE_DOMAIN_TYPE: &str =
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)";
/// EIP-712 type of the auth domain (without a verifying contract).
pub const AUTH_DOMAIN_TYPE: &str = "EIP712Domain(string name,string version,uint256 chainId)";
/// EIP-712 type of a signed order. It has no fee rate (API.md §20).
pub const ORDER_TYPE: &str = "Order(uint256 salt,address maker,address signer,address beneficiary,uint256 tokenId,uint256 makerAmount,uint256 takerAmount,uint256 expiration,uint256 nonce,bytes16 identifier,bytes32 metadata,uint8 side,uint8 signatureType)";
/// EIP-712 type of a single-order cancel.
pub const CANCEL_ORDER_TYPE: &str = "CancelOrder(uint256 orderId,bytes32 marketId)";
/// EIP-712 type of a cancel of every order on one market.
pub const CANCEL_MARKET_ORDERS_TYPE: &str = "CancelMarketOrders(bytes32 marketId)";
/// EIP-712 type of the L1 authentication struct.
pub const CLOB_AUTH_TYPE: &str =
    "ClobAuth(address address,string timestamp,uint256 nonce,string message)";

/// Hashes computed once per process from the constants above.
struct Constants {
    order_type_hash: [u8; 32],
    cancel_order_type_hash: [u8; 32],
    cancel_market_orders_type_hash: [u8; 32],
    clob_auth_type_hash: [u8; 32],
    clob_auth_message_hash: [u8; 32],
}

static CONSTANTS: LazyLock<Constants> = LazyLock::new(|| Constants {
    order_type_hash: keccak256(ORDER_TYPE.as_bytes()),
    cancel_order_type_hash: keccak256(CANCEL_ORDER_TYPE.as_bytes()),
    cancel_market_orders_type_hash: keccak256(CANCEL_MARKET_ORDERS_TYPE.as_bytes()),
    clob_auth_type_hash: keccak256(CLOB_AUTH_TYPE.as_bytes()),
    clob_auth_message_hash: keccak256(CLOB_AUTH_MESSAGE.as_bytes()),
});

/// keccak256 of [`ORDER_TYPE`].
pub fn order_type_hash() -> [u8; 32] {
    CONSTANTS.order_type_hash
}

/// keccak256 of [`CANCEL_ORDER_TYPE`].
pub fn cancel_order_type_hash() -> [u8; 32] {
    CONSTANTS.cancel_order_type_hash
}

/// keccak256 of [`CANCEL_MARKET_ORDERS_TYPE`].
pub fn cancel_market_orders_type_hash() -> [u8; 32] {
    CONSTANTS.cancel_market_orders_type_hash
}

/// keccak256 of [`CLOB_AUTH_TYPE`].
pub fn clob_auth_type_hash() -> [u8; 32] {
    CONSTANTS.clob_auth_type_hash
}

/// keccak256(0x1901 ‖ domain separator ‖ struct hash).
fn typed_data_digest(separator: &[u8; 32], struct_hash: &[u8; 32]) -> [u8; 32] {
    keccak256_concat(&[b"\x19\x01", separator, struct_hash])
}

/// A `uint256` word holding a `u64`.
fn u64_word(value: u64) -> [u8; 32] {
    U256::from_u64(value).to_be_bytes()
}

/// The order-signing domain `{name: "SVC Market CLOB", version: "1", chainId,
/// verifyingContract}` with its separator precomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeDomain {
    chain_id: u64,
    verifying_contract: Address,
    separator: [u8; 32],
}

impl ExchangeDomain {
    /// Builds the domain and hashes its separator.
    pub fn new(chain_id: u64, verifying_contract: Address) -> ExchangeDomain {
        let separator = keccak256_concat(&[
            &keccak256(EXCHANGE_DOMAIN_TYPE.as_bytes()),
            &keccak256(EXCHANGE_DOMAIN_NAME.as_bytes()),
            &keccak256(DOMAIN_VERSION.as_bytes()),
            &u64_word(chain_id),
            &verifying_contract.to_word(),
        ]);
        ExchangeDomain {
            chain_id,
            verifying_contract,
            separator,
        }
    }

    /// The chain id.
    pub const fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The exchange contract address.
    pub const fn verifying_contract(&self) -> Address {
        self.verifying_contract
    }

    /// The domain separator.
    pub const fn separator(&self) -> &[u8; 32] {
        &self.separator
    }

    /// The EIP-712 digest of a struct hash under this domain.
    pub fn digest(&self, struct_hash: &[u8; 32]) -> [u8; 32] {
        typed_data_digest(&self.separator, struct_hash)
    }
}

/// The default exchange domain: chain 3223, contract [`DEFAULT_EXCHANGE_ADDRESS`].
impl Default for ExchangeDomain {
    fn default() -> ExchangeDomain {
        ExchangeDomain::new(CHAIN_ID, DEFAULT_EXCHANGE_ADDRESS)
    }
}

/// The L1 authentication domain `{name: "ClobAuthDomain", version: "1", chainId}` with its
/// separator precomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthDomain {
    chain_id: u64,
    separator: [u8; 32],
}

impl AuthDomain {
    /// Builds the domain and hashes its separator.
    pub fn new(chain_id: u64) -> AuthDomain {
        let separator = keccak256_concat(&[
            &keccak256(AUTH_DOMAIN_TYPE.as_bytes()),
            &keccak256(AUTH_DOMAIN_NAME.as_bytes()),
            &keccak256(DOMAIN_VERSION.as_bytes()),
            &u64_word(chain_id),
        ]);
        AuthDomain {
            chain_id,
            separator,
        }
    }

    /// The chain id.
    pub const fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The domain separator.
    pub const fn separator(&self) -> &[u8; 32] {
        &self.separator
    }

    /// The EIP-712 digest of a struct hash under this domain.
    pub fn digest(&self, struct_hash: &[u8; 32]) -> [u8; 32] {
        typed_data_digest(&self.separator, struct_hash)
    }
}

/// The auth domain on chain 3223.
impl Default for AuthDomain {
    fn default() -> AuthDomain {
        AuthDomain::new(CHAIN_ID)
    }
}

/// hashStruct of an `Order`.
pub fn order_struct_hash(order: &Order) -> [u8; 32] {
    let mut identifier = [0u8; 32];
    identifier[..16].copy_from_slice(order.identifier.as_bytes());
    keccak256_concat(&[
        &CONSTANTS.order_type_hash,
        &order.salt.to_be_bytes(),
        &order.maker.to_word(),
        &order.signer.to_word(),
        &order.beneficiary.to_word(),
        &order.token_id.to_be_bytes(),
        &order.maker_amount.to_be_bytes(),
        &order.taker_amount.to_be_bytes(),
        &order.expiration.to_be_bytes(),
        &order.nonce.to_be_bytes(),
        // bytes16 is left-aligned in its word; bytes32 is the word itself.
        &identifier,
        order.metadata.as_bytes(),
        &u64_word(u64::from(order.side.as_u8())),
        &u64_word(u64::from(order.signature_type.as_u8())),
    ])
}

/// The order's EIP-712 digest, which is also its order hash (`orderID`, `order_hash`).
pub fn order_digest(order: &Order, domain: &ExchangeDomain) -> [u8; 32] {
    domain.digest(&order_struct_hash(order))
}

/// hashStruct of `CancelOrder(uint256 orderId, bytes32 marketId)`.
pub fn cancel_order_struct_hash(order_id: u64, market_id: &B256) -> [u8; 32] {
    keccak256_concat(&[
        &CONSTANTS.cancel_order_type_hash,
        &u64_word(order_id),
        market_id.as_bytes(),
    ])
}

/// The EIP-712 digest of a `CancelOrder`.
pub fn cancel_order_digest(order_id: u64, market_id: &B256, domain: &ExchangeDomain) -> [u8; 32] {
    domain.digest(&cancel_order_struct_hash(order_id, market_id))
}

/// hashStruct of `CancelMarketOrders(bytes32 marketId)`.
pub fn cancel_market_orders_struct_hash(market_id: &B256) -> [u8; 32] {
    keccak256_concat(&[
        &CONSTANTS.cancel_market_orders_type_hash,
        market_id.as_bytes(),
    ])
}

/// The EIP-712 digest of a `CancelMarketOrders`.
pub fn cancel_market_orders_digest(market_id: &B256, domain: &ExchangeDomain) -> [u8; 32] {
    domain.digest(&cancel_market_orders_struct_hash(market_id))
}

/// hashStruct of `ClobAuth(address address, string timestamp, uint256 nonce, string message)`
/// with the fixed [`CLOB_AUTH_MESSAGE`].
pub fn clob_auth_struct_hash(address: &Address, timestamp: &str, nonce: U256) -> [u8; 32] {
    keccak256_concat(&[
        &CONSTANTS.clob_auth_type_hash,
        &address.to_word(),
        &keccak256(timestamp.as_bytes()),
        &nonce.to_be_bytes(),
        &CONSTANTS.clob_auth_message_hash,
    ])
}

/// The EIP-712 digest of a `ClobAuth`.
pub fn clob_auth_digest(
    address: &Address,
    timestamp: &str,
    nonce: U256,
    domain: &AuthDomain,
) -> [u8; 32] {
    domain.digest(&clob_auth_struct_hash(address, timestamp, nonce))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_exchange_address_is_c10b() {
        // API.md §4 writes it `...C10b`, which is not its EIP-55 form (`...C10B`).
        assert_eq!(
            DEFAULT_EXCHANGE_ADDRESS,
            Address::parse_ignoring_checksum("0x000000000000000000000000000000000000C10b").unwrap()
        );
        assert_eq!(
            DEFAULT_EXCHANGE_ADDRESS.to_string(),
            "0x000000000000000000000000000000000000C10B"
        );
    }

    #[test]
    fn domains_of_other_chains_have_other_separators() {
        assert_ne!(
            ExchangeDomain::new(1, DEFAULT_EXCHANGE_ADDRESS),
            ExchangeDomain::default()
        );
        assert_ne!(
            AuthDomain::new(1).separator(),
            AuthDomain::default().separator()
        );
    }
}
