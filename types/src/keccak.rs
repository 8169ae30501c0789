//! Keccak-256, the hash of EIP-712, EIP-55 and Ethereum addresses.

use sha3::{Digest, Keccak256};

/// Keccak-256 of `data`.
pub fn keccak256(data: &[u8]) -> [u8; 32] {
    Keccak256::digest(data).into()
}

/// Keccak-256 of several byte strings, hashed as their concatenation (no copy is made).
pub fn keccak256_concat(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Keccak256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_has_the_known_hash() {
        assert_eq!(
            hex::encode(keccak256(b"")),
            "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
    }

    #[test]
    fn concat_equals_hash_of_joined_bytes() {
        assert_eq!(keccak256_concat(&[b"ab", b"cd"]), keccak256(b"abcd"));
    }
}
