//! Fixed-length byte strings: `B256` (condition ids, token ids as bytes, hashes, trade ids) and
//! `Bytes16` (the order `identifier`), plus the shared `0x`-hex decoder.
//!
//! Human-readable formats (JSON) write them as `0x` + lowercase hex; binary ones (bincode: the
//! journal and snapshots) as the raw bytes, with no length.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not `0x` followed by the expected number of hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    /// The string does not start with `0x`.
    #[error("expected a 0x-prefixed hex string")]
    MissingPrefix,
    /// The number of hex digits after `0x` is wrong.
    #[error("expected 0x followed by {expected} hex digits, found {found}")]
    WrongLength {
        /// Hex digits required.
        expected: usize,
        /// Characters found after `0x`.
        found: usize,
    },
    /// A character after `0x` is not a hex digit.
    #[error("expected only hex digits 0-9a-fA-F after 0x")]
    NotHex,
}

/// Decodes `0x` followed by exactly `2 * N` hex digits (either case) into `N` bytes.
pub fn decode_0x_hex<const N: usize>(text: &str) -> Result<[u8; N], HexError> {
    let digits = text.strip_prefix("0x").ok_or(HexError::MissingPrefix)?;
    if digits.len() != 2 * N {
        return Err(HexError::WrongLength {
            expected: 2 * N,
            found: digits.len(),
        });
    }
    let mut bytes = [0u8; N];
    hex::decode_to_slice(digits, &mut bytes).map_err(|_| HexError::NotHex)?;
    Ok(bytes)
}

/// Writes `0x` and the bytes as lowercase hex without allocating.
pub fn write_0x_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    f.write_str("0x")?;
    let mut chunk = [0u8; 64];
    for part in bytes.chunks(chunk.len() / 2) {
        for (pair, byte) in chunk.chunks_exact_mut(2).zip(part) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0x0f)];
        }
        let text = std::str::from_utf8(&chunk[..part.len() * 2]).map_err(|_| fmt::Error)?;
        f.write_str(text)?;
    }
    Ok(())
}

/// `N` bytes, written as `0x` + `2N` lowercase hex digits; parsed from either case.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FixedBytes<const N: usize>(pub [u8; N]);

/// 32 bytes: condition (market) ids, EIP-712 digests, order hashes, trade ids, transaction hashes.
pub type B256 = FixedBytes<32>;

/// 32 bytes, the engine's name: token ids (big-endian U256), condition ids, order hashes.
pub type Bytes32 = FixedBytes<32>;

/// 16 bytes: the signed order's `identifier`.
pub type Bytes16 = FixedBytes<16>;

impl<const N: usize> FixedBytes<N> {
    /// All bytes zero.
    pub const ZERO: FixedBytes<N> = FixedBytes([0; N]);

    /// Parses `0x` + `2N` hex digits (either case).
    pub fn from_hex(text: &str) -> Result<FixedBytes<N>, HexError> {
        decode_0x_hex(text).map(FixedBytes)
    }

    /// The bytes.
    pub const fn as_bytes(&self) -> &[u8; N] {
        &self.0
    }
}

impl<const N: usize> Default for FixedBytes<N> {
    fn default() -> FixedBytes<N> {
        FixedBytes::ZERO
    }
}

impl<const N: usize> From<[u8; N]> for FixedBytes<N> {
    fn from(bytes: [u8; N]) -> FixedBytes<N> {
        FixedBytes(bytes)
    }
}

impl<const N: usize> FromStr for FixedBytes<N> {
    type Err = HexError;

    fn from_str(text: &str) -> Result<FixedBytes<N>, HexError> {
        FixedBytes::from_hex(text)
    }
}

impl<const N: usize> fmt::Display for FixedBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_0x_hex(f, &self.0)
    }
}

impl<const N: usize> fmt::Debug for FixedBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_0x_hex(f, &self.0)
    }
}

impl<const N: usize> Serialize for FixedBytes<N> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            serialize_raw(&self.0, serializer)
        }
    }
}

