//! `Address`: a 20-byte Ethereum address, parsed in any case (mixed case must pass EIP-55) and
//! written in EIP-55 checksum form; raw bytes in binary formats (the journal, snapshots).

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::address_memo::{remembered, AddressMemo};
use crate::fixed_bytes::{decode_0x_hex, deserialize_raw, serialize_raw, HexError};
use crate::keccak::keccak256;

/// Hex digits of an address.
const ADDRESS_HEX_DIGITS: usize = 40;

thread_local! {
    /// Recent addresses of this thread and their checksum digits.
    static CHECKSUM_MEMO: RefCell<AddressMemo<[u8; ADDRESS_HEX_DIGITS]>> =
        const { RefCell::new(AddressMemo::new()) };
}

/// A 20-byte Ethereum address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Address(pub [u8; 20]);

/// Why a string is not an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Not `0x` followed by 40 hex digits.
    #[error("expected a 0x-prefixed 20-byte hex address (0x + 40 hex digits)")]
    Malformed,
    /// Upper- and lowercase letters are mixed but do not follow the EIP-55 checksum.
    #[error("mixed-case address fails the EIP-55 checksum (expected {expected})")]
    BadChecksum {
        /// The address written with the correct checksum.
        expected: String,
    },
}

impl From<HexError> for AddressError {
    fn from(_: HexError) -> AddressError {
        AddressError::Malformed
    }
}

impl Address {
    /// The zero address.
    pub const ZERO: Address = Address([0; 20]);

    /// Parses `0x` + 40 hex digits. All-lowercase and all-uppercase digits are accepted as
    /// they are; mixed case must match the EIP-55 checksum.
    pub fn parse(text: &str) -> Result<Address, AddressError> {
        let address = Address(decode_0x_hex::<20>(text)?);
        let digits = &text.as_bytes()[2..];
        let has_upper = digits.iter().any(u8::is_ascii_uppercase);
        let has_lower = digits.iter().any(u8::is_ascii_lowercase);
        if has_upper && has_lower {
            let checksummed = address.to_checksum_digits();
            if digits != checksummed.as_slice() {
                return Err(AddressError::BadChecksum {
                    expected: address.to_string(),
                });
            }
        }
        Ok(address)
    }

    /// Parses `0x` + 40 hex digits in any case without checking an EIP-55 checksum. For
    /// trusted text only (configuration, known-answer files): API.md §4 itself writes the default
    /// exchange address `0x...C10b`, which is not its checksum form (`0x...C10B`).
    pub fn parse_ignoring_checksum(text: &str) -> Result<Address, AddressError> {
        Ok(Address(decode_0x_hex::<20>(text)?))
    }

    /// The bytes of the address.
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// `0x` + 40 lowercase hex digits (the form hashed into owner UUIDs).
    pub fn to_lowercase_hex(&self) -> String {
        let mut text = String::with_capacity(2 + ADDRESS_HEX_DIGITS);
        text.push_str("0x");
        text.push_str(&hex::encode(self.0));
        text
    }

    /// The address as a 32-byte ABI word (left-padded with zeros).
    pub fn to_word(&self) -> [u8; 32] {
        let mut word = [0u8; 32];
        word[12..].copy_from_slice(&self.0);
        word
    }

    /// The 40 EIP-55 checksum hex digits (without `0x`), from this thread's memo of recent
    /// addresses when it holds them (a keccak, ~0.65 µs, otherwise).
    fn to_checksum_digits(self) -> [u8; ADDRESS_HEX_DIGITS] {
        remembered(&CHECKSUM_MEMO, self, Address::compute_checksum_digits)
    }

    /// The 40 EIP-55 checksum hex digits, computed.
    fn compute_checksum_digits(self) -> [u8; ADDRESS_HEX_DIGITS] {
        let mut digits = [0u8; ADDRESS_HEX_DIGITS];
        // Encoding 20 bytes into 40 digits cannot fail: the lengths match.
        let encoded = hex::encode_to_slice(self.0, &mut digits);
        debug_assert!(encoded.is_ok());
        let hash = keccak256(&digits);
        for (index, digit) in digits.iter_mut().enumerate() {
            let nibble = (hash[index / 2] >> (4 * (1 - index % 2))) & 0x0f;
            if nibble >= 8 {
                digit.make_ascii_uppercase();
            }
        }
        digits
    }
}

