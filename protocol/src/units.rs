//! Units of money and price, and the exact conversions between signed amounts and
//! (price, size) (API.md §1).
//!
//! Prices are held as integer *price ticks* of 0.0001 (`0.55` is `5500`); amounts as integer
//! base units of 6 decimals (`1 share = 1_000_000 units`). Nothing here uses floating point and
//! nothing is rounded: a value that is not exact is rejected.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::order::Side;
use crate::u256::U256;

pub use ladder_types::price::{
    format_price_ticks, PriceTicksDisplay, PRICE_DECIMALS, PRICE_SCALE, UNITS_PER_SHARE,
};

/// Decimals of the collateral (and of outcome tokens on chain).
pub const COLLATERAL_DECIMALS: u32 = 6;
/// The smallest price an order can carry, in ticks (0.0001).
pub const PRICE_TICKS_MIN: u32 = 1;
/// The largest price an order can carry, in ticks (0.9999).
pub const PRICE_TICKS_MAX: u32 = PRICE_SCALE - 1;
/// Collateral base units of one share at a price of one tick (`UNITS_PER_SHARE / PRICE_SCALE`).
pub const UNITS_PER_SHARE_TICK: u64 = UNITS_PER_SHARE / PRICE_SCALE as u64;

/// Why a decimal string is not a price (or tick size).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// Not of the form `digits` or `digits.digits`.
    #[error("expected a decimal number such as 0.55, found {text:?}")]
    Malformed {
        /// The rejected text.
        text: String,
    },
    /// Non-zero digits beyond the fourth decimal place.
    #[error(
        "price {text:?} has non-zero digits beyond 4 decimal places (the smallest tick is 0.0001)"
    )]
    TooPrecise {
        /// The rejected text.
        text: String,
    },
    /// The value does not fit the price-tick range of a `u32`.
    #[error("decimal {text:?} is too large")]
    TooLarge {
        /// The rejected text.
        text: String,
    },
    /// An order price must lie strictly between 0 and 1.
    #[error("price {text:?} must be greater than 0 and less than 1")]
    OutOfRange {
        /// The rejected text.
        text: String,
    },
    /// A minimum tick size must be one of the four supported values.
    #[error("tick size {text:?} must be one of 0.1, 0.01, 0.001, 0.0001")]
    UnsupportedTickSize {
        /// The rejected text.
        text: String,
    },
}

/// Parses a non-negative decimal (`"0.55"`, `"0.5500"`, `"1"`) into price ticks of 0.0001.
///
/// No sign, exponent or whitespace; at least one digit before the point and one after it when a
/// point is present. Digits beyond the fourth decimal must be zero.
pub fn parse_decimal_ticks(text: &str) -> Result<u32, PriceError> {
    let malformed = || PriceError::Malformed {
        text: text.to_string(),
    };
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (text, ""),
    };
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return Err(malformed());
    }
    if text.contains('.') && fraction.is_empty() {
        return Err(malformed());
    }
    let (kept, dropped) = fraction.split_at(fraction.len().min(PRICE_DECIMALS));
    if dropped.bytes().any(|byte| byte != b'0') {
        return Err(PriceError::TooPrecise {
            text: text.to_string(),
        });
    }
    let too_large = || PriceError::TooLarge {
        text: text.to_string(),
    };
    let mut ticks: u32 = 0;
    for byte in whole.bytes() {
        ticks = ticks
            .checked_mul(10)
            .and_then(|t| t.checked_add(u32::from(byte - b'0')))
            .ok_or_else(too_large)?;
    }
    ticks = ticks.checked_mul(PRICE_SCALE).ok_or_else(too_large)?;
    let mut fraction_ticks: u32 = 0;
    for index in 0..PRICE_DECIMALS {
        let digit = kept
            .as_bytes()
            .get(index)
            .map_or(0, |byte| u32::from(byte - b'0'));
        fraction_ticks = fraction_ticks * 10 + digit;
    }
    ticks.checked_add(fraction_ticks).ok_or_else(too_large)
}

