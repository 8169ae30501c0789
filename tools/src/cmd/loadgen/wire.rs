//! HTTP/1.1 on a raw keep-alive `TcpStream`: a request written into a reused buffer with its
//! L2 headers (an HMAC with a fresh timestamp, computed at send time), and a response read
//! by Content-Length. Nothing here allocates per request beyond the response body.

use std::io::{self, BufRead, BufReader, Read, Write};
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

/// Reads one response.
pub fn read_response(reader: &mut BufReader<TcpStream>) -> io::Result<Response> {
    let mut line = Vec::with_capacity(128);
    if reader.read_until(b'\n', &mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let status = std::str::from_utf8(&line)
        .ok()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| {
            bad(format!(
                "bad status line {:?}",
                String::from_utf8_lossy(&line)
            ))
        })?;
    let (mut length, mut close, mut head_bytes) = (0usize, false, line.len());
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        head_bytes += n;
        if n == 0 || head_bytes > RESPONSE_HEAD_MAX {
            return Err(bad("response header section cut or too large".into()));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if text.is_empty() {
            break;
        }
        if let Some((name, value)) = text.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value
                    .parse()
                    .map_err(|_| bad(format!("bad Content-Length {value:?}")))?;
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            }
        }
    }
    if length > RESPONSE_BODY_MAX {
        return Err(bad(format!("response body of {length} bytes")));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(Response {
        status,
        close,
        body,
    })
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
    fn substring_search() {
        assert!(contains(b"{\"success\":true,", b"\"success\":true"));
        assert!(!contains(b"{\"success\":false}", b"\"success\":true"));
    }
}
