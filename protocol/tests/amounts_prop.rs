//! Properties of the exact conversions: amounts built from (price, size) parse back to the same
//! (price, size); amounts off the tick grid or for fractional shares are rejected; text forms
//! of U256, prices and addresses round-trip.

use ladder_protocol::units::{price_and_size_from_units, PRICE_SCALE, UNITS_PER_SHARE};
use ladder_protocol::{
    amounts_from_price_and_size, format_price_ticks, parse_price_ticks,
    price_and_size_from_amounts, Address, AmountError, Side, U256,
};
use proptest::prelude::*;

fn side() -> impl Strategy<Value = Side> {
    prop_oneof![Just(Side::Buy), Just(Side::Sell)]
}

/// (maker, taker) from (collateral, shares) for a side.
fn by_side(side: Side, collateral_units: u64, share_units: u64) -> (u64, u64) {
    match side {
        Side::Buy => (collateral_units, share_units),
        Side::Sell => (share_units, collateral_units),
    }
}

proptest! {
    #[test]
    fn client_amounts_parse_back_to_the_same_price_and_size(
        side in side(),
        price_ticks in 1u32..=9999,
        shares in 1u64..=1_000_000_000,
    ) {
        let (maker, taker) = amounts_from_price_and_size(side, price_ticks, shares).unwrap();
        let parsed = price_and_size_from_amounts(side, U256::from_u64(maker), U256::from_u64(taker));
        prop_assert_eq!(parsed, Ok((price_ticks, shares * UNITS_PER_SHARE)));
    }

    #[test]
    fn collateral_off_the_tick_grid_is_rejected(
        side in side(),
        price_ticks in 1u32..=9998,
        shares in 1u64..=1_000_000_000,
        // Strictly between two grid points: collateral + 1 ..= collateral + step - 1.
        offset_fraction in 1u64..100,
    ) {
        let share_units = shares * UNITS_PER_SHARE;
        let step = share_units / u64::from(PRICE_SCALE);
        let collateral = u64::from(price_ticks) * step + (offset_fraction * step / 100).max(1);
        prop_assume!(!collateral.is_multiple_of(step));
        let (maker, taker) = by_side(side, collateral, share_units);
        let result = price_and_size_from_units(side, maker, taker);
        prop_assert_eq!(result, Err(AmountError::OffTick { collateral_units: collateral, share_units }));
    }

    #[test]
    fn fractional_share_amounts_are_rejected(
        side in side(),
        collateral in 1u64..=1_000_000_000_000,
        whole in 0u64..=1_000_000,
        fraction in 1u64..UNITS_PER_SHARE,
    ) {
        let share_units = whole * UNITS_PER_SHARE + fraction;
        let (maker, taker) = by_side(side, collateral, share_units);
        let result = price_and_size_from_units(side, maker, taker);
        prop_assert_eq!(result, Err(AmountError::SharesNotWhole { share_units }));
    }

    #[test]
    fn any_amount_pair_either_round_trips_or_is_rejected(
        side in side(),
        maker in any::<u64>(),
        taker in any::<u64>(),
    ) {
        if let Ok((price_ticks, size_units)) = price_and_size_from_units(side, maker, taker) {
            let shares = size_units / UNITS_PER_SHARE;
            prop_assert_eq!(amounts_from_price_and_size(side, price_ticks, shares), Ok((maker, taker)));
        }
    }

    #[test]
    fn u256_decimal_text_round_trips(limbs in any::<[u8; 32]>()) {
        let value = U256::from_be_bytes(limbs);
        let text = value.to_string();
        prop_assert_eq!(U256::from_dec_str(&text), Ok(value));
        prop_assert_eq!(value.to_be_bytes(), limbs);
    }

    #[test]
    fn u256_agrees_with_u128_formatting(value in any::<u128>()) {
        prop_assert_eq!(U256::from_u128(value).to_string(), value.to_string());
    }

    #[test]
    fn price_text_round_trips(price_ticks in 1u32..=9999) {
        let text = format_price_ticks(price_ticks);
        prop_assert!(!text.ends_with('0'), "not trimmed: {}", text);
        prop_assert_eq!(parse_price_ticks(&text), Ok(price_ticks));
    }

    #[test]
    fn address_text_round_trips(bytes in any::<[u8; 20]>()) {
        let address = Address(bytes);
        let checksummed = address.to_string();
        prop_assert_eq!(Address::parse(&checksummed), Ok(address));
        prop_assert_eq!(Address::parse(&address.to_lowercase_hex()), Ok(address));
    }
}
