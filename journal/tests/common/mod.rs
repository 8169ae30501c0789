//! Helpers shared by the journal's integration tests.
#![allow(dead_code)]

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ladder_journal::layout::{self, SEGMENT_HEADER_BYTES};
use ladder_journal::{journal_dir, Journal, JournalOptions, JournalReader, Record};

/// Segment size used by tests: small, so a few hundred records roll over several times.
pub const TEST_SEGMENT_BYTES: u64 = 4096;

/// Options with small segments.
pub fn small_segments() -> JournalOptions {
    JournalOptions {
        segment_size_bytes: TEST_SEGMENT_BYTES,
    }
}

/// A deterministic payload for `seq`.
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|index| (seq as usize * 31 + index * 7) as u8)
        .collect()
}

/// The record that `write_records` appends for `seq`.
pub fn expected_record(seq: u64, len: usize) -> Record {
    Record {
        seq,
        timestamp_ns: 1_700_000_000_000_000_000 + seq * 1_000,
        record_type: (seq % 3) as u16,
        payload: payload(seq, len),
    }
}

/// Appends records `1..=lens.len()` with the given payload lengths and closes the journal.
pub fn write_records(data_dir: &Path, lens: &[usize]) -> Vec<Record> {
    let (mut journal, _) = Journal::open(data_dir, small_segments()).expect("open journal");
    let records = append_records(&mut journal, 1, lens);
    journal
        .commit(ladder_journal::Durability::Async)
        .expect("commit");
    records
}

/// Appends records starting at `first_seq` with the given payload lengths.
pub fn append_records(journal: &mut Journal, first_seq: u64, lens: &[usize]) -> Vec<Record> {
    lens.iter()
        .enumerate()
        .map(|(index, &len)| {
            let record = expected_record(first_seq + index as u64, len);
            journal
                .append(
                    record.seq,
                    record.timestamp_ns,
                    record.record_type,
                    &record.payload,
                )
                .expect("append");
            record
        })
        .collect()
}

/// Payload lengths cycling through small and medium sizes.
pub fn varied_lens(count: usize) -> Vec<usize> {
    (0..count).map(|index| (index * 37) % 300).collect()
}

/// Every record the journal holds, read from the start.
pub fn read_all(data_dir: &Path) -> Vec<Record> {
    let reader = JournalReader::open(data_dir).expect("open reader");
    reader.collect::<Result<Vec<_>, _>>().expect("read records")
}

/// Segment files, in sequence order.
pub fn segment_paths(data_dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(journal_dir(data_dir))
        .expect("list journal")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "seg"))
        .collect();
    paths.sort();
    paths
}

/// A frame found by reading a segment file directly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpot {
    /// The segment file.
    pub path: PathBuf,
    /// Offset of the frame word.
    pub offset: u64,
    /// Payload length.
    pub payload_len: u64,
}

impl FrameSpot {
    /// Offset just past the payload.
    pub fn end(&self) -> u64 {
        self.offset + layout::FRAME_HEADER_BYTES as u64 + self.payload_len
    }
}

/// The frames of one segment, found by following the length fields from the header on.
pub fn frames_in(path: &Path) -> Vec<FrameSpot> {
    let bytes = fs::read(path).expect("read segment");
    let mut frames = Vec::new();
    let mut offset = SEGMENT_HEADER_BYTES;
    while offset + 8 <= bytes.len() {
        let word = u64::from_ne_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"));
        if word == 0 || word == layout::SEGMENT_END_WORD {
            break;
        }
        let (payload_len, _) = layout::split_frame_word(word);
        frames.push(FrameSpot {
            path: path.to_path_buf(),
            offset: offset as u64,
            payload_len: u64::from(payload_len),
        });
        offset += layout::frame_len_bytes(payload_len as usize);
    }
    frames
}

/// Every frame of the journal, in order.
pub fn all_frames(data_dir: &Path) -> Vec<FrameSpot> {
    segment_paths(data_dir)
        .iter()
        .flat_map(|path| frames_in(path))
        .collect()
}

/// Overwrites bytes of a file at `offset`.
pub fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for patch");
    file.write_all_at(bytes, offset).expect("patch");
}

/// Reads `len` bytes of a file at `offset`.
pub fn peek(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let bytes = fs::read(path).expect("read");
    bytes[offset as usize..offset as usize + len].to_vec()
}

/// Flips one bit of the byte at `offset`.
pub fn flip_byte(path: &Path, offset: u64) {
    let byte = peek(path, offset, 1)[0];
    patch(path, offset, &[byte ^ 0x40]);
}
