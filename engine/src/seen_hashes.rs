//! The hash of every order ever accepted, to refuse a signed order submitted twice.
//!
//! The hashes are kept in acceptance order in a chunked log, and found through a
//! `HashIndex` of their digests: one probe per placement, no rehash pauses.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::chunk_log::ChunkLog;
use crate::hash_index::{key_digest, HashIndex};
use crate::types::Hash32;

/// Order hashes seen, oldest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct SeenHashes {
    hashes: ChunkLog<Hash32>,
    index: HashIndex,
}

impl SeenHashes {
    /// An empty set with room for `hashes` hashes.
    pub fn with_room(hashes: usize, prefault: bool) -> SeenHashes {
        SeenHashes {
            hashes: ChunkLog::with_room(hashes, Hash32::default(), prefault),
            index: HashIndex::with_room(hashes, prefault),
        }
    }

    /// Whether `hash` was seen.
    #[inline]
    pub fn contains(&self, hash: &Hash32) -> bool {
        self.index
            .find(key_digest(&hash.0), |n| {
                self.hashes.get(n as usize) == Some(hash)
            })
            .is_some()
    }

    /// Starts loading what `contains(hash)` and `insert(hash)` read first.
    #[inline]
    pub fn prefetch(&self, hash: &Hash32) {
        self.index.prefetch(key_digest(&hash.0));
    }

    /// Records `hash`, which was not seen before.
    pub fn insert(&mut self, hash: Hash32) {
        debug_assert!(!self.contains(&hash));
        debug_assert_eq!(self.index.len(), self.hashes.iter().len() as u64);
        let hashes = &self.hashes;
        self.index.push(key_digest(&hash.0), |n| {
            key_digest(&hashes.get(n as usize).expect("a filed hash").0)
        });
        self.hashes.push(hash);
    }

    /// Every hash seen, oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Hash32> + '_ {
        self.hashes.iter()
    }
}

/// Encoded as the sequence of hashes (the index is rebuilt on decoding).
impl Serialize for SeenHashes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.hashes.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SeenHashes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut seen = SeenHashes::default();
        for hash in Vec::<Hash32>::deserialize(deserializer)? {
            if !seen.contains(&hash) {
                seen.insert(hash);
            }
        }
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Bytes32;

    #[test]
    fn remembers_what_it_saw_and_nothing_else() {
        let mut seen = SeenHashes::default();
        for i in 0..1_000u32 {
            let mut h = [0u8; 32];
            h[28..].copy_from_slice(&i.to_be_bytes());
            assert!(!seen.contains(&Bytes32(h)));
            seen.insert(Bytes32(h));
            assert!(seen.contains(&Bytes32(h)));
        }
        assert!(!seen.contains(&Bytes32([0xff; 32])));
        assert_eq!(seen.iter().len(), 1_000);
    }
}
