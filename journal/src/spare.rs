//! The next segment file, made ahead on a helper thread so that a rollover on the writer's
//! thread costs a header write and a rename instead of a file creation and two fsyncs
//! (0.4–1.2 ms measured on the machines this runs on).
//!
//! A spare is created under a temporary name, sized and synced; its header is left zero,
//! since the sequence it will start at is known only at the rollover. The writer then writes
//! the header through the mapping and renames the file into place; the next synced commit
//! flushes the header with the records and syncs the directory before anything in the new
//! segment is acknowledged. A crash before that leaves either the temporary file (removed on
//! open) or a last segment whose header never reached the disk, which recovery cuts away as a
//! torn tail: nothing in it was acknowledged.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memmap2::MmapRaw;

use crate::error::{JournalError, Result};

/// Name of the spare segment file while it waits in the journal directory.
pub(crate) const SPARE_FILE_NAME: &str = "next-segment.tmp";

/// Bytes at the start of a spare faulted in for writing by the helper: the writer's first
/// write into a hole of a freshly synced shared mapping (the header's page) cost it ~0.9 ms
/// (a page fault that allocates the block and updates the file's times).
const SPARE_POPULATED_BYTES: usize = 1 << 20;

/// A sized, synced, mapped segment file with a zero header, under [`SPARE_FILE_NAME`].
#[derive(Debug)]
pub(crate) struct Spare {
    /// The writable mapping of the whole file.
    pub map: MmapRaw,
    /// Where the file is now.
    pub temp_path: PathBuf,
}

/// Makes one spare at a time on a helper thread and hands it over when it is ready.
#[derive(Debug, Default)]
pub(crate) struct SpareMaker {
    making: Option<JoinHandle<Result<Spare>>>,
    /// A spare made and not yet taken.
    ready: Option<Spare>,
    /// No helper thread could be made for this segment: not tried again before the next
    /// rollover (`take_ready`).
    no_thread: bool,
    /// The last spare could not be made for want of disk space (tried again by
    /// [`SpareMaker::retry_if_short`]).
    short: bool,
    /// When a spare short of space may be tried again.
    retry_at: Option<Instant>,
}

/// How long after a spare found the disk full it is tried again.
pub(crate) const SPACE_RETRY_INTERVAL: Duration = Duration::from_millis(500);

impl SpareMaker {
    /// Whether a spare is being made or waits to be taken (or could not be started for the
    /// current segment).
    pub fn is_started(&self) -> bool {
        self.making.is_some() || self.ready.is_some() || self.no_thread || self.short
    }

    /// Whether a spare has been made (or making it failed) and waits to be taken.
    #[cfg(test)]
    pub fn is_ready(&self) -> bool {
        self.ready.is_some() || self.making.as_ref().is_some_and(JoinHandle::is_finished)
    }

    /// Whether a made spare waits to be taken (after [`SpareMaker::poll`]).
    pub fn has_ready(&self) -> bool {
        self.ready.is_some()
    }

    /// Whether the last spare could not be made for want of disk space.
    pub fn is_short(&self) -> bool {
        self.short
    }

