//! A set of 32-byte hashes: open addressing over the hashes themselves, probed linearly,
//! at most half full. Unlike a `HashSet`, it tells where a hash's probe starts, so the
//! engine can start loading that line for a command a few places ahead (`prefetch`): a set of
//! every recent order's hash is far larger than the cache, and each placement reads it at a
//! random place. Measured on the `ladder bench engine` stream (2 M commands, 1.2 M hashes,
//! five interleaved pairs): 2.6–3.2 M commands/s against 1.6–2.0 M with a `HashSet`. A dense
//! array of tags beside the hashes (two lines to load) made 2.4–2.8 M.
//!
//! The all-zero hash marks an empty slot; the set holds it with a flag of its own. Removal
//! shifts the rest of the probe run back (no tombstones), so a long-lived set with as many
//! removals as insertions keeps its probes short. The set grows after an insertion that
//! leaves it more than half full, so there is always an empty slot for the next one: a
//! [`Vacancy`] found by a lookup stays valid until the set changes.
//!
//! Room made up front may be resident from the start: 64 bytes per hash of room, 4 MB for
//! the engine's default 65,536. A zeroed `Vec` this large is not reliably left to the kernel
//! to map lazily: once large blocks have been freed, glibc serves it from its heap and writes
//! every byte. A mapping of its own would be lazy, but every fresh page then faults on first
//! touch, and the property tests, which make and clone engines by the thousand, ran four
//! times slower.

use std::hash::{BuildHasher, BuildHasherDefault};

use crate::key_hash::KeyHasher;
use crate::prefetch::prefetch;
use crate::types::Hash32;

/// Slots of the smallest table.
const SLOTS_MIN: usize = 64;

/// The empty slot's content.
const EMPTY: Hash32 = crate::types::FixedBytes([0; 32]);

/// A set of 32-byte hashes; see the module's documentation.
#[derive(Clone, Debug)]
pub(crate) struct HashSlots {
    /// A power of two long and at most half full.
    slots: Vec<Hash32>,
    /// Hashes held in `slots` (the zero hash not counted).
    in_slots: usize,
    holds_zero: bool,
}

/// Where a hash the set does not hold goes: valid until the set changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Vacancy(usize);

impl Default for HashSlots {
    fn default() -> Self {
        HashSlots::with_room(0)
    }
}

impl HashSlots {
    /// An empty set with room for `hashes` hashes before it grows.
    pub fn with_room(hashes: usize) -> HashSlots {
        let size = hashes.saturating_mul(2).next_power_of_two().max(SLOTS_MIN);
        HashSlots {
            slots: vec![EMPTY; size],
            in_slots: 0,
            holds_zero: false,
        }
    }

    /// Hashes held.
    pub fn len(&self) -> usize {
        self.in_slots + usize::from(self.holds_zero)
    }

    /// Whether `hash` is held.
    #[inline]
    pub fn contains(&self, hash: &Hash32) -> bool {
        self.vacancy(hash).is_none()
    }

    /// Where `hash` would go, or `None` when it is held.
    #[inline]
    pub fn vacancy(&self, hash: &Hash32) -> Option<Vacancy> {
        if *hash == EMPTY {
            return (!self.holds_zero).then_some(Vacancy(usize::MAX));
        }
        self.find(hash).err().map(Vacancy)
    }

    /// Adds `hash`; false when it was already held.
    pub fn insert(&mut self, hash: Hash32) -> bool {
        match self.vacancy(&hash) {
            Some(vacancy) => {
                self.fill(vacancy, hash);
                true
            }
            None => false,
        }
    }

    /// Adds `hash` at `vacancy`, which [`HashSlots::vacancy`] gave for it since the set last
    /// changed.
    #[inline]
    pub fn fill(&mut self, vacancy: Vacancy, hash: Hash32) {
        if hash == EMPTY {
            self.holds_zero = true;
            return;
        }
        debug_assert_eq!(self.find(&hash), Err(vacancy.0), "a stale vacancy");
        self.slots[vacancy.0] = hash;
        self.in_slots += 1;
        if self.in_slots * 2 > self.slots.len() {
            self.grow();
        }
    }

