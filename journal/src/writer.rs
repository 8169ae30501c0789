//! The single writer: appends frames into the mapped active segment, rolls over to new
//! segments, and makes appended records durable on `commit`.

use std::convert::Infallible;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use memmap2::MmapRaw;

use crate::release::Released;

use crate::clean_stop;
use crate::error::{JournalError, Result};
use crate::layout::{self, FrameFields};
use crate::lock::WriterLock;
use crate::options::{Durability, JournalOptions};
use crate::prefault::Prefaulter;
use crate::recovery::{recover, RecoveryReport};
use crate::scan::ScannedSegment;
use crate::segment::{create_segment, free_segment_path, journal_dir, remove_temp_files, sync_dir};
use crate::spare::{Spare, SpareMaker};

/// The journal's single writer. Holds the directory's writer lock while it lives.
///
/// Records are appended straight into the memory-mapped active segment (no allocation, no
/// system call); `commit(Durability::Sync)` flushes everything appended since the last
/// synced commit with one msync per touched segment (group commit).
#[derive(Debug)]
pub struct Journal {
    data_dir: PathBuf,
    journal_dir: PathBuf,
    options: JournalOptions,
    payload_max_bytes: usize,
    active: Option<ActiveSegment>,
    /// The segment before the active one while it still has unsynced bytes.
    retired: Option<RetiredSegment>,
    /// Flushes of older left segments running on helper threads (see `retire`); a synced
    /// commit waits for them.
    background_flushes: Vec<BackgroundFlush>,
    first_seq: Option<u64>,
    next_seq: u64,
    poisoned: bool,
    /// Faults the active segment's pages in ahead of the appends.
    prefaulter: Prefaulter,
    /// Makes the next segment file ahead of the rollover that needs it.
    spare: SpareMaker,
    /// A segment was renamed into place since the last synced commit: that commit syncs the
    /// directory too.
    directory_unsynced: bool,
    /// The last ordinary write asked for was refused for want of space.
    refusing: bool,
    _lock: WriterLock,
}

/// A writer that stops after a successful final flush leaves the clean-stop marker; one
/// that cannot flush (or was poisoned by a failed flush) leaves none, and the next open reads
/// the journal's tail from the disk (see `clean_stop`).
impl Drop for Journal {
    fn drop(&mut self) {
        if self.poisoned || self.commit(Durability::Sync).is_err() {
            return;
        }
        if let Err(error) = clean_stop::mark(&self.journal_dir) {
            tracing::warn!(%error, "could not mark the journal's clean stop");
        }
    }
}

/// What a write is, for the room it may use when no further segment can be reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteClass {
    /// Placements, key creations, admin writes: refused once the room is down to the cancel
    /// reserve.
    Ordinary,
    /// Cancels, timers and settlement updates, and records a standby copies: they may use
    /// the reserve.
    Reserved,
}

/// The segment being appended to.
#[derive(Debug)]
struct ActiveSegment {
    /// The writable mapping, shared with [`FlushTicket`]s that flush ranges of it on another
    /// thread (they never read or write it). Only this writer writes, past `write_offset`.
    map: Arc<MmapRaw>,
    path: PathBuf,
    frames_end: usize,
    /// Where the next frame goes; every byte from here to `frames_end` is zero.
    write_offset: usize,
    /// Bytes before this offset are on stable storage.
    synced_offset: usize,
    /// The end-of-segment marker is written: the next append rolls over.
    sealed: bool,
    /// Pages far behind `write_offset`, let go of the mapping.
    released: Released,
}

/// A segment the writer has left that still has bytes to flush.
#[derive(Clone, Debug)]
struct RetiredSegment {
    map: Arc<MmapRaw>,
    path: PathBuf,
    synced_offset: usize,
    end_offset: usize,
}

