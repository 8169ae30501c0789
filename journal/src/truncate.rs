//! Cutting a journal at a position: zeroing the rest of one segment and disposing of every
//! later segment. Shared by recovery (torn tails), `repair` and `truncate_after`.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{JournalError, Result};
use crate::layout;
use crate::scan::Scan;
use crate::segment::{journal_dir, sync_dir, SegmentMap};

/// Zero bytes written per call when clearing a range.
const ZERO_WRITE_CHUNK_BYTES: usize = 64 << 10;
/// Most `.bad` copies kept beside one segment (`.bad`, `.bad.1`, ...).
pub const BACKUPS_PER_SEGMENT_MAX: u32 = 100;

static ZEROS: [u8; ZERO_WRITE_CHUNK_BYTES] = [0; ZERO_WRITE_CHUNK_BYTES];

/// What to do with data that is cut away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disposal {
    /// Delete it (it holds no valid record, or the caller asked for the cut).
    Delete,
    /// Keep a `.bad` copy of the cut segment and move later segments to `.bad` names.
    KeepAsBad,
}

/// What a cut did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cut {
    /// Non-zero bytes cut away (in the cut segment and in every removed one).
    pub bytes_dropped: u64,
    /// Segments removed (or moved to `.bad`).
    pub removed_segments: Vec<PathBuf>,
    /// `.bad` copies written or renamed to.
    pub backups: Vec<PathBuf>,
}

/// Cuts the journal at (`segment_index`, `offset`): with `offset` inside the frame area the
/// segment keeps its bytes before `offset` and is zeroed after; with `offset` inside the
/// header the whole segment goes. Every later segment goes.
pub(crate) fn cut_at(
    scan: &Scan,
    segment_index: usize,
    offset: usize,
    disposal: Disposal,
) -> Result<Cut> {
    let mut cut = Cut::default();
    let entry = &scan.files[segment_index];
    let first_removed = if offset < layout::SEGMENT_HEADER_BYTES {
        segment_index
    } else {
        let map = SegmentMap::open(&entry.path)?;
        let nonzero_end = map.nonzero_end(offset.min(map.len())..map.len());
        drop(map);
        if nonzero_end > offset {
            if disposal == Disposal::KeepAsBad {
                let backup = backup_path(&entry.path)?;
                copy_synced(&entry.path, &backup)?;
                cut.backups.push(backup);
            }
            zero_range(&entry.path, offset, nonzero_end)?;
            cut.bytes_dropped += (nonzero_end - offset) as u64;
        }
        if let Some(walked) = scan.walked.get(segment_index) {
            extend_to(&entry.path, walked.segment_size_bytes)?;
        }
        segment_index + 1
    };
    for later in &scan.files[first_removed..] {
        let map = SegmentMap::open(&later.path)?;
        cut.bytes_dropped += map.nonzero_end(0..map.len()) as u64;
        drop(map);
        match disposal {
            Disposal::Delete => {
                fs::remove_file(&later.path).map_err(JournalError::io("remove", &later.path))?;
            }
            Disposal::KeepAsBad => {
                let backup = backup_path(&later.path)?;
                fs::rename(&later.path, &backup).map_err(JournalError::io("rename", &backup))?;
                cut.backups.push(backup);
            }
        }
        cut.removed_segments.push(later.path.clone());
    }
    sync_dir(&journal_dir(&scan.data_dir))?;
    Ok(cut)
}

/// Bytes a cut at (`segment_index`, `offset`) would drop, without changing anything.
pub(crate) fn bytes_after(scan: &Scan, segment_index: usize, offset: usize) -> Result<u64> {
    let mut bytes = 0;
    for (index, entry) in scan.files.iter().enumerate().skip(segment_index) {
        let map = SegmentMap::open(&entry.path)?;
        let from = if index == segment_index && offset >= layout::SEGMENT_HEADER_BYTES {
            offset.min(map.len())
        } else {
            0
        };
        bytes += (map.nonzero_end(from..map.len()) - from) as u64;
    }
    Ok(bytes)
}

/// Overwrites `from..to` of the file with zeros and syncs it.
fn zero_range(path: &Path, from: usize, to: usize) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(JournalError::io("open for truncation", path))?;
    let mut at = from;
    while at < to {
        let len = (to - at).min(ZERO_WRITE_CHUNK_BYTES);
        file.write_all_at(&ZEROS[..len], at as u64)
            .map_err(JournalError::io("zero", path))?;
        at += len;
    }
    file.sync_data().map_err(JournalError::io("sync", path))
}

/// Grows a file that was cut short back to its preallocated size.
fn extend_to(path: &Path, size_bytes: u64) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(JournalError::io("open", path))?;
    let len = file
        .metadata()
        .map_err(JournalError::io("stat", path))?
        .len();
    if len >= size_bytes {
        return Ok(());
    }
    file.set_len(size_bytes)
        .map_err(JournalError::io("extend", path))?;
    file.sync_all().map_err(JournalError::io("sync", path))
}

/// Copies `from` to `to` and syncs the copy; a copy that failed (a full disk) is removed,
/// so that no partial `.bad` file is left to be taken for the damaged data.
fn copy_synced(from: &Path, to: &Path) -> Result<()> {
    let copied = fs::copy(from, to)
        .map_err(JournalError::io("copy", to))
        .and_then(|_| {
            fs::File::open(to)
                .and_then(|copy| copy.sync_all())
                .map_err(JournalError::io("sync", to))
        });
    if copied.is_err() {
        let _ = fs::remove_file(to);
    }
    copied
}

/// The first free name among `<path>.bad`, `<path>.bad.1`, ...
fn backup_path(path: &Path) -> Result<PathBuf> {
    let mut name = path.as_os_str().to_os_string();
    name.push(".bad");
    let base = PathBuf::from(name);
    for attempt in 0..=BACKUPS_PER_SEGMENT_MAX {
        let candidate = if attempt == 0 {
            base.clone()
        } else {
            let mut numbered = base.clone().into_os_string();
            numbered.push(format!(".{attempt}"));
            PathBuf::from(numbered)
        };
        let taken = candidate
            .try_exists()
            .map_err(JournalError::io("check", &candidate))?;
        if !taken {
            return Ok(candidate);
        }
    }
    let error = std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("{BACKUPS_PER_SEGMENT_MAX} .bad copies already exist"),
    );
    Err(JournalError::io("keep a copy of", path)(error))
}
