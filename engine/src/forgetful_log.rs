//! An append-only log whose entries can be forgotten: entry `i` is found in O(1) by its index
//! while held, and the memory of a run of forgotten entries is given back. Entries live in
//! chunks of `CHUNK_ENTRIES`; a full chunk whose entries are all forgotten is freed (kept as a
//! spare for the next chunk), and the chunks at the front that are freed leave the directory.
//! So the log's memory follows what it holds, not how many entries it ever had: one entry
//! held for a long time keeps only its own chunk.

use std::collections::VecDeque;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Entries per chunk.
const CHUNK_ENTRIES: usize = 1 << 10;

/// Freed chunks kept for reuse at least (more when more were made at start-up).
const SPARE_CHUNKS_MIN: usize = 4;

/// One chunk: its entries (`None` once forgotten) and how many it holds.
#[derive(Clone, Debug)]
struct Chunk<T> {
    entries: Vec<Option<T>>,
    held: u32,
}

impl<T> Chunk<T> {
    fn new() -> Chunk<T> {
        Chunk {
            entries: Vec::with_capacity(CHUNK_ENTRIES),
            held: 0,
        }
    }
}

/// A log of `T` indexed from 0 whose entries can be forgotten.
#[derive(Clone, Debug)]
pub(crate) struct ForgetfulLog<T> {
    /// Chunk `first_chunk + k` is `chunks[k]` (`None`: freed).
    chunks: VecDeque<Option<Chunk<T>>>,
    first_chunk: u64,
    /// The index the next entry gets.
    len: u64,
    /// Entries held.
    held: u64,
    /// Freed chunks, emptied, for the next ones (not part of the state).
    spare: Vec<Chunk<T>>,
    spare_max: usize,
}

impl<T> Default for ForgetfulLog<T> {
    fn default() -> Self {
        ForgetfulLog {
            chunks: VecDeque::new(),
            first_chunk: 0,
            len: 0,
            held: 0,
            spare: Vec::new(),
            spare_max: SPARE_CHUNKS_MIN,
        }
    }
}

impl<T> ForgetfulLog<T> {
    /// An empty log with chunks made ahead for `entries` entries.
    pub fn with_room(entries: usize) -> Self {
        let chunks = entries.div_ceil(CHUNK_ENTRIES);
        ForgetfulLog {
            spare: (0..chunks).map(|_| Chunk::new()).collect(),
            spare_max: chunks.max(SPARE_CHUNKS_MIN),
            ..ForgetfulLog::default()
        }
    }

    /// The index the next entry gets (entries ever pushed).
    #[inline]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Entries held (pushed and not forgotten).
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Appends `item` and returns its index.
    pub fn push(&mut self, item: T) -> u64 {
        let index = self.len;
        let chunk_number = index / CHUNK_ENTRIES as u64;
        if index.is_multiple_of(CHUNK_ENTRIES as u64) {
            let chunk = self.spare.pop().unwrap_or_else(Chunk::new);
            if self.chunks.is_empty() {
                self.first_chunk = chunk_number;
            }
            self.chunks.push_back(Some(chunk));
        }
        let at = (chunk_number - self.first_chunk) as usize;
        let chunk = self.chunks[at]
            .as_mut()
            .expect("the last chunk is being filled: not freed");
        chunk.entries.push(Some(item));
        chunk.held += 1;
        self.len += 1;
        self.held += 1;
        index
    }

    fn chunk(&self, index: u64) -> Option<&Chunk<T>> {
        let at = (index / CHUNK_ENTRIES as u64).checked_sub(self.first_chunk)?;
        self.chunks.get(usize::try_from(at).ok()?)?.as_ref()
    }

    /// The entry at `index`, if it was pushed and is not forgotten.
    #[inline]
    pub fn get(&self, index: u64) -> Option<&T> {
        self.chunk(index)?
            .entries
            .get((index % CHUNK_ENTRIES as u64) as usize)?
            .as_ref()
    }

    /// The entry at `index`, mutably.
    pub fn get_mut(&mut self, index: u64) -> Option<&mut T> {
        let at = (index / CHUNK_ENTRIES as u64).checked_sub(self.first_chunk)?;
        self.chunks
            .get_mut(usize::try_from(at).ok()?)?
            .as_mut()?
            .entries
            .get_mut((index % CHUNK_ENTRIES as u64) as usize)?
            .as_mut()
    }

    /// Forgets the entry at `index` and returns it (`None`: not held).
    pub fn forget(&mut self, index: u64) -> Option<T> {
        let at =
            usize::try_from((index / CHUNK_ENTRIES as u64).checked_sub(self.first_chunk)?).ok()?;
        let slot = self.chunks.get_mut(at)?;
        let chunk = slot.as_mut()?;
        let item = chunk
            .entries
            .get_mut((index % CHUNK_ENTRIES as u64) as usize)?
            .take()?;
        chunk.held -= 1;
        self.held -= 1;
        // A full chunk with nothing held gets no more entries: it is freed.
        if chunk.held == 0 && chunk.entries.len() == CHUNK_ENTRIES {
            if let Some(mut freed) = slot.take() {
                if self.spare.len() < self.spare_max {
                    freed.entries.clear();
                    self.spare.push(freed);
                }
            }
            while matches!(self.chunks.front(), Some(None)) {
                self.chunks.pop_front();
                self.first_chunk += 1;
            }
        }
        Some(item)
    }

