//! Prices and amounts as integers, and the one way a price is written as text.
//!
//! Prices are integer *ticks* of 0.0001 (`0.55` is `5500`); amounts are integer base units of
//! 6 decimals (one share, or one unit of collateral, is `1_000_000`).

use std::fmt;

/// Prices are integer ticks of 0.0001: `5_500` is 0.55.
pub type PriceTicks = u32;
/// Amounts of collateral or outcome tokens in base units (6 decimals).
pub type Units = u64;

/// Price ticks in a price of 1: one tick is 0.0001.
pub const PRICE_SCALE: PriceTicks = 10_000;
/// Decimal places of one price tick.
pub const PRICE_DECIMALS: usize = 4;
/// Base units in one share (and in one unit of collateral).
pub const UNITS_PER_SHARE: Units = 1_000_000;

/// Writes price ticks as a trimmed decimal: `5500` is `0.55`, `10` is `0.001`, `10000` is `1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceTicksDisplay(pub PriceTicks);

impl fmt::Display for PriceTicksDisplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / PRICE_SCALE;
        let mut fraction = self.0 % PRICE_SCALE;
        write!(f, "{whole}")?;
        if fraction == 0 {
            return Ok(());
        }
        let mut width = PRICE_DECIMALS;
        while fraction.is_multiple_of(10) {
            fraction /= 10;
            width -= 1;
        }
        write!(f, ".{fraction:0width$}")
    }
}

/// Price ticks as a trimmed decimal string (see [`PriceTicksDisplay`]).
pub fn format_price_ticks(price_ticks: PriceTicks) -> String {
    PriceTicksDisplay(price_ticks).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_written_trimmed() {
        for (ticks, text) in [
            (5_500, "0.55"),
            (10, "0.001"),
            (1, "0.0001"),
            (1_234, "0.1234"),
            (10_000, "1"),
            (0, "0"),
            (9_990, "0.999"),
        ] {
            assert_eq!(format_price_ticks(ticks), text, "{ticks}");
        }
    }
}
