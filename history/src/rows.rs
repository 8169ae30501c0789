//! Engine values to and from the text and integers of `history.db`'s columns.

use ladder_engine::{
    Address, FillParty, FixedBytes, MatchType, OrderStatus, OrderType, Outcome, Side, TradeStatus,
    TradeView,
};
use rusqlite::Row;

/// `0x` and lowercase hex.
pub fn hex_text(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

/// The bytes of `0x` hex text of exactly `N` bytes.
pub fn from_hex<const N: usize>(text: &str) -> Result<[u8; N], String> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    let mut out = [0u8; N];
    hex::decode_to_slice(digits, &mut out).map_err(|e| format!("{text:?}: {e}"))?;
    Ok(out)
}

/// A stored amount or time: SQLite integers are signed 64-bit; every value the engine makes
/// fits (amounts are bounded far below 2^63).
pub fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Names of enumerations as stored.
pub trait Named: Sized + Copy + 'static {
    /// Every value.
    const ALL: &'static [Self];
    /// Its stored name.
    fn name(self) -> &'static str;
    /// The value stored as `text`.
    fn from_name(text: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.name() == text)
            .ok_or_else(|| format!("unknown value {text:?}"))
    }
}

impl Named for Side {
    const ALL: &'static [Self] = &[Side::Buy, Side::Sell];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for Outcome {
    const ALL: &'static [Self] = &[Outcome::Yes, Outcome::No];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for MatchType {
    const ALL: &'static [Self] = &[MatchType::Complementary, MatchType::Mint, MatchType::Merge];
    fn name(self) -> &'static str {
        match self {
            MatchType::Complementary => "COMPLEMENTARY",
            MatchType::Mint => "MINT",
            MatchType::Merge => "MERGE",
        }
    }
}

impl Named for TradeStatus {
    const ALL: &'static [Self] = &[
        TradeStatus::Matched,
        TradeStatus::Mined,
        TradeStatus::Confirmed,
        TradeStatus::Retrying,
        TradeStatus::Failed,
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for OrderStatus {
    const ALL: &'static [Self] = &[
        OrderStatus::Live,
        OrderStatus::Delayed,
        OrderStatus::Matched,
        OrderStatus::Canceled,
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for OrderType {
    const ALL: &'static [Self] = &[
        OrderType::Gtc,
        OrderType::Gtd,
        OrderType::Fok,
        OrderType::Fak,
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// The columns of a `trades` row read by [`trade_from_row`], in order.
pub const TRADE_COLUMNS: &str = "trade_index, trade_id, transaction_hash, condition_id, \
    yes_token_id, no_token_id, match_type, \
    taker_order_id, taker_order_hash, taker_address, taker_outcome, taker_side, taker_price_ticks, \
    maker_order_id, maker_order_hash, maker_address, maker_outcome, maker_side, maker_price_ticks, \
    size_units, taker_fee_units, match_time_ns, last_update_ns, status";

/// Reads column `at` as text and converts it.
pub fn text_column<T>(
    row: &Row<'_>,
    at: usize,
    convert: impl FnOnce(&str) -> Result<T, String>,
) -> rusqlite::Result<T> {
    let text: String = row.get(at)?;
    convert(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Text, e.into())
    })
}

fn u64_column(row: &Row<'_>, at: usize) -> rusqlite::Result<u64> {
    let value: i64 = row.get(at)?;
    u64::try_from(value).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Integer, e.into())
    })
}

fn party_from_row(row: &Row<'_>, first: usize) -> rusqlite::Result<FillParty> {
    Ok(FillParty {
        order_id: u64_column(row, first)?,
        order_hash: text_column(row, first + 1, |t| from_hex(t).map(FixedBytes))?,
        address: text_column(row, first + 2, |t| from_hex(t).map(Address))?,
        outcome: text_column(row, first + 3, Outcome::from_name)?,
        side: text_column(row, first + 4, Side::from_name)?,
        price_ticks: u32::try_from(u64_column(row, first + 5)?).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                first + 5,
                rusqlite::types::Type::Integer,
                e.into(),
            )
        })?,
    })
}

/// A trade from a row of [`TRADE_COLUMNS`].
pub fn trade_from_row(row: &Row<'_>) -> rusqlite::Result<TradeView> {
    let bytes32 = |at| text_column(row, at, |t| from_hex(t).map(FixedBytes));
    Ok(TradeView {
        index: u64_column(row, 0)?,
        id: bytes32(1)?,
        transaction_hash: bytes32(2)?,
        condition_id: bytes32(3)?,
        yes_token_id: bytes32(4)?,
        no_token_id: bytes32(5)?,
        match_type: text_column(row, 6, MatchType::from_name)?,
        taker: party_from_row(row, 7)?,
        maker: party_from_row(row, 13)?,
        size_units: u64_column(row, 19)?,
        taker_fee_units: u64_column(row, 20)?,
        match_time_ns: u64_column(row, 21)?,
        last_update_ns: u64_column(row, 22)?,
        status: text_column(row, 23, TradeStatus::from_name)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_value() {
        fn round_trip<T: Named + PartialEq + std::fmt::Debug>() {
            for &value in T::ALL {
                assert_eq!(T::from_name(value.name()), Ok(value));
            }
            assert!(T::from_name("nonsense").is_err());
        }
        round_trip::<Side>();
        round_trip::<Outcome>();
        round_trip::<MatchType>();
        round_trip::<TradeStatus>();
        round_trip::<OrderStatus>();
        round_trip::<OrderType>();
    }

    #[test]
    fn hex_text_reads_back_and_a_wrong_length_is_refused() {
        let bytes = [0xabu8; 20];
        assert_eq!(from_hex::<20>(&hex_text(&bytes)), Ok(bytes));
        assert!(from_hex::<32>(&hex_text(&bytes)).is_err());
    }
}
