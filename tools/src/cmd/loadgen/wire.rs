//! HTTP/1.1 on a raw keep-alive `TcpStream`: a request written into a reused buffer with its
//! L2 headers (an HMAC with a fresh timestamp, computed at send time), and a response read
//! by Content-Length. Nothing here allocates per request beyond the response body.

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;

use ladder_client::{
    HEADER_ADDRESS, HEADER_API_KEY, HEADER_PASSPHRASE, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
use ladder_protocol::L2Secret;

use super::setup::Account;

/// Largest response body accepted.
pub const RESPONSE_BODY_MAX: usize = 1024 * 1024;
/// Largest response header section accepted.
pub const RESPONSE_HEAD_MAX: usize = 16 * 1024;
/// Most header fields a response may have.
const RESPONSE_HEADERS_MAX: usize = 32;

/// `host:port` of an `http://host:port` URL.
pub fn authority(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url {url}: only http:// URLs are supported"))?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        return Err(format!("--url {url}: expected http://host:port"));
    }
    Ok(authority.to_string())
}

/// An account's L2 material, ready to sign requests.
#[derive(Clone)]
pub struct Auth {
    address: String,
    api_key: String,
    passphrase: String,
    secret: L2Secret,
}

impl Auth {
    /// Made-up L2 material, for tests that need a request signed with something.
    #[cfg(test)]
    pub fn made_up() -> Auth {
        Auth {
            address: "0xabc".into(),
            api_key: "k".into(),
            passphrase: "p".into(),
            secret: L2Secret::from_base64("c2VjcmV0LWZvci10ZXN0LXZlY3RvcnMtb25seS0zMmI=")
                .expect("valid base64"),
        }
    }

    /// The L2 material of `account`.
    pub fn new(account: &Account) -> Auth {
        Auth {
            address: account.address.to_string(),
            api_key: account.credentials.api_key.clone(),
            passphrase: account.credentials.passphrase.clone(),
            secret: account.credentials.secret.clone(),
        }
    }
}

/// Appends one request with a JSON body and L2 headers stamped `timestamp` to `out`.
pub fn write_request(
    out: &mut Vec<u8>,
    host: &str,
    method: &str,
    path: &str,
    auth: &Auth,
    timestamp: &str,
    body: &[u8],
) {
    let signature = auth.secret.sign(timestamp, method, path, body);
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{HEADER_ADDRESS}: {}\r\n{HEADER_API_KEY}: {}\r\n\
         {HEADER_TIMESTAMP}: {timestamp}\r\n{HEADER_PASSPHRASE}: {}\r\n{HEADER_SIGNATURE}: {signature}\r\n\r\n",
        body.len(),
        auth.address,
        auth.api_key,
        auth.passphrase,
    );
    out.extend_from_slice(body);
}

/// A response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// The server will close the connection after it.
    pub close: bool,
    /// The body.
    pub body: Vec<u8>,
}

fn bad(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Parses the response at the start of `received`: `None` while it is incomplete, else the
/// response and how many bytes it took (what follows belongs to the next one).
pub fn parse_response(received: &[u8]) -> io::Result<Option<(Response, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; RESPONSE_HEADERS_MAX];
    let mut head = httparse::Response::new(&mut headers);
    let head_len = match head.parse(received) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if received.len() > RESPONSE_HEAD_MAX => {
            return Err(bad("response header section too large".into()))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(bad(format!("bad response head: {e}"))),
    };
    let status = head.code.unwrap_or_default();
    let (mut length, mut close) = (0usize, false);
    for header in head.headers.iter() {
        let value = String::from_utf8_lossy(header.value);
        let value = value.trim();
        if header.name.eq_ignore_ascii_case("content-length") {
            length = value
                .parse()
                .map_err(|_| bad(format!("bad Content-Length {value:?}")))?;
        } else if header.name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    if length > RESPONSE_BODY_MAX {
        return Err(bad(format!("response body of {length} bytes")));
    }
    let end = head_len + length;
    if received.len() < end {
        return Ok(None);
    }
    let response = Response {
        status,
        close,
        body: received[head_len..end].to_vec(),
    };
    Ok(Some((response, end)))
}

/// Reads one response from a blocking stream, leaving what follows it in `reader`.
pub fn read_response(reader: &mut BufReader<TcpStream>) -> io::Result<Response> {
    let mut received = Vec::with_capacity(512);
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        let (before, chunk_len) = (received.len(), chunk.len());
        received.extend_from_slice(chunk);
        match parse_response(&received)? {
            Some((response, used)) => {
                reader.consume(used - before);
                return Ok(response);
            }
            None => reader.consume(chunk_len),
        }
    }
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_plain_http_with_an_authority() {
        assert_eq!(
            authority("http://127.0.0.1:8080/").unwrap(),
            "127.0.0.1:8080"
        );
        assert!(authority("https://x:1").is_err());
        assert!(authority("http://x:1/api").is_err());
    }

    #[test]
    fn a_request_carries_a_verifiable_l2_signature() {
        let secret_b64 = "c2VjcmV0LWZvci10ZXN0LXZlY3RvcnMtb25seS0zMmI=";
        let auth = Auth {
            address: "0xabc".into(),
            api_key: "k".into(),
            passphrase: "p".into(),
            secret: L2Secret::from_base64(secret_b64).unwrap(),
        };
        let mut out = Vec::new();
        write_request(
            &mut out,
            "h:1",
            "POST",
            "/order",
            &auth,
            "1700000000",
            b"{}",
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("POST /order HTTP/1.1\r\nHost: h:1\r\n"),
            "{text}"
        );
        assert!(text.contains("Content-Length: 2\r\n") && text.ends_with("\r\n\r\n{}"));
        let signature = text
            .lines()
            .find_map(|l| l.strip_prefix("SVC_SIGNATURE: "))
            .unwrap();
        assert!(ladder_protocol::verify_l2(
            secret_b64,
            "1700000000",
            "POST",
            "/order",
            b"{}",
            signature
        ));
    }

    #[test]
    fn responses_are_parsed_when_complete_and_leave_what_follows() {
        let first_bytes = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        let second_bytes = b"HTTP/1.1 503 X\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        let two = [&first_bytes[..], &second_bytes[..]].concat();
        let first_len = first_bytes.len();
        for cut in 0..first_len {
            assert!(
                parse_response(&two[..cut]).unwrap().is_none(),
                "cut at {cut}"
            );
        }
        let (first, used) = parse_response(&two).unwrap().unwrap();
        assert_eq!(
            (first.status, first.close, &first.body[..], used),
            (200, false, &b"{}"[..], first_len)
        );
        let (second, used) = parse_response(&two[first_len..]).unwrap().unwrap();
        assert_eq!(
            (second.status, second.close, second.body.len()),
            (503, true, 0)
        );
        assert_eq!(first_len + used, two.len());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(parse_response(b"garbage\r\n\r\n").is_err());
        let huge = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            RESPONSE_BODY_MAX + 1
        );
        assert!(parse_response(huge.as_bytes()).is_err());
    }

    #[test]
    fn substring_search() {
        assert!(contains(b"{\"success\":true,", b"\"success\":true"));
        assert!(!contains(b"{\"success\":false}", b"\"success\":true"));
    }
}
