//! `salt` written as a JSON integer wider than 64 bits.
//!
//! API.md §1 accepts a JSON integer for `salt`, a uint256. serde_json (without its
//! `arbitrary_precision` feature, which would change every number of the workspace) reads an
//! integer past 64 bits as a float and keeps no digits beyond it, and simd-json refuses it.
//! So before such a body is parsed, every integer that is the value of a `"salt"` key and is
//! too wide for 64 bits is put in quotes: `salt` is then read as the decimal string it also
//! may be, digit for digit. Nothing else in the body changes.

/// The body with each too-wide integer value of a `"salt"` key quoted, or `None` when it has
/// none (the common case: no copy).
pub(crate) fn quote_wide_salts(body: &[u8]) -> Option<Vec<u8>> {
    let wide = wide_salt_values(body);
    if wide.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() + 2 * wide.len());
    let mut copied = 0;
    for (start, end) in wide {
        out.extend_from_slice(&body[copied..start]);
        out.push(b'"');
        out.extend_from_slice(&body[start..end]);
        out.push(b'"');
        copied = end;
    }
    out.extend_from_slice(&body[copied..]);
    Some(out)
}

/// Byte ranges of the integers, too wide for 64 bits, that follow a `"salt"` key. A string
/// followed by `:` is a key in any JSON; strings are skipped whole, escapes included, so a
/// `"salt":` inside a string value never counts.
fn wide_salt_values(body: &[u8]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(&byte) = body.get(at) {
        if byte != b'"' {
            at += 1;
            continue;
        }
        let content_start = at + 1;
        let Some(content_end) = string_end(body, content_start) else {
            break;
        };
        at = content_end + 1;
        if &body[content_start..content_end] != b"salt" {
            continue;
        }
        let colon = skip_space(body, at);
        if body.get(colon) != Some(&b':') {
            continue;
        }
        let start = skip_space(body, colon + 1);
        let digits = body[start.min(body.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = start + digits;
        let ends_integer = !matches!(body.get(end), Some(b'.' | b'e' | b'E' | b'0'..=b'9'));
        if digits > 0 && ends_integer && too_wide(&body[start..end]) {
            found.push((start, end));
        }
        at = end.max(at);
    }
    found
}

/// The index of the quote that closes a string whose content starts at `from`.
fn string_end(body: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(&byte) = body.get(at) {
        match byte {
            b'\\' => at += 2,
            b'"' => return Some(at),
            _ => at += 1,
        }
    }
    None
}

fn skip_space(body: &[u8], from: usize) -> usize {
    from + body[from.min(body.len())..]
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .count()
}

/// Whether the decimal `digits` exceed `u64::MAX` (leading zeros aside).
fn too_wide(digits: &[u8]) -> bool {
    let significant = digits
        .iter()
        .position(|&d| d != b'0')
        .map_or(&digits[digits.len()..], |i| &digits[i..]);
    const U64_MAX: &[u8] = b"18446744073709551615";
    significant.len() > U64_MAX.len()
        || (significant.len() == U64_MAX.len() && significant > U64_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(body: &str) -> Option<String> {
        quote_wide_salts(body.as_bytes()).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn only_too_wide_integer_salts_are_quoted() {
        let wide = "123456789012345678901234567890";
        assert_eq!(
            quoted(&format!(r#"{{"order":{{"salt": {wide},"side":"BUY"}}}}"#)),
            Some(format!(r#"{{"order":{{"salt": "{wide}","side":"BUY"}}}}"#))
        );
        // Two orders of a batch, each its own.
        assert_eq!(
            quoted(&format!(r#"[{{"salt":{wide}1}},{{"salt":{wide}2}}]"#)),
            Some(format!(r#"[{{"salt":"{wide}1"}},{{"salt":"{wide}2"}}]"#))
        );
        for untouched in [
            r#"{"salt":18446744073709551615}"#.to_string(),
            r#"{"salt":"123456789012345678901234567890"}"#.to_string(),
            format!(r#"{{"x":{wide}}}"#),
            format!(r#"{{"salt":{wide}.5}}"#),
            format!(r#"{{"salt":{wide}e3}}"#),
            format!(r#"{{"salt":-{wide}}}"#),
            format!(r#"{{"metadata":"\"salt\":{wide}"}}"#),
            format!(r#"{{"sal\u0074":{wide}}}"#),
        ] {
            assert_eq!(quoted(&untouched), None, "{untouched}");
        }
        assert_eq!(
            quoted(r#"{"salt":18446744073709551616}"#),
            Some(r#"{"salt":"18446744073709551616"}"#.into())
        );
        assert_eq!(
            quoted(r#"{"salt":000000000000000000000000001}"#),
            None,
            "leading zeros: 1 fits (and is refused as JSON by both parsers anyway)"
        );
        for cut in [r#"{"salt"#, r#"{"salt":"#, r#"{"salt"   "#, r#"{""#] {
            assert_eq!(quoted(cut), None, "{cut}");
        }
    }
}