/// Writes `bytes` as a tuple of `N` bytes: what serde writes for a `[u8; N]`.
pub(crate) fn serialize_raw<S: Serializer, const N: usize>(
    bytes: &[u8; N],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeTuple;
    let mut tuple = serializer.serialize_tuple(N)?;
    for byte in bytes {
        tuple.serialize_element(byte)?;
    }
    tuple.end()
}

/// Reads a tuple of `N` bytes written by [`serialize_raw`].
pub(crate) fn deserialize_raw<'de, D: Deserializer<'de>, const N: usize>(
    deserializer: D,
) -> Result<[u8; N], D::Error> {
    struct RawBytes<const N: usize>;
    impl<'de, const N: usize> serde::de::Visitor<'de> for RawBytes<N> {
        type Value = [u8; N];

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{N} bytes")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<[u8; N], A::Error> {
            let mut bytes = [0u8; N];
            for (index, byte) in bytes.iter_mut().enumerate() {
                *byte = seq
                    .next_element()?
                    .ok_or_else(|| serde::de::Error::invalid_length(index, &self))?;
            }
            Ok(bytes)
        }
    }
    deserializer.deserialize_tuple(N, RawBytes::<N>)
}

impl<'de, const N: usize> Deserialize<'de> for FixedBytes<N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FixedBytes<N>, D::Error> {
        if deserializer.is_human_readable() {
            let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
            FixedBytes::from_hex(&text).map_err(serde::de::Error::custom)
        } else {
            deserialize_raw(deserializer).map(FixedBytes)
        }
    }
}

/// Bincode's own encoding (the journal's commands): the raw bytes, the same as the serde
/// path above writes for binary formats.
impl<const N: usize> bincode::Encode for FixedBytes<N> {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        encoder: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        bincode::Encode::encode(&self.0, encoder)
    }
}

impl<Context, const N: usize> bincode::Decode<Context> for FixedBytes<N> {
    fn decode<D: bincode::de::Decoder<Context = Context>>(
        decoder: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        <[u8; N] as bincode::Decode<Context>>::decode(decoder).map(FixedBytes)
    }
}

impl<'de, Context, const N: usize> bincode::BorrowDecode<'de, Context> for FixedBytes<N> {
    fn borrow_decode<D: bincode::de::BorrowDecoder<'de, Context = Context>>(
        decoder: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        <[u8; N] as bincode::Decode<Context>>::decode(decoder).map(FixedBytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKET: &str = "0x3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b";

    #[test]
    fn b256_round_trips_in_lowercase() {
        let value = B256::from_hex(&MARKET.to_uppercase().replacen("0X", "0x", 1)).unwrap();
        assert_eq!(value.to_string(), MARKET);
        assert_eq!(format!("{value:?}"), MARKET);
    }

    #[test]
    fn wrong_lengths_and_prefixes_are_rejected() {
        assert_eq!(
            B256::from_hex("0x3b3b"),
            Err(HexError::WrongLength {
                expected: 64,
                found: 4
            })
        );
        assert_eq!(B256::from_hex(&MARKET[2..]), Err(HexError::MissingPrefix));
        assert_eq!(
            Bytes16::from_hex("0x00112233445566778899aabbccddeeffaa"),
            Err(HexError::WrongLength {
                expected: 32,
                found: 34
            })
        );
        assert_eq!(
            Bytes16::from_hex("0x00112233445566778899aabbccddeegg"),
            Err(HexError::NotHex)
        );
    }

    #[test]
    fn binary_formats_write_the_raw_bytes() {
        let value = B256::from([7; 32]);
        let config = bincode::config::standard();
        let serde_bytes = bincode::serde::encode_to_vec(value, config).unwrap();
        assert_eq!(serde_bytes, vec![7; 32]);
        assert_eq!(bincode::encode_to_vec(value, config).unwrap(), serde_bytes);
        let (back, read): (B256, usize) =
            bincode::serde::decode_from_slice(&serde_bytes, config).unwrap();
        assert_eq!((back, read), (value, 32));
    }

    #[test]
    fn serde_is_a_hex_string() {
        let value = Bytes16::from_hex("0x00112233445566778899AABBCCDDEEFF").unwrap();
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, "\"0x00112233445566778899aabbccddeeff\"");
        assert_eq!(serde_json::from_str::<Bytes16>(&json).unwrap(), value);
    }
}
