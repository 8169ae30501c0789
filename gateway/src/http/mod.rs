//! HTTP/1.1 on bytes: parsing requests (httparse) and writing responses, with every size
//! bounded. No I/O here: the connection code feeds bytes in and takes bytes out.

mod chunked;
mod progress;
mod request;
mod response;

pub use progress::RequestProgress;
pub use request::{
    body_limit, parse_front, parse_request, ChunkWait, HttpError, Method, Parsed, Request,
    BATCH_CANCEL_BODY_BYTES_MAX, BODY_BYTES_MAX, HEADERS_MAX, HEADER_BYTES_MAX,
};
pub use response::{Response, Status};

/// Whether `text` is a plain decimal number: ASCII digits only, at least one (no sign, no
/// spaces: Rust's `parse` would take a leading `+`), of any size.
pub fn is_decimal(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A header or query value that must be a plain decimal number ([`is_decimal`]) within `u64`.
pub fn decimal_u64(text: &str) -> Option<u64> {
    is_decimal(text).then(|| text.parse().ok()).flatten()
}