/// Parses an order price: a decimal strictly between 0 and 1 with at most 4 significant decimals.
pub fn parse_price_ticks(text: &str) -> Result<u32, PriceError> {
    let ticks = parse_decimal_ticks(text)?;
    if !(PRICE_TICKS_MIN..=PRICE_TICKS_MAX).contains(&ticks) {
        return Err(PriceError::OutOfRange {
            text: text.to_string(),
        });
    }
    Ok(ticks)
}

/// A market's minimum price tick: one of 0.1, 0.01, 0.001, 0.0001.
///
/// In JSON it is written as a number (API.md §2.7 `minimum_tick_size`); it is read from a number or
/// a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TickSize {
    /// 0.1 (1000 price ticks).
    Tenth,
    /// 0.01 (100 price ticks).
    Hundredth,
    /// 0.001 (10 price ticks).
    Thousandth,
    /// 0.0001 (1 price tick).
    TenThousandth,
}

impl TickSize {
    /// The tick size in price ticks of 0.0001.
    pub const fn ticks(self) -> u32 {
        match self {
            TickSize::Tenth => 1000,
            TickSize::Hundredth => 100,
            TickSize::Thousandth => 10,
            TickSize::TenThousandth => 1,
        }
    }

    /// The tick size of a number of price ticks, if it is one of the four.
    pub const fn from_ticks(ticks: u32) -> Option<TickSize> {
        match ticks {
            1000 => Some(TickSize::Tenth),
            100 => Some(TickSize::Hundredth),
            10 => Some(TickSize::Thousandth),
            1 => Some(TickSize::TenThousandth),
            _ => None,
        }
    }

    /// Parses `"0.01"` (trailing zeros allowed) into a tick size.
    pub fn parse(text: &str) -> Result<TickSize, PriceError> {
        let ticks = parse_decimal_ticks(text).map_err(|_| PriceError::UnsupportedTickSize {
            text: text.to_string(),
        })?;
        TickSize::from_ticks(ticks).ok_or_else(|| PriceError::UnsupportedTickSize {
            text: text.to_string(),
        })
    }

    /// True when `price_ticks` is a multiple of this tick and lies in `[tick, 1 - tick]`.
    pub const fn allows(self, price_ticks: u32) -> bool {
        let tick = self.ticks();
        price_ticks.is_multiple_of(tick) && price_ticks >= tick && price_ticks <= PRICE_SCALE - tick
    }

    /// The value as an `f64`, used only to write the JSON number.
    fn as_json_number(self) -> f64 {
        match self {
            TickSize::Tenth => 0.1,
            TickSize::Hundredth => 0.01,
            TickSize::Thousandth => 0.001,
            TickSize::TenThousandth => 0.0001,
        }
    }
}

impl fmt::Display for TickSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&PriceTicksDisplay(self.ticks()), f)
    }
}

impl Serialize for TickSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.as_json_number())
    }
}

impl<'de> Deserialize<'de> for TickSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<TickSize, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum NumberOrText<'a> {
            Number(f64),
            Text(std::borrow::Cow<'a, str>),
        }
        // A JSON number is read through its shortest decimal form ("0.01"), then parsed exactly.
        let text = match NumberOrText::deserialize(deserializer)? {
            NumberOrText::Number(number) => number.to_string(),
            NumberOrText::Text(text) => text.into_owned(),
        };
        TickSize::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Formats a price for an error message.
fn price_text(price_ticks: &u32) -> PriceTicksDisplay {
    PriceTicksDisplay(*price_ticks)
}