impl From<[u8; 20]> for Address {
    fn from(bytes: [u8; 20]) -> Address {
        Address(bytes)
    }
}

impl FromStr for Address {
    type Err = AddressError;

    fn from_str(text: &str) -> Result<Address, AddressError> {
        Address::parse(text)
    }
}

/// EIP-55 checksum form.
impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.to_checksum_digits();
        f.write_str("0x")?;
        f.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Address {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            serialize_raw(&self.0, serializer)
        }
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Address, D::Error> {
        if deserializer.is_human_readable() {
            let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
            Address::parse(&text).map_err(serde::de::Error::custom)
        } else {
            deserialize_raw(deserializer).map(Address)
        }
    }
}

/// Bincode's own encoding (the journal's commands): the raw bytes.
impl bincode::Encode for Address {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        encoder: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        bincode::Encode::encode(&self.0, encoder)
    }
}

impl<Context> bincode::Decode<Context> for Address {
    fn decode<D: bincode::de::Decoder<Context = Context>>(
        decoder: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        <[u8; 20] as bincode::Decode<Context>>::decode(decoder).map(Address)
    }
}

bincode::impl_borrow_decode!(Address);

#[cfg(test)]
mod tests {
    use super::*;

    const EOA0: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

    #[test]
    fn memoized_checksums_are_the_computed_ones() {
        let addresses = [
            Address::parse(&EOA0.to_lowercase()).unwrap(),
            Address([0x11; 20]),
        ];
        for _ in 0..2 {
            for address in addresses {
                let digits = address.to_checksum_digits();
                assert_eq!(digits, address.compute_checksum_digits());
            }
        }
        assert_eq!(addresses[0].to_string(), EOA0);
    }

    #[test]
    fn displays_in_eip55_form() {
        let address = Address::parse(&EOA0.to_lowercase()).unwrap();
        assert_eq!(address.to_string(), EOA0);
        assert_eq!(address.to_lowercase_hex(), EOA0.to_lowercase());
    }

    #[test]
    fn accepts_all_lowercase_all_uppercase_and_checksummed() {
        let expected = Address::parse(EOA0).unwrap();
        let upper = format!("0x{}", EOA0[2..].to_uppercase());
        assert_eq!(Address::parse(&upper), Ok(expected));
        assert_eq!(Address::parse(&EOA0.to_lowercase()), Ok(expected));
    }

    #[test]
    fn mixed_case_with_a_bad_checksum_is_rejected_saying_eip55() {
        let bad = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        let error = Address::parse(bad).unwrap_err();
        assert_eq!(
            error,
            AddressError::BadChecksum {
                expected: EOA0.to_string()
            }
        );
        assert!(error.to_string().contains("EIP-55"), "{error}");
    }

    #[test]
    fn malformed_addresses_are_rejected() {
        for bad in [
            "",
            "0x",
            "f39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "0xf39f",
            &EOA0[..41],
        ] {
            assert_eq!(Address::parse(bad), Err(AddressError::Malformed), "{bad:?}");
        }
        assert_eq!(
            Address::parse("0xg39fd6e51aad88f6f4ce6ab8827279cfffb92266"),
            Err(AddressError::Malformed)
        );
    }

    #[test]
    fn word_is_left_padded() {
        let word = Address::parse(EOA0).unwrap().to_word();
        assert_eq!(word[..12], [0u8; 12]);
        assert_eq!(word[12], 0xf3);
    }

    #[test]
    fn serde_writes_eip55() {
        let address = Address::parse(&EOA0.to_lowercase()).unwrap();
        assert_eq!(
            serde_json::to_string(&address).unwrap(),
            format!("\"{EOA0}\"")
        );
    }

    #[test]
    fn binary_formats_write_the_20_raw_bytes_both_ways() {
        let address = Address::parse(EOA0).unwrap();
        let config = bincode::config::standard();
        let serde_bytes = bincode::serde::encode_to_vec(address, config).unwrap();
        assert_eq!(serde_bytes, address.0.to_vec());
        assert_eq!(
            bincode::encode_to_vec(address, config).unwrap(),
            serde_bytes
        );
        let (back, read): (Address, usize) =
            bincode::serde::decode_from_slice(&serde_bytes, config).unwrap();
        assert_eq!((back, read), (address, 20));
        let (back, _): (Address, usize) = bincode::decode_from_slice(&serde_bytes, config).unwrap();
        assert_eq!(back, address);
    }
}
