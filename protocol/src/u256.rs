//! `U256`: the unsigned 256-bit integer of EIP-712 `uint256` fields (token ids, salts, nonces,
//! amounts), with exact decimal-string parsing and formatting.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The largest number of decimal digits a `U256` can have (`2^256 - 1` has 78 digits).
const DECIMAL_DIGITS_MAX: usize = 78;

/// An unsigned 256-bit integer.
///
/// Held as four 64-bit limbs, most significant first, so that the derived ordering is the
/// numeric ordering.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct U256([u64; 4]);

/// Why a decimal string is not a `U256`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum U256Error {
    /// The string is empty.
    #[error("empty string is not a decimal integer")]
    Empty,
    /// The string holds something other than the digits 0-9 (a sign, a space, a dot...).
    #[error("expected only decimal digits 0-9, found {found:?}")]
    NotDigit {
        /// The first offending character.
        found: char,
    },
    /// The value is 2^256 or more.
    #[error("decimal integer does not fit in 256 bits")]
    Overflow,
}

impl U256 {
    /// Zero.
    pub const ZERO: U256 = U256([0; 4]);
    /// `2^256 - 1`.
    pub const MAX: U256 = U256([u64::MAX; 4]);

    /// The value of a `u64`.
    pub const fn from_u64(value: u64) -> U256 {
        U256([0, 0, 0, value])
    }

    /// The value of a `u128`.
    pub const fn from_u128(value: u128) -> U256 {
        U256([0, 0, (value >> 64) as u64, value as u64])
    }

    /// The value as a `u64`, or `None` when it is larger than `u64::MAX`.
    pub const fn to_u64(self) -> Option<u64> {
        match self.0 {
            [0, 0, 0, low] => Some(low),
            _ => None,
        }
    }

    /// True when the value is zero.
    pub const fn is_zero(self) -> bool {
        matches!(self.0, [0, 0, 0, 0])
    }

    /// The value from 32 big-endian bytes (the EIP-712 / ABI word encoding).
    pub fn from_be_bytes(bytes: [u8; 32]) -> U256 {
        let mut limbs = [0u64; 4];
        for (limb, chunk) in limbs.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            *limb = u64::from_be_bytes(word);
        }
        U256(limbs)
    }

    /// The value as 32 big-endian bytes (the EIP-712 / ABI word encoding).
    pub fn to_be_bytes(self) -> [u8; 32] {
        let mut bytes = [0u8; 32];
        for (chunk, limb) in bytes.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&limb.to_be_bytes());
        }
        bytes
    }

    /// Parses a decimal integer: digits only (no sign, no spaces, no `0x`), leading zeros allowed.
    pub fn from_dec_str(text: &str) -> Result<U256, U256Error> {
        if text.is_empty() {
            return Err(U256Error::Empty);
        }
        let mut value = U256::ZERO;
        for ch in text.chars() {
            let digit = ch.to_digit(10).ok_or(U256Error::NotDigit { found: ch })?;
            value = value
                .mul_small_add(10, u64::from(digit))
                .ok_or(U256Error::Overflow)?;
        }
        Ok(value)
    }

    /// `self * factor + addend`, or `None` on overflow.
    fn mul_small_add(self, factor: u64, addend: u64) -> Option<U256> {
        let mut limbs = self.0;
        let mut carry = u128::from(addend);
        for limb in limbs.iter_mut().rev() {
            let wide = u128::from(*limb) * u128::from(factor) + carry;
            *limb = wide as u64;
            carry = wide >> 64;
        }
        (carry == 0).then_some(U256(limbs))
    }

    /// Divides in place by a non-zero `divisor`, returning the remainder.
    fn div_rem_small(&mut self, divisor: u64) -> u64 {
        debug_assert!(divisor != 0);
        let mut remainder: u128 = 0;
        for limb in self.0.iter_mut() {
            let wide = (remainder << 64) | u128::from(*limb);
            *limb = (wide / u128::from(divisor)) as u64;
            remainder = wide % u128::from(divisor);
        }
        remainder as u64
    }
}

impl From<u64> for U256 {
    fn from(value: u64) -> U256 {
        U256::from_u64(value)
    }
}

impl From<u128> for U256 {
    fn from(value: u128) -> U256 {
        U256::from_u128(value)
    }
}

impl FromStr for U256 {
    type Err = U256Error;

    fn from_str(text: &str) -> Result<U256, U256Error> {
        U256::from_dec_str(text)
    }
}

/// The largest power of ten below `2^64`: a `U256` is written 19 digits at a time, one
/// division of its four limbs per 19 digits instead of one per digit (about 6 times faster).
const DECIMAL_CHUNK: u64 = 10_000_000_000_000_000_000;
/// Digits per `DECIMAL_CHUNK`.
const DECIMAL_CHUNK_DIGITS: usize = 19;