/// Why a pair of signed amounts does not describe a valid (price, size).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// An amount is larger than the service supports (`u64::MAX` base units).
    #[error("{field} {value} is too large (at most {max} base units)", max = u64::MAX)]
    TooLarge {
        /// `makerAmount` or `takerAmount`.
        field: &'static str,
        /// The rejected amount.
        value: U256,
    },
    /// The share amount is zero.
    #[error(
        "share amount is 0; an order must be for at least 1 share ({UNITS_PER_SHARE} base units)"
    )]
    ZeroShares,
    /// The share amount is not a whole number of shares.
    #[error("share amount {share_units} is not a whole number of shares (must be a multiple of {UNITS_PER_SHARE} base units)")]
    SharesNotWhole {
        /// The share amount in base units.
        share_units: u64,
    },
    /// The implied price is 0 or at least 1.
    #[error("price = collateral {collateral_units} / shares {share_units} must be greater than 0 and less than 1")]
    PriceOutOfRange {
        /// The collateral amount in base units.
        collateral_units: u64,
        /// The share amount in base units.
        share_units: u64,
    },
    /// The implied price is not an exact multiple of 0.0001.
    #[error("price = collateral {collateral_units} / shares {share_units} is not an exact multiple of 0.0001")]
    OffTick {
        /// The collateral amount in base units.
        collateral_units: u64,
        /// The share amount in base units.
        share_units: u64,
    },
    /// A price given in ticks is outside `1..=9999`.
    #[error("price {} must be greater than 0 and less than 1", price_text(.price_ticks))]
    PriceTicksOutOfRange {
        /// The rejected price in ticks.
        price_ticks: u32,
    },
    /// The amounts of a (price, size) do not fit in `u64` base units.
    #[error("{shares} shares at price {} overflow the amount range", price_text(.price_ticks))]
    Overflow {
        /// Price in ticks.
        price_ticks: u32,
        /// Size in whole shares.
        shares: u64,
    },
}

/// The price and size of a signed order, from its amounts (API.md §1).
///
/// BUY: maker = collateral paid, taker = shares received; SELL: maker = shares, taker =
/// collateral. Returns `(price_ticks, size_units)`, where `size_units` is the share amount in
/// base units (a multiple of [`UNITS_PER_SHARE`]).
pub fn price_and_size_from_amounts(
    side: Side,
    maker_amount_units: U256,
    taker_amount_units: U256,
) -> Result<(u32, u64), AmountError> {
    let maker = maker_amount_units.to_u64().ok_or(AmountError::TooLarge {
        field: "makerAmount",
        value: maker_amount_units,
    })?;
    let taker = taker_amount_units.to_u64().ok_or(AmountError::TooLarge {
        field: "takerAmount",
        value: taker_amount_units,
    })?;
    price_and_size_from_units(side, maker, taker)
}

/// [`price_and_size_from_amounts`] for amounts already known to fit in `u64`.
pub fn price_and_size_from_units(
    side: Side,
    maker_amount_units: u64,
    taker_amount_units: u64,
) -> Result<(u32, u64), AmountError> {
    let (collateral_units, share_units) = match side {
        Side::Buy => (maker_amount_units, taker_amount_units),
        Side::Sell => (taker_amount_units, maker_amount_units),
    };
    if share_units == 0 {
        return Err(AmountError::ZeroShares);
    }
    if share_units % UNITS_PER_SHARE != 0 {
        return Err(AmountError::SharesNotWhole { share_units });
    }
    if collateral_units == 0 || collateral_units >= share_units {
        return Err(AmountError::PriceOutOfRange {
            collateral_units,
            share_units,
        });
    }
    // price_ticks = collateral * PRICE_SCALE / share_units = collateral / (shares * 100).
    let units_per_tick = share_units / PRICE_SCALE as u64;
    if collateral_units % units_per_tick != 0 {
        return Err(AmountError::OffTick {
            collateral_units,
            share_units,
        });
    }
    let price_ticks = collateral_units / units_per_tick;
    debug_assert!((PRICE_TICKS_MIN as u64..=PRICE_TICKS_MAX as u64).contains(&price_ticks));
    Ok((price_ticks as u32, share_units))
}

