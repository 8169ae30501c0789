//! Plain value types of the engine: the shared domain values (`ladder-types`), and the
//! engine's own: the book's axis, match types, notional arithmetic.
//!
//! The engine knows nothing of JSON, hex or decimal strings: identifiers are byte arrays,
//! prices are integer ticks of 0.0001 and amounts are integer base units (6 decimals).

use serde::{Deserialize, Serialize};

pub use ladder_types::{
    format_price_ticks, Address, Bytes32, FixedBytes, OrderType, Outcome, PriceTicks,
    PriceTicksDisplay, Side, Units, PRICE_SCALE, UNITS_PER_SHARE,
};

/// A timestamp in nanoseconds since the Unix epoch, stamped by the sequencer.
pub type TimestampNs = u64;
/// The engine's numeric order id (the `id` of open orders and cancels).
pub type OrderId = u64;

/// Nanoseconds in one second.
pub const NANOS_PER_SECOND: u64 = 1_000_000_000;
/// Nanoseconds in one millisecond.
pub const NANOS_PER_MILLI: u64 = 1_000_000;

/// A token id, big-endian U256.
pub type TokenId = Bytes32;
/// A market's condition id.
pub type ConditionId = Bytes32;
/// An EIP-712 order digest, a trade id or a transaction hash.
pub type Hash32 = Bytes32;

/// The side of the market's one book on the Yes-price axis (API.md §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AxisSide {
    /// BUY Yes and SELL No.
    Bid,
    /// SELL Yes and BUY No.
    Ask,
}

impl AxisSide {
    /// Where an order on `outcome` with `side` rests on the Yes axis.
    pub fn of(outcome: Outcome, side: Side) -> AxisSide {
        match (outcome, side) {
            (Outcome::Yes, Side::Buy) | (Outcome::No, Side::Sell) => AxisSide::Bid,
            (Outcome::Yes, Side::Sell) | (Outcome::No, Side::Buy) => AxisSide::Ask,
        }
    }

    /// The opposite axis side.
    pub fn opposite(self) -> AxisSide {
        match self {
            AxisSide::Bid => AxisSide::Ask,
            AxisSide::Ask => AxisSide::Bid,
        }
    }
}

/// An order's own-token price expressed on the Yes axis (and back: the map is its own inverse).
pub fn axis_price(outcome: Outcome, price_ticks: PriceTicks) -> PriceTicks {
    match outcome {
        Outcome::Yes => price_ticks,
        Outcome::No => PRICE_SCALE - price_ticks,
    }
}

/// Collateral units paid for `size_units` of tokens at `price_ticks`.
///
/// Exact when `size_units` is a multiple of `PRICE_SCALE` (every whole-share size is).
pub fn notional_units(price_ticks: PriceTicks, size_units: Units) -> Units {
    debug_assert!(size_units.is_multiple_of(Units::from(PRICE_SCALE)));
    Units::from(price_ticks) * (size_units / Units::from(PRICE_SCALE))
}

/// How two orders matched (API.md §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MatchType {
    /// Same token, opposite sides: tokens swap for collateral.
    Complementary,
    /// BUY Yes with BUY No: both sides' collateral mints a full set.
    Mint,
    /// SELL Yes with SELL No: a full set is merged back into collateral.
    Merge,
}

impl MatchType {
    /// The match type of a taker and a maker order.
    pub fn of(taker: (Outcome, Side), maker: (Outcome, Side)) -> MatchType {
        if taker.0 == maker.0 {
            MatchType::Complementary
        } else if taker.1 == Side::Buy {
            MatchType::Mint
        } else {
            MatchType::Merge
        }
    }
}
