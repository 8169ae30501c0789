//! Disk space for the journal, reserved before it is written: segment files are allocated
//! for real (`posix_fallocate`), not sparse, so that a write through the mapping never meets
//! a full disk (a write fault on an unallocated page of a shared mapping is SIGBUS, which no
//! code can handle). Running out of space is then a refusal to allocate, seen ahead of time.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{JournalError, Result};

/// Allocates `len` bytes of `file` from `offset` on disk (the file grows to cover them).
pub(crate) fn allocate(file: &File, offset: u64, len: u64, path: &Path) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    allocate_range(file, offset, len).map_err(JournalError::io("allocate segment", path))
}

#[cfg(unix)]
fn allocate_range(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "range too large",
        ));
    };
    loop {
        // SAFETY: the descriptor is open for as long as `file` lives; posix_fallocate reads
        // no memory of ours. It returns the error number instead of setting errno.
        let status = unsafe { libc::posix_fallocate(file.as_raw_fd(), offset, len) };
        match status {
            0 => return Ok(()),
            libc::EINTR => continue,
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

#[cfg(not(unix))]
fn allocate_range(file: &File, offset: u64, len: u64) -> io::Result<()> {
    file.set_len(offset + len)
}

/// Whether `error` says the device has no space left (or the quota is spent).
pub fn is_no_space(error: &JournalError) -> bool {
    match error {
        JournalError::Io { source, .. } => is_no_space_io(source),
        _ => false,
    }
}

/// Whether an I/O error says the device has no space left (or the quota is spent).
pub fn is_no_space_io(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(code) if code == libc::ENOSPC || code == libc::EDQUOT
    ) || error.kind() == io::ErrorKind::StorageFull
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocated_file_holds_its_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let file = File::create(&path).unwrap();
        allocate(&file, 0, 1 << 20, &path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 1 << 20);
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            assert!(
                meta.blocks() * 512 >= 1 << 20,
                "not sparse: {} blocks",
                meta.blocks()
            );
        }
    }

    #[test]
    fn no_space_is_told_apart() {
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(is_no_space_io(&full));
        assert!(!is_no_space_io(&io::Error::from_raw_os_error(libc::EIO)));
        let error = JournalError::io("allocate segment", Path::new("x"))(full);
        assert!(is_no_space(&error));
    }
}