/// Room above the cancel reserve within which a journal that cannot reserve its next
/// segment counts as full before any write was refused: the largest client write (a batch
/// of 15 orders) needs about this much.
const FULL_MARGIN_BYTES: usize = 16 << 10;

impl Journal {
    /// Opens (or creates) the journal in `<data_dir>/journal` for writing: takes the writer
    /// lock, scans every segment, cuts away a torn tail (reported in the `RecoveryReport` and
    /// logged), and fails with `JournalError::Corrupt` on damage before the last good record.
    pub fn open(
        data_dir: impl AsRef<Path>,
        options: JournalOptions,
    ) -> Result<(Journal, RecoveryReport)> {
        options.validate()?;
        let data_dir = data_dir.as_ref().to_path_buf();
        let journal_dir = journal_dir(&data_dir);
        crate::segment::create_dir_durably(&journal_dir)?;
        let lock = WriterLock::acquire(&journal_dir)?;
        remove_temp_files(&journal_dir)?;
        let clean_stop = clean_stop::take(&journal_dir)?;
        if !clean_stop {
            clean_stop::drop_cached_tail(&crate::segment::list_segments(&journal_dir)?);
        }
        let (scan, report) = recover(&data_dir, clean_stop)?;
        sync_left_behind(&scan.walked, &journal_dir)?;
        let active = match scan.walked.last() {
            Some(segment) => Some(ActiveSegment::open(segment)?),
            None => None,
        };
        let journal = Journal {
            payload_max_bytes: options.record_payload_max_bytes(),
            data_dir,
            journal_dir,
            options,
            active,
            retired: None,
            background_flushes: Vec::new(),
            first_seq: scan.first_seq,
            next_seq: scan.next_seq,
            poisoned: false,
            prefaulter: Prefaulter::start(),
            spare: SpareMaker::default(),
            directory_unsynced: false,
            refusing: false,
            _lock: lock,
        };
        if let Some(active) = &journal.active {
            journal
                .prefaulter
                .populate(&active.map, active.write_offset);
        }
        Ok((journal, report))
    }

    /// Appends one record. `seq` must be `last_seq() + 1`. The record is visible to readers
    /// when this returns, durable after the next `commit(Durability::Sync)`.
    pub fn append(
        &mut self,
        seq: u64,
        timestamp_ns: u64,
        record_type: u16,
        payload: &[u8],
    ) -> Result<()> {
        self.append_with(seq, timestamp_ns, record_type, payload.len(), |area| {
            area.copy_from_slice(payload);
            Ok::<usize, Infallible>(payload.len())
        })?;
        Ok(())
    }

