//! Ladder's domain values, one definition each, shared by `protocol` (the wire) and `engine`
//! (the state machine) so that an order crosses the layers without being converted.
//!
//! - [`Address`] and [`FixedBytes`] (`B256`, `Bytes32`, `Bytes16`): `0x` hex in human-readable
//!   formats (JSON: addresses in EIP-55 form), raw bytes in binary ones (the journal, snapshots).
//! - [`Side`], [`Outcome`], [`OrderType`], [`OrderStatus`], [`TradeStatus`]: the names of the
//!   API in JSON, a variant index in binary formats.
//! - [`price`]: prices in integer ticks of 0.0001, amounts in integer base units (6 decimals),
//!   and the one formatter of a price as text.
//!
//! Nothing here depends on another Ladder crate.

pub mod address;
pub mod address_memo;
pub mod fixed_bytes;
pub mod keccak;
pub mod price;
pub mod sides;
pub mod statuses;

pub use address::{Address, AddressError};
pub use address_memo::{remembered, AddressMemo};
pub use fixed_bytes::{Bytes16, Bytes32, FixedBytes, HexError, B256};
pub use price::{
    format_price_ticks, PriceTicks, PriceTicksDisplay, Units, PRICE_DECIMALS, PRICE_SCALE,
    UNITS_PER_SHARE,
};
pub use sides::{OrderType, OrderTypeError, Outcome, Side};
pub use statuses::{OrderStatus, TradeStatus};