    /// Collects the helper's result if it has finished (`wait`: waits for it).
    pub fn poll(&mut self, wait: bool) {
        let finished = self
            .making
            .as_ref()
            .is_some_and(|thread| wait || thread.is_finished());
        if !finished {
            return;
        }
        let Some(thread) = self.making.take() else {
            return;
        };
        match thread.join() {
            Ok(Ok(spare)) => {
                if self.short {
                    tracing::info!("journal space is available again: writes resume");
                }
                self.short = false;
                self.retry_at = None;
                self.ready = Some(spare);
            }
            Ok(Err(error)) if crate::space::is_no_space(&error) => {
                if !self.short {
                    tracing::error!(%error, "journal full: no space left on device for the next segment; refusing writes but cancels until space returns");
                }
                self.short = true;
                self.retry_at = Some(Instant::now() + SPACE_RETRY_INTERVAL);
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "the spare journal segment could not be made");
            }
            Err(_) => tracing::warn!("the journal spare thread panicked"),
        }
    }

    /// Starts making a spare again once [`SPACE_RETRY_INTERVAL`] has passed since one
    /// found the disk full.
    pub fn retry_if_short(&mut self, journal_dir: &Path, size: u64) {
        if !self.short || self.making.is_some() {
            return;
        }
        if self.retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        self.retry_at = Some(Instant::now() + SPACE_RETRY_INTERVAL);
        self.spawn(journal_dir, size);
    }

    /// Starts making a spare of `size` bytes in `journal_dir`. Without a helper thread there
    /// is no spare, and rollovers create their segment themselves.
    pub fn start(&mut self, journal_dir: &Path, size: u64) {
        if self.making.is_some() || self.ready.is_some() || self.short {
            return;
        }
        self.spawn(journal_dir, size);
    }

    fn spawn(&mut self, journal_dir: &Path, size: u64) {
        let path = journal_dir.join(SPARE_FILE_NAME);
        let spawned = std::thread::Builder::new()
            .name("journal-spare".into())
            .spawn(move || make_spare(path, size));
        match spawned {
            Ok(thread) => self.making = Some(thread),
            Err(error) => {
                self.no_thread = true;
                tracing::warn!(%error, "no journal spare thread; the rollover creates its file");
            }
        }
    }

    /// The spare, if it is ready; `None` while it is still being made, or when making it
    /// failed (logged: the rollover then creates its segment itself and meets the error
    /// there, if it persists).
    pub fn take_ready(&mut self) -> Option<Spare> {
        self.no_thread = false;
        self.poll(false);
        self.ready.take()
    }
}

impl Drop for SpareMaker {
    /// An unused spare's file is removed (a crash leaves it to `Journal::open`).
    fn drop(&mut self) {
        self.poll(true);
        if let Some(spare) = self.ready.take() {
            drop(spare.map);
            let _ = fs::remove_file(&spare.temp_path);
        }
    }
}

fn make_spare(path: PathBuf, size: u64) -> Result<Spare> {
    let file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(JournalError::io("create spare segment", &path))?;
    if let Err(error) = crate::space::allocate(&file, 0, size, &path) {
        // A spare that could not be allocated is no spare: its file goes.
        drop(file);
        let _ = fs::remove_file(&path);
        return Err(error);
    }
    file.sync_all()
        .map_err(JournalError::io("sync spare segment", &path))?;
    let map = MmapRaw::map_raw(&file).map_err(JournalError::io("map spare segment", &path))?;
    populate_head(&map);
    Ok(Spare {
        map,
        temp_path: path,
    })
}

/// Faults the first pages of `map` in for writing (a hint: without it the writer faults them).
#[cfg(target_os = "linux")]
fn populate_head(map: &MmapRaw) {
    let len = map.len().min(SPARE_POPULATED_BYTES);
    if let Err(error) = map.advise_range(memmap2::Advice::PopulateWrite, 0, len) {
        tracing::debug!(%error, "spare segment not prefaulted");
    }
}

#[cfg(not(target_os = "linux"))]
fn populate_head(_map: &MmapRaw) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_is_handed_over_once_and_an_unused_one_is_removed() {
        let dir = std::env::temp_dir().join(format!("ladder-spare-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut maker = SpareMaker::default();
        assert!(!maker.is_started());
        maker.start(&dir, 1 << 16);
        assert!(maker.is_started());
        let spare = loop {
            if let Some(spare) = maker.take_ready() {
                break spare;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert!(!maker.is_started(), "taken");
        assert_eq!(spare.map.len(), 1 << 16);
        assert_eq!(fs::metadata(&spare.temp_path).unwrap().len(), 1 << 16);
        fs::remove_file(&spare.temp_path).unwrap();
        maker.start(&dir, 1 << 16);
        drop(maker);
        assert!(
            !dir.join(SPARE_FILE_NAME).exists(),
            "an unused spare is removed"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
