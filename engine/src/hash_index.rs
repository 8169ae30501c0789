//! An index from 32-byte hashes (order hashes, trade ids, transaction hashes) to the dense
//! numbers under which their owners keep them (order numbers, trade indices, batch numbers),
//! filed in order: 0, 1, 2, ...
//!
//! Built for the sequencer thread. An open-addressing table of 8-byte slots, probed
//! linearly, each holding a 16-bit tag of the key's digest and the number: a lookup is
//! usually one cache line, and an insert writes the line the lookup read. The keys stay with
//! their owner, who confirms a tag match and gives the digest of any number when the table
//! grows. Growth is incremental: when the table is three quarters full, a table twice the
//! size takes the new entries and each insert moves a few of the numbers filed before into
//! it, so no insert stops to rehash millions of entries (as a growing `HashMap` does, for
//! milliseconds).

use crate::prefetch::prefetch;
use crate::room::zeroed_vec;

/// Numbers filed before a growth moved to the new table per insert. A table of `n` slots
/// grows at `3n/4` entries into one of `2n` slots that grows again `3n/4` inserts later, by
/// when all `3n/4` must have moved: any rate of at least 1 does; 4 keeps the time with two
/// tables short.
const MOVES_PER_INSERT: u64 = 4;

/// Slots of the smallest table.
const SLOTS_MIN: usize = 64;

/// Bits of a slot that hold the number.
const NUMBER_BITS: u32 = 48;

/// The largest number a slot holds.
const NUMBER_MAX: u64 = (1 << NUMBER_BITS) - 1;

/// The 64-bit digest the index files a 32-byte key under.
#[inline]
pub(crate) fn key_digest(key: &[u8; 32]) -> u64 {
    let word = |i: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&key[i * 8..i * 8 + 8]);
        u64::from_le_bytes(bytes)
    };
    let folded = word(0).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ word(1).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ word(2).wrapping_mul(0x1656_67b1_9e37_79f9)
        ^ word(3).wrapping_mul(0xff51_afd7_ed55_8ccd);
    mix(folded)
}

