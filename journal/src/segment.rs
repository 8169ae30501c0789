//! Segment files: naming, listing, creation, and read-only mapping.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Fault, JournalError, Result};
use crate::layout::{self, SegmentHeader};

/// Name of the journal's directory inside the data directory.
pub const JOURNAL_DIR_NAME: &str = "journal";
/// Most segment files a journal directory may hold (64 TiB at the default segment size).
pub const SEGMENTS_MAX: usize = 1 << 20;

const SEGMENT_SUFFIX: &str = ".seg";
const TEMP_SUFFIX: &str = ".tmp";
const SEQ_DIGITS: usize = 20;

/// The journal directory of a data directory: `<data_dir>/journal`.
pub fn journal_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(JOURNAL_DIR_NAME)
}

/// File name of the segment whose first record is `first_seq`: 20 digits and `.seg`.
pub(crate) fn segment_file_name(first_seq: u64) -> String {
    format!("{first_seq:0width$}{SEGMENT_SUFFIX}", width = SEQ_DIGITS)
}

/// The first sequence named by a segment file name, or `None` for any other file.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != SEQ_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A segment file found in the journal directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentEntry {
    /// Path of the file.
    pub path: PathBuf,
    /// First sequence, from the file name.
    pub first_seq: u64,
}

/// The segment files of a journal directory, in sequence order. A missing directory holds none.
pub(crate) fn list_segments(journal_dir: &Path) -> Result<Vec<SegmentEntry>> {
    let entries = match fs::read_dir(journal_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(JournalError::io("list", journal_dir)(error)),
    };
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry.map_err(JournalError::io("list", journal_dir))?;
        let name = entry.file_name();
        let Some(first_seq) = name.to_str().and_then(parse_segment_file_name) else {
            continue;
        };
        if segments.len() == SEGMENTS_MAX {
            return Err(JournalError::TooManySegments {
                segments_max: SEGMENTS_MAX,
            });
        }
        segments.push(SegmentEntry {
            path: entry.path(),
            first_seq,
        });
    }
    segments.sort_by_key(|segment| segment.first_seq);
    Ok(segments)
}

/// Creates a preallocated segment atomically: the header is written and synced under a
/// temporary name, then the file is renamed into place and the directory synced, so a
/// segment file never exists without its complete header.
pub(crate) fn create_segment(
    journal_dir: &Path,
    first_seq: u64,
    segment_size_bytes: u64,
) -> Result<(File, PathBuf)> {
    let name = segment_file_name(first_seq);
    let path = free_segment_path(journal_dir, first_seq)?;
    let temp = journal_dir.join(format!("{name}{TEMP_SUFFIX}"));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(JournalError::io("create segment", &temp))?;
    let header = SegmentHeader {
        segment_size_bytes,
        first_seq,
    };
    file.write_all(&header.encode())
        .map_err(JournalError::io("write segment header", &temp))?;
    crate::space::allocate(&file, 0, segment_size_bytes, &temp)?;
    file.sync_all()
        .map_err(JournalError::io("sync segment", &temp))?;
    fs::rename(&temp, &path).map_err(JournalError::io("rename segment", &path))?;
    sync_dir(journal_dir)?;
    Ok((file, path))
}

/// The path of the segment starting at `first_seq`, which must not exist yet.
pub(crate) fn free_segment_path(journal_dir: &Path, first_seq: u64) -> Result<PathBuf> {
    let path = journal_dir.join(segment_file_name(first_seq));
    let exists = path
        .try_exists()
        .map_err(JournalError::io("check", &path))?;
    if exists {
        let error = std::io::Error::new(ErrorKind::AlreadyExists, "segment already exists");
        return Err(JournalError::io("create segment", &path)(error));
    }
    Ok(path)
}

/// Removes temporary files left by a segment creation that a crash interrupted, and a spare
/// segment a crash left unused.
pub(crate) fn remove_temp_files(journal_dir: &Path) -> Result<()> {
    for entry in fs::read_dir(journal_dir).map_err(JournalError::io("list", journal_dir))? {
        let entry = entry.map_err(JournalError::io("list", journal_dir))?;
        let name = entry.file_name();
        let is_temp = name.to_str().is_some_and(|name| {
            name == crate::spare::SPARE_FILE_NAME
                || name
                    .strip_suffix(TEMP_SUFFIX)
                    .and_then(parse_segment_file_name)
                    .is_some()
        });
        if is_temp {
            tracing::warn!(path = %entry.path().display(), "removing unfinished segment file");
            fs::remove_file(entry.path()).map_err(JournalError::io("remove", &entry.path()))?;
        }
    }
    Ok(())
}

