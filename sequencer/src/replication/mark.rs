//! What identifies a journal record across journals: its sequence, time stamp, type and the
//! checksum of its payload. A standby names the mark of the last record it holds when it
//! connects; the primary compares it with its own record of that sequence, so that a standby
//! whose journal has diverged (records the primary never had, as after a failover or a lost
//! `async` tail) is refused rather than followed into a state no journal explains.

use std::fmt;
use std::path::Path;

use ladder_journal::{JournalReader, RecordRef};

/// The identity of one journal record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMark {
    /// Its sequence number.
    pub seq: u64,
    /// The primary's time stamp of it.
    pub timestamp_ns: u64,
    /// Its record type.
    pub record_type: u16,
    /// CRC32C of its payload.
    pub payload_crc: u32,
}

impl RecordMark {
    /// The mark of a record.
    pub fn of(record: &RecordRef<'_>) -> RecordMark {
        RecordMark {
            seq: record.seq,
            timestamp_ns: record.timestamp_ns,
            record_type: record.record_type,
            payload_crc: record.payload_crc32c(),
        }
    }

    /// The mark of record `seq` of the journal in `data_dir`: `None` when the journal does
    /// not hold it (yet).
    pub fn of_journal(data_dir: &Path, seq: u64) -> Result<Option<RecordMark>, String> {
        let mut reader = JournalReader::open(data_dir).map_err(|e| e.to_string())?;
        Self::read_at(&mut reader, seq)
    }

    /// The mark of record `seq`, read with `reader` (left just after it).
    pub fn read_at(reader: &mut JournalReader, seq: u64) -> Result<Option<RecordMark>, String> {
        reader.seek(seq).map_err(|e| e.to_string())?;
        match reader.poll().map_err(|e| e.to_string())? {
            Some(record) if record.seq == seq => Ok(Some(RecordMark::of(&record))),
            Some(record) => Err(format!("record {seq} expected, {} read", record.seq)),
            None => Ok(None),
        }
    }

    /// Parses the form `Display` writes.
    pub fn parse(text: &str) -> Option<RecordMark> {
        let mut parts = text.split(':');
        let mark = RecordMark {
            seq: parts.next()?.parse().ok()?,
            timestamp_ns: parts.next()?.parse().ok()?,
            record_type: parts.next()?.parse().ok()?,
            payload_crc: u32::from_str_radix(parts.next()?, 16).ok()?,
        };
        parts.next().is_none().then_some(mark)
    }
}

/// `seq:timestamp_ns:type:crc` (the CRC in hex), as the handshake carries it.
impl fmt::Display for RecordMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{:08x}",
            self.seq, self.timestamp_ns, self.record_type, self.payload_crc
        )
    }
}

/// Whether a standby whose last record is `theirs` may follow a primary whose record of that
/// sequence is `ours` (`None`: the primary does not hold it). The error says why not, for the
/// standby's operator.
pub fn check_standby(theirs: &RecordMark, ours: Option<&RecordMark>) -> Result<(), String> {
    const REMEDY: &str = "its journal has diverged from the primary's; \
                          start the standby on an empty data directory";
    match ours {
        Some(ours) if ours == theirs => Ok(()),
        Some(ours) => Err(format!(
            "the standby's record {} ({theirs}) differs from the primary's ({ours}): {REMEDY}",
            theirs.seq
        )),
        None => Err(format!(
            "the standby holds record {}, which the primary does not: {REMEDY}",
            theirs.seq
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(seq: u64, timestamp_ns: u64) -> RecordMark {
        RecordMark {
            seq,
            timestamp_ns,
            record_type: 1,
            payload_crc: 0x00ab_cdef,
        }
    }

    #[test]
    fn a_mark_reads_back_from_its_text_and_nothing_else_parses() {
        let original = mark(42, 1_700_000_000_123_456_789);
        assert_eq!(original.to_string(), "42:1700000000123456789:1:00abcdef");
        assert_eq!(RecordMark::parse(&original.to_string()), Some(original));
        for bad in [
            "",
            "42",
            "42:1:1",
            "42:1:1:zz",
            "42:1:1:00abcdef:9",
            "x:1:1:0",
        ] {
            assert_eq!(RecordMark::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_standby_follows_only_when_its_last_record_is_the_primarys() {
        let theirs = mark(7, 100);
        assert_eq!(check_standby(&theirs, Some(&mark(7, 100))), Ok(()));
        let other_time = check_standby(&theirs, Some(&mark(7, 101))).unwrap_err();
        assert!(other_time.contains("record 7") && other_time.contains("diverged"));
        let other_payload = RecordMark {
            payload_crc: 1,
            ..theirs
        };
        assert!(check_standby(&theirs, Some(&other_payload)).is_err());
        let ahead = check_standby(&theirs, None).unwrap_err();
        assert!(ahead.contains("which the primary does not"), "{ahead}");
    }
}
