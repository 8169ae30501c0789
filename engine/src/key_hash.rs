//! Hashing for the engine's byte-string keys (addresses, token and condition ids, order
//! hashes). Their bytes come out of keccak, so they are already spread evenly: the hasher
//! takes the key eight bytes at a time, each word mixed in with one multiply (the first
//! `FxHasher`'s step), and mixes the result once more with a full 64 × 64 → 128-bit multiply,
//! whose middle bits depend on every input bit. That is less work than `rustc-hash` 2's
//! hasher, which it replaces for these keys (session 24: 16 fewer instructions per command of
//! the `bench engine` stream), and keys that differ in one byte still land apart.
//!
//! Like the hasher it replaces, it is unkeyed: it does not resist keys chosen to collide.
//! Finding keccak outputs that collide in a table's low bits costs the same brute force
//! with either, and no map here is keyed by free-form input.

use std::hash::{BuildHasherDefault, Hasher};

/// A map from byte-string keys, hashed by [`KeyHasher`].
pub type KeyMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<KeyHasher>>;
/// A set of byte-string keys, hashed by [`KeyHasher`].
pub type KeySet<K> = std::collections::HashSet<K, BuildHasherDefault<KeyHasher>>;

/// The multiplier of each word's step (`FxHasher`'s).
const STEP: u64 = 0x517c_c1b7_2722_0a95;
/// The final mix's odd constant, with bits spread evenly (the golden ratio's fraction).
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// Mixes a key's words in one at a time, then once more; see the module's documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyHasher {
    folded: u64,
}

impl KeyHasher {
    #[inline(always)]
    fn fold(&mut self, word: u64) {
        self.folded = (self.folded.rotate_left(5) ^ word).wrapping_mul(STEP);
    }
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            self.fold(u64::from_le_bytes(le));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut le = [0u8; 8];
            le[..tail.len()].copy_from_slice(tail);
            self.fold(u64::from_le_bytes(le));
        }
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.fold(value);
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.fold(value as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let product = u128::from(self.folded).wrapping_mul(u128::from(MIX));
        (product as u64) ^ ((product >> 64) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash_of(key: impl Hash) -> u64 {
        BuildHasherDefault::<KeyHasher>::default().hash_one(key)
    }

    #[test]
    fn keys_that_differ_in_any_one_byte_hash_apart_in_their_low_bits() {
        // Tables pick a bucket from the low bits: keys differing in a single byte (as test
        // addresses often do) must not share them.
        for len in [20usize, 32] {
            let base = vec![0u8; len];
            let mut buckets = std::collections::HashSet::new();
            for position in 0..len {
                for value in 1..=8u8 {
                    let mut key = base.clone();
                    key[position] = value;
                    buckets.insert(hash_of(&key) & 0xffff);
                }
            }
            // 8 × len keys; a few chance collisions among 65,536 buckets at most.
            assert!(buckets.len() + 3 >= 8 * len, "{len}: {}", buckets.len());
        }
    }

    #[test]
    fn equal_words_do_not_cancel() {
        assert_ne!(hash_of([7u8; 32]), hash_of([0u8; 32]));
        assert_ne!(
            hash_of(([1u8; 20], [1u8; 20])),
            hash_of(([2u8; 20], [2u8; 20]))
        );
    }
}