/// The price `collateral_units / share_units` as an exact trimmed decimal (`3333330 /
/// 10000000` → `0.333333`), or as that quotient when it has no exact decimal within 18 places.
pub fn price_text_of_amounts(collateral_units: u64, share_units: u64) -> String {
    const PLACES_MAX: usize = 18;
    if share_units == 0 {
        return format!("{collateral_units}/{share_units}");
    }
    let (numerator, denominator) = (u128::from(collateral_units), u128::from(share_units));
    let whole = numerator / denominator;
    let mut remainder = numerator % denominator;
    let mut digits = String::new();
    while remainder != 0 && digits.len() < PLACES_MAX {
        remainder *= 10;
        digits.push(char::from(b'0' + (remainder / denominator) as u8));
        remainder %= denominator;
    }
    match (remainder, digits.is_empty()) {
        (0, true) => whole.to_string(),
        (0, false) => format!("{whole}.{digits}"),
        _ => format!("{collateral_units}/{share_units}"),
    }
}

/// The price an order's amounts give, refused before its market is known: off the 0.0001
/// grid, or not within (0, 1). Only the market tells which tick it should be a multiple of,
/// and whether it lies within that market's `[tick, 1 - tick]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffendingPrice {
    /// The price as text (an exact decimal, or the quotient of the amounts).
    pub text: String,
    /// Collateral base units of the order.
    pub collateral_units: u64,
    /// Share base units of the order.
    pub share_units: u64,
}

impl OffendingPrice {
    /// Whether the price lies within `[tick, 1 - tick]` for a market of tick `tick_ticks`.
    pub fn within_range(&self, tick_ticks: u32) -> bool {
        let scaled = u128::from(self.collateral_units) * u128::from(PRICE_SCALE);
        let share = u128::from(self.share_units);
        scaled >= u128::from(tick_ticks) * share
            && scaled <= u128::from(PRICE_SCALE.saturating_sub(tick_ticks)) * share
    }
}

impl AmountError {
    /// The price the amounts give, when this error is about the price (off the 0.0001 grid,
    /// or not within (0, 1)).
    pub fn offending_price(&self) -> Option<OffendingPrice> {
        match *self {
            AmountError::OffTick {
                collateral_units,
                share_units,
            }
            | AmountError::PriceOutOfRange {
                collateral_units,
                share_units,
            } => Some(OffendingPrice {
                text: price_text_of_amounts(collateral_units, share_units),
                collateral_units,
                share_units,
            }),
            _ => None,
        }
    }
}

