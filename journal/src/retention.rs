//! Retention: the segments whose every record is held elsewhere (by a snapshot, the history
//! store and every connected standby: the caller works out how far) leave the journal: removed,
//! or moved to an archive directory. The segment being written, and any segment holding a
//! record past the bound, stay; the journal then starts later, which readers and recovery
//! handle (a reader asked for an earlier sequence says where the journal starts).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{JournalError, Result};
use crate::segment::{create_dir_durably, journal_dir, list_segments, sync_dir};

/// The first sequence the journal of `data_dir` holds, from its first segment's name (`None`:
/// no segment yet).
pub fn journal_first_seq(data_dir: impl AsRef<Path>) -> Result<Option<u64>> {
    Ok(list_segments(&journal_dir(data_dir.as_ref()))?
        .first()
        .map(|segment| segment.first_seq))
}

/// Retires every segment whose records are all at or before `through_seq`, oldest first,
/// never the last segment: removed, or moved into `archive` when given (created if needed).
/// Returns the segments retired (their paths in the journal).
pub fn retire_segments_through(
    data_dir: impl AsRef<Path>,
    through_seq: u64,
    archive: Option<&Path>,
) -> Result<Vec<PathBuf>> {
    let dir = journal_dir(data_dir.as_ref());
    let segments = list_segments(&dir)?;
    let mut retired = Vec::new();
    for pair in segments.windows(2) {
        let (segment, next) = (&pair[0], &pair[1]);
        // The segment's last record is the one before the next segment's first.
        if next.first_seq.saturating_sub(1) > through_seq {
            break;
        }
        match archive {
            Some(archive) => move_into(&segment.path, archive)?,
            None => fs::remove_file(&segment.path)
                .map_err(JournalError::io("remove segment", &segment.path))?,
        }
        retired.push(segment.path.clone());
    }
    if !retired.is_empty() {
        sync_dir(&dir)?;
        if let Some(archive) = archive {
            sync_dir(archive)?;
        }
    }
    Ok(retired)
}

/// Moves `file` into directory `archive` durably: a rename on the same file system, else a
/// copy synced before the original is removed.
fn move_into(file: &Path, archive: &Path) -> Result<()> {
    create_dir_durably(archive)?;
    let name = file
        .file_name()
        .ok_or_else(|| JournalError::InvalidOptions(format!("{}: no file name", file.display())))?;
    let target = archive.join(name);
    match fs::rename(file, &target) {
        Ok(()) => return Ok(()),
        // Another file system: copied below.
        Err(error) if error.kind() == ErrorKind::CrossesDevices => {}
        Err(error) => return Err(JournalError::io("archive segment", file)(error)),
    }
    let copy = target.with_extension("seg.tmp");
    fs::copy(file, &copy).map_err(JournalError::io("archive segment", &copy))?;
    fs::File::open(&copy)
        .and_then(|f| f.sync_all())
        .map_err(JournalError::io("sync archived segment", &copy))?;
    fs::rename(&copy, &target).map_err(JournalError::io("archive segment", &target))?;
    sync_dir(archive)?;
    fs::remove_file(file).map_err(JournalError::io("remove segment", file))
}
