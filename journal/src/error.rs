//! Errors of the journal, and the faults that make a frame or segment invalid.

use std::io;
use std::path::{Path, PathBuf};

/// Result type of the journal.
pub type Result<T, E = JournalError> = std::result::Result<T, E>;

/// Why a segment header or a frame is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// The file is shorter than a segment header.
    #[error("file of {file_len_bytes} bytes is shorter than a segment header")]
    HeaderTooShort {
        /// Length of the file.
        file_len_bytes: u64,
    },
    /// The segment does not start with the journal's magic bytes.
    #[error("segment header has the wrong magic bytes")]
    BadMagic,
    /// The segment header's checksum does not match its contents.
    #[error("segment header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    HeaderChecksumMismatch {
        /// Checksum stored in the header.
        stored: u32,
        /// Checksum computed over the header.
        computed: u32,
    },
    /// The segment was written in a format version this build does not read.
    #[error("segment format version {version} is not supported")]
    UnsupportedVersion {
        /// Version found in the header.
        version: u32,
    },
    /// The header length field is not the one of this format.
    #[error("segment header length {header_len} is not supported")]
    BadHeaderLength {
        /// Length found in the header.
        header_len: u32,
    },
    /// The segment size in the header is outside the limits.
    #[error("segment size {segment_size_bytes} in the header is out of range")]
    BadSegmentSize {
        /// Size found in the header.
        segment_size_bytes: u64,
    },
    /// The header names sequence 0, which no record has.
    #[error("segment header names first sequence 0")]
    ZeroFirstSeq,
    /// The file name and the header disagree on the first sequence.
    #[error("file name says first sequence {name_seq} but the header says {header_seq}")]
    FirstSeqMismatch {
        /// Sequence in the file name.
        name_seq: u64,
        /// Sequence in the header.
        header_seq: u64,
    },
    /// The frame's payload length exceeds the maximum.
    #[error("payload length {payload_len} exceeds the maximum {payload_max}")]
    LengthTooLarge {
        /// Length found in the frame.
        payload_len: u32,
        /// The maximum.
        payload_max: usize,
    },
    /// The frame extends past the end of the segment (or of the file).
    #[error("frame ending at {frame_end} runs past the segment end {segment_end}")]
    FrameBeyondSegmentEnd {
        /// Where the frame would end.
        frame_end: u64,
        /// Where the segment ends.
        segment_end: u64,
    },
    /// The frame checksum does not match its body.
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    ChecksumMismatch {
        /// Checksum stored in the frame.
        stored: u32,
        /// Checksum computed over the body.
        computed: u32,
    },
    /// A record (or segment) does not carry the next sequence number.
    #[error("sequence gap: expected {expected}, found {found}")]
    SequenceGap {
        /// The sequence that should come next.
        expected: u64,
        /// The sequence found.
        found: u64,
    },
    /// Non-zero bytes follow the end of written data in a segment.
    #[error(
        "non-zero bytes after the end of written data (first at offset {first_nonzero_offset})"
    )]
    BytesAfterEnd {
        /// Offset of the first non-zero byte.
        first_nonzero_offset: u64,
    },
}

/// Errors returned by the journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file-system operation failed.
    #[error("{op} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The journal is damaged before its last good record; opening it would lose records.
    #[error(
        "journal corrupt in segment {} at offset {offset}: {reason}; the records after it \
         cannot be trusted: run `ladder journal repair --data-dir {}` (it keeps a .bad copy)",
        .segment.display(),
        .data_dir.display()
    )]
    Corrupt {
        /// The data directory (the one given to `--data-dir`).
        data_dir: PathBuf,
        /// The damaged segment file.
        segment: PathBuf,
        /// Byte offset of the damage in the segment.
        offset: u64,
        /// What is wrong there.
        reason: Fault,
    },
    /// A segment was written in a format version this build does not read.
    #[error("segment {} has format version {version}, which this build does not read", .segment.display())]
    UnsupportedVersion {
        /// The segment file.
        segment: PathBuf,
        /// Its version.
        version: u32,
    },
    /// Another process (or another `Journal` in this one) holds the writer lock.
    #[error("journal {} is locked by another writer", .path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// `append` was given a sequence that is not the next one.
    #[error("append out of sequence: expected {expected}, got {got}")]
    SequenceNotNext {
        /// The sequence the journal expects.
        expected: u64,
        /// The sequence given.
        got: u64,
    },
    /// The payload is larger than a record may be.
    #[error("payload of {payload_len} bytes exceeds the maximum {payload_max}")]
    PayloadTooLarge {
        /// Length asked for.
        payload_len: usize,
        /// The maximum for this journal.
        payload_max: usize,
    },
    /// The encoder given to `append_with` failed; nothing was appended.
    #[error("record encoding failed: {0}")]
    Encode(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The encoder given to `append_with` claims to have written more than it was given.
    #[error("encoder reported {written} bytes but was given {payload_len_max}")]
    EncodedTooLong {
        /// Bytes the encoder reported.
        written: usize,
        /// Bytes it was given.
        payload_len_max: usize,
    },
    /// Flushing appended records to disk failed. Fatal: the flush is never retried (the kernel
    /// may already have dropped the dirty pages), the journal refuses further use, and the
    /// caller must stop without acknowledging the records.
    #[error("journal flush of {} failed (fatal, never retried): {source}", .path.display())]
    FlushFailed {
        /// The segment file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// An earlier flush or segment rollover failed; the journal refuses further appends and
    /// commits.
    #[error("journal unusable after an earlier failed flush or segment rollover")]
    Poisoned,
    /// The options are out of range.
    #[error("invalid journal options: {0}")]
    InvalidOptions(String),
    /// The requested sequence is not in the journal.
    #[error("sequence {requested} is not in the journal (it starts at {first_seq})")]
    SeqNotInJournal {
        /// Sequence asked for.
        requested: u64,
        /// First sequence held.
        first_seq: u64,
    },
    /// The journal directory holds more segments than the limit.
    #[error("journal holds more than {segments_max} segments")]
    TooManySegments {
        /// The limit.
        segments_max: usize,
    },
    /// The snapshot directory holds more snapshots than the limit (prune them).
    #[error("snapshot directory holds more than {snapshots_max} snapshots")]
    TooManySnapshots {
        /// The limit.
        snapshots_max: usize,
    },
    /// A snapshot is larger than the limit.
    #[error("snapshot of {payload_len} bytes exceeds the maximum {payload_max}")]
    SnapshotTooLarge {
        /// Length asked for.
        payload_len: u64,
        /// The maximum.
        payload_max: u64,
    },
}

impl JournalError {
    /// Wraps an I/O error with what was being done and to which path.
    pub(crate) fn io(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> JournalError {
        let path = path.to_path_buf();
        move |source| JournalError::Io { op, path, source }
    }
}
