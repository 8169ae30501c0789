//! HTTP/1.1 on bytes: parsing requests (httparse) and writing responses, with every size
//! bounded. No I/O here: the connection code feeds bytes in and takes bytes out.

mod progress;
mod request;
mod response;

pub use progress::RequestProgress;
pub use request::{
    body_limit, parse_front, parse_request, HttpError, Method, Parsed, Request,
    BATCH_CANCEL_BODY_BYTES_MAX, BODY_BYTES_MAX, HEADERS_MAX, HEADER_BYTES_MAX,
};
pub use response::{Response, Status};
