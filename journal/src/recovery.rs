//! Recovery when a journal is opened for writing: a torn tail is cut away and reported,
//! corruption before the last good record is an error.

use std::path::{Path, PathBuf};

use crate::clean_stop::TAIL_SEGMENTS;
use crate::error::{Fault, JournalError, Result};
use crate::scan::{scan, Damage, DamageKind, Scan};
use crate::truncate::{bytes_after, cut_at, Disposal};

/// A torn tail: bytes after the last good record that never formed a complete record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The segment holding the first bad byte.
    pub segment: PathBuf,
    /// Offset of the first bad frame in that segment (0: the segment header itself).
    pub offset: u64,
    /// What is wrong there.
    pub reason: Fault,
    /// Non-zero bytes dropped by recovery (for `verify`: that recovery would drop).
    pub bytes_dropped: u64,
    /// Later segments that hold no valid record and were (or would be) removed.
    pub removed_segments: Vec<PathBuf>,
}

/// What `Journal::open` found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segment files after recovery.
    pub segments: usize,
    /// Valid records in the journal.
    pub records: u64,
    /// First sequence held.
    pub first_seq: Option<u64>,
    /// Last sequence held.
    pub last_seq: Option<u64>,
    /// The torn tail that was cut away, if there was one.
    pub torn_tail: Option<TornTail>,
}

/// Describes torn-tail damage without changing anything.
pub(crate) fn describe_torn_tail(scan: &Scan, damage: &Damage) -> Result<TornTail> {
    let removed_from = if damage.offset < crate::layout::SEGMENT_HEADER_BYTES {
        damage.segment_index
    } else {
        damage.segment_index + 1
    };
    Ok(TornTail {
        segment: scan.files[damage.segment_index].path.clone(),
        offset: damage.offset as u64,
        reason: damage.reason.clone(),
        bytes_dropped: bytes_after(scan, damage.segment_index, damage.offset)?,
        removed_segments: scan.files[removed_from..]
            .iter()
            .map(|entry| entry.path.clone())
            .collect(),
    })
}

/// Whether damage that `verify` calls corruption (valid frames follow it) is what a power
/// loss does to an unflushed tail, which recovery cuts by itself: after an unclean stop, in
/// the last segments (where the flushes under way were), and not a valid frame with the
/// wrong sequence (which no lost write makes). Pages of one flush reach the disk in any
/// order, so a hole can precede records written after it; none of them was acknowledged,
/// since an answer waits for the flush of everything before it. The frames after the hole
/// are never searched (client bytes inside a payload could look like one); what is cut is
/// kept in `.bad` copies.
fn is_torn_out_of_order(scan: &Scan, damage: &Damage, clean_stop: bool) -> bool {
    !clean_stop
        && damage.kind == DamageKind::Corruption
        && !matches!(damage.reason, Fault::SequenceGap { .. })
        && damage.segment_index + TAIL_SEGMENTS >= scan.files.len()
}

/// Scans the journal, cuts away a torn tail (logging it), and returns the clean scan. The
/// caller holds the writer lock; `clean_stop` says whether the last writer stopped cleanly.
pub(crate) fn recover(data_dir: &Path, clean_stop: bool) -> Result<(Scan, RecoveryReport)> {
    let first = scan(data_dir, |_, _| {})?;
    if first.records_with_nonzero_padding > 0 {
        tracing::warn!(
            records = first.records_with_nonzero_padding,
            "journal records have non-zero padding (outside the checksum, no data lost): \
             check the storage"
        );
    }
    let Some(damage) = &first.damage else {
        let report = report_for(&first, None);
        return Ok((first, report));
    };
    let out_of_order = is_torn_out_of_order(&first, damage, clean_stop);
    if !out_of_order {
        if let Some(error) = first.corruption_error() {
            return Err(error);
        }
    }
    let disposal = if out_of_order {
        Disposal::KeepAsBad
    } else {
        Disposal::Delete
    };
    let cut = cut_at(&first, damage.segment_index, damage.offset, disposal)?;
    if out_of_order {
        tracing::error!(
            segment = %first.files[damage.segment_index].path.display(),
            offset = damage.offset,
            reason = %damage.reason,
            kept = ?cut.backups,
            "after an unclean stop the journal's tail has a hole with records after it (pages of \
             an unfinished flush reached the disk out of order): cut at the hole (with sync \
             durability nothing after it was acknowledged); what was cut is kept"
        );
    }
    let torn_tail = TornTail {
        segment: first.files[damage.segment_index].path.clone(),
        offset: damage.offset as u64,
        reason: damage.reason.clone(),
        bytes_dropped: cut.bytes_dropped,
        removed_segments: cut.removed_segments,
    };
    tracing::warn!(
        segment = %torn_tail.segment.display(),
        offset = torn_tail.offset,
        bytes_dropped = torn_tail.bytes_dropped,
        removed_segments = torn_tail.removed_segments.len(),
        reason = %torn_tail.reason,
        "journal had a torn tail after its last good record; cut it away"
    );
    let clean = scan(data_dir, |_, _| {})?;
    if let Some(damage) = &clean.damage {
        // The cut removed every byte after the last good record, so this cannot happen unless
        // something else is writing the directory.
        return Err(JournalError::Corrupt {
            data_dir: data_dir.to_path_buf(),
            segment: clean.files[damage.segment_index].path.clone(),
            offset: damage.offset as u64,
            reason: damage.reason.clone(),
        });
    }
    let report = report_for(&clean, Some(torn_tail));
    Ok((clean, report))
}

fn report_for(scan: &Scan, torn_tail: Option<TornTail>) -> RecoveryReport {
    RecoveryReport {
        segments: scan.files.len(),
        records: scan.records,
        first_seq: scan.first_seq,
        last_seq: scan.last_seq(),
        torn_tail,
    }
}
