//! Reading a request as its bytes arrive, so that bytes trickled one at a time cost a look at
//! the new bytes only, never a parse of everything before them: the header section is parsed
//! when its request line is whole (a malformed one is refused at once) and when the section
//! itself is whole; a body is waited for by its length, the header section not parsed again.

use super::request::{parse_front, ChunkWait, HttpError, Parsed, Request, HEADER_BYTES_MAX};

/// How far the request at the front of a connection's buffer has been read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestProgress {
    /// Bytes already looked at for the end of the header section.
    scanned: usize,
    /// Whether the request line has been parsed (it was whole and well-formed).
    line_checked: bool,
    /// Once the header section is whole: the length of the whole request.
    needed: Option<usize>,
    /// The header section asked for `100 Continue` before its body, not yet given.
    continue_due: bool,
    /// Once the header section is whole, with a chunked body: how far the body was read.
    chunks: Option<ChunkWait>,
}

/// Where the first line end at or after `from` is.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| from + i)
}

/// Whether `buf` holds an empty line (the end of a header section) that ends at or after
/// `from`: a `\n` followed by `\n` or by `\r\n`.
fn head_ends(buf: &[u8], from: usize) -> bool {
    let mut at = from;
    while let Some(end) = line_end(buf, at) {
        match (buf.get(end + 1), buf.get(end + 2)) {
            (Some(b'\n'), _) | (Some(b'\r'), Some(b'\n')) => return true,
            _ => at = end + 1,
        }
    }
    false
}

impl RequestProgress {
    /// The request at the front of `buf` once it is whole (and the bytes it took); `Ok(None)`
    /// while more bytes are needed. After a request is returned the progress starts again.
    pub fn advance(&mut self, buf: &[u8]) -> Result<Option<(Request, usize)>, HttpError> {
        if let Some(chunks) = self.chunks.as_mut() {
            // Only the new bytes are read; the request is parsed once, when its body is whole.
            if !chunks.advance(buf)? {
                return Ok(None);
            }
            return match parse_front(buf)? {
                Parsed::Complete(request, used) => self.done(request, used),
                _ => Ok(None),
            };
        }
        match self.needed {
            Some(needed) if buf.len() < needed => return Ok(None),
            Some(_) => {}
            None => {
                // Only the new bytes (and the two before them, which may start a line end).
                let from = self.scanned.saturating_sub(2);
                self.scanned = buf.len();
                // Until the request line is checked, its end can only be in the new bytes.
                let line_whole = self.line_checked || line_end(buf, from).is_some();
                if !head_ends(buf, from) {
                    if buf.len() > HEADER_BYTES_MAX {
                        return Err(HttpError::HeadersTooLarge);
                    }
                    if !line_whole || self.line_checked {
                        return Ok(None);
                    }
                    // The request line is whole: refuse a malformed one now.
                    self.line_checked = true;
                    return self.after_parse(parse_front(buf)?);
                }
            }
        }
        self.after_parse(parse_front(buf)?)
    }

    /// Goes on from what a parse of the buffer found.
    fn after_parse(&mut self, parsed: Parsed) -> Result<Option<(Request, usize)>, HttpError> {
        match parsed {
            Parsed::Complete(request, used) => self.done(request, used),
            Parsed::NeedHead => Ok(None),
            Parsed::NeedBody {
                needed,
                expects_continue,
            } => self.wait_for_body(needed, expects_continue),
            Parsed::NeedChunks(wait) => {
                self.continue_due = wait.expects_continue;
                self.chunks = Some(wait);
                Ok(None)
            }
        }
    }

    /// The header section is whole and its body is `needed - head` bytes still to come.
    fn wait_for_body(
        &mut self,
        needed: usize,
        expects_continue: bool,
    ) -> Result<Option<(Request, usize)>, HttpError> {
        if self.needed.is_none() {
            self.continue_due = expects_continue;
        }
        self.needed = Some(needed);
        Ok(None)
    }

