//! Positions by key (account, market and outcome packed in one word): an open-addressing
//! table of 32-byte slots (the key and its balance in half a cache line), probed linearly.
//! Unlike a `HashMap`, it tells where a key's probe starts, so the engine can start loading
//! that line for the next command while the current one runs (`prefetch`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ledger::Balance;
use crate::prefetch::prefetch;

/// Slots of a new table.
const SLOTS_MIN: usize = 1024;

/// One slot: `stored` is the key plus one (0: empty).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    stored: u64,
    balance: Balance,
}

/// Balances by position key.
#[derive(Clone, Debug, Default)]
pub(crate) struct PositionTable {
    /// Empty, or a power of two long and never more than three quarters full.
    slots: Vec<Slot>,
    len: usize,
}

impl PositionTable {
    /// The balance under `key`, if it was ever created.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&Balance> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = home(key, mask);
        loop {
            let slot = &self.slots[i];
            if slot.stored == key + 1 {
                return Some(&slot.balance);
            }
            if slot.stored == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// The balance under `key`, created zero if it was never there.
    #[inline]
    pub fn get_or_insert(&mut self, key: u64) -> &mut Balance {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = home(key, mask);
        loop {
            let stored = self.slots[i].stored;
            if stored == key + 1 {
                break;
            }
            if stored == 0 {
                self.slots[i].stored = key + 1;
                self.len += 1;
                break;
            }
            i = (i + 1) & mask;
        }
        &mut self.slots[i].balance
    }

    /// Starts loading the slot where a lookup of `key` begins.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        if !self.slots.is_empty() {
            prefetch(&self.slots[home(key, self.slots.len() - 1)]);
        }
    }

    /// Every key and balance, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Balance)> + '_ {
        self.slots
            .iter()
            .filter(|slot| slot.stored != 0)
            .map(|slot| (slot.stored - 1, &slot.balance))
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(SLOTS_MIN);
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); size]);
        let mask = size - 1;
        for slot in old.into_iter().filter(|slot| slot.stored != 0) {
            let mut i = home(slot.stored - 1, mask);
            while self.slots[i].stored != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }
}

/// The slot a probe for `key` starts at.
#[inline]
fn home(key: u64, mask: usize) -> usize {
    mix(key) as usize & mask
}

/// Encoded as `(key, balance)` pairs sorted by key, so equal tables encode equally whatever
/// order their keys came in.
impl Serialize for PositionTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut all: Vec<(u64, Balance)> = self.iter().map(|(k, b)| (k, *b)).collect();
        all.sort_unstable_by_key(|(k, _)| *k);
        all.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PositionTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut table = PositionTable::default();
        for (key, balance) in Vec::<(u64, Balance)>::deserialize(deserializer)? {
            if key == u64::MAX {
                return Err(serde::de::Error::custom("position key out of range"));
            }
            *table.get_or_insert(key) = balance;
        }
        Ok(table)
    }
}

/// The murmur3 finaliser: every input bit affects every output bit.
#[inline]
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn agrees_with_a_hash_map_while_growing() {
        let mut table = PositionTable::default();
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Keys shaped like positions, many colliding in their low bits.
            let key = ((x % 3_000) << 32) | ((x >> 20) % 40);
            table.get_or_insert(key).free += step;
            *model.entry(key).or_default() += step;
            let probe = ((x >> 40) % 3_000) << 32;
            assert_eq!(table.get(probe).map(|b| b.free), model.get(&probe).copied());
        }
        assert_eq!(table.iter().count(), model.len());
        for (key, balance) in table.iter() {
            assert_eq!(model[&key], balance.free);
        }
        assert!(table.get(u64::MAX - 1).is_none());
    }

    #[test]
    fn encodes_the_same_whatever_the_insertion_order() {
        let mut a = PositionTable::default();
        let mut b = PositionTable::default();
        for key in 0..2_000u64 {
            a.get_or_insert(key).free = key;
            b.get_or_insert(1_999 - key).free = 1_999 - key;
        }
        let config = bincode::config::standard();
        let bytes_a = bincode::serde::encode_to_vec(&a, config).unwrap();
        let bytes_b = bincode::serde::encode_to_vec(&b, config).unwrap();
        assert_eq!(bytes_a, bytes_b);
        let (back, _): (PositionTable, usize) =
            bincode::serde::decode_from_slice(&bytes_a, config).unwrap();
        assert_eq!(back.get(1_234).map(|b| b.free), Some(1_234));
    }
}
