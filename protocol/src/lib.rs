//! Ladder's wire types, units and cryptography (EIP-712, secp256k1 recovery, EIP-55, L2 HMAC,
//! owners).
//!
//! Values arrive as text and leave as text; in between they are typed: [`U256`], [`Address`],
//! [`B256`], [`Signature`], prices in integer ticks ([`units`]). A request body becomes a
//! [`SignedOrder`] (well-formed, unchecked) and then a [`VerifiedOrder`] (its signature recovers
//! to its signer).

pub mod eip712;
pub mod l2;
pub mod order;
pub mod owner;
pub mod signature;
pub mod u256;
pub mod units;
pub mod user_op;
pub mod wire;

/// The domain values this crate shares with the engine (see `ladder-types`).
pub use ladder_types::{address, fixed_bytes, keccak};

pub use address::{Address, AddressError};
pub use eip712::{
    cancel_market_orders_digest, cancel_order_digest, clob_auth_digest, order_digest, AuthDomain,
    ExchangeDomain, CHAIN_ID, CLOB_AUTH_MESSAGE, DEFAULT_EXCHANGE_ADDRESS,
};
pub use fixed_bytes::{Bytes16, FixedBytes, HexError, B256};
pub use l2::{constant_time_eq, l2_signature, verify_l2, L2Error, L2Secret};
pub use order::{HashedOrder, Order, Side, SignatureType, SignedOrder, VerifiedOrder};
pub use owner::owner_uuid;
/// The secp256k1 secret key type used by [`sign_digest`] and [`address_of`].
pub use secp256k1::SecretKey;
pub use signature::{address_of, sign_digest, Signature, SignatureError};
pub use u256::{U256Error, U256};
pub use units::{
    amounts_from_price_and_size, format_price_ticks, parse_price_ticks,
    price_and_size_from_amounts, AmountError, OffendingPrice, PriceError, TickSize,
};