    /// Appends one record whose payload `encode` writes straight into the mapped segment.
    /// `encode` gets exactly `payload_len_max` bytes and returns how many it used; space for
    /// `payload_len_max` is reserved, so a smaller payload may roll over a little early. If
    /// `encode` fails, nothing is appended. Returns the payload length written. An I/O error
    /// while rolling over to a new segment is fatal: later calls return `Poisoned`.
    pub fn append_with<F, E>(
        &mut self,
        seq: u64,
        timestamp_ns: u64,
        record_type: u16,
        payload_len_max: usize,
        encode: F,
    ) -> Result<usize>
    where
        F: FnOnce(&mut [u8]) -> std::result::Result<usize, E>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.check_append(seq, payload_len_max)?;
        let frame_len_max = layout::frame_len_bytes(payload_len_max);
        let active = self.reserve(seq, frame_len_max)?;
        let offset = active.write_offset;
        let frame = active.bytes_mut(offset, frame_len_max);
        debug_assert!(frame[..layout::FRAME_HEADER_BYTES].iter().all(|&b| b == 0));
        let fields = FrameFields {
            seq,
            timestamp_ns,
            record_type,
        };
        fields.encode_into(frame);
        let payload_area = &mut frame[layout::FRAME_HEADER_BYTES..][..payload_len_max];
        let payload_len = match encode(payload_area) {
            Ok(written) if written <= payload_len_max => written,
            outcome => {
                // Leave the bytes after the write offset zero, as readers and recovery expect.
                frame[layout::FRAME_BODY_OFFSET..].fill(0);
                return Err(match outcome {
                    Ok(written) => JournalError::EncodedTooLong {
                        written,
                        payload_len_max,
                    },
                    Err(error) => JournalError::Encode(error.into()),
                });
            }
        };
        let frame_end = layout::FRAME_HEADER_BYTES + payload_len;
        frame[frame_end..].fill(0);
        let checksum = layout::frame_checksum(&frame[layout::FRAME_BODY_OFFSET..frame_end]);
        active.publish(offset, layout::frame_word(payload_len as u32, checksum));
        active.write_offset = offset + layout::frame_len_bytes(payload_len);
        let write_offset = active.write_offset;
        active.released.behind(&active.map, write_offset);
        self.prefaulter.advance(write_offset);
        self.next_seq = seq + 1;
        self.first_seq.get_or_insert(seq);
        Ok(payload_len)
    }

    /// Ends a group of appends. `Durability::Sync` returns once everything appended since the
    /// last synced commit is on stable storage (msync of the dirty byte range of each touched
    /// segment, which on Linux is an fdatasync of that range); `Durability::Async` flushes nothing
    /// (it only collects the outcome of segments left behind and flushed in the background).
    ///
    /// A failed flush is fatal: it is never retried (the kernel may have dropped the dirty
    /// pages), the journal refuses every later call with `Poisoned`, and the caller must stop
    /// without acknowledging the records.
    pub fn commit(&mut self, durability: Durability) -> Result<()> {
        if durability == Durability::Async {
            if self.poisoned {
                return Err(JournalError::Poisoned);
            }
            return self.reap_background_flushes();
        }
        let Some(ticket) = self.begin_commit()? else {
            return Ok(());
        };
        let flushed = ticket.complete();
        self.poisoned |= flushed.is_err();
        flushed
    }

    /// Starts a synced commit whose waiting happens elsewhere: the returned ticket, completed
    /// on any thread, makes everything appended so far durable (an fdatasync of each touched
    /// segment file, which writes back the mapping's dirty pages). `None` when nothing is
    /// waiting to be flushed. Appends may go on meanwhile; nothing appended before this call
    /// may be acknowledged before the ticket completes. A failed ticket is fatal, as a failed
    /// `commit`: the caller must stop without acknowledging.
    pub fn begin_commit(&mut self) -> Result<Option<FlushTicket>> {
        if self.poisoned {
            return Err(JournalError::Poisoned);
        }
        self.reap_background_flushes()?;
        let background = std::mem::take(&mut self.background_flushes);
        let mut ranges = Vec::with_capacity(2);
        if let Some(retired) = self.retired.take() {
            ranges.push(FlushRange {
                map: retired.map,
                path: retired.path,
                from: retired.synced_offset,
                to: retired.end_offset,
            });
        }
        if let Some(active) = &mut self.active {
            if active.write_offset > active.synced_offset {
                ranges.push(FlushRange {
                    map: active.map.clone(),
                    path: active.path.clone(),
                    from: active.synced_offset,
                    to: active.write_offset,
                });
                active.synced_offset = active.write_offset;
            }
        }
        let directory =
            std::mem::take(&mut self.directory_unsynced).then(|| self.journal_dir.clone());
        let ticket = FlushTicket {
            ranges,
            background,
            directory,
        };
        Ok((!ticket.is_empty()).then_some(ticket))
    }

    /// Sequence of the last record, or `first sequence - 1` when the journal holds none
    /// (0 for a new journal).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Sequence the next append must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Sequence of the first record held, if any.
    pub fn first_seq(&self) -> Option<u64> {
        self.first_seq
    }

    /// The data directory this journal lives in.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Largest payload one record may carry.
    pub fn record_payload_max_bytes(&self) -> usize {
        self.payload_max_bytes
    }

    /// Bytes of the active segment kept for cancels once no next segment can be reserved
    /// (a quarter of a segment, at most 4 MiB): market makers can still pull their quotes
    /// when nothing else can be written.
    pub fn cancel_reserve_bytes(&self) -> usize {
        (self.options.segment_size_bytes / 4).min(4 << 20) as usize
    }

    /// Bytes left for frames in the active segment.
    fn active_room(&self) -> usize {
        match &self.active {
            Some(active) if !active.sealed => active.frames_end - active.write_offset,
            _ => 0,
        }
    }

    /// Whether records of about `bytes` bytes (frames included) of `class` can be journaled
    /// now without the disk running out under them. Appends never fault on a full disk
    /// (segments are allocated ahead), so when the next segment cannot be reserved the
    /// journal refuses ahead instead: ordinary writes while the active segment's room is
    /// down to the cancel reserve, cancels once the room itself is gone.
    pub fn admits(&mut self, bytes: usize, class: WriteClass) -> bool {
        let room = self.active_room();
        let reserve = match class {
            WriteClass::Ordinary => self.cancel_reserve_bytes(),
            WriteClass::Reserved => 0,
        };
        if room >= bytes.saturating_add(reserve) && !self.spare.is_short() {
            if class == WriteClass::Ordinary {
                self.refusing = false;
            }
            return true;
        }
        // The next segment is needed (or known to be short): learn whether it exists.
        if !self.spare.is_started() {
            self.spare
                .start(&self.journal_dir, self.options.segment_size_bytes);
        }
        self.spare.poll(true);
        // Once an ordinary write was refused, the journal is full for every ordinary write
        // (a smaller one would still fit, but the state is one, as operators see it) until
        // a segment is reserved again.
        let full_already = class == WriteClass::Ordinary && self.refusing;
        let admitted =
            self.spare.has_ready() || (!full_already && room >= bytes.saturating_add(reserve));
        if class == WriteClass::Ordinary {
            self.refusing = !admitted;
        }
        admitted
    }

    /// Starts making the next segment once the active one is past half full, or the first
    /// one of an empty journal (a journal reopened past half, or empty, with no write since,
    /// learns this way whether the disk has room).
    pub fn make_next_segment_if_due(&mut self) {
        let past_half = self
            .active
            .as_ref()
            .is_some_and(|active| active.write_offset * 2 > active.frames_end);
        // An empty journal makes its first segment ahead too: a start on a full disk then
        // knows it (`is_full`) before a write is refused.
        if (past_half || self.active.is_none()) && !self.spare.is_started() {
            self.spare
                .start(&self.journal_dir, self.options.segment_size_bytes);
        }
        self.spare.poll(false);
    }

    /// Whether the journal is full: no next segment is reserved and ordinary writes are
    /// refused (at the last ask, or, before any was asked, because the disk had no room for
    /// the next segment and the active one is down to the cancel reserve, as after a
    /// restart on a full disk or on a standby, whose copies are never ordinary writes).
    pub fn is_full(&self) -> bool {
        let down_to_the_reserve = self.spare.is_short()
            && self.active_room() < self.cancel_reserve_bytes() + FULL_MARGIN_BYTES;
        !self.spare.has_ready() && (self.refusing || down_to_the_reserve)
    }

    /// Whether the last try to reserve the next segment found the disk full.
    pub fn is_short(&self) -> bool {
        self.spare.is_short()
    }

    /// While the disk is full, tries again to reserve the next segment (at most twice a
    /// second, on a helper thread); writes resume once it is reserved.
    pub fn retry_space(&mut self) {
        if self.spare.is_short() {
            self.spare.poll(false);
            self.spare
                .retry_if_short(&self.journal_dir, self.options.segment_size_bytes);
        }
    }

    fn check_append(&self, seq: u64, payload_len_max: usize) -> Result<()> {
        if self.poisoned {
            return Err(JournalError::Poisoned);
        }
        if seq != self.next_seq {
            return Err(JournalError::SequenceNotNext {
                expected: self.next_seq,
                got: seq,
            });
        }
        if payload_len_max > self.payload_max_bytes {
            return Err(JournalError::PayloadTooLarge {
                payload_len: payload_len_max,
                payload_max: self.payload_max_bytes,
            });
        }
        Ok(())
    }

    /// The active segment with room for a frame of `frame_len_max` bytes, rolling over to a
    /// new segment that starts at `seq` when the current one is full.
    fn reserve(&mut self, seq: u64, frame_len_max: usize) -> Result<&mut ActiveSegment> {
        let fits = self.active.as_ref().is_some_and(|active| {
            !active.sealed && active.write_offset + frame_len_max <= active.frames_end
        });
        self.make_next_segment_if_due();
        if !fits {
            // A half-done rollover (a segment file created but not installed) cannot be
            // retried, so any failure here is fatal like a failed flush.
            let rolled = self.roll_over(seq);
            self.poisoned |= rolled.is_err();
            rolled?;
        }
        Ok(self
            .active
            .as_mut()
            .expect("roll_over installs an active segment"))
    }

    /// Installs the segment starting at `seq` (the spare made ahead, or a file created here),
    /// seals the current one with the end-of-segment marker (after the new file exists, so a
    /// reader that sees the marker finds the file), and keeps the old mapping until its bytes
    /// are flushed.
    fn roll_over(&mut self, seq: u64) -> Result<()> {
        let size = self.options.segment_size_bytes;
        // A spare being made is waited for: a second file made beside it could only meet
        // the same disk.
        self.spare.poll(true);
        let fresh = match self.spare.take_ready() {
            Some(spare) if spare.map.len() as u64 == size => self.install_spare(spare, seq)?,
            _ => {
                let (file, path) = create_segment(&self.journal_dir, seq, size)?;
                // The file is this journal's own segment, guarded by the writer lock; other
                // processes only map it read-only, and segment files are never truncated
                // while mapped.
                let map = MmapRaw::map_raw(&file).map_err(JournalError::io("map", &path))?;
                // Its header is synced already.
                ActiveSegment::empty(map, path, layout::SEGMENT_HEADER_BYTES)
            }
        };
        self.prefaulter
            .populate(&fresh.map, layout::SEGMENT_HEADER_BYTES);
        if let Some(mut old) = self.active.replace(fresh) {
            if !old.sealed && old.write_offset + layout::FRAME_ALIGN_BYTES <= old.frames_end {
                old.publish(old.write_offset, layout::SEGMENT_END_WORD);
                old.write_offset += layout::FRAME_ALIGN_BYTES;
                old.sealed = true;
            }
            self.retire(old)?;
        }
        Ok(())
    }

    /// Makes the spare the segment starting at `seq`: its header is written through the
    /// mapping and it is renamed into place. The header and the directory entry become
    /// durable with the next synced commit (the header is inside its flush range, and it
    /// syncs the directory), before anything in the segment is acknowledged.
    fn install_spare(&mut self, spare: Spare, seq: u64) -> Result<ActiveSegment> {
        let path = free_segment_path(&self.journal_dir, seq)?;
        // Nothing of it is synced: the next flush starts at the header.
        let mut segment = ActiveSegment::empty(spare.map, path, 0);
        let header = layout::SegmentHeader {
            segment_size_bytes: segment.frames_end as u64,
            first_seq: seq,
        }
        .encode();
        segment.bytes_mut(0, header.len()).copy_from_slice(&header);
        fs::rename(&spare.temp_path, &segment.path)
            .map_err(JournalError::io("rename segment", &segment.path))?;
        self.directory_unsynced = true;
        Ok(segment)
    }

    /// Keeps a left segment's mapping for the next synced commit. If an earlier one is still
    /// waiting (two rollovers without a synced commit, as under `Durability::Async`), that one
    /// is flushed on a helper thread: flushing a whole segment here stalled the writer for
    /// 200 ms at each rollover (`ladder bench sequencer --durability async`, p99.9).
    fn retire(&mut self, old: ActiveSegment) -> Result<()> {
        self.reap_background_flushes()?;
        if let Some(previous) = self.retired.take() {
            let background = BackgroundFlush::start(previous);
            self.background_flushes.push(background);
        }
        if old.write_offset > old.synced_offset {
            self.retired = Some(RetiredSegment {
                map: old.map,
                path: old.path,
                synced_offset: old.synced_offset,
                end_offset: old.write_offset,
            });
        }
        Ok(())
    }

    /// Collects the background flushes that have finished; a failed one is fatal, as a failed
    /// commit.
    fn reap_background_flushes(&mut self) -> Result<()> {
        let mut index = 0;
        while index < self.background_flushes.len() {
            if !self.background_flushes[index].is_finished() {
                index += 1;
                continue;
            }
            let flushed = self.background_flushes.swap_remove(index).wait();
            self.poisoned |= flushed.is_err();
            flushed?;
        }
        Ok(())
    }
}

