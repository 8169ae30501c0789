//! A two-level bitset over the price ladder: which levels hold orders, and the nearest
//! occupied level above or below a price in a handful of word operations.

use serde::{Deserialize, Serialize};

use crate::types::{PriceTicks, PRICE_SCALE};

const LEVELS: usize = PRICE_SCALE as usize + 1;
const WORDS: usize = LEVELS.div_ceil(64);
const SUMMARY_WORDS: usize = WORDS.div_ceil(64);

/// Occupied price levels, `0..=PRICE_SCALE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceBits {
    words: Vec<u64>,
    summary: [u64; SUMMARY_WORDS],
}

impl Default for PriceBits {
    fn default() -> Self {
        PriceBits {
            words: vec![0; WORDS],
            summary: [0; SUMMARY_WORDS],
        }
    }
}

impl PriceBits {
    /// Marks `price` occupied.
    #[inline]
    pub fn set(&mut self, price: PriceTicks) {
        let p = price as usize;
        self.words[p / 64] |= 1 << (p % 64);
        self.summary[p / 4096] |= 1 << ((p / 64) % 64);
    }

    /// Marks `price` empty.
    #[inline]
    pub fn clear(&mut self, price: PriceTicks) {
        let p = price as usize;
        let word = &mut self.words[p / 64];
        *word &= !(1 << (p % 64));
        if *word == 0 {
            self.summary[p / 4096] &= !(1 << ((p / 64) % 64));
        }
    }

    /// Whether `price` is occupied.
    #[inline]
    pub fn contains(&self, price: PriceTicks) -> bool {
        let p = price as usize;
        self.words[p / 64] & (1 << (p % 64)) != 0
    }

    /// The lowest occupied price `>= from`.
    pub fn lowest_at_or_above(&self, from: PriceTicks) -> Option<PriceTicks> {
        let from = from as usize;
        if from >= LEVELS {
            return None;
        }
        let w = from / 64;
        let in_word = self.words[w] & (!0u64 << (from % 64));
        if in_word != 0 {
            return Some((w * 64 + in_word.trailing_zeros() as usize) as PriceTicks);
        }
        let next_word = self.next_word_at_or_above(w + 1)?;
        let bits = self.words[next_word];
        Some((next_word * 64 + bits.trailing_zeros() as usize) as PriceTicks)
    }

    /// The highest occupied price `<= from`.
    pub fn highest_at_or_below(&self, from: PriceTicks) -> Option<PriceTicks> {
        let from = (from as usize).min(LEVELS - 1);
        let w = from / 64;
        let shift = 63 - (from % 64);
        let in_word = (self.words[w] << shift) >> shift;
        if in_word != 0 {
            return Some((w * 64 + 63 - in_word.leading_zeros() as usize) as PriceTicks);
        }
        let prev_word = self.prev_word_at_or_below(w.checked_sub(1)?)?;
        let bits = self.words[prev_word];
        Some((prev_word * 64 + 63 - bits.leading_zeros() as usize) as PriceTicks)
    }

    fn next_word_at_or_above(&self, w: usize) -> Option<usize> {
        if w >= WORDS {
            return None;
        }
        let mut s = w / 64;
        let mut mask = !0u64 << (w % 64);
        while s < SUMMARY_WORDS {
            let bits = self.summary[s] & mask;
            if bits != 0 {
                return Some(s * 64 + bits.trailing_zeros() as usize);
            }
            s += 1;
            mask = !0;
        }
        None
    }

    fn prev_word_at_or_below(&self, w: usize) -> Option<usize> {
        let mut s = w / 64;
        let shift = 63 - (w % 64);
        let mut bits = (self.summary[s] << shift) >> shift;
        loop {
            if bits != 0 {
                return Some(s * 64 + 63 - bits.leading_zeros() as usize);
            }
            s = s.checked_sub(1)?;
            bits = self.summary[s];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn nearest_levels_match_a_sorted_set(
            prices in proptest::collection::vec(0..=PRICE_SCALE, 0..40),
            removed in proptest::collection::vec(0..=PRICE_SCALE, 0..20),
            probe in 0..=PRICE_SCALE,
        ) {
            let mut bits = PriceBits::default();
            let mut model = BTreeSet::new();
            for p in prices { bits.set(p); model.insert(p); }
            for p in removed { bits.clear(p); model.remove(&p); }
            prop_assert_eq!(bits.lowest_at_or_above(probe), model.range(probe..).next().copied());
            prop_assert_eq!(bits.highest_at_or_below(probe), model.range(..=probe).next_back().copied());
            prop_assert_eq!(bits.contains(probe), model.contains(&probe));
        }
    }

    #[test]
    fn extremes_are_found() {
        let mut bits = PriceBits::default();
        bits.set(0);
        bits.set(PRICE_SCALE);
        assert_eq!(bits.lowest_at_or_above(1), Some(PRICE_SCALE));
        assert_eq!(bits.highest_at_or_below(PRICE_SCALE - 1), Some(0));
        assert_eq!(bits.lowest_at_or_above(PRICE_SCALE + 1), None);
    }
}
