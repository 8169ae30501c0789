//! Decoding and checking one frame of a mapped segment.

use crate::error::Fault;
use crate::layout::{self, FrameFields};
use crate::segment::SegmentMap;

/// A frame that checked out: its fields and where its payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameInfo {
    /// Offset of the frame in its segment.
    pub offset: usize,
    /// Sequence, timestamp and record type.
    pub fields: FrameFields,
    /// Payload length.
    pub payload_len: usize,
    /// Offset of the next frame.
    pub next_offset: usize,
    /// The padding after the payload is not zero. It carries no data and is outside the
    /// checksum, so the frame stays valid; `verify` counts such frames as a sign of bad media.
    pub padding_nonzero: bool,
}

impl FrameInfo {
    /// Offset of the first payload byte.
    pub fn payload_offset(&self) -> usize {
        self.offset + layout::FRAME_HEADER_BYTES
    }
}

/// What lies at a frame position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FrameCheck {
    /// A zero frame word: the end of written data (for now, in a live segment).
    End,
    /// The end-of-segment marker: the writer moved on to the next segment.
    SegmentEnd,
    /// A complete record with a good checksum.
    Valid(FrameInfo),
    /// Something that is not a valid frame.
    Bad(Fault),
}

/// Checks the frame at `offset` of `segment`, whose frames must end by `frames_end`. The frame
/// word is loaded once, with acquire ordering, so a concurrently published frame is either
/// seen whole or not at all.
pub(crate) fn check_frame(segment: &SegmentMap, offset: usize, frames_end: usize) -> FrameCheck {
    debug_assert!(offset.is_multiple_of(layout::FRAME_ALIGN_BYTES));
    debug_assert!(offset + 8 <= frames_end && frames_end <= segment.len());
    let word = segment.load_word(offset);
    if word == 0 {
        return FrameCheck::End;
    }
    if word == layout::SEGMENT_END_WORD {
        return FrameCheck::SegmentEnd;
    }
    let (payload_len, stored) = layout::split_frame_word(word);
    if payload_len as usize > layout::RECORD_PAYLOAD_MAX_BYTES {
        return FrameCheck::Bad(Fault::LengthTooLarge {
            payload_len,
            payload_max: layout::RECORD_PAYLOAD_MAX_BYTES,
        });
    }
    let frame_end = offset + layout::FRAME_HEADER_BYTES + payload_len as usize;
    if frame_end > frames_end {
        return FrameCheck::Bad(Fault::FrameBeyondSegmentEnd {
            frame_end: frame_end as u64,
            segment_end: frames_end as u64,
        });
    }
    let body = segment.bytes(offset + layout::FRAME_BODY_OFFSET..frame_end);
    let computed = layout::frame_checksum(body);
    if computed != stored {
        return FrameCheck::Bad(Fault::ChecksumMismatch { stored, computed });
    }
    let next_offset = layout::align_up(frame_end);
    let padding = segment.bytes(frame_end..next_offset.min(frames_end));
    FrameCheck::Valid(FrameInfo {
        offset,
        fields: FrameFields::decode_body(body),
        payload_len: payload_len as usize,
        next_offset,
        padding_nonzero: padding.iter().any(|&byte| byte != 0),
    })
}
