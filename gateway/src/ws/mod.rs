//! WebSocket channels on the same event loops as HTTP: `/ws/user` (API.md §16) and
//! `/ws/market` (API.md §17). The handshake is answered by the HTTP layer; frames are read
//! and written with tungstenite over the non-blocking socket.

pub mod conn;
pub mod feed;

use std::sync::Arc;

use ladder_engine::{format_price_ticks, BookView, Bytes32, UNITS_PER_SHARE};
use ladder_protocol::U256;
use serde_json::{json, Map, Value};
use sha1::{Digest, Sha1};

use crate::convert::{engine_token, wire_token};
use crate::http::Request;

/// Which channel a connection is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsKind {
    /// `/ws/user`: the caller's order and trade events.
    User,
    /// `/ws/market`: public book deltas and trades of subscribed markets.
    Market,
}

/// The buffer a connection reads clients' frames into (tungstenite's default, 128 KiB, is
/// zeroed whole before each read and stays resident: 129 KiB of memory per connection).
/// Clients send small messages; a larger frame grows the buffer as it needs.
pub const INBOUND_READ_BUFFER_BYTES: usize = 4 * 1024;

/// Largest outbound queue of one connection (API.md §17: 1 MiB), before its next frame.
pub const OUTBOUND_BYTES_MAX: usize = 1024 * 1024;

/// How long a `/ws/user` connection may hold frames past [`OUTBOUND_BYTES_MAX`] (API.md
/// §16): a burst of one user's events reaches a client that reads it within this time.
pub const USER_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(1);

/// The most a `/ws/user` connection holds past [`OUTBOUND_BYTES_MAX`] while it catches up (a
/// sweep or a cancel-all of ~10,000 of one maker's orders).
pub const USER_OUTBOUND_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The most every `/ws/user` connection together holds past [`OUTBOUND_BYTES_MAX`]: past it, a
/// connection with more to hold is closed as a slow consumer.
pub const USER_OVERFLOW_POOL_BYTES_MAX: usize = 256 * 1024 * 1024;

/// The longest header of a frame the server sends (unmasked, 64-bit length).
pub const FRAME_HEADER_BYTES_MAX: usize = 10;
/// Largest inbound message.
pub const INBOUND_MESSAGE_BYTES_MAX: usize = 64 * 1024;
/// Most assets one market subscription may name.
pub const ASSETS_PER_MESSAGE_MAX: usize = 500;
/// Seconds within which the first (subscribe) message must arrive.
pub const SUBSCRIBE_TIMEOUT_S: u64 = 10;

/// The channel a request asks to upgrade to, if it is a WebSocket upgrade.
pub fn upgrade_kind(request: &Request) -> Option<WsKind> {
    let upgrade = request.header("upgrade")?;
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return None;
    }
    match request.path().trim_end_matches('/') {
        "/ws/user" => Some(WsKind::User),
        "/ws/market" => Some(WsKind::Market),
        _ => None,
    }
}

/// The `101 Switching Protocols` answer to an upgrade, or why it is refused.
pub fn handshake_response(request: &Request) -> Result<Vec<u8>, &'static str> {
    if request.method != crate::http::Method::Get {
        return Err("websocket upgrade needs GET");
    }
    if request.header("sec-websocket-version") != Some("13") {
        return Err("Sec-WebSocket-Version must be 13");
    }
    let key = request
        .header("sec-websocket-key")
        .ok_or("Sec-WebSocket-Key is required")?;
    // RFC 6455 4.1: a base64 nonce of 16 bytes, which encodes to 24 characters.
    let nonce_like = key.len() == 24
        && key.ends_with("==")
        && key[..22]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/');
    if !nonce_like {
        return Err("Sec-WebSocket-Key must be a base64-encoded 16-byte nonce");
    }
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    Ok(format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    )
    .into_bytes())
}

/// What a `/ws/market` message asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarketOperation {
    /// Follow these tokens' markets (the first message, or `operation: subscribe`).
    Subscribe,
    /// Stop following these tokens' markets.
    Unsubscribe,
    /// Send fresh books of these tokens (empty: of every token subscribed so far).
    Snapshot,
}

/// A parsed `/ws/market` message: the operation, the token ids that parsed, and an error
/// text for each id that did not (those are answered with `{"error"}`; the rest still count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarketMessage {
    /// What is asked.
    pub operation: MarketOperation,
    /// The token ids that parsed, in the order given.
    pub tokens: Vec<Bytes32>,
    /// Why each id that did not parse was refused, naming it by its index.
    pub rejected: Vec<String>,
}

