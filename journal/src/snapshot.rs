//! Snapshots of the engine state: `<data_dir>/snapshots/snapshot-<seq, 20 digits>.snap`, a
//! checksummed header followed by the caller's opaque payload (the state after applying every
//! record up to `seq`). Written to a temporary file, synced, renamed into place, and the
//! directory synced, so a snapshot file is either complete or absent.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{JournalError, Result};
use crate::segment::sync_dir;

/// Name of the snapshot directory inside the data directory.
pub const SNAPSHOT_DIR_NAME: &str = "snapshots";
/// Magic bytes at the start of every snapshot file.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"LADDRSNP";
/// Version of the snapshot header written by this crate.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 1;
/// Size of the snapshot header.
pub const SNAPSHOT_HEADER_BYTES: usize = 40;
/// Largest snapshot payload written or read.
pub const SNAPSHOT_PAYLOAD_MAX_BYTES: u64 = 8 << 30;
/// Most snapshot files considered in the directory.
pub const SNAPSHOTS_LISTED_MAX: usize = 10_000;

const FILE_PREFIX: &str = "snapshot-";
const FILE_SUFFIX: &str = ".snap";
const TEMP_SUFFIX: &str = ".tmp";
const SEQ_DIGITS: usize = 20;

/// A snapshot read back and verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The last sequence applied to the state the payload holds.
    pub seq: u64,
    /// The caller's payload.
    pub payload: Vec<u8>,
}

/// Why a snapshot file cannot be used.
#[derive(Debug, thiserror::Error)]
enum SnapshotDefect {
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    #[error("header is damaged or of another format")]
    BadHeader,
    #[error("header names sequence {header_seq}, file name {name_seq}")]
    SeqMismatch { header_seq: u64, name_seq: u64 },
    #[error("file is {file_len} bytes, header says {expected}")]
    LengthMismatch { file_len: u64, expected: u64 },
    #[error("payload checksum mismatch")]
    ChecksumMismatch,
}

/// The snapshot directory of a data directory.
pub fn snapshot_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(SNAPSHOT_DIR_NAME)
}

/// Path of the snapshot taken at `seq`.
pub fn snapshot_path(data_dir: &Path, seq: u64) -> PathBuf {
    snapshot_dir(data_dir).join(format!(
        "{FILE_PREFIX}{seq:0width$}{FILE_SUFFIX}",
        width = SEQ_DIGITS
    ))
}

/// Snapshot writes and prunes of this process, one at a time: two writers (the historian's
/// periodic snapshot and one on command) may otherwise share a temporary file, or a prune
/// remove the other's temporary file before its rename.
static SNAPSHOT_FILES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn snapshot_files_lock() -> std::sync::MutexGuard<'static, ()> {
    SNAPSHOT_FILES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes the snapshot at `seq` durably and returns its path.
pub fn write_snapshot(data_dir: impl AsRef<Path>, seq: u64, payload: &[u8]) -> Result<PathBuf> {
    let _one_at_a_time = snapshot_files_lock();
    let payload_len = payload.len() as u64;
    if payload_len > SNAPSHOT_PAYLOAD_MAX_BYTES {
        return Err(JournalError::SnapshotTooLarge {
            payload_len,
            payload_max: SNAPSHOT_PAYLOAD_MAX_BYTES,
        });
    }
    let data_dir = data_dir.as_ref();
    let dir = snapshot_dir(data_dir);
    crate::segment::create_dir_durably(&dir)?;
    let path = snapshot_path(data_dir, seq);
    let mut temp_name = path.as_os_str().to_os_string();
    temp_name.push(TEMP_SUFFIX);
    let temp = PathBuf::from(temp_name);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(JournalError::io("create snapshot", &temp))?;
    let written = file
        .write_all(&encode_header(seq, payload))
        .and_then(|()| file.write_all(payload))
        .and_then(|()| file.sync_all());
    if let Err(error) = written {
        // A partial file (a full disk, typically) is not left to take the space.
        drop(file);
        let _ = fs::remove_file(&temp);
        return Err(JournalError::io("write snapshot", &temp)(error));
    }
    fs::rename(&temp, &path).map_err(JournalError::io("rename snapshot", &path))?;
    sync_dir(&dir)?;
    Ok(path)
}

