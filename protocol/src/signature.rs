//! 65-byte secp256k1 signatures `r ‖ s ‖ v` (API.md §4): parsing, address recovery with
//! low-s and `v` rules, and signing for clients and tests.
//!
//! Parsing checks only the form (`0x` + 130 hex digits), so that a well-formed signature that
//! does not verify is told apart from a malformed field (API.md §8). Recovery applies the
//! rules: `v` in {27, 28} (0 and 1 accepted) and `s` in the lower half of the curve order.

use std::fmt;
use std::str::FromStr;

use secp256k1::ecdsa::{RecoverableSignature, RecoveryId};
use secp256k1::{Message, PublicKey, SecretKey, SECP256K1};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::address::Address;
use crate::fixed_bytes::{decode_0x_hex, write_0x_hex};
use crate::keccak::keccak256;

/// Bytes of a signature.
pub const SIGNATURE_BYTES: usize = 65;

/// Half the secp256k1 group order, big-endian: the largest `s` a low-s signature may have.
const HALF_ORDER: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
];

/// Why a signature is malformed or does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Not `0x` followed by exactly 130 hex digits.
    #[error("expected a 0x-prefixed 65-byte hex signature (0x + 130 hex digits)")]
    Malformed,
    /// `v` is not 27, 28, 0 or 1.
    #[error("signature v must be 27 or 28 (0 or 1 accepted), found {v}")]
    BadV {
        /// The rejected `v` byte.
        v: u8,
    },
    /// `s` is above half the curve order.
    #[error("signature s is in the upper half of the curve order (high-s); only low-s signatures are accepted")]
    HighS,
    /// No public key recovers from the signature and digest.
    #[error("signature does not recover to any public key")]
    Unrecoverable,
    /// The signature recovers to an address other than the expected signer.
    #[error("signature recovers to {recovered}, not to the signer {expected}")]
    WrongSigner {
        /// The address the signature recovers to.
        recovered: Address,
        /// The address that should have signed.
        expected: Address,
    },
}

/// A 65-byte signature `r ‖ s ‖ v`, held exactly as presented.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signature([u8; SIGNATURE_BYTES]);

impl Signature {
    /// Parses `0x` + 130 hex digits (either case). Checks the form only.
    pub fn from_hex(text: &str) -> Result<Signature, SignatureError> {
        decode_0x_hex::<SIGNATURE_BYTES>(text)
            .map(Signature)
            .map_err(|_| SignatureError::Malformed)
    }

    /// The signature from its 65 bytes.
    pub const fn from_bytes(bytes: [u8; SIGNATURE_BYTES]) -> Signature {
        Signature(bytes)
    }

    /// The 65 bytes as presented.
    pub const fn as_bytes(&self) -> &[u8; SIGNATURE_BYTES] {
        &self.0
    }

    /// The `v` byte as presented.
    pub const fn v(&self) -> u8 {
        self.0[64]
    }

    /// The recovery id (0 or 1) from `v` in {27, 28, 0, 1}.
    fn recovery_id(&self) -> Result<RecoveryId, SignatureError> {
        match self.v() {
            0 | 27 => Ok(RecoveryId::Zero),
            1 | 28 => Ok(RecoveryId::One),
            v => Err(SignatureError::BadV { v }),
        }
    }

    /// Checks that `v` is acceptable and `s` is low.
    pub fn check_canonical(&self) -> Result<(), SignatureError> {
        self.recovery_id()?;
        if self.0[32..64] > HALF_ORDER[..] {
            return Err(SignatureError::HighS);
        }
        Ok(())
    }

    /// The address whose key produced this signature over `digest`.
    pub fn recover_address(&self, digest: &[u8; 32]) -> Result<Address, SignatureError> {
        self.check_canonical()?;
        let recovery_id = self.recovery_id()?;
        let signature = RecoverableSignature::from_compact(&self.0[..64], recovery_id)
            .map_err(|_| SignatureError::Unrecoverable)?;
        let public_key = SECP256K1
            .recover_ecdsa(&Message::from_digest(*digest), &signature)
            .map_err(|_| SignatureError::Unrecoverable)?;
        Ok(address_of_public_key(&public_key))
    }

    /// Recovers the signer and checks that it is `expected`.
    pub fn verify(&self, digest: &[u8; 32], expected: &Address) -> Result<(), SignatureError> {
        let recovered = self.recover_address(digest)?;
        if recovered != *expected {
            return Err(SignatureError::WrongSigner {
                recovered,
                expected: *expected,
            });
        }
        Ok(())
    }
}

impl FromStr for Signature {
    type Err = SignatureError;

    fn from_str(text: &str) -> Result<Signature, SignatureError> {
        Signature::from_hex(text)
    }
}

/// `0x` + 130 lowercase hex digits.
impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_0x_hex(f, &self.0)
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_0x_hex(f, &self.0)
    }
}

impl Serialize for Signature {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Signature {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Signature, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Signature::from_hex(&text).map_err(serde::de::Error::custom)
    }
}