/// Segments before the last that a stopped writer may have left unsynced: the one it left at
/// its last rollover and, under `Durability::Async`, one flushing in the background.
const SEGMENTS_LEFT_UNSYNCED_MAX: usize = 2;

/// Makes durable what a writer that stopped (crashed, or was killed) may have left in the page
/// cache only, before this writer acknowledges anything after it: the segments it left last
/// (the last one is synced when it is opened for appending) and the directory entries of
/// segments it renamed into place. Otherwise a power loss after new acknowledgements could
/// take older records, or a segment's name, from under them.
fn sync_left_behind(walked: &[ScannedSegment], journal_dir: &Path) -> Result<()> {
    let before_last = walked.len().saturating_sub(1);
    let from = before_last.saturating_sub(SEGMENTS_LEFT_UNSYNCED_MAX);
    for segment in &walked[from..before_last] {
        let path = &segment.entry.path;
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|file| file.sync_data())
            .map_err(JournalError::io("sync", path))?;
    }
    sync_dir(journal_dir)
}

/// Whether a file of `len` bytes has a disk block for each of them (it is not sparse).
#[cfg(unix)]
fn fully_allocated(file: &fs::File, len: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.metadata()
        .is_ok_and(|meta| meta.blocks().saturating_mul(512) >= len)
}

