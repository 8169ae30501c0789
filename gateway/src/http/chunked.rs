//! The chunked transfer coding of a request body (RFC 9112 7.1): a scanner that finds where a
//! chunked body ends and can be resumed as bytes arrive (each byte is looked at about once,
//! however they trickle in), and the decoding of a whole one. Sizes are bounded: a chunk-size
//! line, the trailer section, the decoded body (the endpoint's limit, checked at each chunk's
//! size line, before its data arrives) and the coded bytes (what a connection buffers).

/// Longest chunk-size line, chunk extensions included.
const SIZE_LINE_BYTES_MAX: usize = 1024;
/// Longest trailer section.
const TRAILER_BYTES_MAX: usize = 16 * 1024;

/// Why a chunked body cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// Not the chunked coding (a bad size line, data not followed by CRLF, a line too long).
    Malformed,
    /// The decoded body would pass `limit`, or its coding the bytes a connection buffers.
    TooLarge,
}

/// Where the scan is within the coded body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Part {
    /// A chunk-size line starts at `at`.
    #[default]
    SizeLine,
    /// Chunk data of this many bytes starts at `at`, then CRLF.
    Data(usize),
    /// A trailer line (or the empty line that ends the body) starts at `at`.
    Trailer,
}

/// How far a chunked body has been read: resumable over a growing buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkScan {
    /// Where the next part starts in the coded bytes.
    at: usize,
    /// How far the current line has been searched for its end.
    searched: usize,
    part: Part,
    /// Decoded bytes so far.
    body_len: usize,
    /// Trailer bytes so far.
    trailer_len: usize,
}

impl ChunkScan {
    /// Reads on in `coded` (the bytes after the header section, as many as have arrived; the
    /// same buffer grown since the last call). `Some(length of the coded body)` once its end
    /// has arrived; `on_data` is given each chunk's data in order. `limit` bounds the decoded
    /// body, `coded_max` the coded one.
    pub fn advance(
        &mut self,
        coded: &[u8],
        limit: usize,
        coded_max: usize,
        on_data: &mut dyn FnMut(&[u8]),
    ) -> Result<Option<usize>, ChunkError> {
        loop {
            match self.part {
                Part::SizeLine => {
                    let Some(line) = self.line(coded, SIZE_LINE_BYTES_MAX)? else {
                        return self.waiting(coded, coded_max);
                    };
                    let size = chunk_size(line)?;
                    if self.body_len.saturating_add(size) > limit {
                        return Err(ChunkError::TooLarge);
                    }
                    self.part = if size == 0 {
                        Part::Trailer
                    } else {
                        Part::Data(size)
                    };
                }
                Part::Data(size) => {
                    let end = self.at + size;
                    if coded.len() < end + 2 {
                        return self.waiting(coded, coded_max);
                    }
                    if &coded[end..end + 2] != b"\r\n" {
                        return Err(ChunkError::Malformed);
                    }
                    on_data(&coded[self.at..end]);
                    self.body_len += size;
                    self.at = end + 2;
                    self.searched = self.at;
                    self.part = Part::SizeLine;
                }
                Part::Trailer => {
                    let Some(line) = self.line(coded, TRAILER_BYTES_MAX)? else {
                        return self.waiting(coded, coded_max);
                    };
                    if line.is_empty() {
                        return Ok(Some(self.at));
                    }
                    self.trailer_len += line.len();
                    if self.trailer_len > TRAILER_BYTES_MAX {
                        return Err(ChunkError::TooLarge);
                    }
                }
            }
        }
    }

    /// Where the scan stands in the coded bytes: the body's length once it is whole.
    pub fn end(&self) -> usize {
        self.at
    }

