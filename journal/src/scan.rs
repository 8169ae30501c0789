//! Walking a whole journal directory: every frame, checksum and sequence, and the
//! classification of damage as a torn tail (recoverable) or corruption before the last good
//! record (an error).
//!
//! The rule: at the first bad frame (or bad segment header, or non-zero bytes after the end of
//! written data), look for any valid frame (good length, good checksum, non-zero sequence) at
//! any 8-byte boundary after it, in that segment and every later one. If there is one, records
//! after the damage would be lost: corruption. If there is none, the damage is a torn tail. A
//! valid frame with the wrong sequence is corruption outright.

use std::path::{Path, PathBuf};

use crate::error::{Fault, JournalError, Result};
use crate::frame::{check_frame, FrameCheck, FrameInfo};
use crate::layout::{self, SegmentHeader};
use crate::record::RecordRef;
use crate::segment::{journal_dir, list_segments, SegmentEntry, SegmentMap};

/// A segment whose header checked out, as far as its frames were walked.
#[derive(Clone, Debug)]
pub(crate) struct ScannedSegment {
    /// The file and its first sequence.
    pub entry: SegmentEntry,
    /// Size from the header.
    pub segment_size_bytes: u64,
    /// Offset just past the last valid frame (where the next frame goes).
    pub data_end: usize,
    /// The segment ends with the end-of-segment marker at `data_end`.
    pub sealed: bool,
}

/// Whether damage loses records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DamageKind {
    /// Nothing valid follows the damage: a write that did not finish. Recoverable.
    TornTail,
    /// Valid records follow the damage: they cannot be kept without repair.
    Corruption,
}

/// The first damage found.
#[derive(Clone, Debug)]
pub(crate) struct Damage {
    /// Index into `Scan::files` of the damaged segment.
    pub segment_index: usize,
    /// Offset of the damage (0 when the segment header itself is the problem).
    pub offset: usize,
    /// What is wrong.
    pub reason: Fault,
    /// Torn tail or corruption.
    pub kind: DamageKind,
    /// Valid frames found after the damage (records that repair would drop).
    pub valid_frames_after: u64,
}

/// Where a record lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordLocation {
    /// Index into `Scan::files`.
    pub segment_index: usize,
    /// Offset of the frame.
    pub offset: usize,
}

/// The outcome of walking a journal.
#[derive(Debug)]
pub(crate) struct Scan {
    /// The data directory scanned.
    pub data_dir: PathBuf,
    /// Every segment file, in sequence order.
    pub files: Vec<SegmentEntry>,
    /// The segments walked (a prefix of `files`; a segment with a bad header is not in it).
    pub walked: Vec<ScannedSegment>,
    /// Sequence of the first valid record.
    pub first_seq: Option<u64>,
    /// The sequence the next record must carry.
    pub next_seq: u64,
    /// Valid records before any damage.
    pub records: u64,
    /// Valid records whose padding is not zero (harmless, but a sign of bad media).
    pub records_with_nonzero_padding: u64,
    /// The first damage, if any.
    pub damage: Option<Damage>,
}

impl Scan {
    /// Sequence of the last valid record.
    pub fn last_seq(&self) -> Option<u64> {
        (self.records > 0).then(|| self.next_seq - 1)
    }

    /// The `Corrupt` error for corruption damage, naming segment, offset and repair command.
    pub fn corruption_error(&self) -> Option<JournalError> {
        let damage = self.damage.as_ref()?;
        if damage.kind != DamageKind::Corruption {
            return None;
        }
        Some(JournalError::Corrupt {
            data_dir: self.data_dir.clone(),
            segment: self.files[damage.segment_index].path.clone(),
            offset: damage.offset as u64,
            reason: damage.reason.clone(),
        })
    }
}

