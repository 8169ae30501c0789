//! A small blocking HTTP/1.1 client over one keep-alive connection: any method with or
//! without a body, JSON answers. For the `ladder client` commands and the end-to-end tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Largest response body read.
pub const RESPONSE_BODY_MAX: usize = 64 * 1024 * 1024;

/// A response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// Body text.
    pub body: String,
}

impl HttpResponse {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One keep-alive connection to `host:port`, reopened when the server closed it.
///
/// A node of a coordinated cluster that does not lead answers a write 503 `standby: not
/// primary` with the leader's URL, having changed nothing (CONTRACT 22): the client then
/// sends the request once more, to the leader, and talks to the leader from then on (unless
/// [`HttpClient::follow_leader`] is off), until the leader cannot be reached: then it goes
/// back to the URL it was made for.
pub struct HttpClient {
    authority: String,
    /// The authority it was made for: it goes back there when a leader it followed fails.
    home: String,
    stream: Option<BufReader<TcpStream>>,
    timeout: Duration,
    /// Whether a standby's 503 that names the leader is retried there.
    pub follow_leader: bool,
}

impl HttpClient {
    /// A client of `base_url` (`http://host:port`; TLS is not supported here).
    pub fn new(base_url: &str) -> Result<HttpClient, String> {
        let authority = base_url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{base_url}: only http:// URLs are supported"))?
            .trim_end_matches('/')
            .to_string();
        Ok(HttpClient {
            home: authority.clone(),
            authority,
            stream: None,
            timeout: Duration::from_secs(30),
            follow_leader: true,
        })
    }

    /// The base URL requests go to now (the leader's, once a standby named it).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.authority)
    }

    /// Sends one request and reads its response. `path` includes the query string.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<&str>,
    ) -> Result<HttpResponse, String> {
        let response = match self.request_here(method, path, headers, body) {
            Ok(response) => response,
            Err(e) => {
                // A leader followed earlier is gone: the next request goes where this
                // client was pointed, which names the next leader.
                if self.authority != self.home {
                    self.authority = self.home.clone();
                    self.stream = None;
                }
                return Err(e);
            }
        };
        match self.leader_named(&response) {
            Some(leader) => {
                // Nothing was applied where it was refused: one more try, at the leader (a
                // repeated order is refused there as a duplicate by its hash in any case).
                self.authority = leader;
                self.stream = None;
                self.request_here(method, path, headers, body)
            }
            None => Ok(response),
        }
    }

    /// The leader's authority when `response` is a standby's refusal that names another
    /// node as the leader.
    fn leader_named(&self, response: &HttpResponse) -> Option<String> {
        if !self.follow_leader || response.status != 503 {
            return None;
        }
        let body = response.json();
        if body["error"] != "standby: not primary" {
            return None;
        }
        let leader = body["leader"].as_str()?.strip_prefix("http://")?;
        let leader = leader.trim_end_matches('/');
        (!leader.is_empty() && leader != self.authority).then(|| leader.to_string())
    }

    /// Sends one request to the current node.
    fn request_here(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<&str>,
    ) -> Result<HttpResponse, String> {
        let reused = self.stream.is_some();
        match self.try_request(method, path, headers, body) {
            Ok(response) => Ok(response),
            Err(_) if reused => {
                // The server may have closed an idle keep-alive connection: retry once.
                self.stream = None;
                self.try_request(method, path, headers, body)
            }
            Err(e) => Err(e),
        }
    }

    fn connect(&mut self) -> Result<&mut BufReader<TcpStream>, String> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(&self.authority)
                .map_err(|e| format!("connect {}: {e}", self.authority))?;
            stream.set_nodelay(true).ok();
            stream.set_read_timeout(Some(self.timeout)).ok();
            self.stream = Some(BufReader::new(stream));
        }
        self.stream
            .as_mut()
            .ok_or_else(|| "not connected".to_string())
    }

    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<&str>,
    ) -> Result<HttpResponse, String> {
        let authority = self.authority.clone();
        let reader = self.connect()?;
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let body = body.unwrap_or("");
        if !body.is_empty() || matches!(method, "POST" | "PUT" | "DELETE" | "PATCH") {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let stream = reader.get_mut();
        stream
            .write_all(head.as_bytes())
            .map_err(|e| e.to_string())?;
        stream
            .write_all(body.as_bytes())
            .map_err(|e| e.to_string())?;
        let response = read_response(reader);
        if response.as_ref().map_or(true, |r| {
            r.header("connection")
                .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        }) {
            self.stream = None;
        }
        response
    }
}

fn read_response(reader: &mut BufReader<TcpStream>) -> Result<HttpResponse, String> {
    // A TLS record (an alert, 0x15, or a handshake, 0x16) where a status line should be:
    // looked at before the line is read, since a handshake is not text.
    let first = reader
        .fill_buf()
        .map_err(|e| e.to_string())?
        .first()
        .copied();
    if matches!(first, Some(0x15 | 0x16)) {
        return Err(
            "the service answered in TLS; this client speaks plain HTTP only \
             (reach a node started with --tls-cert over https, e.g. with curl)"
                .into(),
        );
    }
    let mut status_line = String::new();
    if reader
        .read_line(&mut status_line)
        .map_err(|e| e.to_string())?
        == 0
    {
        return Err("connection closed".into());
    }
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| e.to_string())?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
            if name == "content-length" {
                length = value.parse().map_err(|_| "bad Content-Length")?;
            }
            headers.push((name, value));
        }
    }
    if length > RESPONSE_BODY_MAX {
        return Err(format!("response body of {length} bytes is too large"));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).map_err(|e| e.to_string())?;
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