    /// The line starting at `at` without its CRLF, once whole (and `at` moves past it).
    fn line<'c>(&mut self, coded: &'c [u8], max: usize) -> Result<Option<&'c [u8]>, ChunkError> {
        let from = self.searched.max(self.at);
        let Some(lf) = coded[from..].iter().position(|&b| b == b'\n') else {
            self.searched = coded.len();
            if coded.len() - self.at > max {
                return Err(ChunkError::Malformed);
            }
            return Ok(None);
        };
        let lf = from + lf;
        let line = coded[self.at..lf]
            .strip_suffix(b"\r")
            .ok_or(ChunkError::Malformed)?;
        if line.len() > max {
            return Err(ChunkError::Malformed);
        }
        self.at = lf + 1;
        self.searched = self.at;
        Ok(Some(line))
    }

    /// More bytes are needed; refused once the coded body fills what may be buffered (the
    /// connection reads no more then: waiting would only end in a timeout).
    fn waiting(&self, coded: &[u8], coded_max: usize) -> Result<Option<usize>, ChunkError> {
        if coded.len() >= coded_max {
            return Err(ChunkError::TooLarge);
        }
        Ok(None)
    }
}

/// The size a chunk-size line gives: hex digits, then optional extensions after `;`.
fn chunk_size(line: &[u8]) -> Result<usize, ChunkError> {
    let digits = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii_end();
    if digits.is_empty() || digits.len() > 15 {
        return Err(ChunkError::Malformed);
    }
    digits.iter().try_fold(0usize, |size, &b| {
        let digit = (b as char).to_digit(16).ok_or(ChunkError::Malformed)?;
        Ok(size * 16 + digit as usize)
    })
}

/// The decoded body of a whole chunked body `coded` (as [`ChunkScan::advance`] found it).
pub fn decode(coded: &[u8], limit: usize) -> Result<Vec<u8>, ChunkError> {
    let mut body = Vec::new();
    ChunkScan::default().advance(coded, limit, usize::MAX, &mut |data| {
        body.extend_from_slice(data)
    })?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_whole(coded: &[u8]) -> Result<Option<usize>, ChunkError> {
        ChunkScan::default().advance(coded, 1 << 20, 1 << 20, &mut |_| {})
    }

    #[test]
    fn a_chunked_body_decodes_whole_or_trickled() {
        let coded =
            b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let end = coded.len() - 4;
        assert_eq!(scan_whole(coded), Ok(Some(end)));
        assert_eq!(
            decode(&coded[..end], 1 << 20).unwrap(),
            b"Wikipedia in\r\n\r\nchunks.".to_vec()
        );
        // One byte at a time: not whole until the last byte of the trailer section.
        let mut scan = ChunkScan::default();
        let mut body = Vec::new();
        for n in 1..=end {
            let got = scan.advance(&coded[..n], 1 << 20, 1 << 20, &mut |d| {
                body.extend_from_slice(d)
            });
            assert_eq!(got, Ok((n == end).then_some(end)), "after {n} bytes");
        }
        assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.".to_vec());
    }

    #[test]
    fn a_bad_coding_or_one_past_its_limits_is_refused() {
        for bad in [
            &b"x\r\nabc\r\n0\r\n\r\n"[..],
            b"3\r\nabcd\r\n0\r\n\r\n",
            b"3\nabc\r\n0\r\n\r\n",
            b"\r\n",
            b"1000000000000000\r\n",
        ] {
            assert_eq!(scan_whole(bad), Err(ChunkError::Malformed), "{bad:?}");
        }
        let mut scan = ChunkScan::default();
        assert_eq!(
            scan.advance(b"11\r\n", 16, 1 << 20, &mut |_| {}),
            Err(ChunkError::TooLarge),
            "refused at the size line, before its data"
        );
        let long_line = vec![b'1'; SIZE_LINE_BYTES_MAX + 2];
        assert_eq!(scan_whole(&long_line), Err(ChunkError::Malformed));
        let mut scan = ChunkScan::default();
        assert_eq!(
            scan.advance(b"10\r\n0123456789", 1 << 20, 8, &mut |_| {}),
            Err(ChunkError::TooLarge),
            "more coded bytes than may be buffered"
        );
    }
}