#[cfg(not(unix))]
fn fully_allocated(_file: &fs::File, _len: u64) -> bool {
    true
}

impl ActiveSegment {
    /// A segment with no frames yet, mapped as `map`, whose bytes before `synced_offset` are
    /// on stable storage.
    fn empty(map: MmapRaw, path: PathBuf, synced_offset: usize) -> Self {
        ActiveSegment {
            frames_end: map.len(),
            map: Arc::new(map),
            path,
            write_offset: layout::SEGMENT_HEADER_BYTES,
            synced_offset,
            sealed: false,
            released: Released::default(),
        }
    }

    /// Maps the last segment of a recovered journal for appending. Its recovered bytes are
    /// synced first, so a later synced commit covers everything the journal holds.
    fn open(segment: &ScannedSegment) -> Result<Self> {
        let path = &segment.entry.path;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(JournalError::io("open segment", path))?;
        let len = file
            .metadata()
            .map_err(JournalError::io("stat", path))?
            .len();
        // Allocated from the end of what it holds (a segment written before segments were
        // allocated, or cut short, is sparse or short there): the appends must never meet a
        // full disk through the mapping. On a full disk this fails, and opening with it.
        let data_end = segment.data_end as u64;
        let to_allocate = segment.segment_size_bytes.saturating_sub(data_end);
        if len < segment.segment_size_bytes || !fully_allocated(&file, len) {
            crate::space::allocate(&file, data_end, to_allocate, path)?;
        }
        file.sync_data().map_err(JournalError::io("sync", path))?;
        let map = MmapRaw::map_raw(&file).map_err(JournalError::io("map", path))?;
        let frames_end = segment.segment_size_bytes as usize;
        assert!(segment.data_end <= frames_end && frames_end <= map.len());
        Ok(ActiveSegment {
            map: Arc::new(map),
            path: path.clone(),
            frames_end,
            write_offset: segment.data_end,
            synced_offset: segment.data_end,
            sealed: segment.sealed,
            released: Released::default(),
        })
    }

