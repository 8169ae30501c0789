//! `verify`: check every frame, checksum and sequence of a journal without changing it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Result;
use crate::layout;
use crate::recovery::{describe_torn_tail, TornTail};
use crate::scan::scan;

/// Totals of a journal that checked out (a torn tail included: it is recoverable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Segment files.
    pub segments: usize,
    /// Valid records.
    pub records: u64,
    /// Payload bytes of the valid records.
    pub payload_bytes: u64,
    /// Bytes the valid records' frames occupy (headers and padding included).
    pub frame_bytes: u64,
    /// First sequence held.
    pub first_seq: Option<u64>,
    /// Last sequence held.
    pub last_seq: Option<u64>,
    /// Timestamp of the first record (nanoseconds since the Unix epoch).
    pub first_timestamp_ns: Option<u64>,
    /// Timestamp of the last record.
    pub last_timestamp_ns: Option<u64>,
    /// Records per record type.
    pub records_by_type: BTreeMap<u16, u64>,
    /// Valid records whose padding bytes (outside the checksum, carrying no data) are not
    /// zero: harmless to the records, but a sign of bad media.
    pub records_with_nonzero_padding: u64,
    /// The torn tail after the last good record, which opening the journal would cut away.
    pub torn_tail: Option<TornTail>,
}

/// Checks the journal in `<data_dir>/journal`. A torn tail is reported, not an error; damage
/// before the last good record (a bad frame, a bad segment header, a sequence gap) is
/// `JournalError::Corrupt`, naming the segment, the offset and the repair command.
pub fn verify(data_dir: impl AsRef<Path>) -> Result<VerifyReport> {
    let data_dir = data_dir.as_ref();
    let mut report = VerifyReport::default();
    let scan = scan(data_dir, |record, _| {
        report.records += 1;
        report.payload_bytes += record.payload.len() as u64;
        report.frame_bytes += layout::frame_len_bytes(record.payload.len()) as u64;
        report.first_seq.get_or_insert(record.seq);
        report.last_seq = Some(record.seq);
        report.first_timestamp_ns.get_or_insert(record.timestamp_ns);
        report.last_timestamp_ns = Some(record.timestamp_ns);
        *report
            .records_by_type
            .entry(record.record_type)
            .or_insert(0) += 1;
    })?;
    if let Some(error) = scan.corruption_error() {
        return Err(error);
    }
    report.segments = scan.files.len();
    report.records_with_nonzero_padding = scan.records_with_nonzero_padding;
    if let Some(damage) = &scan.damage {
        report.torn_tail = Some(describe_torn_tail(&scan, damage)?);
    }
    Ok(report)
}