impl fmt::Display for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut digits = [b'0'; DECIMAL_DIGITS_MAX];
        let mut end = DECIMAL_DIGITS_MAX;
        let mut rest = *self;
        let start = loop {
            let mut chunk = rest.div_rem_small(DECIMAL_CHUNK);
            let mut at = end;
            while chunk > 0 {
                at -= 1;
                digits[at] = b'0' + (chunk % 10) as u8;
                chunk /= 10;
            }
            if rest.is_zero() {
                // The most significant chunk: no leading zeros, but "0" for zero.
                break at.min(DECIMAL_DIGITS_MAX - 1);
            }
            // A lower chunk keeps its leading zeros (the buffer starts as '0's).
            end -= DECIMAL_CHUNK_DIGITS;
        };
        // Only ASCII digits were written.
        let text = std::str::from_utf8(&digits[start..]).map_err(|_| fmt::Error)?;
        f.pad(text)
    }
}

impl fmt::Debug for U256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for U256 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for U256 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<U256, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        U256::from_dec_str(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_formats_as_78_digits_and_parses_back() {
        let text = "115792089237316195423570985008687907853269984665640564039457584007913129639935";
        let max = U256::from_dec_str(text).expect("2^256-1 parses");
        assert_eq!(max, U256::MAX);
        assert_eq!(max.to_string(), text);
    }

    #[test]
    fn two_to_the_256_overflows() {
        let text = "115792089237316195423570985008687907853269984665640564039457584007913129639936";
        assert_eq!(U256::from_dec_str(text), Err(U256Error::Overflow));
    }

    #[test]
    fn rejects_empty_signs_spaces_and_non_digits() {
        assert_eq!(U256::from_dec_str(""), Err(U256Error::Empty));
        for bad in ["+1", "-1", " 1", "1 ", "1.0", "0x10", "1e3", "١"] {
            assert!(U256::from_dec_str(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn leading_zeros_are_accepted() {
        assert_eq!(U256::from_dec_str("000042"), Ok(U256::from_u64(42)));
        assert_eq!(U256::from_dec_str("0"), Ok(U256::ZERO));
        assert_eq!(U256::ZERO.to_string(), "0");
    }

    #[test]
    fn big_endian_bytes_round_trip() {
        let value = U256::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let bytes = value.to_be_bytes();
        assert_eq!(bytes[31], 0x10);
        assert_eq!(bytes[16], 0x01);
        assert_eq!(U256::from_be_bytes(bytes), value);
    }

    #[test]
    fn ordering_is_numeric() {
        assert!(U256::from_u64(u64::MAX) < U256::from_u128(1 << 64));
        assert!(U256::from_u64(2) > U256::from_u64(1));
    }

    #[test]
    fn to_u64_rejects_values_above_u64() {
        assert_eq!(U256::from_u64(7).to_u64(), Some(7));
        assert_eq!(U256::from_u128(1 << 64).to_u64(), None);
    }

    /// The digit-at-a-time division the formatter replaced, as the reference.
    fn digit_by_digit(mut value: U256) -> String {
        let mut digits = Vec::new();
        loop {
            digits.push(b'0' + value.div_rem_small(10) as u8);
            if value.is_zero() {
                break;
            }
        }
        digits.reverse();
        String::from_utf8(digits).unwrap()
    }

    #[test]
    fn formats_chunk_boundaries_exactly() {
        for value in [
            0u128,
            9,
            10,
            9_999_999_999_999_999_999,
            10_000_000_000_000_000_000,
            10_000_000_000_000_000_001,
            u128::from(u64::MAX),
            u128::MAX,
        ] {
            assert_eq!(U256::from_u128(value).to_string(), value.to_string());
        }
        assert_eq!(format!("{:>5}", U256::from_u64(42)), "   42");
    }

    proptest::proptest! {
        #[test]
        fn formats_as_the_digit_by_digit_division(limbs: [u64; 4], zeros in 0usize..4) {
            let mut limbs = limbs;
            limbs[..zeros].fill(0);
            let value = U256(limbs);
            let text = value.to_string();
            proptest::prop_assert_eq!(&text, &digit_by_digit(value));
            proptest::prop_assert_eq!(U256::from_dec_str(&text), Ok(value));
        }
    }

    #[test]
    fn serde_uses_decimal_strings() {
        let value = U256::from_u64(1234567);
        assert_eq!(serde_json::to_string(&value).unwrap(), "\"1234567\"");
        let back: U256 = serde_json::from_str("\"1234567\"").unwrap();
        assert_eq!(back, value);
        assert!(serde_json::from_str::<U256>("1234567").is_err());
    }
}