    /// The bytes `offset..offset + len` of the segment, to write a frame into.
    fn bytes_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.map.len(), "a frame inside the segment");
        // SAFETY: the range is inside the mapping (asserted), which lives as long as `self`;
        // only this writer writes the mapping, and `&mut self` means no other slice of it is
        // live here. Flush tickets only msync it; readers use their own mappings.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(offset), len) }
    }

    /// Publishes a frame: one release store of its frame word, after every other byte of the
    /// frame is written, so a reader that loads a non-zero word sees the whole frame.
    fn publish(&mut self, offset: usize, word: u64) {
        assert!(offset.is_multiple_of(layout::FRAME_ALIGN_BYTES) && offset + 8 <= self.map.len());
        // SAFETY: the mapping is page-aligned and `offset` is a multiple of 8 inside it
        // (asserted), so the pointer is valid and aligned for an AtomicU64; `&mut self` means
        // no other access through this mapping is live. Readers use other mappings and only
        // load the word atomically.
        let slot = unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(offset).cast::<u64>()) };
        slot.store(word, Ordering::Release);
    }
}

/// What a [`Journal::begin_commit`] left to do: byte ranges of segments to msync.
#[derive(Debug)]
pub struct FlushTicket {
    ranges: Vec<FlushRange>,
    /// Flushes of older segments already running on helper threads.
    background: Vec<BackgroundFlush>,
    /// The journal directory, when a segment was renamed into it since the last synced
    /// commit: synced after the ranges.
    directory: Option<PathBuf>,
}