/// Walks every segment of the journal in `data_dir`, calling `on_record` for each valid record
/// before the first damage, and classifies that damage.
pub(crate) fn scan<F>(data_dir: &Path, mut on_record: F) -> Result<Scan>
where
    F: FnMut(RecordRef<'_>, RecordLocation),
{
    let files = list_segments(&journal_dir(data_dir))?;
    let mut scan = Scan {
        data_dir: data_dir.to_path_buf(),
        next_seq: files.first().map_or(1, |entry| entry.first_seq),
        files,
        walked: Vec::new(),
        first_seq: None,
        records: 0,
        records_with_nonzero_padding: 0,
        damage: None,
    };
    for segment_index in 0..scan.files.len() {
        let entry = &scan.files[segment_index];
        let map = SegmentMap::open(&entry.path)?;
        let (header, frames_end) = match check_header(&map, entry, scan.next_seq) {
            Ok(checked) => checked,
            Err(Fault::UnsupportedVersion { version }) => {
                return Err(JournalError::UnsupportedVersion {
                    segment: entry.path.clone(),
                    version,
                });
            }
            Err(reason) => {
                let start = layout::SEGMENT_HEADER_BYTES;
                let definite = !magic_may_be_torn(&map);
                let damage =
                    classify(&scan.files, segment_index, &map, 0, start, reason, definite)?;
                scan.damage = Some(damage);
                break;
            }
        };
        let mut next_seq = scan.next_seq;
        let walk = walk_frames(&map, frames_end, &mut next_seq, |record, offset| {
            on_record(
                record,
                RecordLocation {
                    segment_index,
                    offset,
                },
            );
        });
        if scan.first_seq.is_none() && walk.records > 0 {
            scan.first_seq = Some(scan.next_seq);
        }
        scan.next_seq = next_seq;
        scan.records += walk.records;
        scan.records_with_nonzero_padding += walk.records_with_nonzero_padding;
        scan.walked.push(ScannedSegment {
            entry: entry.clone(),
            segment_size_bytes: header.segment_size_bytes,
            data_end: walk.data_end,
            sealed: walk.sealed,
        });
        if let Some(found) = walk.damage {
            let (offset, start) = (found.offset, found.search_from);
            let damage = classify(
                &scan.files,
                segment_index,
                &map,
                offset,
                start,
                found.reason,
                found.definite,
            )?;
            scan.damage = Some(damage);
            break;
        }
    }
    Ok(scan)
}

/// Whether a bad segment header may be an interrupted write of a new segment's header: its
/// magic bytes (as many as the file holds, read from the file when it is too short to be
/// mapped) are each either zero (not written yet) or the magic's own. Other bytes there are
/// no write of ours: corruption, whatever follows. A file that cannot be read is left to the
/// checks that follow.
fn magic_may_be_torn(map: &SegmentMap) -> bool {
    let magic_len = layout::SEGMENT_MAGIC.len();
    let first_bytes = if map.len() >= magic_len {
        map.bytes(0..magic_len).to_vec()
    } else {
        match std::fs::read(map.path()) {
            Ok(mut bytes) => {
                bytes.truncate(magic_len);
                bytes
            }
            Err(_) => return true,
        }
    };
    first_bytes
        .iter()
        .zip(layout::SEGMENT_MAGIC)
        .all(|(&byte, expected)| byte == 0 || byte == expected)
}

/// Checks a segment header against its file name and the sequence expected next.
fn check_header(
    map: &SegmentMap,
    entry: &SegmentEntry,
    expected_seq: u64,
) -> std::result::Result<(SegmentHeader, usize), Fault> {
    let (header, frames_end) = map.header()?;
    if header.first_seq != entry.first_seq {
        return Err(Fault::FirstSeqMismatch {
            name_seq: entry.first_seq,
            header_seq: header.first_seq,
        });
    }
    if header.first_seq != expected_seq {
        return Err(Fault::SequenceGap {
            expected: expected_seq,
            found: header.first_seq,
        });
    }
    Ok((header, frames_end))
}

/// Damage found while walking one segment.
struct FoundDamage {
    offset: usize,
    /// Where the search for later valid frames starts.
    search_from: usize,
    reason: Fault,
    /// Corruption regardless of what follows (a valid frame with the wrong sequence).
    definite: bool,
}

/// What walking one segment's frames found.
struct SegmentWalk {
    data_end: usize,
    sealed: bool,
    records: u64,
    records_with_nonzero_padding: u64,
    damage: Option<FoundDamage>,
}

/// Walks the frames of one segment from the header to the end of written data, checking
/// sequence continuity and that nothing but zeros follows the end.
fn walk_frames<F>(
    map: &SegmentMap,
    frames_end: usize,
    next_seq: &mut u64,
    mut on_record: F,
) -> SegmentWalk
where
    F: FnMut(RecordRef<'_>, usize),
{
    let mut walk = SegmentWalk {
        data_end: layout::SEGMENT_HEADER_BYTES,
        sealed: false,
        records: 0,
        records_with_nonzero_padding: 0,
        damage: None,
    };
    // Each step advances by at least one frame, so the loop ends within the segment.
    while walk.data_end + layout::FRAME_ALIGN_BYTES <= frames_end {
        let offset = walk.data_end;
        let frame = match check_frame(map, offset, frames_end) {
            FrameCheck::Valid(frame) => frame,
            FrameCheck::End => {
                walk.damage = check_zero_after(map, offset, offset);
                return walk;
            }
            FrameCheck::SegmentEnd => {
                walk.sealed = true;
                walk.damage = check_zero_after(map, offset + 8, offset + 8);
                return walk;
            }
            FrameCheck::Bad(reason) => {
                walk.damage = Some(FoundDamage {
                    offset,
                    search_from: offset + layout::FRAME_ALIGN_BYTES,
                    reason,
                    definite: false,
                });
                return walk;
            }
        };
        if frame.fields.seq != *next_seq {
            walk.damage = Some(FoundDamage {
                offset,
                search_from: offset,
                reason: Fault::SequenceGap {
                    expected: *next_seq,
                    found: frame.fields.seq,
                },
                definite: true,
            });
            return walk;
        }
        on_record(record_at(map, &frame), offset);
        *next_seq += 1;
        walk.records += 1;
        walk.records_with_nonzero_padding += u64::from(frame.padding_nonzero);
        walk.data_end = frame.next_offset;
    }
    // The segment is full; a file cut short may still end in the first bytes of a frame.
    walk.damage = check_zero_after(map, walk.data_end, walk.data_end);
    walk
}

/// Damage if any byte from `zero_from` to the end of the file is non-zero; it is reported at
/// `damage_at`.
fn check_zero_after(map: &SegmentMap, damage_at: usize, zero_from: usize) -> Option<FoundDamage> {
    let first_nonzero = map.first_nonzero(zero_from.min(map.len())..map.len())?;
    Some(FoundDamage {
        offset: damage_at,
        search_from: damage_at + layout::FRAME_ALIGN_BYTES,
        reason: Fault::BytesAfterEnd {
            first_nonzero_offset: first_nonzero as u64,
        },
        definite: false,
    })
}

/// The record a checked frame holds.
pub(crate) fn record_at<'a>(map: &'a SegmentMap, frame: &FrameInfo) -> RecordRef<'a> {
    let payload_start = frame.payload_offset();
    RecordRef {
        seq: frame.fields.seq,
        timestamp_ns: frame.fields.timestamp_ns,
        record_type: frame.fields.record_type,
        payload: map.bytes(payload_start..payload_start + frame.payload_len),
    }
}

