//! Writing HTTP/1.1 responses. Every body is JSON (API.md §18) except `/metrics`.

use std::io::Write;

/// The statuses Ladder answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 200.
    Ok,
    /// 400.
    BadRequest,
    /// 401.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 408.
    RequestTimeout,
    /// 409.
    Conflict,
    /// 413.
    PayloadTooLarge,
    /// 429.
    TooManyRequests,
    /// 431.
    HeadersTooLarge,
    /// 500.
    Internal,
    /// 501.
    NotImplemented,
    /// 503.
    Unavailable,
    /// 505.
    VersionNotSupported,
}

impl Status {
    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::Unauthorized => 401,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::Conflict => 409,
            Status::PayloadTooLarge => 413,
            Status::TooManyRequests => 429,
            Status::HeadersTooLarge => 431,
            Status::Internal => 500,
            Status::NotImplemented => 501,
            Status::Unavailable => 503,
            Status::VersionNotSupported => 505,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::Unauthorized => "Unauthorized",
            Status::Forbidden => "Forbidden",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::RequestTimeout => "Request Timeout",
            Status::Conflict => "Conflict",
            Status::PayloadTooLarge => "Payload Too Large",
            Status::TooManyRequests => "Too Many Requests",
            Status::HeadersTooLarge => "Request Header Fields Too Large",
            Status::Internal => "Internal Server Error",
            Status::NotImplemented => "Not Implemented",
            Status::Unavailable => "Service Unavailable",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// A response ready to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status.
    pub status: Status,
    /// Body bytes.
    pub body: Vec<u8>,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// `Retry-After` in seconds, for 429 and 503.
    pub retry_after_s: Option<u64>,
    /// Close the connection after this response.
    pub close: bool,
    /// Further headers, written as given (names and values are the service's own text).
    pub extra_headers: Vec<(&'static str, String)>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: Status, body: Vec<u8>) -> Response {
        Response {
            status,
            body,
            content_type: "application/json",
            retry_after_s: None,
            close: false,
            extra_headers: Vec::new(),
        }
    }

    /// `{"error": message}` with `status`.
    pub fn error(status: Status, message: &str) -> Response {
        let body = serde_json::to_vec(&serde_json::json!({ "error": message }))
            .unwrap_or_else(|_| b"{\"error\":\"internal error\"}".to_vec());
        Response::json(status, body)
    }

    /// 429: a rate limit refused the request; a token is there again in `wait_s` seconds.
    pub fn rate_limited(wait_s: u64) -> Response {
        Response::error(Status::TooManyRequests, "rate limit exceeded").retry_after(wait_s)
    }

    /// Plain text (Prometheus metrics).
    pub fn text(body: String) -> Response {
        Response {
            status: Status::Ok,
            body: body.into_bytes(),
            content_type: "text/plain; version=0.0.4",
            retry_after_s: None,
            close: false,
            extra_headers: Vec::new(),
        }
    }

    /// Sets `Retry-After`.
    pub fn retry_after(mut self, seconds: u64) -> Response {
        self.retry_after_s = Some(seconds);
        self
    }

    /// Adds the header `name: value`.
    pub fn header(mut self, name: &'static str, value: String) -> Response {
        self.extra_headers.push((name, value));
        self
    }

    /// Marks the connection for closing.
    pub fn closing(mut self) -> Response {
        self.close = true;
        self
    }

    /// Says `Connection: keep-alive` (to a client that asked for it, as an HTTP/1.0 client
    /// must, to know the connection stays open), unless the response closes it.
    pub fn keeping_alive(mut self) -> Response {
        if !self.close {
            self.extra_headers
                .push(("Connection", "keep-alive".to_string()));
        }
        self
    }

    /// Appends the response's bytes to `out`; `head_only` omits the body (HEAD).
    pub fn write_to(&self, out: &mut Vec<u8>, head_only: bool) {
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status.code(),
            self.status.reason(),
            self.content_type,
            self.body.len()
        );
        write_date(out);
        if let Some(seconds) = self.retry_after_s {
            let _ = write!(out, "Retry-After: {seconds}\r\n");
        }
        for (name, value) in &self.extra_headers {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        if self.close {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !head_only {
            out.extend_from_slice(&self.body);
        }
    }
}

thread_local! {
    /// This thread's `Date` header line and the second it names: formatted once a second.
    static DATE_LINE: std::cell::RefCell<(u64, String)> =
        const { std::cell::RefCell::new((u64::MAX, String::new())) };
}

/// Appends the `Date` header (RFC 9110 6.6.1: an origin server with a clock sends it), in
/// the IMF-fixdate form, of the current second.
fn write_date(out: &mut Vec<u8>) {
    let now = std::time::SystemTime::now();
    let second = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE_LINE.with(|line| {
        let mut line = line.borrow_mut();
        if line.0 != second {
            *line = (
                second,
                format!("Date: {}\r\n", httpdate::fmt_http_date(now)),
            );
        }
        out.extend_from_slice(line.1.as_bytes());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_a_json_body_with_its_length() {
        let mut out = Vec::new();
        Response::error(Status::NotFound, "not found")
            .retry_after(2)
            .write_to(&mut out, false);
        let text = String::from_utf8(out).unwrap();
        // The date line is this second's, in the IMF-fixdate form.
        let date_at = text.find("Date: ").expect("a Date header");
        let date_end = date_at + text[date_at..].find("\r\n").unwrap() + 2;
        let date = &text[date_at + 6..date_end - 2];
        assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
        assert_eq!(date.len(), 29, "{date}");
        let without_date = format!("{}{}", &text[..date_at], &text[date_end..]);
        assert_eq!(
            without_date,
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 21\r\nRetry-After: 2\r\n\r\n{\"error\":\"not found\"}"
        );
    }
}
