//! Runs of a primary outside a cluster, and which run a standby followed: a primary that
//! restarted without an unflushed tail (a power loss) may tell a standby that followed its
//! previous run to cut the records it holds from that tail, even once it has written its own
//! at the same sequences, because that standby got them from this primary before a flush it
//! lost, and they were never answered. A standby that followed another run (another node, or
//! this node before it restarted more than once) gets no such word: its records may have been
//! answered elsewhere, and a person decides.
//!
//! A primary keeps its run's id in `primary.run`, a standby the id of the run it follows in
//! `followed.run`; both are written durably (a temporary file, synced, renamed, the directory
//! synced). A node that starts writing as a primary forgets what it followed.

use std::io::Write;
use std::path::Path;

/// The file of a primary's current run id, in its data directory.
pub const PRIMARY_RUN_FILE: &str = "primary.run";
/// The file of the run id a standby follows, in its data directory.
pub const FOLLOWED_RUN_FILE: &str = "followed.run";

/// A primary's run: its id and the id of the run before it on this data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrimaryRun {
    /// This run's id (never 0).
    pub id: u64,
    /// The previous run's id, if this data directory had one.
    pub previous: Option<u64>,
}

/// Begins a primary's run on `data_dir`: reads the previous run's id, writes a new one, and
/// forgets any run this node followed as a standby (its records from now on are its own).
/// `None` when the new id cannot be written (a full disk): the run then has no id, no
/// standby is told to cut, and the old id is removed so that no later run takes it for its
/// previous one. A full disk never keeps the service from starting.
pub fn begin_primary_run(data_dir: &Path) -> Option<PrimaryRun> {
    let _ = forget_followed_run(data_dir);
    let previous = read_run(&data_dir.join(PRIMARY_RUN_FILE));
    let id = loop {
        let id: u64 = rand::random();
        if id != 0 && Some(id) != previous {
            break id;
        }
    };
    match write_run(data_dir, PRIMARY_RUN_FILE, id) {
        Ok(()) => Some(PrimaryRun { id, previous }),
        Err(e) => {
            tracing::warn!(error = %e, "this primary run has no id (standbys ahead of it are not told to cut)");
            let _ = forget_primary_run(data_dir);
            None
        }
    }
}

/// Forgets this node's primary run: it follows another node now, so a later run of its own
/// does not follow on from that one.
pub fn forget_primary_run(data_dir: &Path) -> Result<(), String> {
    remove_durably(data_dir, PRIMARY_RUN_FILE)
}

/// The run id this standby last followed, if it kept one.
pub fn followed_run(data_dir: &Path) -> Option<u64> {
    read_run(&data_dir.join(FOLLOWED_RUN_FILE))
}

/// Records that this standby follows run `id` (before it takes any record of that run).
pub fn record_followed_run(data_dir: &Path, id: u64) -> Result<(), String> {
    write_run(data_dir, FOLLOWED_RUN_FILE, id)
}

/// Forgets the run this node followed (it writes as a primary now).
pub fn forget_followed_run(data_dir: &Path) -> Result<(), String> {
    remove_durably(data_dir, FOLLOWED_RUN_FILE)
}

/// Removes `data_dir/name` if it is there, durably.
fn remove_durably(data_dir: &Path, name: &str) -> Result<(), String> {
    let path = data_dir.join(name);
    match std::fs::remove_file(&path) {
        Ok(()) => ladder_journal::sync_dir(data_dir).map_err(|e| e.to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The id in `path` (16 hex digits), if the file holds one.
fn read_run(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    u64::from_str_radix(text.trim(), 16)
        .ok()
        .filter(|id| *id != 0)
}

/// Writes `id` to `data_dir/name` durably.
fn write_run(data_dir: &Path, name: &str, id: u64) -> Result<(), String> {
    let path = data_dir.join(name);
    let failed = |e: std::io::Error| format!("{}: {e}", path.display());
    ladder_journal::create_dir_durably(data_dir).map_err(|e| e.to_string())?;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(failed)?;
    file.write_all(format!("{id:016x}\n").as_bytes())
        .map_err(failed)?;
    file.sync_all().map_err(failed)?;
    std::fs::rename(&tmp, &path).map_err(failed)?;
    ladder_journal::sync_dir(data_dir).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_remembers_the_one_before_and_a_primary_forgets_what_it_followed() {
        let dir = tempfile::tempdir().unwrap();
        record_followed_run(dir.path(), 7).unwrap();
        assert_eq!(followed_run(dir.path()), Some(7));
        let first = begin_primary_run(dir.path()).unwrap();
        assert_eq!(first.previous, None);
        assert_eq!(
            followed_run(dir.path()),
            None,
            "its records are its own now"
        );
        let second = begin_primary_run(dir.path()).unwrap();
        assert_eq!(second.previous, Some(first.id));
        assert_ne!(second.id, first.id);
        forget_primary_run(dir.path()).unwrap();
        assert_eq!(begin_primary_run(dir.path()).unwrap().previous, None);
    }
}