/// Decides whether damage at (`segment_index`, `offset`) is a torn tail or corruption by
/// counting valid frames from `search_from` on.
fn classify(
    files: &[SegmentEntry],
    segment_index: usize,
    map: &SegmentMap,
    offset: usize,
    search_from: usize,
    reason: Fault,
    definite: bool,
) -> Result<Damage> {
    let later_files = &files[segment_index + 1..];
    let valid_frames_after = count_valid_frames_after(map, search_from, later_files)?;
    let kind = if definite || valid_frames_after > 0 {
        DamageKind::Corruption
    } else {
        DamageKind::TornTail
    };
    Ok(Damage {
        segment_index,
        offset,
        reason,
        kind,
        valid_frames_after,
    })
}

/// Counts valid frames at any 8-byte boundary from `search_from` in the segment mapped as
/// `map` and from the header end in each of `later_files`.
pub(crate) fn count_valid_frames_after(
    map: &SegmentMap,
    search_from: usize,
    later_files: &[SegmentEntry],
) -> Result<u64> {
    let mut count = count_valid_frames(map, search_from);
    for entry in later_files {
        let later = SegmentMap::open(&entry.path)?;
        count += count_valid_frames(&later, layout::SEGMENT_HEADER_BYTES);
    }
    Ok(count)
}

/// Counts valid frames at any 8-byte boundary from `offset` to the end of the file.
fn count_valid_frames(map: &SegmentMap, mut offset: usize) -> u64 {
    let end = map.len();
    let mut count = 0;
    // Each step advances by at least 8 bytes, so the loop ends within the file.
    while offset + layout::FRAME_ALIGN_BYTES <= end {
        match check_frame(map, offset, end) {
            FrameCheck::Valid(frame) if frame.fields.seq != 0 => {
                count += 1;
                offset = frame.next_offset;
            }
            _ => offset += layout::FRAME_ALIGN_BYTES,
        }
    }
    count
}
