//! A record as readers see it.

/// A record borrowed from a mapped segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Sequence number (continuous, starting at the journal's first sequence).
    pub seq: u64,
    /// Nanoseconds since the Unix epoch, as stamped by the sequencer.
    pub timestamp_ns: u64,
    /// Caller-defined record type.
    pub record_type: u16,
    /// The payload bytes, checksum-verified.
    pub payload: &'a [u8],
}

impl RecordRef<'_> {
    /// CRC32C of the payload (to compare records across journals without their bytes).
    pub fn payload_crc32c(&self) -> u32 {
        crc32c::crc32c(self.payload)
    }

    /// Copies the record out of the mapping.
    pub fn to_record(&self) -> Record {
        Record {
            seq: self.seq,
            timestamp_ns: self.timestamp_ns,
            record_type: self.record_type,
            payload: self.payload.to_vec(),
        }
    }
}

/// A record with its own copy of the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Sequence number.
    pub seq: u64,
    /// Nanoseconds since the Unix epoch, as stamped by the sequencer.
    pub timestamp_ns: u64,
    /// Caller-defined record type.
    pub record_type: u16,
    /// The payload bytes.
    pub payload: Vec<u8>,
}
