//! Readers: iterate records from any sequence, and follow a live journal (another thread or
//! process appending) across segment rollovers.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Fault, JournalError, Result};
use crate::frame::{check_frame, FrameCheck, FrameInfo};
use crate::layout;
use crate::record::{Record, RecordRef};
use crate::release::Released;
use crate::scan::{count_valid_frames_after, record_at};
use crate::segment::{journal_dir, list_segments, segment_file_name, SegmentMap};

/// Reads records in sequence order, checking every checksum and the sequence continuity.
///
/// `poll` returns `None` at the current end of written data and can be called again later to
/// see records appended since, following the writer into new segments. Files are mapped
/// read-only; the journal may be written concurrently. When the reader sits at the end of a
/// sealed or full segment, each `poll` looks for the next segment file (one `stat`), so a
/// tight polling loop should back off while nothing arrives. At the end of written data inside
/// a segment, where the writer goes on writing (unless it stopped between making the next file
/// and sealing this one), it looks at most every [`UNSEALED_END_LOOK_EVERY`].
#[derive(Debug)]
pub struct JournalReader {
    data_dir: PathBuf,
    journal_dir: PathBuf,
    segment: Option<OpenSegment>,
    offset: usize,
    /// The sequence the next record must carry (`None` before the first segment is found).
    next_seq: Option<u64>,
    /// Records before this sequence are passed over (set by `seek`).
    skip_before_seq: u64,
    /// A bad frame with nothing valid after it: a torn tail, until its frame word changes.
    torn: Option<TornMark>,
    /// When the reader last looked for a next segment from the end of written data inside a
    /// segment.
    unsealed_end_looked: Option<Instant>,
}