    /// Every held entry with its index, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        let first = self.first_chunk;
        self.chunks
            .iter()
            .enumerate()
            .filter_map(move |(k, chunk)| Some((first + k as u64, chunk.as_ref()?)))
            .flat_map(|(number, chunk)| {
                chunk.entries.iter().enumerate().filter_map(move |(i, e)| {
                    Some((number * CHUNK_ENTRIES as u64 + i as u64, e.as_ref()?))
                })
            })
    }

    /// A log of `len` entries ever pushed that holds `held` (index, entry) pairs, in
    /// increasing index order below `len`; `None` when they are not.
    pub fn from_held(len: u64, held: impl IntoIterator<Item = (u64, T)>) -> Option<Self> {
        let mut log = ForgetfulLog::default();
        for (index, item) in held {
            if index < log.len || index >= len {
                return None;
            }
            // Skipped indexes were forgotten: pushed as placeholders, then forgotten.
            while log.len < index {
                log.push_forgotten(index);
            }
            log.push(item);
        }
        while log.len < len {
            log.push_forgotten(len);
        }
        Some(log)
    }

    /// Takes an index for an entry that is forgotten at once (rebuilding a log); a whole
    /// chunk of them takes no memory but its place in the directory.
    fn push_forgotten(&mut self, up_to: u64) {
        let chunk = CHUNK_ENTRIES as u64;
        if self.len.is_multiple_of(chunk) && up_to - self.len >= chunk {
            if self.chunks.is_empty() {
                // No chunk to keep a place for: every whole chunk up to `up_to` at once.
                self.len = up_to - up_to % chunk;
            } else {
                self.chunks.push_back(None);
                self.len += chunk;
            }
            return;
        }
        let index = self.len;
        let chunk_number = index / chunk;
        if index.is_multiple_of(chunk) {
            if self.chunks.is_empty() {
                self.first_chunk = chunk_number;
            }
            self.chunks.push_back(Some(Chunk::new()));
        }
        let at = (chunk_number - self.first_chunk) as usize;
        let slot = &mut self.chunks[at];
        let filled = slot.as_mut().expect("the chunk being filled");
        filled.entries.push(None);
        self.len += 1;
        if filled.held == 0 && filled.entries.len() == CHUNK_ENTRIES {
            *slot = None;
        }
        while matches!(self.chunks.front(), Some(None)) {
            self.chunks.pop_front();
            self.first_chunk += 1;
        }
    }
}

/// A log is stored as the count of entries ever pushed and the held entries with their
/// indexes, in order (its chunks are rebuilt on load).
impl<T: Serialize> Serialize for ForgetfulLog<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let held: Vec<(u64, &T)> = self.iter().collect();
        (self.len, held).serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ForgetfulLog<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (len, held) = <(u64, Vec<(u64, T)>)>::deserialize(deserializer)?;
        ForgetfulLog::from_held(len, held)
            .ok_or_else(|| serde::de::Error::custom("log entries out of order or past its end"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_index_until_forgotten() {
        let mut log = ForgetfulLog::default();
        for i in 0..3000u64 {
            assert_eq!(log.push(i * 10), i);
        }
        assert_eq!(log.get(2999), Some(&29990));
        assert_eq!(log.forget(5), Some(50));
        assert_eq!(log.forget(5), None, "forgotten once");
        assert_eq!(log.get(5), None);
        assert_eq!(log.get(3000), None, "not pushed");
        *log.get_mut(6).expect("held") = 7;
        assert_eq!(log.get(6), Some(&7));
        assert_eq!((log.len(), log.held()), (3000, 2999));
    }

    #[test]
    fn memory_follows_what_is_held() {
        let mut log = ForgetfulLog::default();
        let total = 100 * CHUNK_ENTRIES as u64;
        // Entry 3 is held throughout (a trade stuck in settlement); the rest is forgotten as
        // soon as the next one is pushed.
        for i in 0..total {
            log.push(i);
            if i > 0 && i - 1 != 3 {
                log.forget(i - 1);
            }
        }
        assert_eq!(log.held(), 2);
        let live_chunks = log.chunks.iter().filter(|c| c.is_some()).count();
        assert_eq!(live_chunks, 2, "entry 3's chunk and the one being filled");
        assert_eq!(log.get(3), Some(&3));
        log.forget(3);
        assert_eq!(log.chunks.len(), 1, "freed chunks left the directory");
        assert_eq!(log.first_chunk, 99);
        assert_eq!(log.get(total - 1), Some(&(total - 1)));
    }

    #[test]
    fn a_log_rebuilt_from_what_it_holds_is_the_same_log() {
        let mut log = ForgetfulLog::default();
        for i in 0..5000u64 {
            log.push(i);
        }
        for i in (0..5000).filter(|i| i % 7 != 0 && !(2048..3072).contains(i)) {
            log.forget(i);
        }
        let held: Vec<(u64, u64)> = log.iter().map(|(i, v)| (i, *v)).collect();
        assert!(held.iter().all(|(i, v)| i == v));
        let rebuilt = ForgetfulLog::from_held(log.len(), held.clone()).expect("in order");
        let again: Vec<(u64, u64)> = rebuilt.iter().map(|(i, v)| (i, *v)).collect();
        assert_eq!(again, held);
        assert_eq!(rebuilt.len(), 5000);
        assert_eq!(rebuilt.chunks.len(), log.chunks.len());
        assert!(ForgetfulLog::from_held(3, vec![(1, 1u64), (1, 1)]).is_none());
        assert!(ForgetfulLog::from_held(3, vec![(3, 1u64)]).is_none());
    }
}
