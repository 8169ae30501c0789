//! Page cursors and limits (API.md §2.2, API.md §11): a cursor is the base64 of a decimal offset
//! (`MA==` is offset 0), `LTE=` ends the stream, and the empty string asks for the first page.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};

/// The end-of-stream cursor (base64 of `-1`).
pub const END_CURSOR: &str = "LTE=";
/// The cursor of the first page (base64 of `0`).
pub const START_CURSOR: &str = "MA==";
/// Page size when none is asked for.
pub const PAGE_LIMIT_DEFAULT: usize = 100;
/// The largest page size; larger requests are clamped to it.
pub const PAGE_LIMIT_MAX: usize = 500;
/// The longest cursor text accepted (a `u64` offset needs at most 28 base64 characters).
const CURSOR_TEXT_MAX: usize = 32;

/// Standard alphabet, padding optional on decode.
const STANDARD_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Where a page request starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// Start at this offset into the list.
    Offset(u64),
    /// The stream has ended: the page is empty.
    End,
}

/// Why a cursor cannot be read (a 400 naming `next_cursor`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("next_cursor: expected a cursor returned by a previous page")]
pub struct CursorError;

/// The cursor of a page starting at `offset`.
pub fn encode_cursor(offset: u64) -> String {
    STANDARD.encode(offset.to_string())
}

/// Reads a cursor: `""` is offset 0, `LTE=` the end, otherwise base64 of a decimal offset
/// (padding optional).
pub fn decode_cursor(text: &str) -> Result<Cursor, CursorError> {
    if text.is_empty() {
        return Ok(Cursor::Offset(0));
    }
    if text.len() > CURSOR_TEXT_MAX {
        return Err(CursorError);
    }
    // Padding is optional (some clients strip it), for the end marker as for an offset.
    let decoded = STANDARD_LENIENT.decode(text).map_err(|_| CursorError)?;
    let digits = std::str::from_utf8(&decoded).map_err(|_| CursorError)?;
    if digits == "-1" {
        return Ok(Cursor::End);
    }
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(CursorError);
    }
    // An offset too large for a u64 is past the end of any list, as u64::MAX is.
    Ok(Cursor::Offset(digits.parse().unwrap_or(u64::MAX)))
}

/// The `next_cursor` of a page that returned `count` items from `offset` with page size
/// `limit`: `LTE=` on the final page, which is the one smaller than `limit` (API.md §2.2: a
/// full page is mid-stream, even when the list ends with it; the next page is then empty).
pub fn next_cursor(offset: u64, count: usize, limit: usize) -> String {
    if count < limit {
        END_CURSOR.to_string()
    } else {
        encode_cursor(offset.saturating_add(count as u64))
    }
}

/// The page size to use for a requested `limit`: the default when absent or 0, at most
/// [`PAGE_LIMIT_MAX`].
pub fn clamp_limit(requested: Option<u64>) -> usize {
    match requested {
        None | Some(0) => PAGE_LIMIT_DEFAULT,
        Some(limit) => usize::try_from(limit)
            .unwrap_or(PAGE_LIMIT_MAX)
            .min(PAGE_LIMIT_MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_encode_as_base64_decimals() {
        assert_eq!(encode_cursor(0), START_CURSOR);
        assert_eq!(encode_cursor(100), "MTAw");
        assert_eq!(decode_cursor("MTAw"), Ok(Cursor::Offset(100)));
        assert_eq!(decode_cursor(START_CURSOR), Ok(Cursor::Offset(0)));
        assert_eq!(decode_cursor("MA"), Ok(Cursor::Offset(0)));
    }

    #[test]
    fn empty_is_the_first_page_and_lte_the_end() {
        assert_eq!(decode_cursor(""), Ok(Cursor::Offset(0)));
        assert_eq!(decode_cursor(END_CURSOR), Ok(Cursor::End));
        // Without its padding too, as an offset's cursor is read.
        assert_eq!(decode_cursor("LTE"), Ok(Cursor::End));
    }

    #[test]
    fn an_offset_past_u64_is_past_every_list_end() {
        let past = STANDARD.encode("18446744073709551616");
        assert_eq!(decode_cursor(&past), Ok(Cursor::Offset(u64::MAX)));
        let far = STANDARD.encode("99999999999999999999");
        assert_eq!(decode_cursor(&far), Ok(Cursor::Offset(u64::MAX)));
    }

    #[test]
    fn garbage_cursors_are_errors() {
        for bad in ["!!", "LTI=", "YWJj", "LQ==", &"A".repeat(100)] {
            assert_eq!(decode_cursor(bad), Err(CursorError), "{bad}");
        }
        assert_eq!(
            CursorError.to_string(),
            "next_cursor: expected a cursor returned by a previous page"
        );
    }

    #[test]
    fn only_a_page_smaller_than_the_limit_ends_the_stream() {
        assert_eq!(next_cursor(0, 100, 100), "MTAw");
        assert_eq!(next_cursor(200, 50, 100), END_CURSOR);
        assert_eq!(next_cursor(0, 0, 100), END_CURSOR);
        // A full page that happens to hold the last items is followed by an empty one.
        assert_eq!(next_cursor(100, 100, 100), "MjAw");
        assert_eq!(next_cursor(200, 0, 100), END_CURSOR);
    }

    #[test]
    fn limits_default_and_clamp() {
        assert_eq!(clamp_limit(None), 100);
        assert_eq!(clamp_limit(Some(0)), 100);
        assert_eq!(clamp_limit(Some(7)), 7);
        assert_eq!(clamp_limit(Some(10_000)), 500);
    }
}
