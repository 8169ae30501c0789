//! `repair`: keep a copy of the damaged segment, then cut the journal at its first bad frame;
//! and `truncate_after`: cut the journal after a given sequence.

use std::path::{Path, PathBuf};

use crate::error::{Fault, JournalError, Result};
use crate::lock::WriterLock;
use crate::scan::{scan, DamageKind, RecordLocation};
use crate::segment::journal_dir;
use crate::snapshot::set_aside_snapshots_after;
use crate::truncate::{cut_at, Disposal};

/// What `repair` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// The damage cut away; `None` when the journal was already sound.
    pub repaired: Option<RepairedDamage>,
    /// Last sequence the journal holds after the repair.
    pub last_seq: Option<u64>,
    /// Snapshots past that sequence, renamed to `.bad` (kept, never read).
    pub snapshots_set_aside: Vec<PathBuf>,
}

/// Damage that `repair` cut away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairedDamage {
    /// The segment holding the first bad frame.
    pub segment: PathBuf,
    /// Offset of the first bad frame (0: the segment header).
    pub offset: u64,
    /// What was wrong there.
    pub reason: Fault,
    /// True when the damage was only a torn tail (no valid record was lost).
    pub torn_tail: bool,
    /// Records with valid checksums after the damage, now dropped (kept in the `.bad` files).
    pub valid_records_dropped: u64,
    /// Non-zero bytes cut away.
    pub bytes_dropped: u64,
    /// The `.bad` copies kept beside the segments.
    pub backups: Vec<PathBuf>,
}

/// Repairs the journal in `<data_dir>/journal`: if it has damage, keeps a copy of the damaged
/// segment as `<segment>.bad`, zeroes it from the first bad frame to its end, and moves every
/// later segment to a `.bad` name. Takes the writer lock, so it fails while a writer runs.
pub fn repair(data_dir: impl AsRef<Path>) -> Result<RepairReport> {
    let data_dir = data_dir.as_ref();
    let journal_dir = journal_dir(data_dir);
    if !journal_dir.is_dir() {
        return Ok(RepairReport::default());
    }
    let _lock = WriterLock::acquire(&journal_dir)?;
    let scan = scan(data_dir, |_, _| {})?;
    let Some(damage) = &scan.damage else {
        return Ok(RepairReport {
            repaired: None,
            last_seq: scan.last_seq(),
            snapshots_set_aside: set_aside_snapshots_after(data_dir, scan.last_seq())?,
        });
    };
    let cut = cut_at(
        &scan,
        damage.segment_index,
        damage.offset,
        Disposal::KeepAsBad,
    )?;
    let repaired = RepairedDamage {
        segment: scan.files[damage.segment_index].path.clone(),
        offset: damage.offset as u64,
        reason: damage.reason.clone(),
        torn_tail: damage.kind == DamageKind::TornTail,
        valid_records_dropped: damage.valid_frames_after,
        bytes_dropped: cut.bytes_dropped,
        backups: cut.backups,
    };
    tracing::warn!(
        segment = %repaired.segment.display(),
        offset = repaired.offset,
        reason = %repaired.reason,
        valid_records_dropped = repaired.valid_records_dropped,
        bytes_dropped = repaired.bytes_dropped,
        "journal repaired: cut at the first bad frame, damaged data kept in .bad files"
    );
    Ok(RepairReport {
        repaired: Some(repaired),
        last_seq: scan.last_seq(),
        snapshots_set_aside: set_aside_snapshots_after(data_dir, scan.last_seq())?,
    })
}

/// Cuts the journal so that `seq` is its last record (records after it are deleted, not
/// kept). Used by tests and to resynchronise a standby. Fails on corruption before `seq + 1`
/// and when the journal starts after `seq + 1`.
pub fn truncate_after(data_dir: impl AsRef<Path>, seq: u64) -> Result<()> {
    cut_after(data_dir.as_ref(), seq, Disposal::Delete).map(|_| ())
}

/// Quarantines the records after `seq` (a record that makes every replay fail, and what
/// followed it): the journal ends at `seq`, the cut segment is kept as `<segment>.bad` and
/// later segments are moved to `.bad` names; snapshots past `seq` are set aside. Returns the
/// `.bad` files kept. Fails like [`truncate_after`].
pub fn quarantine_after(data_dir: impl AsRef<Path>, seq: u64) -> Result<Vec<PathBuf>> {
    cut_after(data_dir.as_ref(), seq, Disposal::KeepAsBad)
}

/// Cuts after `seq`, disposing of what is cut as `disposal` says; the `.bad` files kept.
fn cut_after(data_dir: &Path, seq: u64, disposal: Disposal) -> Result<Vec<PathBuf>> {
    let journal_dir = journal_dir(data_dir);
    if !journal_dir.is_dir() {
        return Ok(Vec::new());
    }
    let _lock = WriterLock::acquire(&journal_dir)?;
    let mut cut_location: Option<RecordLocation> = None;
    let scan = scan(data_dir, |record, location| {
        if record.seq == seq + 1 {
            cut_location = Some(location);
        }
    })?;
    if let Some(first) = scan.files.first() {
        if seq + 1 < first.first_seq {
            return Err(JournalError::SeqNotInJournal {
                requested: seq,
                first_seq: first.first_seq,
            });
        }
    }
    let mut kept = Vec::new();
    if let Some(location) = cut_location {
        let cut = cut_at(&scan, location.segment_index, location.offset, disposal)?;
        kept.extend(cut.backups);
    } else {
        // Nothing after `seq` is valid; what remains is damage after the last good record.
        if let Some(error) = scan.corruption_error() {
            return Err(error);
        }
        if let Some(damage) = &scan.damage {
            let cut = cut_at(&scan, damage.segment_index, damage.offset, disposal)?;
            kept.extend(cut.backups);
        }
    }
    kept.extend(set_aside_snapshots_after(data_dir, Some(seq))?);
    Ok(kept)
}