/// Creates `dir` (and its missing parents) durably: each directory made is synced into its
/// parent, so that a power loss right after cannot lose the directory with what is in it.
pub fn create_dir_durably(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_durably(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => return Ok(()),
        Err(error) => return Err(JournalError::io("create", dir)(error)),
    }
    match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Makes renames and removals in `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|dir_file| dir_file.sync_all())
        .map_err(JournalError::io("sync directory", dir))
}

/// A segment file mapped read-only, for readers that may run beside a live writer.
///
/// It hands out raw-pointer views only: the frame word is loaded atomically, and byte slices
/// are made only of frames already published (immutable from then on) or, during recovery,
/// of regions no writer touches.
#[derive(Debug)]
pub(crate) struct SegmentMap {
    map: Option<MmapRaw>,
    file_len_bytes: u64,
    path: PathBuf,
}

impl SegmentMap {
    /// Maps the whole file read-only.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(JournalError::io("open segment", path))?;
        let file_len_bytes = file
            .metadata()
            .map_err(JournalError::io("stat segment", path))?
            .len();
        // A file too short for a header is reported by `header()`; mapping zero bytes fails.
        let map = if file_len_bytes >= layout::SEGMENT_HEADER_BYTES as u64 {
            let map = MmapOptions::new()
                .map_raw_read_only(&file)
                .map_err(JournalError::io("map segment", path))?;
            Some(map)
        } else {
            None
        };
        Ok(SegmentMap {
            map,
            file_len_bytes,
            path: path.to_path_buf(),
        })
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lets go of the mapped pages far behind `position` (see [`Released`]).
    pub fn release_behind(&self, released: &mut crate::release::Released, position: usize) {
        if let Some(map) = &self.map {
            released.behind(map, position);
        }
    }

    /// Mapped length (0 when the file is too short to hold a header).
    pub fn len(&self) -> usize {
        self.map.as_ref().map_or(0, MmapRaw::len)
    }

    /// The header, checked, and the end of the region frames may occupy.
    pub fn header(&self) -> std::result::Result<(SegmentHeader, usize), Fault> {
        if self.len() < layout::SEGMENT_HEADER_BYTES {
            return Err(Fault::HeaderTooShort {
                file_len_bytes: self.file_len_bytes,
            });
        }
        let header = SegmentHeader::decode(self.bytes(0..layout::SEGMENT_HEADER_BYTES))?;
        // A file cut short ends its frame area early (not necessarily on a frame boundary).
        let end = (header.segment_size_bytes as usize).min(self.len());
        Ok((header, end))
    }

    /// Loads the frame word at `offset` with acquire ordering: when it is non-zero, the frame
    /// body it describes is complete.
    pub fn load_word(&self, offset: usize) -> u64 {
        assert!(offset.is_multiple_of(layout::FRAME_ALIGN_BYTES) && offset + 8 <= self.len());
        let Some(map) = &self.map else { return 0 };
        // SAFETY: the mapping is page-aligned and `offset` is a multiple of 8 inside it, so the
        // pointer is valid and aligned for a u64. A relaxed atomic load of at most the pointer
        // width is allowed on read-only memory (std::sync::atomic, "Atomic accesses to
        // read-only memory"); the fence that follows makes it an acquire load, pairing with the
        // writer's release store of the same word.
        let word = unsafe {
            let slot = AtomicU64::from_ptr(map.as_mut_ptr().add(offset).cast::<u64>());
            slot.load(Ordering::Relaxed)
        };
        fence(Ordering::Acquire);
        word
    }

    /// The bytes in `range`, which must lie inside the mapping and must not be written while
    /// the slice lives (a published frame, or a segment no writer has open).
    pub fn bytes(&self, range: Range<usize>) -> &[u8] {
        assert!(range.start <= range.end && range.end <= self.len());
        let Some(map) = &self.map else { return &[] };
        // SAFETY: the range is inside the live mapping (asserted), which outlives `&self`;
        // callers only ask for bytes no one writes while they read them (see above), and files
        // are never shrunk while mapped (recovery zeroes bytes instead of truncating).
        unsafe { std::slice::from_raw_parts(map.as_ptr().add(range.start), range.len()) }
    }
}

/// Bytes checked per step when looking for non-zero data.
const ZERO_SCAN_CHUNK_BYTES: usize = 4 << 10;

impl SegmentMap {
    /// Offset of the first non-zero byte in `range`, if any.
    pub fn first_nonzero(&self, range: Range<usize>) -> Option<usize> {
        let start = range.start;
        let bytes = self.bytes(range);
        for (index, chunk) in bytes.chunks(ZERO_SCAN_CHUNK_BYTES).enumerate() {
            if chunk_is_zero(chunk) {
                continue;
            }
            let within = chunk.iter().position(|&byte| byte != 0)?;
            return Some(start + index * ZERO_SCAN_CHUNK_BYTES + within);
        }
        None
    }

    /// The offset just past the last non-zero byte in `range`, rounded up to the frame
    /// alignment; `range.start` when the range is all zero.
    pub fn nonzero_end(&self, range: Range<usize>) -> usize {
        let start = range.start;
        let bytes = self.bytes(range);
        let chunks = bytes.len().div_ceil(ZERO_SCAN_CHUNK_BYTES);
        for index in (0..chunks).rev() {
            let chunk_start = index * ZERO_SCAN_CHUNK_BYTES;
            let chunk_end = (chunk_start + ZERO_SCAN_CHUNK_BYTES).min(bytes.len());
            let chunk = &bytes[chunk_start..chunk_end];
            if chunk_is_zero(chunk) {
                continue;
            }
            if let Some(last) = chunk.iter().rposition(|&byte| byte != 0) {
                return layout::align_up(start + chunk_start + last + 1);
            }
        }
        start
    }
}

/// True when every byte of `chunk` is zero (written as a fold so that it vectorises).
fn chunk_is_zero(chunk: &[u8]) -> bool {
    chunk.iter().fold(0u8, |acc, &byte| acc | byte) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_have_twenty_digits_and_parse_back() {
        assert_eq!(segment_file_name(1), "00000000000000000001.seg");
        assert_eq!(parse_segment_file_name("00000000000000000001.seg"), Some(1));
        assert_eq!(
            parse_segment_file_name("00000000000000000001.seg.bad"),
            None
        );
        assert_eq!(parse_segment_file_name("1.seg"), None);
        assert_eq!(parse_segment_file_name("0000000000000000000x.seg"), None);
    }
}