/// The newest snapshot whose header and checksum verify. Broken ones are skipped with a
/// warning; `None` when there is no usable snapshot.
pub fn latest_valid_snapshot(data_dir: impl AsRef<Path>) -> Result<Option<Snapshot>> {
    latest_valid_snapshot_through(data_dir, u64::MAX)
}

/// The newest snapshot at or before `last_seq` whose header and checksum verify (broken ones
/// are skipped with a warning).
pub fn latest_valid_snapshot_through(
    data_dir: impl AsRef<Path>,
    last_seq: u64,
) -> Result<Option<Snapshot>> {
    let listed = list_snapshots(&snapshot_dir(data_dir.as_ref()))?;
    for (seq, path) in listed.iter().rev().filter(|(seq, _)| *seq <= last_seq) {
        match read_snapshot(path, *seq) {
            Ok(snapshot) => return Ok(Some(snapshot)),
            Err(defect) => warn_broken(path, &defect),
        }
    }
    Ok(None)
}

/// The sequence of the oldest snapshot whose header and checksum verify (`None`: none does).
/// Recovery falls back to it when every newer one is unusable, so the journal must keep the
/// records after it.
pub fn oldest_valid_snapshot_seq(data_dir: impl AsRef<Path>) -> Result<Option<u64>> {
    let listed = list_snapshots(&snapshot_dir(data_dir.as_ref()))?;
    for (seq, path) in &listed {
        match read_snapshot(path, *seq) {
            Ok(_) => return Ok(Some(*seq)),
            Err(defect) => warn_broken(path, &defect),
        }
    }
    Ok(None)
}

/// Keeps the newest `keep_newest` valid snapshots, and the newest valid one at or before
/// `needed_through` (what a reader that stands there, as the history store's writer, starts
/// from), and removes every snapshot older than the oldest of those (broken newer ones stay,
/// for inspection), plus leftover temporary files. Removes nothing while fewer than
/// `keep_newest` valid snapshots exist. Returns the removed paths.
pub fn prune_snapshots(
    data_dir: impl AsRef<Path>,
    keep_newest: usize,
    needed_through: u64,
) -> Result<Vec<PathBuf>> {
    if keep_newest == 0 {
        return Err(JournalError::InvalidOptions(
            "prune_snapshots must keep at least one snapshot".to_string(),
        ));
    }
    let _one_at_a_time = snapshot_files_lock();
    let dir = snapshot_dir(data_dir.as_ref());
    let mut removed = remove_temp_files(&dir)?;
    let listed = list_snapshots(&dir)?;
    let mut valid_seen = 0;
    let mut cutoff_seq = None;
    for (seq, path) in listed.iter().rev() {
        match read_snapshot(path, *seq) {
            Ok(_) => valid_seen += 1,
            Err(defect) => warn_broken(path, &defect),
        }
        if valid_seen == keep_newest {
            cutoff_seq = Some(*seq);
            break;
        }
    }
    let Some(mut cutoff_seq) = cutoff_seq else {
        return Ok(removed);
    };
    if cutoff_seq > needed_through {
        let needed = listed
            .iter()
            .rev()
            .filter(|(seq, _)| *seq <= needed_through)
            .find(|(seq, path)| read_snapshot(path, *seq).is_ok());
        if let Some((needed, _)) = needed {
            cutoff_seq = cutoff_seq.min(*needed);
        }
    }
    for (seq, path) in &listed {
        if *seq < cutoff_seq {
            fs::remove_file(path).map_err(JournalError::io("remove snapshot", path))?;
            removed.push(path.clone());
        }
    }
    sync_dir(&dir)?;
    Ok(removed)
}

/// Renames every snapshot past `last_seq` (every one when the journal holds no record) to
/// `<name>.bad`, where no reader looks: a snapshot of records the journal no longer holds
/// would put recovery past the journal's end. Returns the new paths.
pub fn set_aside_snapshots_after(
    data_dir: impl AsRef<Path>,
    last_seq: Option<u64>,
) -> Result<Vec<PathBuf>> {
    let dir = snapshot_dir(data_dir.as_ref());
    let mut set_aside = Vec::new();
    for (seq, path) in list_snapshots(&dir)? {
        if last_seq.is_some_and(|last| seq <= last) {
            continue;
        }
        let mut name = path.clone().into_os_string();
        name.push(".bad");
        let bad = PathBuf::from(name);
        fs::rename(&path, &bad).map_err(JournalError::io("set aside snapshot", &path))?;
        tracing::warn!(path = %bad.display(), seq, "snapshot past the journal's end set aside");
        set_aside.push(bad);
    }
    if !set_aside.is_empty() {
        sync_dir(&dir)?;
    }
    Ok(set_aside)
}