/// One segment's unflushed bytes; holding the mapping keeps it alive until flushed.
#[derive(Debug)]
struct FlushRange {
    map: Arc<MmapRaw>,
    path: PathBuf,
    from: usize,
    to: usize,
}

impl FlushTicket {
    /// One ticket for several taken in order: the ranges of one segment become one range,
    /// so completing it costs one msync per segment.
    pub fn merge(tickets: impl IntoIterator<Item = FlushTicket>) -> Option<FlushTicket> {
        let mut ranges: Vec<FlushRange> = Vec::with_capacity(2);
        let mut background = Vec::new();
        let mut directory = None;
        for ticket in tickets {
            background.extend(ticket.background);
            directory = directory.or(ticket.directory);
            for range in ticket.ranges {
                match ranges.iter_mut().find(|r| Arc::ptr_eq(&r.map, &range.map)) {
                    Some(same) => {
                        same.from = same.from.min(range.from);
                        same.to = same.to.max(range.to);
                    }
                    None => ranges.push(range),
                }
            }
        }
        let ticket = FlushTicket {
            ranges,
            background,
            directory,
        };
        (!ticket.is_empty()).then_some(ticket)
    }

    /// Makes the records appended before the ticket was taken durable (msync of their byte
    /// ranges). Blocks for the disk.
    pub fn complete(self) -> Result<()> {
        for background in self.background {
            background.wait()?;
        }
        for range in &self.ranges {
            flush(&range.map, &range.path, range.from, range.to)?;
        }
        if let Some(directory) = &self.directory {
            sync_dir(directory)?;
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.ranges.is_empty() && self.background.is_empty() && self.directory.is_none()
    }
}

/// A left segment being flushed on its own helper thread.
#[derive(Debug)]
struct BackgroundFlush {
    path: PathBuf,
    state: FlushState,
}

/// Where a background flush is.
#[derive(Debug)]
enum FlushState {
    /// Running on this thread.
    Running(JoinHandle<Result<()>>),
    /// Done (on the writer's thread, when no helper could be made).
    Done(Result<()>),
}

impl BackgroundFlush {
    /// Starts flushing `segment`'s unsynced bytes on a new thread (or here, if no thread can
    /// be made).
    fn start(segment: RetiredSegment) -> BackgroundFlush {
        let path = segment.path.clone();
        let on_helper = segment.clone();
        let spawned = std::thread::Builder::new()
            .name("journal-flush".into())
            .spawn(move || on_helper.flush());
        let state = match spawned {
            Ok(thread) => FlushState::Running(thread),
            Err(error) => {
                tracing::warn!(%error, "no journal flush thread; flushing on the writer");
                FlushState::Done(segment.flush())
            }
        };
        BackgroundFlush { path, state }
    }