/// How often a reader at the end of written data inside a segment looks for a next segment
/// file. Such a file exists only if a writer stopped between making it and sealing the one
/// before, so the look is rare and late is fine; looking at every poll cost a follower polling
/// every few milliseconds a `stat` each time (13 % of the historian's samples at 3,000/s).
pub const UNSEALED_END_LOOK_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct OpenSegment {
    map: SegmentMap,
    first_seq: u64,
    frames_end: usize,
    /// Pages far behind the read position, let go of the mapping.
    released: Released,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TornMark {
    first_seq: u64,
    offset: usize,
    word: u64,
}

impl JournalReader {
    /// Opens a reader of the journal in `<data_dir>/journal`, positioned at its first record.
    /// A journal with no segment yet is fine: `poll` waits for the first one.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self> {
        let data_dir = data_dir.as_ref().to_path_buf();
        let mut reader = JournalReader {
            journal_dir: journal_dir(&data_dir),
            data_dir,
            segment: None,
            offset: layout::SEGMENT_HEADER_BYTES,
            next_seq: None,
            skip_before_seq: 0,
            torn: None,
            unsealed_end_looked: None,
        };
        if let Some(first) = list_segments(&reader.journal_dir)?.first() {
            reader.enter_segment(&first.path, first.first_seq)?;
        }
        Ok(reader)
    }

    /// Positions the reader so that the next record returned is `seq` (or the first one after
    /// it, once written). Fails if the journal starts after `seq`.
    pub fn seek(&mut self, seq: u64) -> Result<()> {
        let files = list_segments(&self.journal_dir)?;
        self.torn = None;
        self.skip_before_seq = seq;
        let Some(first) = files.first() else {
            self.segment = None;
            self.next_seq = None;
            return Ok(());
        };
        if seq < first.first_seq {
            return Err(JournalError::SeqNotInJournal {
                requested: seq,
                first_seq: first.first_seq,
            });
        }
        let holder = &files[files.partition_point(|entry| entry.first_seq <= seq) - 1];
        self.segment = None;
        self.next_seq = None;
        // A holder that is a torn end leaves the reader before the first segment: it reads
        // up to the torn end, skipping what comes before `seq`.
        self.enter_segment(&holder.path, holder.first_seq)?;
        Ok(())
    }

    /// The next record, or `None` at the current end of written data (call again later to see
    /// newer records). A torn tail also reads as the end; damage followed by valid records is
    /// `JournalError::Corrupt`.
    pub fn poll(&mut self) -> Result<Option<RecordRef<'_>>> {
        match (self.advance()?, &self.segment) {
            (Some(frame), Some(segment)) => Ok(Some(record_at(&segment.map, &frame))),
            _ => Ok(None),
        }
    }

    /// The sequence the next record will carry, once known.
    pub fn next_seq(&self) -> Option<u64> {
        self.next_seq
    }

    /// True when the reader stopped at a torn tail (a bad frame with nothing valid after it).
    pub fn at_torn_tail(&self) -> bool {
        self.torn.is_some()
    }

    /// Finds the next valid frame, moving across segments; `None` at the end of written data.
    fn advance(&mut self) -> Result<Option<FrameInfo>> {
        // Each pass either returns, moves to a later segment, or moves past a frame.
        loop {
            let Some(segment) = &self.segment else {
                if self.enter_next_segment(false)? {
                    continue;
                }
                return Ok(None);
            };
            if self.offset + layout::FRAME_ALIGN_BYTES > segment.frames_end {
                if self.enter_next_segment(true)? {
                    continue;
                }
                return Ok(None);
            }
            if self.torn == Some(self.torn_mark(segment)) {
                return Ok(None);
            }
            let frame = match check_frame(&segment.map, self.offset, segment.frames_end) {
                FrameCheck::Valid(frame) => frame,
                FrameCheck::End => {
                    if self.may_look_past_unsealed_end() && self.enter_next_segment(false)? {
                        continue;
                    }
                    return Ok(None);
                }
                FrameCheck::SegmentEnd => {
                    if self.enter_next_segment(true)? {
                        continue;
                    }
                    return Ok(None);
                }
                FrameCheck::Bad(reason) => {
                    self.on_bad_frame(reason)?;
                    return Ok(None);
                }
            };
            let expected = self.next_seq.unwrap_or(segment.first_seq);
            if frame.fields.seq != expected {
                let reason = Fault::SequenceGap {
                    expected,
                    found: frame.fields.seq,
                };
                return Err(self.corrupt(reason));
            }
            self.offset = frame.next_offset;
            self.next_seq = Some(expected + 1);
            self.torn = None;
            if let Some(segment) = self.segment.as_mut() {
                segment
                    .map
                    .release_behind(&mut segment.released, self.offset);
            }
            if frame.fields.seq >= self.skip_before_seq {
                return Ok(Some(frame));
            }
        }
    }

    fn torn_mark(&self, segment: &OpenSegment) -> TornMark {
        TornMark {
            first_seq: segment.first_seq,
            offset: self.offset,
            word: segment.map.load_word(self.offset),
        }
    }

    /// Moves to the segment that starts at the next sequence, if its file exists.
    /// Whether to look for a next segment from the end of written data inside a segment:
    /// once per [`UNSEALED_END_LOOK_EVERY`].
    fn may_look_past_unsealed_end(&mut self) -> bool {
        let now = Instant::now();
        let due = self
            .unsealed_end_looked
            .is_none_or(|looked| now.duration_since(looked) >= UNSEALED_END_LOOK_EVERY);
        if due {
            self.unsealed_end_looked = Some(now);
        }
        due
    }

    /// Moves into the segment after the current one, if it exists. `read_whole`: the current
    /// one was read to its end (full, or sealed by the writer, which makes the next file
    /// first), so a later segment without the next one is a gap; at an unsealed end the
    /// writer may be rolling over at this moment, and a torn header after a power loss looks
    /// the same, so there it is only the end of the data.
    fn enter_next_segment(&mut self, read_whole: bool) -> Result<bool> {
        let Some(next_seq) = self.next_seq else {
            let files = list_segments(&self.journal_dir)?;
            let Some(first) = files.first() else {
                return Ok(false);
            };
            return self.enter_segment(&first.path, first.first_seq);
        };
        if self
            .segment
            .as_ref()
            .is_some_and(|segment| segment.first_seq == next_seq)
        {
            // Still inside an empty segment: nothing newer can exist yet.
            return Ok(false);
        }
        let path = self.journal_dir.join(segment_file_name(next_seq));
        let exists = path
            .try_exists()
            .map_err(JournalError::io("check", &path))?;
        if !exists {
            // The writer names each segment after the record that follows the last one, so
            // a later segment without this one means records are missing, not the end.
            if read_whole {
                let files = list_segments(&self.journal_dir)?;
                if let Some(later) = files.iter().find(|entry| entry.first_seq > next_seq) {
                    return Err(self.corrupt(Fault::SequenceGap {
                        expected: next_seq,
                        found: later.first_seq,
                    }));
                }
            }
            return Ok(false);
        }
        self.enter_segment(&path, next_seq)
    }

    /// Moves into the segment file at `path`, which should start at `first_seq`. A bad header
    /// with no valid frame after it (the header of a segment renamed into place never reached
    /// the disk before a power loss) is the end of the data, as recovery sees it: `false`, and
    /// the reader stays where it was. A bad header followed by records is corruption.
    fn enter_segment(&mut self, path: &Path, first_seq: u64) -> Result<bool> {
        let map = SegmentMap::open(path)?;
        let header = map.header().and_then(|(header, frames_end)| {
            if header.first_seq == first_seq {
                Ok(frames_end)
            } else {
                Err(Fault::FirstSeqMismatch {
                    name_seq: first_seq,
                    header_seq: header.first_seq,
                })
            }
        });
        let frames_end = match header {
            Ok(frames_end) => frames_end,
            Err(Fault::UnsupportedVersion { version }) => {
                return Err(JournalError::UnsupportedVersion {
                    segment: path.to_path_buf(),
                    version,
                });
            }
            Err(reason) => {
                let files = list_segments(&self.journal_dir)?;
                let later = &files[files.partition_point(|entry| entry.first_seq <= first_seq)..];
                if count_valid_frames_after(&map, layout::SEGMENT_HEADER_BYTES, later)? == 0 {
                    return Ok(false);
                }
                return Err(JournalError::Corrupt {
                    data_dir: self.data_dir.clone(),
                    segment: path.to_path_buf(),
                    offset: 0,
                    reason,
                });
            }
        };
        self.segment = Some(OpenSegment {
            map,
            first_seq,
            frames_end,
            released: Released::default(),
        });
        self.offset = layout::SEGMENT_HEADER_BYTES;
        self.next_seq = Some(first_seq);
        self.torn = None;
        Ok(true)
    }

    /// A bad frame is a torn tail (remembered, read as the end) if no valid frame follows it
    /// in this or a later segment, and corruption otherwise.
    fn on_bad_frame(&mut self, reason: Fault) -> Result<()> {
        let Some(segment) = &self.segment else {
            return Ok(());
        };
        let files = list_segments(&self.journal_dir)?;
        let later = &files[files.partition_point(|entry| entry.first_seq <= segment.first_seq)..];
        let search_from = self.offset + layout::FRAME_ALIGN_BYTES;
        if count_valid_frames_after(&segment.map, search_from, later)? > 0 {
            return Err(self.corrupt(reason));
        }
        self.torn = Some(self.torn_mark(segment));
        Ok(())
    }

    fn corrupt(&self, reason: Fault) -> JournalError {
        JournalError::Corrupt {
            data_dir: self.data_dir.clone(),
            segment: self
                .segment
                .as_ref()
                .map(|segment| segment.map.path().to_path_buf())
                .unwrap_or_default(),
            offset: self.offset as u64,
            reason,
        }
    }
}

impl Iterator for JournalReader {
    type Item = Result<Record>;

    /// The next record, copied out; `None` at the current end of written data (a later call may
    /// return newer records).
    fn next(&mut self) -> Option<Self::Item> {
        self.poll()
            .map(|record| record.map(|record| record.to_record()))
            .transpose()
    }
}