fn warn_broken(path: &Path, defect: &SnapshotDefect) {
    tracing::warn!(path = %path.display(), %defect, "skipping broken snapshot");
}

fn encode_header(seq: u64, payload: &[u8]) -> [u8; SNAPSHOT_HEADER_BYTES] {
    let mut header = [0u8; SNAPSHOT_HEADER_BYTES];
    header[..8].copy_from_slice(&SNAPSHOT_MAGIC);
    header[8..12].copy_from_slice(&SNAPSHOT_FORMAT_VERSION.to_le_bytes());
    header[16..24].copy_from_slice(&seq.to_le_bytes());
    header[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    header[32..36].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let header_crc = crc32c::crc32c(&header[..36]);
    header[36..40].copy_from_slice(&header_crc.to_le_bytes());
    header
}

/// (seq, payload length, payload checksum) from a header, if it checks out.
fn decode_header(header: &[u8; SNAPSHOT_HEADER_BYTES]) -> Option<(u64, u64, u32)> {
    let u32_at = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let u64_at = |at: usize| u64::from(u32_at(at)) | (u64::from(u32_at(at + 4)) << 32);
    let valid = header[..8] == SNAPSHOT_MAGIC
        && u32_at(8) == SNAPSHOT_FORMAT_VERSION
        && u32_at(36) == crc32c::crc32c(&header[..36]);
    valid.then(|| (u64_at(16), u64_at(24), u32_at(32)))
}

fn read_snapshot(path: &Path, name_seq: u64) -> std::result::Result<Snapshot, SnapshotDefect> {
    let mut file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut header = [0u8; SNAPSHOT_HEADER_BYTES];
    file.read_exact(&mut header)?;
    let (seq, payload_len, checksum) = decode_header(&header).ok_or(SnapshotDefect::BadHeader)?;
    if seq != name_seq {
        return Err(SnapshotDefect::SeqMismatch {
            header_seq: seq,
            name_seq,
        });
    }
    let expected = SNAPSHOT_HEADER_BYTES as u64 + payload_len;
    if payload_len > SNAPSHOT_PAYLOAD_MAX_BYTES || file_len != expected {
        return Err(SnapshotDefect::LengthMismatch { file_len, expected });
    }
    // The length is bounded by the file's actual size, checked above.
    let mut payload = Vec::with_capacity(payload_len as usize);
    file.read_to_end(&mut payload)?;
    if payload.len() as u64 != payload_len || crc32c::crc32c(&payload) != checksum {
        return Err(SnapshotDefect::ChecksumMismatch);
    }
    Ok(Snapshot { seq, payload })
}

/// Snapshot files in `dir`, sorted by sequence; a missing directory holds none.
fn list_snapshots(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(JournalError::io("list", dir)(error)),
    };
    let mut listed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(JournalError::io("list", dir))?;
        let Some(seq) = entry.file_name().to_str().and_then(parse_snapshot_name) else {
            continue;
        };
        if listed.len() == SNAPSHOTS_LISTED_MAX {
            return Err(JournalError::TooManySnapshots {
                snapshots_max: SNAPSHOTS_LISTED_MAX,
            });
        }
        listed.push((seq, entry.path()));
    }
    listed.sort();
    Ok(listed)
}

fn remove_temp_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(removed),
        Err(error) => return Err(JournalError::io("list", dir)(error)),
    };
    for entry in entries {
        let entry = entry.map_err(JournalError::io("list", dir))?;
        let name = entry.file_name();
        let is_temp = name
            .to_str()
            .and_then(|name| name.strip_suffix(TEMP_SUFFIX))
            .and_then(parse_snapshot_name)
            .is_some();
        if is_temp {
            fs::remove_file(entry.path()).map_err(JournalError::io("remove", &entry.path()))?;
            removed.push(entry.path());
        }
    }
    Ok(removed)
}

fn parse_snapshot_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(FILE_PREFIX)?.strip_suffix(FILE_SUFFIX)?;
    if digits.len() != SEQ_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
