//! Small files the data directory keeps beside the journal (a node id, a mark), written so
//! that a power loss leaves either the old content or the new one, never an empty file: a
//! temporary file, synced, renamed into place, and the directory synced.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{JournalError, Result};
use crate::segment::sync_dir;

/// Writes `bytes` to `path` durably and atomically.
pub fn write_file_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut temp_name = path.as_os_str().to_os_string();
    temp_name.push(".tmp");
    let temp = Path::new(&temp_name);
    File::create(temp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .map_err(JournalError::io("write", temp))?;
    fs::rename(temp, path).map_err(JournalError::io("rename", path))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.id");
        write_file_durably(&path, b"one\n").unwrap();
        write_file_durably(&path, b"two\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two\n");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }
}
