//! The on-disk format, byte for byte: the segment header and the record frame.
//!
//! All integers are little-endian. Every frame starts on an 8-byte boundary so that its first
//! eight bytes (payload length and checksum, the *frame word*) can be published with one
//! aligned atomic store; see `journal/README.md` for the full description.

use crate::error::Fault;

/// Magic bytes at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"LADDRJNL";
/// Version of the segment and frame format written by this crate.
pub const FORMAT_VERSION: u32 = 1;
/// Size of the segment header; the first frame starts right after it.
pub const SEGMENT_HEADER_BYTES: usize = 64;
/// Size of a frame header: length, checksum, sequence, timestamp, record type, reserved.
pub const FRAME_HEADER_BYTES: usize = 32;
/// Alignment of every frame (and of the frame word published atomically).
pub const FRAME_ALIGN_BYTES: usize = 8;
/// Largest payload a record may carry.
pub const RECORD_PAYLOAD_MAX_BYTES: usize = 1 << 20;
/// Smallest segment size accepted by [`crate::JournalOptions`].
pub const SEGMENT_SIZE_MIN_BYTES: u64 = 4 << 10;
/// Largest segment size accepted by [`crate::JournalOptions`].
pub const SEGMENT_SIZE_MAX_BYTES: u64 = 1 << 30;
/// Segment sizes must be a multiple of this (the page size), so flushes stay page-aligned.
pub const SEGMENT_SIZE_ALIGN_BYTES: u64 = 4 << 10;
/// Default segment size.
pub const SEGMENT_SIZE_DEFAULT_BYTES: u64 = 64 << 20;
/// Frame word (length `u32::MAX`, checksum `u32::MAX`) that marks the end of a segment whose
/// writer has moved on to the next segment. No record can have this length.
pub const SEGMENT_END_WORD: u64 = u64::MAX;
/// Checksum stored in place of a computed CRC32C of zero, so that every record's frame word is
/// non-zero (a zero word marks the end of written data).
pub const CHECKSUM_ZERO_SUBSTITUTE: u32 = u32::MAX;

/// Byte offset of the sequence number inside a frame.
pub const FRAME_SEQ_OFFSET: usize = 8;
/// Byte offset of the timestamp inside a frame.
pub const FRAME_TIMESTAMP_OFFSET: usize = 16;
/// Byte offset of the record type inside a frame.
pub const FRAME_TYPE_OFFSET: usize = 24;
/// Byte offset where the checksummed body starts (everything after the checksum field).
pub const FRAME_BODY_OFFSET: usize = 8;

const HEADER_VERSION_OFFSET: usize = 8;
const HEADER_LEN_OFFSET: usize = 12;
const HEADER_SIZE_OFFSET: usize = 16;
const HEADER_FIRST_SEQ_OFFSET: usize = 24;
const HEADER_CHECKSUM_OFFSET: usize = 32;

/// The fixed header at the start of every segment file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Size of the preallocated segment file, header included.
    pub segment_size_bytes: u64,
    /// Sequence number of the first record in the segment (also the file name).
    pub first_seq: u64,
}

impl SegmentHeader {
    /// Encodes the header; the bytes after the header checksum are zero.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        let mut bytes = [0u8; SEGMENT_HEADER_BYTES];
        bytes[..8].copy_from_slice(&SEGMENT_MAGIC);
        put_u32(&mut bytes, HEADER_VERSION_OFFSET, FORMAT_VERSION);
        put_u32(&mut bytes, HEADER_LEN_OFFSET, SEGMENT_HEADER_BYTES as u32);
        put_u64(&mut bytes, HEADER_SIZE_OFFSET, self.segment_size_bytes);
        put_u64(&mut bytes, HEADER_FIRST_SEQ_OFFSET, self.first_seq);
        let checksum = crc32c::crc32c(&bytes[..HEADER_CHECKSUM_OFFSET]);
        put_u32(&mut bytes, HEADER_CHECKSUM_OFFSET, checksum);
        bytes
    }

    /// Decodes and checks a header read from disk.
    pub fn decode(bytes: &[u8]) -> Result<Self, Fault> {
        if bytes.len() < SEGMENT_HEADER_BYTES {
            return Err(Fault::HeaderTooShort {
                file_len_bytes: bytes.len() as u64,
            });
        }
        if bytes[..8] != SEGMENT_MAGIC {
            return Err(Fault::BadMagic);
        }
        let stored = get_u32(bytes, HEADER_CHECKSUM_OFFSET);
        let computed = crc32c::crc32c(&bytes[..HEADER_CHECKSUM_OFFSET]);
        if stored != computed {
            return Err(Fault::HeaderChecksumMismatch { stored, computed });
        }
        let version = get_u32(bytes, HEADER_VERSION_OFFSET);
        if version != FORMAT_VERSION {
            return Err(Fault::UnsupportedVersion { version });
        }
        let header_len = get_u32(bytes, HEADER_LEN_OFFSET);
        if header_len as usize != SEGMENT_HEADER_BYTES {
            return Err(Fault::BadHeaderLength { header_len });
        }
        let header = SegmentHeader {
            segment_size_bytes: get_u64(bytes, HEADER_SIZE_OFFSET),
            first_seq: get_u64(bytes, HEADER_FIRST_SEQ_OFFSET),
        };
        if !segment_size_is_valid(header.segment_size_bytes) {
            return Err(Fault::BadSegmentSize {
                segment_size_bytes: header.segment_size_bytes,
            });
        }
        if header.first_seq == 0 {
            return Err(Fault::ZeroFirstSeq);
        }
        Ok(header)
    }
}

