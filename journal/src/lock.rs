//! The single-writer lock: an exclusive `flock` on `<journal dir>/LOCK`, held while a
//! `Journal`, `repair` or `truncate_after` changes the journal.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{JournalError, Result};

/// Name of the lock file in the journal directory.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// Holds the writer lock until dropped (closing the file releases it).
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Takes the lock without waiting; `Locked` if another writer holds it.
    pub fn acquire(journal_dir: &Path) -> Result<Self> {
        let path: PathBuf = journal_dir.join(LOCK_FILE_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(JournalError::io("open lock", &path))?;
        // SAFETY: flock only reads the descriptor, which `file` keeps open for the call.
        let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if result == 0 {
            return Ok(WriterLock { _file: file });
        }
        let error = std::io::Error::last_os_error();
        if error.kind() == std::io::ErrorKind::WouldBlock {
            return Err(JournalError::Locked { path });
        }
        Err(JournalError::io("lock", &path)(error))
    }
}