/// Parses a `/ws/market` message: `{"type":"market","assets_ids":[...]}` or
/// `{"operation":"subscribe"|"unsubscribe"|"snapshot","assets_ids":[...]}`. The message as a
/// whole fails only when it is not such an object; a bad id is listed in `rejected`.
pub fn parse_market_message(text: &str) -> Result<MarketMessage, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| "expected a JSON object".to_string())?;
    let operation = match (
        value.get("operation").and_then(Value::as_str),
        value.get("type").and_then(Value::as_str),
    ) {
        (Some("unsubscribe"), _) => MarketOperation::Unsubscribe,
        (Some("snapshot"), _) => MarketOperation::Snapshot,
        (Some("subscribe"), _) | (None, Some("market" | "MARKET")) => MarketOperation::Subscribe,
        _ => return Err(
            "expected {\"type\":\"market\",...} or operation subscribe, unsubscribe or snapshot"
                .into(),
        ),
    };
    let assets = value
        .get("assets_ids")
        .and_then(Value::as_array)
        .ok_or("assets_ids: expected an array of token ids")?;
    if assets.len() > ASSETS_PER_MESSAGE_MAX {
        return Err(format!("assets_ids: at most {ASSETS_PER_MESSAGE_MAX}"));
    }
    let mut message = MarketMessage {
        operation,
        tokens: Vec::with_capacity(assets.len()),
        rejected: Vec::new(),
    };
    for (i, asset) in assets.iter().enumerate() {
        let parsed = asset
            .as_str()
            .ok_or_else(|| format!("assets_ids[{i}]: expected a decimal string"))
            .and_then(|text| {
                U256::from_dec_str(text)
                    .map_err(|e| format!("assets_ids[{i}]: unknown asset id {text:?}: {e}"))
            });
        match parsed {
            // An id named twice is one subscription (and one book); a snapshot sends a book
            // per id named (API.md §17).
            Ok(token)
                if operation != MarketOperation::Snapshot
                    && message.tokens.contains(&engine_token(&token)) => {}
            Ok(token) => message.tokens.push(engine_token(&token)),
            Err(e) => message.rejected.push(e),
        }
    }
    Ok(message)
}

/// The `book` event of one token (API.md §17), with Polymarket's hash.
pub fn book_frame(view: &BookView, timestamp_ms: u64) -> Arc<str> {
    let level = |&(price, size): &(u32, u64)| json!({ "price": format_price_ticks(price), "size": (size / UNITS_PER_SHARE).to_string() });
    let m = &view.market;
    let mut book = Map::new();
    book.insert("event_type".into(), json!("book"));
    book.insert("market".into(), json!(m.condition_id));
    book.insert(
        "asset_id".into(),
        json!(wire_token(&m.token_id(view.outcome)).to_string()),
    );
    book.insert("seq".into(), json!(m.event_seq));
    book.insert("timestamp".into(), json!(timestamp_ms.to_string()));
    book.insert("hash".into(), json!(""));
    book.insert(
        "bids".into(),
        Value::Array(view.bids.iter().rev().map(level).collect()),
    );
    book.insert(
        "asks".into(),
        Value::Array(view.asks.iter().rev().map(level).collect()),
    );
    let hash = hex::encode(Sha1::digest(
        Value::Object(book.clone()).to_string().as_bytes(),
    ));
    book.insert("hash".into(), json!(hash));
    Arc::from(Value::Object(book).to_string())
}

/// `{"error": message}`.
pub fn error_frame(message: &str) -> String {
    json!({ "error": message }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_id_is_rejected_alone_and_the_good_ones_still_count() {
        let message =
            parse_market_message(r#"{"type":"market","assets_ids":["12","0xzz",7,"34"]}"#)
                .expect("the message parses");
        assert_eq!(message.operation, MarketOperation::Subscribe);
        assert_eq!(
            message.tokens,
            vec![
                engine_token(&U256::from(12u64)),
                engine_token(&U256::from(34u64))
            ]
        );
        assert_eq!(message.rejected.len(), 2);
        assert!(message.rejected[0].starts_with("assets_ids[1]: "));
        assert!(message.rejected[1].starts_with("assets_ids[2]: "));
    }

    #[test]
    fn an_id_named_twice_is_one_subscription() {
        let message = parse_market_message(r#"{"type":"market","assets_ids":["12","34","12"]}"#)
            .expect("the message parses");
        assert_eq!(
            message.tokens,
            vec![
                engine_token(&U256::from(12u64)),
                engine_token(&U256::from(34u64))
            ]
        );
    }

    #[test]
    fn the_upgrade_key_must_be_a_16_byte_base64_nonce() {
        let upgrade = |key: &str| {
            let text = format!(
                "GET /ws/market HTTP/1.1\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n"
            );
            let (request, _) = crate::http::parse_request(text.as_bytes())
                .unwrap()
                .unwrap();
            handshake_response(&request).map(|_| ())
        };
        assert_eq!(upgrade("dGhlIHNhbXBsZSBub25jZQ=="), Ok(()));
        for key in [
            "abc",
            "",
            "dGhlIHNhbXBsZSBub25jZQ",
            "dGhlIHNhbXBsZSBub25j!Q==",
        ] {
            assert_eq!(
                upgrade(key),
                Err("Sec-WebSocket-Key must be a base64-encoded 16-byte nonce"),
                "{key:?}"
            );
        }
    }

    #[test]
    fn operations_are_told_apart_and_a_message_without_one_fails() {
        let op = |text: &str| parse_market_message(text).map(|m| m.operation);
        assert_eq!(
            op(r#"{"operation":"snapshot","assets_ids":[]}"#),
            Ok(MarketOperation::Snapshot)
        );
        assert_eq!(
            op(r#"{"operation":"unsubscribe","assets_ids":["1"]}"#),
            Ok(MarketOperation::Unsubscribe)
        );
        assert_eq!(
            op(r#"{"operation":"subscribe","assets_ids":["1"]}"#),
            Ok(MarketOperation::Subscribe)
        );
        assert!(op(r#"{"operation":"drop","assets_ids":["1"]}"#).is_err());
        assert!(op(r#"{"type":"market"}"#).is_err());
        assert!(op("not json").is_err());
    }
}
