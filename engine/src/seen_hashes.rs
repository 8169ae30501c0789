//! The hashes of the orders the engine knows, to refuse a signed order submitted twice: every
//! open order's, every closed order's not yet forgotten, and a forgotten order's for
//! `HASH_GRACE_RECORDS` records more. Older ones are in the history store, where the gateway
//! looks before it submits an order (API.md §19): the grace covers an order checked there just
//! before its twin was forgotten, so that the engine's decision stays a function of the
//! journal alone and no duplicate slips between the two.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::hash_slots::{HashSlots, Vacancy};
use crate::types::Hash32;

/// Records a forgotten order's hash is still refused by the engine itself. A protocol
/// constant, not a setting: a primary and its standby must drop the same hashes at the same
/// record. The gateway refuses to place orders while the history store is more than half of
/// it behind the journal, and an order waits in the rings for far fewer records than the other
/// half, so every hash the engine has dropped was in the store when the order was checked.
pub const HASH_GRACE_RECORDS: u64 = 1 << 18;

/// Order hashes known, and the forgotten ones still within their grace.
#[derive(Clone, Debug, Default)]
pub(crate) struct SeenHashes {
    hashes: HashSlots,
    /// Hashes of forgotten orders with the sequence that forgot them, oldest first.
    fading: VecDeque<(u64, Hash32)>,
}

impl SeenHashes {
    /// An empty set with room for `hashes` hashes.
    pub fn with_room(hashes: usize) -> SeenHashes {
        SeenHashes {
            hashes: HashSlots::with_room(hashes),
            fading: VecDeque::new(),
        }
    }

    /// Hashes known: open and unforgotten orders', and forgotten ones' within their grace.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Starts loading what `vacancy(hash)` and `fill` read first.
    #[inline]
    pub fn prefetch(&self, hash: &Hash32) {
        self.hashes.prefetch(hash);
    }

    /// Where `hash` goes, or `None` when it is known.
    #[inline]
    pub fn vacancy(&self, hash: &Hash32) -> Option<Vacancy> {
        self.hashes.vacancy(hash)
    }

    /// Records `hash` at `vacancy`, which [`SeenHashes::vacancy`] gave for it since the set
    /// last changed.
    #[inline]
    pub fn fill(&mut self, vacancy: Vacancy, hash: Hash32) {
        self.hashes.fill(vacancy, hash);
    }

    /// The order of `hash` was forgotten at `seq`: its hash goes `HASH_GRACE_RECORDS` later.
    pub fn fade(&mut self, seq: u64, hash: Hash32) {
        self.fading.push_back((seq, hash));
    }

    /// Whether some hash's grace is over at `seq`.
    pub fn fade_due(&self, seq: u64) -> bool {
        self.fading
            .front()
            .is_some_and(|&(at, _)| at.saturating_add(HASH_GRACE_RECORDS) <= seq)
    }

    /// Drops the hashes whose grace is over at `seq`.
    pub fn drop_faded(&mut self, seq: u64) {
        while self.fade_due(seq) {
            if let Some((_, hash)) = self.fading.pop_front() {
                self.hashes.remove(&hash);
            }
        }
    }

    /// Every hash known (in no particular order), and the fading ones in order.
    pub fn parts(&self) -> (impl Iterator<Item = &Hash32> + '_, &VecDeque<(u64, Hash32)>) {
        (self.hashes.iter(), &self.fading)
    }
}

/// What a snapshot stores: the hashes sorted (the same state gives the same bytes), and the
/// fading ones in order.
#[derive(Serialize, Deserialize)]
struct Stored {
    hashes: Vec<Hash32>,
    fading: VecDeque<(u64, Hash32)>,
}

impl Serialize for SeenHashes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut hashes: Vec<Hash32> = self.hashes.iter().copied().collect();
        hashes.sort_unstable();
        Stored {
            hashes,
            fading: self.fading.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SeenHashes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Stored { hashes, fading } = Stored::deserialize(deserializer)?;
        let mut seen = SeenHashes::with_room(hashes.len());
        for hash in hashes {
            seen.hashes.insert(hash);
        }
        if fading.iter().any(|(_, hash)| !seen.hashes.contains(hash)) {
            return Err(serde::de::Error::custom("a fading hash that is not known"));
        }
        seen.fading = fading;
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::FixedBytes;

    impl SeenHashes {
        fn knows(&self, hash: &Hash32) -> bool {
            self.vacancy(hash).is_none()
        }
    }

    fn hash(i: u32) -> Hash32 {
        let mut h = [0u8; 32];
        h[28..].copy_from_slice(&i.to_be_bytes());
        FixedBytes(h)
    }

    #[test]
    fn remembers_what_it_saw_until_its_grace_is_over() {
        let mut seen = SeenHashes::default();
        for i in 0..1_000u32 {
            let vacancy = seen.vacancy(&hash(i)).expect("not seen yet");
            seen.fill(vacancy, hash(i));
            assert!(seen.knows(&hash(i)));
        }
        assert!(!seen.knows(&FixedBytes([0xff; 32])));
        seen.fade(10, hash(1));
        seen.fade(12, hash(2));
        seen.drop_faded(10 + HASH_GRACE_RECORDS - 1);
        assert!(seen.knows(&hash(1)), "within its grace");
        assert!(!seen.fade_due(10 + HASH_GRACE_RECORDS - 1));
        assert!(seen.fade_due(10 + HASH_GRACE_RECORDS));
        seen.drop_faded(11 + HASH_GRACE_RECORDS);
        assert!(!seen.knows(&hash(1)));
        assert!(seen.knows(&hash(2)));
        assert!(seen.knows(&hash(3)), "never forgotten");
    }
}
