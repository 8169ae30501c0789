//! Whether the journal's last writer stopped cleanly: a writer that is dropped after a
//! successful final flush leaves a marker file; opening the journal takes it away. Without it
//! the stop was unclean (a crash, a kill, a power loss, a failed flush), and the journal's
//! last segments are read from the disk, not from the page cache: after a failed flush
//! Linux keeps the pages that never reached the disk in the cache, marked clean, and a
//! restart that trusted them would acknowledge records after a hole that a later eviction
//! exposes.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{JournalError, Result};
use crate::segment::{sync_dir, SegmentEntry};

/// The marker's file name in the journal directory.
pub const CLEAN_STOP_FILE_NAME: &str = "clean-stop";

/// The segments at the end of the journal that an unclean stop may have left torn: the one
/// being written and the one before it (whose flush may still have been under way).
pub(crate) const TAIL_SEGMENTS: usize = 2;

/// Whether the last writer stopped cleanly; the marker is removed (durably) either way, so
/// that a crash of this writer is never taken for a clean stop.
pub(crate) fn take(journal_dir: &Path) -> Result<bool> {
    let marker = journal_dir.join(CLEAN_STOP_FILE_NAME);
    match fs::remove_file(&marker) {
        Ok(()) => {
            sync_dir(journal_dir)?;
            Ok(true)
        }
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(error) => Err(JournalError::io("remove", &marker)(error)),
    }
}

/// Leaves the marker: everything appended is durable and the writer stops.
pub(crate) fn mark(journal_dir: &Path) -> Result<()> {
    let marker = journal_dir.join(CLEAN_STOP_FILE_NAME);
    File::create(&marker)
        .and_then(|file| file.sync_all())
        .map_err(JournalError::io("create", &marker))?;
    sync_dir(journal_dir)
}

/// Drops the cached pages of the last [`TAIL_SEGMENTS`] segments, so that what is read next
/// is what the disk holds (pages still dirty are written back, not dropped: they are this
/// machine's writes, which survive a process's crash).
pub(crate) fn drop_cached_tail(files: &[SegmentEntry]) {
    let tail = &files[files.len().saturating_sub(TAIL_SEGMENTS)..];
    for entry in tail {
        let dropped = File::open(&entry.path).map(|file| {
            // SAFETY: posix_fadvise only reads its arguments; the descriptor is open.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }
        });
        match dropped {
            Ok(0) => {}
            Ok(code) => {
                tracing::warn!(segment = %entry.path.display(), code, "could not drop the cached pages of a journal segment")
            }
            Err(error) => {
                tracing::warn!(segment = %entry.path.display(), %error, "could not open a journal segment to drop its cached pages")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!take(dir.path()).unwrap());
        mark(dir.path()).unwrap();
        assert!(take(dir.path()).unwrap());
        assert!(!take(dir.path()).unwrap());
    }
}