    fn is_finished(&self) -> bool {
        match &self.state {
            FlushState::Running(thread) => thread.is_finished(),
            FlushState::Done(_) => true,
        }
    }

    /// Waits for the flush; a helper that panicked counts as a failed flush.
    fn wait(self) -> Result<()> {
        match self.state {
            FlushState::Done(outcome) => outcome,
            FlushState::Running(thread) => thread.join().unwrap_or_else(|_| {
                Err(JournalError::FlushFailed {
                    path: self.path,
                    source: std::io::Error::other("the flush thread panicked"),
                })
            }),
        }
    }
}

impl RetiredSegment {
    /// Flushes the bytes not yet synced.
    fn flush(&self) -> Result<()> {
        flush(&self.map, &self.path, self.synced_offset, self.end_offset)
    }
}

/// Flushes `from..to` of a mapped segment to stable storage.
fn flush(map: &MmapRaw, path: &Path, from: usize, to: usize) -> Result<()> {
    if to <= from {
        return Ok(());
    }
    map.flush_range(from, to - from)
        .map_err(|source| JournalError::FlushFailed {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_after_a_spare_rollover_flushes_its_header_and_syncs_the_directory() {
        let dir = std::env::temp_dir().join(format!("ladder-writer-spare-{}", std::process::id()));
        let options = JournalOptions {
            segment_size_bytes: 4096,
        };
        let (mut journal, _) = Journal::open(&dir, options).unwrap();
        let payload = [7u8; 200];
        let mut seq = 1;
        journal.append(seq, 1, 1, &payload).unwrap();
        // Past half of the first segment: the spare is being made; wait for it.
        while !journal.spare.is_started() {
            seq += 1;
            journal.append(seq, 1, 1, &payload).unwrap();
        }
        let first = journal.active.as_ref().unwrap().path.clone();
        while !journal.spare.is_ready() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        journal.commit(Durability::Sync).unwrap();
        while journal.active.as_ref().unwrap().path == first {
            seq += 1;
            journal.append(seq, 1, 1, &payload).unwrap();
        }
        assert!(!dir
            .join("journal")
            .join(crate::spare::SPARE_FILE_NAME)
            .exists());
        let ticket = journal.begin_commit().unwrap().expect("records to flush");
        let second = &journal.active.as_ref().unwrap().path;
        let new_range = ticket
            .ranges
            .iter()
            .find(|range| &range.path == second)
            .expect("the new segment's range");
        assert_eq!(new_range.from, 0, "from the header on");
        assert_eq!(
            ticket.directory.as_deref(),
            Some(dir.join("journal").as_path())
        );
        ticket.complete().unwrap();
        let next = journal.begin_commit().unwrap();
        assert!(next.is_none(), "the directory is synced once");
        drop(journal);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
