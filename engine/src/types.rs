//! Plain value types shared by every part of the engine: identifiers, sides, units.
//!
//! The engine knows nothing of JSON, hex or decimal strings: identifiers are byte arrays,
//! prices are integer ticks of 0.0001 and amounts are integer base units (6 decimals).

use serde::{Deserialize, Serialize};

/// Prices are integer ticks of 0.0001: `5_500` is 0.55.
pub type PriceTicks = u32;
/// Amounts of collateral or outcome tokens in base units (6 decimals).
pub type Units = u64;
/// A timestamp in nanoseconds since the Unix epoch, stamped by the sequencer.
pub type TimestampNs = u64;
/// The engine's numeric order id (the `id` of open orders and cancels).
pub type OrderId = u64;

/// Price ticks in one unit of collateral: a price of 1 is `PRICE_SCALE` ticks.
pub const PRICE_SCALE: PriceTicks = 10_000;
/// Base units in one whole share (and in one unit of collateral).
pub const UNITS_PER_SHARE: Units = 1_000_000;
/// Nanoseconds in one second.
pub const NANOS_PER_SECOND: u64 = 1_000_000_000;
/// Nanoseconds in one millisecond.
pub const NANOS_PER_MILLI: u64 = 1_000_000;

/// A 20-byte account address (EOA or smart account).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Address(pub [u8; 20]);

/// A 32-byte value: a token id (big-endian U256), a condition id, an order hash, a trade id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Bytes32(pub [u8; 32]);

/// Fixed-size byte strings: `0x` hex for human-readable formats (JSON, the journal dump),
/// raw bytes for binary ones (bincode: the journal and snapshots).
macro_rules! hex_serde {
    ($ty:ident, $n:expr) => {
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                if serializer.is_human_readable() {
                    serializer.serialize_str(&format!("0x{}", hex::encode(self.0)))
                } else {
                    self.0.serialize(serializer)
                }
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                if deserializer.is_human_readable() {
                    let text = String::deserialize(deserializer)?;
                    let digits = text.strip_prefix("0x").unwrap_or(&text);
                    let mut out = [0u8; $n];
                    hex::decode_to_slice(digits, &mut out).map_err(serde::de::Error::custom)?;
                    Ok($ty(out))
                } else {
                    <[u8; $n]>::deserialize(deserializer).map($ty)
                }
            }
        }
    };
}

hex_serde!(Address, 20);
hex_serde!(Bytes32, 32);

/// Bincode's own encoding of a fixed-size byte string: the raw bytes written at once, the
/// same bytes as the serde path above writes one at a time (journal payloads, `codec`).
macro_rules! raw_bincode {
    ($ty:ident, $n:expr) => {
        impl bincode::Encode for $ty {
            fn encode<E: bincode::enc::Encoder>(
                &self,
                encoder: &mut E,
            ) -> Result<(), bincode::error::EncodeError> {
                bincode::Encode::encode(&self.0, encoder)
            }
        }

        impl<Context> bincode::Decode<Context> for $ty {
            fn decode<D: bincode::de::Decoder<Context = Context>>(
                decoder: &mut D,
            ) -> Result<Self, bincode::error::DecodeError> {
                <[u8; $n] as bincode::Decode<Context>>::decode(decoder).map($ty)
            }
        }

        bincode::impl_borrow_decode!($ty);
    };
}

raw_bincode!(Address, 20);
raw_bincode!(Bytes32, 32);

/// A token id, big-endian U256.
pub type TokenId = Bytes32;
/// A market's condition id.
pub type ConditionId = Bytes32;
/// An EIP-712 order digest, a trade id or a transaction hash.
pub type Hash32 = Bytes32;

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl std::fmt::Debug for Bytes32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

/// An order's side as signed: BUY pays collateral for tokens, SELL gives tokens for collateral.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub enum Side {
    /// Pays collateral, receives outcome tokens.
    Buy,
    /// Gives outcome tokens, receives collateral.
    Sell,
}

impl Side {
    /// `BUY` or `SELL`, as on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        }
    }
}

/// One of a market's two outcome tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Outcome {
    /// The Yes token: the book's price axis.
    Yes,
    /// The No token: its prices are mirrored (`1 - p`) on the Yes axis.
    No,
}

impl Outcome {
    /// `Yes` or `No`, as on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Yes => "Yes",
            Outcome::No => "No",
        }
    }

    /// The other outcome.
    pub fn other(self) -> Outcome {
        match self {
            Outcome::Yes => Outcome::No,
            Outcome::No => Outcome::Yes,
        }
    }

    /// 0 for Yes, 1 for No: an index into per-outcome arrays.
    pub fn index(self) -> usize {
        match self {
            Outcome::Yes => 0,
            Outcome::No => 1,
        }
    }
}

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

/// Order lifetime policy (API.md §3).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub enum OrderType {
    /// Good till cancelled: rests.
    Gtc,
    /// Good till date: rests until its expiration.
    Gtd,
    /// Fill or kill: all at once or nothing.
    Fok,
    /// Fill and kill: what the book supports, the rest cancelled.
    Fak,
}

impl OrderType {
    /// `GTC`, `GTD`, `FOK` or `FAK`.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderType::Gtc => "GTC",
            OrderType::Gtd => "GTD",
            OrderType::Fok => "FOK",
            OrderType::Fak => "FAK",
        }
    }

    /// Whether a remainder may rest on the book.
    pub fn rests(self) -> bool {
        matches!(self, OrderType::Gtc | OrderType::Gtd)
    }
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