    /// Whether a `100 Continue` is now due (once per request: the header section asked for
    /// it and the body has not all arrived).
    pub fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_due)
    }

    fn done(
        &mut self,
        request: Request,
        used: usize,
    ) -> Result<Option<(Request, usize)>, HttpError> {
        *self = RequestProgress::default();
        Ok(Some((request, used)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse_request;

    /// Feeds `bytes` one at a time; returns what `advance` gave last, and the progress.
    fn trickle(bytes: &[u8]) -> (Result<Option<(Request, usize)>, HttpError>, RequestProgress) {
        let mut progress = RequestProgress::default();
        let mut last = Ok(None);
        for n in 1..=bytes.len() {
            last = progress.advance(&bytes[..n]);
            if !matches!(last, Ok(None)) {
                break;
            }
        }
        (last, progress)
    }

    #[test]
    fn a_trickled_chunked_request_reads_as_a_whole_one_does_and_may_ask_to_continue() {
        let request = b"POST /books HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
            Expect: 100-continue\r\n\r\n3\r\n[{\"\r\nf\r\ntoken_id\":\"1\"}]\r\n0\r\n\r\nGET";
        let (got, _) = trickle(request);
        let whole = parse_request(request);
        assert_eq!(got, whole);
        let (parsed, used) = whole.unwrap().expect("whole");
        assert_eq!(parsed.body, br#"[{"token_id":"1"}]"#.to_vec());
        assert_eq!(used, request.len() - 3);
        // The header section asked for 100 Continue: due once, while the body is awaited.
        let head_end = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let mut progress = RequestProgress::default();
        assert_eq!(progress.advance(&request[..head_end + 2]), Ok(None));
        assert!(progress.take_continue());
        assert!(!progress.take_continue());
    }

    #[test]
    fn a_trickled_request_reads_as_a_whole_one_does() {
        let body = br#"{"a":1}"#;
        let request = [
            b"POST /books HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n".as_slice(),
            body,
        ]
        .concat();
        let (got, progress) = trickle(&request);
        assert_eq!(got, parse_request(&request));
        assert!(got.is_ok_and(|r| r.is_some()));
        assert_eq!(
            progress,
            RequestProgress::default(),
            "ready for the next request"
        );
    }

    #[test]
    fn bare_line_feeds_end_a_header_section_too() {
        let request = b"GET /time HTTP/1.1\nHost: x\n\n";
        let (got, _) = trickle(request);
        assert_eq!(got, parse_request(request));
    }

    #[test]
    fn a_malformed_request_line_is_refused_as_soon_as_it_is_whole() {
        let mut progress = RequestProgress::default();
        assert_eq!(progress.advance(b"HELLO THERE"), Ok(None));
        assert!(progress.advance(b"HELLO THERE\r\n").is_err());
    }

    #[test]
    fn a_header_section_past_16_kib_is_refused_without_its_end() {
        let mut head = b"GET /time HTTP/1.1\r\n".to_vec();
        while head.len() <= HEADER_BYTES_MAX {
            head.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaa\r\n");
        }
        let (got, _) = trickle(&head);
        assert_eq!(got, Err(HttpError::HeadersTooLarge));
    }

    #[test]
    fn an_expect_100_continue_is_due_once_while_the_body_waits() {
        let mut progress = RequestProgress::default();
        let head = b"POST /order HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n";
        assert_eq!(progress.advance(head), Ok(None));
        assert!(progress.take_continue());
        assert!(!progress.take_continue(), "once");
        assert_eq!(
            progress.advance(&[head.as_slice(), b"[{"].concat()),
            Ok(None)
        );
        assert!(!progress.take_continue());
        // Without the header, or with the body there at once, none is due.
        let mut plain = RequestProgress::default();
        assert_eq!(
            plain.advance(b"POST /order HTTP/1.1\r\nContent-Length: 4\r\n\r\n"),
            Ok(None)
        );
        assert!(!plain.take_continue());
        let mut whole = RequestProgress::default();
        assert!(whole
            .advance(&[head.as_slice(), b"[{}]"].concat())
            .is_ok_and(|r| r.is_some()));
        assert!(!whole.take_continue());
        // However many header lines come before it.
        let mut long = b"POST /order HTTP/1.1\r\n".to_vec();
        for i in 0..100 {
            long.extend_from_slice(format!("X-Pad-{i}: a\r\n").as_bytes());
        }
        long.extend_from_slice(b"Expect: 100-continue\r\nContent-Length: 4\r\n\r\n");
        let mut padded = RequestProgress::default();
        assert_eq!(padded.advance(&long), Ok(None));
        assert!(padded.take_continue());
        // HTTP/1.0 clients are not answered with it.
        let mut old = RequestProgress::default();
        let head = b"POST /order HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
        assert_eq!(old.advance(head), Ok(None));
        assert!(!old.take_continue());
    }

    #[test]
    fn a_waiting_body_does_not_parse_the_head_again() {
        let mut progress = RequestProgress::default();
        let head = b"POST /books HTTP/1.1\r\nContent-Length: 4\r\n\r\n";
        assert_eq!(progress.advance(head), Ok(None));
        assert_eq!(progress.needed, Some(head.len() + 4));
        // A buffer that is not even HTTP any more is not looked at while the body is short:
        // only its length counts.
        assert_eq!(progress.advance(&[0u8; 10]), Ok(None));
        let whole = [head.as_slice(), b"[{}]"].concat();
        assert!(progress.advance(&whole).is_ok_and(|r| r.is_some()));
    }
}