    /// Removes `hash`; false when it was not held.
    pub fn remove(&mut self, hash: &Hash32) -> bool {
        if *hash == EMPTY {
            return std::mem::replace(&mut self.holds_zero, false);
        }
        let Ok(mut hole) = self.find(hash) else {
            return false;
        };
        // Backward shift: a later hash of the run moves into the hole unless its probe
        // starts after the hole (cyclically), where a lookup would no longer pass the hole.
        let mask = self.slots.len() - 1;
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            if self.slots[next] == EMPTY {
                break;
            }
            let start = home(&self.slots[next], mask);
            let stays = if hole <= next {
                hole < start && start <= next
            } else {
                hole < start || start <= next
            };
            if !stays {
                self.slots[hole] = self.slots[next];
                hole = next;
            }
        }
        self.slots[hole] = EMPTY;
        self.in_slots -= 1;
        true
    }

    /// Starts loading the line where a lookup of `hash` begins.
    #[inline]
    pub fn prefetch(&self, hash: &Hash32) {
        prefetch(&self.slots[home(hash, self.slots.len() - 1)]);
    }

    /// Every hash held, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Hash32> + '_ {
        let zero = self.holds_zero.then_some(&EMPTY);
        self.slots.iter().filter(|hash| **hash != EMPTY).chain(zero)
    }

    /// The slot holding `hash` (not zero), or the empty slot where its probe ended.
    #[inline]
    fn find(&self, hash: &Hash32) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = home(hash, mask);
        loop {
            let slot = &self.slots[i];
            if slot == hash {
                return Ok(i);
            }
            if *slot == EMPTY {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; size]);
        let mask = size - 1;
        for hash in old.into_iter().filter(|hash| *hash != EMPTY) {
            let mut i = home(&hash, mask);
            while self.slots[i] != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = hash;
        }
    }
}

/// The slot a probe for `hash` starts at.
#[inline]
fn home(hash: &Hash32, mask: usize) -> usize {
    BuildHasherDefault::<KeyHasher>::default().hash_one(hash) as usize & mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::FixedBytes;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// A hash with few distinct values (so that runs form and collide), zero included.
    fn small_hash() -> impl Strategy<Value = Hash32> {
        (0u8..40, 0usize..32).prop_map(|(value, at)| {
            let mut bytes = [0u8; 32];
            bytes[at % 3 * 11] = value;
            FixedBytes(bytes)
        })
    }

    proptest! {
        #[test]
        fn behaves_as_a_set(ops in prop::collection::vec((any::<bool>(), small_hash()), 0..400)) {
            let mut table = HashSlots::default();
            let mut model = HashSet::new();
            for (add, hash) in ops {
                if add {
                    prop_assert_eq!(table.insert(hash), model.insert(hash));
                } else {
                    prop_assert_eq!(table.remove(&hash), model.remove(&hash));
                }
                prop_assert_eq!(table.len(), model.len());
            }
            for hash in &model {
                prop_assert!(table.contains(hash));
            }
            let held: HashSet<Hash32> = table.iter().copied().collect();
            prop_assert_eq!(held, model);
        }
    }

    #[test]
    fn a_set_made_with_room_holds_that_many_without_growing() {
        let mut table = HashSlots::with_room(1_000);
        let size = table.slots.len();
        for i in 1..=1_000u32 {
            let mut bytes = [0u8; 32];
            bytes[..4].copy_from_slice(&i.to_le_bytes());
            assert!(table.insert(FixedBytes(bytes)));
        }
        assert_eq!(table.slots.len(), size);
        assert_eq!(table.len(), 1_000);
    }

    #[test]
    fn an_empty_set_answers_and_prefetches() {
        let table = HashSlots::default();
        assert!(!table.contains(&FixedBytes([1; 32])));
        assert!(!table.contains(&EMPTY));
        table.prefetch(&FixedBytes([1; 32]));
        assert_eq!(table.iter().count(), 0);
        let mut table = table;
        assert!(!table.remove(&FixedBytes([1; 32])));
    }
}