/// Signs `digest` (RFC 6979 deterministic nonce, low-s) and returns `r ‖ s ‖ v` with `v` 27/28.
pub fn sign_digest(secret_key: &SecretKey, digest: &[u8; 32]) -> Signature {
    let signature = SECP256K1.sign_ecdsa_recoverable(&Message::from_digest(*digest), secret_key);
    let (recovery_id, compact) = signature.serialize_compact();
    let mut bytes = [0u8; SIGNATURE_BYTES];
    bytes[..64].copy_from_slice(&compact);
    bytes[64] = 27 + i32::from(recovery_id) as u8;
    Signature(bytes)
}

/// The Ethereum address of a public key: the last 20 bytes of keccak256 of its 64-byte form.
pub fn address_of_public_key(public_key: &PublicKey) -> Address {
    let uncompressed = public_key.serialize_uncompressed();
    let hash = keccak256(&uncompressed[1..]);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    Address(address)
}

/// The Ethereum address of a secret key.
pub fn address_of(secret_key: &SecretKey) -> Address {
    address_of_public_key(&PublicKey::from_secret_key_global(secret_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Anvil's first development key (public).
    fn key() -> SecretKey {
        let bytes = decode_0x_hex::<32>(
            "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        )
        .unwrap();
        SecretKey::from_byte_array(&bytes).unwrap()
    }

    const KEY_ADDRESS: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

    /// The curve order n, big-endian.
    const ORDER: [u8; 32] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xfe, 0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36,
        0x41, 0x41,
    ];

    /// n - s, big-endian.
    fn negate_s(s: &[u8]) -> [u8; 32] {
        let mut out = [0u8; 32];
        let mut borrow = 0i16;
        for index in (0..32).rev() {
            let mut diff = i16::from(ORDER[index]) - i16::from(s[index]) - borrow;
            borrow = i16::from(diff < 0);
            if diff < 0 {
                diff += 256;
            }
            out[index] = diff as u8;
        }
        out
    }

    #[test]
    fn address_of_the_development_key() {
        assert_eq!(address_of(&key()).to_string(), KEY_ADDRESS);
    }

    #[test]
    fn sign_then_recover_gives_the_signer_with_v_27_or_28() {
        let digest = keccak256(b"digest");
        let signature = sign_digest(&key(), &digest);
        assert!(signature.v() == 27 || signature.v() == 28);
        assert_eq!(
            signature.recover_address(&digest).unwrap(),
            address_of(&key())
        );
        assert_eq!(signature.verify(&digest, &address_of(&key())), Ok(()));
    }

    #[test]
    fn v_0_and_1_are_normalized_to_27_and_28() {
        let digest = keccak256(b"digest");
        let signature = sign_digest(&key(), &digest);
        let mut bytes = *signature.as_bytes();
        bytes[64] -= 27;
        let raw_v = Signature::from_bytes(bytes);
        assert_eq!(raw_v.recover_address(&digest).unwrap(), address_of(&key()));
    }

    #[test]
    fn other_v_values_are_rejected() {
        let digest = keccak256(b"digest");
        let mut bytes = *sign_digest(&key(), &digest).as_bytes();
        for v in [2u8, 26, 29, 35, 255] {
            bytes[64] = v;
            assert_eq!(
                Signature::from_bytes(bytes).recover_address(&digest),
                Err(SignatureError::BadV { v })
            );
        }
    }

    #[test]
    fn high_s_is_rejected_with_a_clear_error() {
        let digest = keccak256(b"digest");
        let mut bytes = *sign_digest(&key(), &digest).as_bytes();
        let high_s = negate_s(&bytes[32..64]);
        bytes[32..64].copy_from_slice(&high_s);
        bytes[64] = 55 - bytes[64]; // (r, n - s) is valid with the other recovery id (27 <-> 28)
        let error = Signature::from_bytes(bytes)
            .recover_address(&digest)
            .unwrap_err();
        assert_eq!(error, SignatureError::HighS);
        assert!(error.to_string().contains("high-s"));
    }

    #[test]
    fn malformed_hex_is_rejected() {
        let good = sign_digest(&key(), &keccak256(b"x")).to_string();
        assert_eq!(good.len(), 132);
        assert!(Signature::from_hex(&good).is_ok());
        for bad in [&good[..130], &good[2..], "0x", "", &format!("{good}00")] {
            assert_eq!(
                Signature::from_hex(bad),
                Err(SignatureError::Malformed),
                "{bad:?}"
            );
        }
        let not_hex = format!("0x{}", "zz".repeat(65));
        assert_eq!(
            Signature::from_hex(&not_hex),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn wrong_signer_names_both_addresses() {
        let digest = keccak256(b"digest");
        let signature = sign_digest(&key(), &digest);
        let error = signature.verify(&digest, &Address::ZERO).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "signature recovers to {KEY_ADDRESS}, not to the signer {}",
                Address::ZERO
            )
        );
    }
}
