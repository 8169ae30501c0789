//! Options of the writer and the durability of a commit.

use std::str::FromStr;

use crate::error::{JournalError, Result};
use crate::layout;

/// How a journal is opened for writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalOptions {
    /// Size of each new segment file, preallocated when the segment is created. Existing
    /// segments keep the size written in their header.
    pub segment_size_bytes: u64,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            segment_size_bytes: layout::SEGMENT_SIZE_DEFAULT_BYTES,
        }
    }
}

impl JournalOptions {
    /// Checks the options against the format's limits.
    pub fn validate(&self) -> Result<()> {
        if layout::segment_size_is_valid(self.segment_size_bytes) {
            return Ok(());
        }
        Err(JournalError::InvalidOptions(format!(
            "segment_size_bytes {} must be within {}..={} and a multiple of {}",
            self.segment_size_bytes,
            layout::SEGMENT_SIZE_MIN_BYTES,
            layout::SEGMENT_SIZE_MAX_BYTES,
            layout::SEGMENT_SIZE_ALIGN_BYTES
        )))
    }

    /// Largest payload one record may carry with these options.
    pub fn record_payload_max_bytes(&self) -> usize {
        layout::payload_max_for_segment(self.segment_size_bytes)
    }
}

/// What `Journal::commit` guarantees when it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Everything appended so far is on stable storage (msync of the dirty range).
    Sync,
    /// Records are in the page cache only: they survive a process crash, not a power loss.
    Async,
}

impl FromStr for Durability {
    type Err = String;

    /// Parses the `--durability` flag: `sync` or `async`.
    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        match text {
            "sync" => Ok(Durability::Sync),
            "async" => Ok(Durability::Async),
            other => Err(format!("durability must be sync or async, not {other:?}")),
        }
    }
}
