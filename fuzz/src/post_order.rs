//! The order and cancel body parsers of `ladder_protocol::wire` on arbitrary bytes: POST /order,
//! POST /orders, DELETE /order, DELETE /orders and DELETE /cancel-market-orders.
//!
//! Besides never panicking, whatever parses must write (`to_json`) a body that parses back to
//! the same value.

use ladder_protocol::wire::{
    parse_cancel_orders, parse_post_orders, CancelMarketOrdersRequest, CancelOrderRequest,
    PostOrderRequest,
};

/// Checks every parser on one input.
pub fn check(data: &[u8]) {
    if let Ok(request) = PostOrderRequest::parse(data) {
        let json = request.to_json();
        assert_eq!(
            PostOrderRequest::parse(json.as_bytes()),
            Ok(request),
            "{json}"
        );
    }
    if let Ok(batch) = parse_post_orders(data) {
        let json = array_of(batch.iter().map(PostOrderRequest::to_json));
        assert_eq!(parse_post_orders(json.as_bytes()), Ok(batch), "{json}");
    }
    if let Ok(request) = CancelOrderRequest::parse(data) {
        let json = request.to_json();
        assert_eq!(
            CancelOrderRequest::parse(json.as_bytes()),
            Ok(request),
            "{json}"
        );
    }
    if let Ok(batch) = parse_cancel_orders(data) {
        let json = array_of(batch.iter().map(CancelOrderRequest::to_json));
        assert_eq!(parse_cancel_orders(json.as_bytes()), Ok(batch), "{json}");
    }
    if let Ok(request) = CancelMarketOrdersRequest::parse(data) {
        let json = request.to_json();
        assert_eq!(
            CancelMarketOrdersRequest::parse(json.as_bytes()),
            Ok(request),
            "{json}"
        );
    }
}

/// `[a,b,...]` of JSON texts.
fn array_of(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(","))
}
