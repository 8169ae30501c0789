//! `ladder_gateway::http::parse_request` on arbitrary bytes.
//!
//! Besides never panicking, a complete request must:
//! - consume no more than it was given, and parse the same from exactly the bytes it consumed;
//! - be incomplete (`Ok(None)`) when any shorter prefix of those bytes is given, as the
//!   connection code feeds a request to the parser while it is still arriving;
//! - parse back to the same method, target, headers and body when written out again (a
//!   chunked body written chunked again).

use ladder_gateway::http::{parse_request, HEADER_BYTES_MAX};

/// Checks the properties above for one input.
pub fn check(data: &[u8]) {
    let Ok(Some((request, used))) = parse_request(data) else {
        return;
    };
    assert!(
        used <= data.len(),
        "consumed {used} of {} bytes",
        data.len()
    );
    assert!(used >= request.body.len());
    assert!(request.target.starts_with('/'));
    let _ = (
        request.path(),
        request.query(),
        request.header("content-length"),
    );

    let exact = &data[..used];
    assert_eq!(parse_request(exact), Ok(Some((request.clone(), used))));
    for cut in [0, used / 2, used.saturating_sub(1)] {
        if cut < used {
            assert_eq!(
                parse_request(&exact[..cut]),
                Ok(None),
                "a {cut}-byte prefix of a complete {used}-byte request"
            );
        }
    }

    let mut written = format!(
        "{} {} HTTP/1.1\r\n",
        request.method.as_str(),
        request.target
    );
    for (name, value) in &request.headers {
        written.push_str(&format!("{name}: {value}\r\n"));
    }
    written.push_str("\r\n");
    // Written with CRLF, a head sent with bare LFs grows: it may pass the limit.
    if written.len() > HEADER_BYTES_MAX {
        return;
    }
    let mut written = written.into_bytes();
    // A chunked request's body is written chunked again: one chunk, then the last. Framing
    // headers are matched by their exact names (`header` also takes `_` for `-`, for the
    // credential headers; `Transfer_Encoding` frames nothing).
    if request
        .headers
        .iter()
        .any(|(name, _)| name == "transfer-encoding")
    {
        if !request.body.is_empty() {
            written.extend_from_slice(format!("{:x}\r\n", request.body.len()).as_bytes());
            written.extend_from_slice(&request.body);
            written.extend_from_slice(b"\r\n");
        }
        written.extend_from_slice(b"0\r\n\r\n");
    } else {
        written.extend_from_slice(&request.body);
    }
    let (again, used_again) = parse_request(&written)
        .unwrap_or_else(|e| panic!("the written request fails to parse: {e:?}"))
        .expect("the written request is complete");
    assert_eq!(used_again, written.len());
    assert_eq!(again.method, request.method);
    assert_eq!(again.target, request.target);
    assert_eq!(again.headers, request.headers);
    assert_eq!(again.body, request.body);
}
