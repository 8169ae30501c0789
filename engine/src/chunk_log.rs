//! An append-only log in fixed-size chunks: pushing never moves what is already stored,
//! so a log of millions of entries grows without the copy (and the pause) of a `Vec`
//! doubling its buffer.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::room::vec_with_room;

/// Entries per chunk (a power of two).
const CHUNK_ENTRIES: usize = 1 << 14;

/// An append-only sequence of `T`, indexed from 0.
#[derive(Clone, Debug)]
pub(crate) struct ChunkLog<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkLog<T> {
    fn default() -> Self {
        ChunkLog {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone> ChunkLog<T> {
    /// An empty log with chunks made for `entries` entries (their pages touched with
    /// `filler` when `prefault`).
    pub fn with_room(entries: usize, filler: T, prefault: bool) -> Self {
        let chunks = entries.div_ceil(CHUNK_ENTRIES);
        ChunkLog {
            chunks: (0..chunks)
                .map(|_| vec_with_room(CHUNK_ENTRIES, filler.clone(), prefault))
                .collect(),
            len: 0,
        }
    }
}

impl<T> ChunkLog<T> {
    /// Appends `item` and returns its index.
    #[inline]
    pub fn push(&mut self, item: T) -> usize {
        let chunk_index = self.len / CHUNK_ENTRIES;
        if chunk_index == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(CHUNK_ENTRIES));
        }
        // Chunks made ahead are empty until the log reaches them.
        let chunk = &mut self.chunks[chunk_index];
        debug_assert!(chunk.len() < CHUNK_ENTRIES);
        chunk.push(item);
        self.len += 1;
        self.len - 1
    }

    /// The entry at `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks
            .get(index / CHUNK_ENTRIES)?
            .get(index % CHUNK_ENTRIES)
    }

    /// Every entry, oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &T> + '_ {
        ExactLen {
            inner: self.chunks.iter().flatten(),
            left: self.len,
        }
    }
}

/// An iterator that knows how many items are left.
struct ExactLen<I> {
    inner: I,
    left: usize,
}

impl<I: Iterator> Iterator for ExactLen<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.inner.next()?;
        self.left -= 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactLen<I> {}

impl<T> FromIterator<T> for ChunkLog<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut log = ChunkLog::default();
        for item in items {
            log.push(item);
        }
        log
    }
}

/// Encoded as a flat sequence, like a `Vec`.
impl<T: Serialize> Serialize for ChunkLog<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ChunkLog<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<T>::deserialize(deserializer)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_index_across_chunks() {
        check_log(ChunkLog::default());
        check_log(ChunkLog::with_room(CHUNK_ENTRIES + 1, 0, true));
        check_log(ChunkLog::with_room(5 * CHUNK_ENTRIES, 0, false));
    }

    fn check_log(mut log: ChunkLog<usize>) {
        for i in 0..(2 * CHUNK_ENTRIES + 3) {
            assert_eq!(log.push(i * 7), i);
        }
        assert_eq!(log.get(CHUNK_ENTRIES + 1), Some(&((CHUNK_ENTRIES + 1) * 7)));
        assert_eq!(log.get(2 * CHUNK_ENTRIES + 3), None);
        let all: Vec<usize> = log.iter().copied().collect();
        assert_eq!(all.len(), 2 * CHUNK_ENTRIES + 3);
        assert_eq!(log.iter().len(), 2 * CHUNK_ENTRIES + 3);
        assert_eq!(all[5], 35);
        assert_eq!(all[2 * CHUNK_ENTRIES + 2], (2 * CHUNK_ENTRIES + 2) * 7);
    }
}
