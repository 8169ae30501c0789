//! WebSocket channels on the same event loops as HTTP: `/ws/user` (CONTRACT 14) and
//! `/ws/market` (CONTRACT 16). The handshake is answered by the HTTP layer; frames are read
//! and written with tungstenite over the non-blocking socket.

pub mod conn;
pub mod feed;

use std::sync::Arc;

use ladder_engine::{format_price, BookView, Bytes32, UNITS_PER_SHARE};
use ladder_protocol::U256;
use serde_json::{json, Map, Value};
use sha1::{Digest, Sha1};

use crate::convert::{engine_token, wire_b256, wire_token};
use crate::http::Request;

/// Which channel a connection is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsKind {
    /// `/ws/user`: the caller's order and trade events.
    User,
    /// `/ws/market`: public book deltas and trades of subscribed markets.
    Market,
}

/// Largest outbound queue of one connection (CONTRACT 18: 1 MiB).
pub const OUTBOUND_BYTES_MAX: usize = 1024 * 1024;
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
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    Ok(format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    )
    .into_bytes())
}

/// A parsed `/ws/market` message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarketMessage {
    /// Subscribe (the first message, or `operation: subscribe`), or ask for fresh books.
    Subscribe(Vec<Bytes32>),
    /// Stop receiving these assets' markets.
    Unsubscribe(Vec<Bytes32>),
}

/// Parses a `/ws/market` message: `{"type":"market","assets_ids":[...]}` or
/// `{"operation":"subscribe"|"unsubscribe"|"snapshot","assets_ids":[...]}`.
pub fn parse_market_message(text: &str) -> Result<MarketMessage, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| "expected a JSON object".to_string())?;
    let assets = value
        .get("assets_ids")
        .and_then(Value::as_array)
        .ok_or("assets_ids: expected an array of token ids")?;
    if assets.len() > ASSETS_PER_MESSAGE_MAX {
        return Err(format!("assets_ids: at most {ASSETS_PER_MESSAGE_MAX}"));
    }
    let tokens = assets
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let text = a
                .as_str()
                .ok_or(format!("assets_ids[{i}]: expected a decimal string"))?;
            U256::from_dec_str(text)
                .map(|t| engine_token(&t))
                .map_err(|e| format!("assets_ids[{i}]: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    match (
        value.get("operation").and_then(Value::as_str),
        value.get("type").and_then(Value::as_str),
    ) {
        (Some("unsubscribe"), _) => Ok(MarketMessage::Unsubscribe(tokens)),
        (Some("subscribe" | "snapshot"), _) | (None, Some("market" | "MARKET")) => {
            Ok(MarketMessage::Subscribe(tokens))
        }
        _ => Err(
            "expected {\"type\":\"market\",...} or operation subscribe, unsubscribe or snapshot"
                .into(),
        ),
    }
}

/// The `book` event of one token (CONTRACT 16), with Polymarket's hash.
pub fn book_frame(view: &BookView, timestamp_ms: u64) -> Arc<str> {
    let level = |&(price, size): &(u32, u64)| json!({ "price": format_price(price), "size": (size / UNITS_PER_SHARE).to_string() });
    let m = &view.market;
    let mut book = Map::new();
    book.insert("event_type".into(), json!("book"));
    book.insert("market".into(), json!(wire_b256(&m.condition_id)));
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