/// The signed amounts `(maker_amount_units, taker_amount_units)` of an order for `shares` whole
/// shares at `price_ticks`: the exact inverse of [`price_and_size_from_amounts`].
pub fn amounts_from_price_and_size(
    side: Side,
    price_ticks: u32,
    shares: u64,
) -> Result<(u64, u64), AmountError> {
    if !(PRICE_TICKS_MIN..=PRICE_TICKS_MAX).contains(&price_ticks) {
        return Err(AmountError::PriceTicksOutOfRange { price_ticks });
    }
    if shares == 0 {
        return Err(AmountError::ZeroShares);
    }
    let overflow = AmountError::Overflow {
        price_ticks,
        shares,
    };
    let share_units = shares
        .checked_mul(UNITS_PER_SHARE)
        .ok_or(overflow.clone())?;
    let collateral_units = shares
        .checked_mul(u64::from(price_ticks) * UNITS_PER_SHARE_TICK)
        .ok_or(overflow)?;
    Ok(match side {
        Side::Buy => (collateral_units, share_units),
        Side::Sell => (share_units, collateral_units),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_price_of_amounts_is_an_exact_decimal_or_the_quotient() {
        assert_eq!(price_text_of_amounts(3_333_330, 10_000_000), "0.333333");
        assert_eq!(price_text_of_amounts(5_000_000, 10_000_000), "0.5");
        assert_eq!(price_text_of_amounts(30_000_000, 10_000_000), "3");
        assert_eq!(price_text_of_amounts(0, 10_000_000), "0");
        assert_eq!(
            price_text_of_amounts(1_000_000, 3_000_000),
            "1000000/3000000"
        );
        assert_eq!(price_text_of_amounts(1, 1 << 40), "1/1099511627776");
        assert_eq!(price_text_of_amounts(7, 0), "7/0");
        let off = AmountError::OffTick {
            collateral_units: 5_555_555,
            share_units: 10_000_000,
        };
        let offending = off.offending_price().unwrap();
        assert_eq!(offending.text, "0.5555555");
        assert!(offending.within_range(100) && !offending.within_range(4_500));
        assert_eq!(AmountError::ZeroShares.offending_price(), None);
        // Below the tick, and past 1 - tick.
        let low = AmountError::OffTick {
            collateral_units: 100,
            share_units: 10_000_000,
        };
        assert!(!low.offending_price().unwrap().within_range(100));
        let high = AmountError::OffTick {
            collateral_units: 9_999_900,
            share_units: 10_000_000,
        };
        assert!(!high.offending_price().unwrap().within_range(10));
    }

    use super::*;

    #[test]
    fn prices_parse_to_ticks() {
        assert_eq!(parse_price_ticks("0.55"), Ok(5500));
        assert_eq!(parse_price_ticks("0.5500"), Ok(5500));
        assert_eq!(parse_price_ticks("0.550000"), Ok(5500));
        assert_eq!(parse_price_ticks("0.001"), Ok(10));
        assert_eq!(parse_price_ticks("0.0001"), Ok(1));
        assert_eq!(parse_price_ticks("0.9999"), Ok(9999));
        assert_eq!(parse_price_ticks("00.5"), Ok(5000));
    }

    #[test]
    fn prices_out_of_range_or_too_precise_are_rejected() {
        for text in ["0", "0.0", "1", "1.0", "2.5"] {
            assert!(
                matches!(parse_price_ticks(text), Err(PriceError::OutOfRange { .. })),
                "{text}"
            );
        }
        assert!(matches!(
            parse_price_ticks("0.00001"),
            Err(PriceError::TooPrecise { .. })
        ));
        assert!(matches!(
            parse_price_ticks("0.55001"),
            Err(PriceError::TooPrecise { .. })
        ));
        for text in [
            "", ".5", "0.", "+0.5", "-0.5", " 0.5", "0.5 ", "5e-1", "0,5", "0.5.5",
        ] {
            assert!(
                matches!(parse_price_ticks(text), Err(PriceError::Malformed { .. })),
                "{text:?}"
            );
        }
        assert!(matches!(
            parse_decimal_ticks("999999999"),
            Err(PriceError::TooLarge { .. })
        ));
    }

    #[test]
    fn prices_format_trimmed() {
        assert_eq!(format_price_ticks(5500), "0.55");
        assert_eq!(format_price_ticks(10), "0.001");
        assert_eq!(format_price_ticks(5000), "0.5");
        assert_eq!(format_price_ticks(1), "0.0001");
        assert_eq!(format_price_ticks(1234), "0.1234");
        assert_eq!(format_price_ticks(10_000), "1");
        assert_eq!(format_price_ticks(0), "0");
    }

    #[test]
    fn tick_sizes_parse_format_and_serialize_as_numbers() {
        assert_eq!(TickSize::parse("0.1").map(TickSize::ticks), Ok(1000));
        assert_eq!(TickSize::parse("0.01").map(TickSize::ticks), Ok(100));
        assert_eq!(TickSize::parse("0.001").map(TickSize::ticks), Ok(10));
        assert_eq!(TickSize::parse("0.0001").map(TickSize::ticks), Ok(1));
        assert!(TickSize::parse("0.05").is_err());
        assert_eq!(TickSize::Hundredth.to_string(), "0.01");
        assert_eq!(serde_json::to_string(&TickSize::Hundredth).unwrap(), "0.01");
        assert_eq!(
            serde_json::to_string(&TickSize::TenThousandth).unwrap(),
            "0.0001"
        );
        assert_eq!(
            serde_json::from_str::<TickSize>("0.001").unwrap(),
            TickSize::Thousandth
        );
        assert_eq!(
            serde_json::from_str::<TickSize>("\"0.1\"").unwrap(),
            TickSize::Tenth
        );
    }

    #[test]
    fn tick_size_allows_multiples_within_tick_and_one_minus_tick() {
        assert!(TickSize::Hundredth.allows(5500));
        assert!(!TickSize::Hundredth.allows(5510));
        assert!(TickSize::Hundredth.allows(100));
        assert!(TickSize::Hundredth.allows(9900));
        assert!(!TickSize::Hundredth.allows(0));
        assert!(!TickSize::Hundredth.allows(10_000));
    }

    #[test]
    fn buy_amounts_give_price_and_size() {
        let result = price_and_size_from_units(Side::Buy, 5_500_000, 10_000_000);
        assert_eq!(result, Ok((5500, 10_000_000)));
    }

    #[test]
    fn sell_amounts_give_price_and_size() {
        let result = price_and_size_from_units(Side::Sell, 25_000_000, 10_500_000);
        assert_eq!(result, Ok((4200, 25_000_000)));
    }

    #[test]
    fn fractional_shares_are_rejected() {
        let result = price_and_size_from_units(Side::Buy, 500_000, 1_500_000);
        assert_eq!(
            result,
            Err(AmountError::SharesNotWhole {
                share_units: 1_500_000
            })
        );
    }

    #[test]
    fn off_tick_price_is_rejected_and_names_the_amounts() {
        let result = price_and_size_from_units(Side::Buy, 5_500_001, 10_000_000);
        let error = result.unwrap_err();
        assert_eq!(
            error,
            AmountError::OffTick {
                collateral_units: 5_500_001,
                share_units: 10_000_000
            }
        );
        assert_eq!(
            error.to_string(),
            "price = collateral 5500001 / shares 10000000 is not an exact multiple of 0.0001"
        );
    }

    #[test]
    fn prices_of_zero_or_one_and_above_are_rejected() {
        for collateral in [0, 10_000_000, 20_000_000] {
            let result = price_and_size_from_units(Side::Buy, collateral, 10_000_000);
            assert!(
                matches!(result, Err(AmountError::PriceOutOfRange { .. })),
                "{collateral}"
            );
        }
        assert_eq!(
            price_and_size_from_units(Side::Sell, 0, 5),
            Err(AmountError::ZeroShares)
        );
    }

    #[test]
    fn amounts_beyond_u64_are_rejected_naming_the_field() {
        let huge = U256::from_u128(u128::from(u64::MAX) + 1);
        let result = price_and_size_from_amounts(Side::Buy, huge, U256::from_u64(1_000_000));
        assert_eq!(
            result,
            Err(AmountError::TooLarge {
                field: "makerAmount",
                value: huge
            })
        );
        let message = result.unwrap_err().to_string();
        assert!(
            message.starts_with("makerAmount 18446744073709551616 is too large"),
            "{message}"
        );
    }

    #[test]
    fn amounts_from_price_and_size_invert_the_parse() {
        assert_eq!(
            amounts_from_price_and_size(Side::Buy, 5500, 10),
            Ok((5_500_000, 10_000_000))
        );
        assert_eq!(
            amounts_from_price_and_size(Side::Sell, 4200, 25),
            Ok((25_000_000, 10_500_000))
        );
        assert_eq!(
            amounts_from_price_and_size(Side::Buy, 10, 3),
            Ok((3000, 3_000_000))
        );
        assert_eq!(
            amounts_from_price_and_size(Side::Buy, 10_000, 3),
            Err(AmountError::PriceTicksOutOfRange {
                price_ticks: 10_000
            })
        );
        assert_eq!(
            amounts_from_price_and_size(Side::Buy, 5000, 0),
            Err(AmountError::ZeroShares)
        );
        assert!(matches!(
            amounts_from_price_and_size(Side::Buy, 5000, u64::MAX),
            Err(AmountError::Overflow { .. })
        ));
    }
}