/// The murmur3 finaliser: every input bit affects every output bit.
#[inline]
pub(crate) fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The slot filing `number` under `digest`: the tag (15 high bits of the digest, whose low
/// bits choose the home slot, with the top bit set so that 0 means empty) over the number.
#[inline]
fn slot_of(digest: u64, number: u64) -> u64 {
    (digest | 1 << 63) & !NUMBER_MAX | number
}

/// Digests to dense numbers; the owner of the keys confirms matches.
#[derive(Clone, Debug, Default)]
pub(crate) struct HashIndex {
    /// The table new entries go to (empty, or a power of two long).
    table: Vec<u64>,
    /// Numbers filed: `0..len`.
    len: u64,
    /// The previous table while its numbers move to `table`; empty otherwise.
    old: Vec<u64>,
    /// Numbers below this one are in `table`; the rest of those filed before the growth,
    /// below `old_len`, only in `old`.
    moved: u64,
    /// Numbers filed before the growth.
    old_len: u64,
}

impl HashIndex {
    /// An empty index with room for `entries` entries before it grows.
    pub fn with_room(entries: usize, prefault: bool) -> HashIndex {
        let slots = (entries.saturating_mul(4) / 3 + 1)
            .next_power_of_two()
            .max(SLOTS_MIN);
        HashIndex {
            table: zeroed_vec(slots, 0, prefault),
            ..HashIndex::default()
        }
    }

    /// Numbers filed.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The number filed under `digest` whose key `is_key` confirms.
    #[inline]
    pub fn find(&self, digest: u64, mut is_key: impl FnMut(u64) -> bool) -> Option<u64> {
        if let Some(number) = probe(&self.table, digest, &mut is_key) {
            return Some(number);
        }
        // Numbers that moved are in `table` too; the others only here.
        probe(&self.old, digest, &mut is_key)
    }

    /// Starts loading the slots a `find` or `push` of `digest` reads first.
    #[inline]
    pub fn prefetch(&self, digest: u64) {
        for table in [&self.table, &self.old] {
            if !table.is_empty() {
                prefetch(&table[digest as usize & (table.len() - 1)]);
            }
        }
    }

    /// Files the next number, `len()`, under `digest`; the caller knows its key is not in
    /// the index yet. `digest_of` gives the digest of any number filed before.
    pub fn push(&mut self, digest: u64, digest_of: impl Fn(u64) -> u64) {
        assert!(self.len <= NUMBER_MAX, "hash index full");
        self.move_some(&digest_of);
        if (self.len as usize + 1) * 4 > self.table.len() * 3 {
            self.grow(&digest_of);
        }
        place(&mut self.table, digest, self.len);
        self.len += 1;
    }

    fn grow(&mut self, digest_of: &impl Fn(u64) -> u64) {
        while !self.old.is_empty() {
            self.move_some(digest_of);
        }
        let slots = (self.table.len() * 2).max(SLOTS_MIN);
        self.old = std::mem::replace(&mut self.table, vec![0; slots]);
        self.moved = 0;
        self.old_len = self.len;
        if self.old_len == 0 {
            self.old = Vec::new();
        }
    }

    fn move_some(&mut self, digest_of: &impl Fn(u64) -> u64) {
        if self.old.is_empty() {
            return;
        }
        let end = (self.moved + MOVES_PER_INSERT).min(self.old_len);
        for number in self.moved..end {
            place(&mut self.table, digest_of(number), number);
        }
        self.moved = end;
        if end == self.old_len {
            self.old = Vec::new();
        }
    }
}

/// Linear probing from the digest's home slot up to the first empty slot.
#[inline]
fn probe(table: &[u64], digest: u64, is_key: &mut impl FnMut(u64) -> bool) -> Option<u64> {
    if table.is_empty() {
        return None;
    }
    let mask = table.len() - 1;
    let tag = slot_of(digest, 0);
    let mut i = digest as usize & mask;
    loop {
        let slot = table[i];
        if slot == 0 {
            return None;
        }
        if slot & !NUMBER_MAX == tag && is_key(slot & NUMBER_MAX) {
            return Some(slot & NUMBER_MAX);
        }
        i = (i + 1) & mask;
    }
}

/// Puts `number` filed under `digest` in the first empty slot from the digest's home slot
/// (the table is never full).
#[inline]
fn place(table: &mut [u64], digest: u64, number: u64) {
    let mask = table.len() - 1;
    let mut i = digest as usize & mask;
    while table[i] != 0 {
        i = (i + 1) & mask;
    }
    table[i] = slot_of(digest, number);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> [u8; 32] {
        let mut k = [0u8; 32];
        k[..8].copy_from_slice(&n.to_be_bytes());
        k[8] = 0x0b;
        k
    }

    #[test]
    fn finds_every_entry_while_growing() {
        check_index(HashIndex::default());
        check_index(HashIndex::with_room(1_000, true));
    }

    fn check_index(mut index: HashIndex) {
        let keys: Vec<[u8; 32]> = (0..100_000).map(key).collect();
        let digest_of = |n: u64| key_digest(&keys[n as usize]);
        for (n, k) in keys.iter().enumerate() {
            let digest = key_digest(k);
            assert_eq!(index.find(digest, |m| keys[m as usize] == *k), None);
            assert_eq!(index.len(), n as u64);
            index.push(digest, digest_of);
            for probe_n in [0, n / 2, n] {
                let pk = &keys[probe_n];
                let found = index.find(key_digest(pk), |m| keys[m as usize] == *pk);
                assert_eq!(found, Some(probe_n as u64));
            }
        }
        assert_eq!(index.find(key_digest(&key(100_000)), |_| true), None);
    }

    #[test]
    fn a_digest_collision_is_told_apart_by_the_key() {
        let mut index = HashIndex::default();
        index.push(7, |_| 7);
        index.push(7, |_| 7);
        assert_eq!(index.find(7, |n| n == 1), Some(1));
        assert_eq!(index.find(7, |n| n == 0), Some(0));
        assert_eq!(index.find(7, |_| false), None);
    }
}
