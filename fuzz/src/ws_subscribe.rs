//! The WebSocket subscribe parsers on arbitrary text: `ladder_gateway::ws::parse_market_message`
//! (`/ws/market`) and `ladder_gateway::ws::conn::parse_user_subscribe` (`/ws/user`).
//!
//! Besides never panicking, a message that parses must parse the same when written out again
//! from what was parsed (the token ids in decimal, the condition ids in hex). The opaque `auth`
//! object is only required to stay an object: JSON floats need not survive a round trip.

use ladder_gateway::convert::wire_token;
use ladder_gateway::ws::conn::parse_user_subscribe;
use ladder_gateway::ws::{parse_market_message, MarketOperation};
use serde_json::json;

/// Checks both parsers on one input (bytes that are not UTF-8 are replaced, as text frames
/// always are UTF-8).
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);

    if let Ok(message) = parse_market_message(&text) {
        let operation = match message.operation {
            MarketOperation::Subscribe => "subscribe",
            MarketOperation::Unsubscribe => "unsubscribe",
            MarketOperation::Snapshot => "snapshot",
        };
        let ids: Vec<String> = message
            .tokens
            .iter()
            .map(|t| wire_token(t).to_string())
            .collect();
        let written = json!({ "operation": operation, "assets_ids": ids }).to_string();
        let again = parse_market_message(&written)
            .unwrap_or_else(|e| panic!("the written message fails to parse: {e}: {written}"));
        assert_eq!(again.operation, message.operation, "{written}");
        assert_eq!(again.tokens, message.tokens, "{written}");
        assert!(again.rejected.is_empty(), "{written}");
    }

    if let Ok((auth, markets)) = parse_user_subscribe(&text) {
        assert!(auth.is_object());
        let ids: Vec<String> = markets.iter().map(|m| m.to_string()).collect();
        let written = json!({ "type": "user", "auth": auth, "markets": ids }).to_string();
        let (auth_again, markets_again) = parse_user_subscribe(&written)
            .unwrap_or_else(|e| panic!("the written subscribe fails to parse: {e}: {written}"));
        assert!(auth_again.is_object());
        assert_eq!(markets_again, markets, "{written}");
    }
}