/// True when `size` is within the limits and aligned as segment sizes must be.
pub fn segment_size_is_valid(size: u64) -> bool {
    (SEGMENT_SIZE_MIN_BYTES..=SEGMENT_SIZE_MAX_BYTES).contains(&size)
        && size.is_multiple_of(SEGMENT_SIZE_ALIGN_BYTES)
}

/// Rounds `offset` up to the frame alignment.
pub const fn align_up(offset: usize) -> usize {
    (offset + FRAME_ALIGN_BYTES - 1) & !(FRAME_ALIGN_BYTES - 1)
}

/// Rounds `offset` down to the frame alignment.
pub const fn align_down(offset: usize) -> usize {
    offset & !(FRAME_ALIGN_BYTES - 1)
}

/// Bytes a frame with `payload_len` payload bytes occupies, padding included.
pub const fn frame_len_bytes(payload_len: usize) -> usize {
    align_up(FRAME_HEADER_BYTES + payload_len)
}

/// Largest payload a segment of `segment_size_bytes` can hold in one record.
pub fn payload_max_for_segment(segment_size_bytes: u64) -> usize {
    let room =
        (segment_size_bytes as usize).saturating_sub(SEGMENT_HEADER_BYTES + FRAME_HEADER_BYTES);
    align_down(room).min(RECORD_PAYLOAD_MAX_BYTES)
}

/// The stored checksum of a frame body (sequence, timestamp, type, reserved bytes, payload):
/// CRC32C, with a result of zero stored as [`CHECKSUM_ZERO_SUBSTITUTE`].
pub fn frame_checksum(body: &[u8]) -> u32 {
    match crc32c::crc32c(body) {
        0 => CHECKSUM_ZERO_SUBSTITUTE,
        checksum => checksum,
    }
}

/// The frame word as a native `u64` whose in-memory bytes are the little-endian payload
/// length followed by the little-endian checksum, ready for one atomic store.
pub fn frame_word(payload_len: u32, checksum: u32) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&payload_len.to_le_bytes());
    bytes[4..].copy_from_slice(&checksum.to_le_bytes());
    u64::from_ne_bytes(bytes)
}

/// Splits a frame word loaded as a native `u64` into (payload length, checksum).
pub fn split_frame_word(word: u64) -> (u32, u32) {
    let bytes = word.to_ne_bytes();
    (get_u32(&bytes, 0), get_u32(&bytes, 4))
}

/// The fixed fields of a frame, as decoded from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameFields {
    /// Sequence number.
    pub seq: u64,
    /// Nanoseconds since the Unix epoch, as stamped by the sequencer.
    pub timestamp_ns: u64,
    /// Caller-defined record type.
    pub record_type: u16,
}

impl FrameFields {
    /// Writes the fields into a frame header (`frame` starts at the frame word).
    pub fn encode_into(&self, frame: &mut [u8]) {
        put_u64(frame, FRAME_SEQ_OFFSET, self.seq);
        put_u64(frame, FRAME_TIMESTAMP_OFFSET, self.timestamp_ns);
        frame[FRAME_TYPE_OFFSET..FRAME_TYPE_OFFSET + 2]
            .copy_from_slice(&self.record_type.to_le_bytes());
    }

    /// Reads the fields from a frame body (`body` starts at [`FRAME_BODY_OFFSET`]).
    pub fn decode_body(body: &[u8]) -> Self {
        let seq_at = FRAME_SEQ_OFFSET - FRAME_BODY_OFFSET;
        let timestamp_at = FRAME_TIMESTAMP_OFFSET - FRAME_BODY_OFFSET;
        let type_at = FRAME_TYPE_OFFSET - FRAME_BODY_OFFSET;
        FrameFields {
            seq: get_u64(body, seq_at),
            timestamp_ns: get_u64(body, timestamp_at),
            record_type: u16::from_le_bytes([body[type_at], body[type_at + 1]]),
        }
    }
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn get_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_header_round_trips() {
        let header = SegmentHeader {
            segment_size_bytes: 8192,
            first_seq: 42,
        };
        assert_eq!(SegmentHeader::decode(&header.encode()), Ok(header));
    }

    #[test]
    fn segment_header_with_flipped_bit_is_rejected() {
        let mut bytes = SegmentHeader {
            segment_size_bytes: 8192,
            first_seq: 42,
        }
        .encode();
        bytes[HEADER_FIRST_SEQ_OFFSET] ^= 1;
        assert!(matches!(
            SegmentHeader::decode(&bytes),
            Err(Fault::HeaderChecksumMismatch { .. })
        ));
    }

    #[test]
    fn frame_word_bytes_are_length_then_checksum_little_endian() {
        let word = frame_word(0x0102_0304, 0x0a0b_0c0d);
        assert_eq!(
            word.to_ne_bytes(),
            [0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b, 0x0a]
        );
        assert_eq!(split_frame_word(word), (0x0102_0304, 0x0a0b_0c0d));
    }

    #[test]
    fn frames_are_padded_to_eight_bytes() {
        assert_eq!(frame_len_bytes(0), 32);
        assert_eq!(frame_len_bytes(1), 40);
        assert_eq!(frame_len_bytes(8), 40);
        assert_eq!(frame_len_bytes(9), 48);
    }

    #[test]
    fn checksum_is_never_zero() {
        // Any body whose CRC32C is zero is stored with the substitute; an arbitrary body keeps
        // its CRC.
        assert_eq!(frame_checksum(b"ladder"), crc32c::crc32c(b"ladder"));
        assert_ne!(frame_checksum(&[]), 0);
    }

    #[test]
    fn four_kib_segment_holds_payloads_up_to_four_kib_minus_headers() {
        assert_eq!(payload_max_for_segment(4096), 4096 - 64 - 32);
        assert_eq!(
            payload_max_for_segment(SEGMENT_SIZE_DEFAULT_BYTES),
            RECORD_PAYLOAD_MAX_BYTES
        );
    }
}
