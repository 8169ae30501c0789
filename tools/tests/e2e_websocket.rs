//! WebSocket channels end to end: `/ws/user` order and trade events with a rising `seq`,
//! bad auth closed with 1008, PING/PONG; `/ws/market` book snapshot then deltas whose
//! sequence rises by one and which, applied to the snapshot, give `GET /book`.

mod support;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::Duration;

use ladder_client::{unix_now_s, Trader};
use ladder_protocol::wire::OrderType;
use ladder_protocol::{L2Secret, Side};
use serde_json::{json, Value};
use support::*;
use tungstenite::{connect, Message, WebSocket};

type Ws = WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

fn open(service: &Service, path: &str) -> Ws {
    let url = format!("{}{path}", service.url.replace("http://", "ws://"));
    let (ws, _) = connect(url).expect("websocket connect");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    ws
}

/// The next JSON object (frames may hold an array of them).
fn next(ws: &mut Ws, queue: &mut Vec<Value>) -> Value {
    loop {
        if !queue.is_empty() {
            return queue.remove(0);
        }
        match ws.read().expect("a frame") {
            Message::Text(text) => {
                match serde_json::from_str::<Value>(text.as_str()).expect("json") {
                    Value::Array(list) => queue.extend(list),
                    other => return other,
                }
            }
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

fn user_subscribe(trader: &Trader) -> String {
    let creds = trader.credentials.as_ref().unwrap();
    let ts = unix_now_s().to_string();
    let signature = L2Secret::from_base64(&creds.secret)
        .unwrap()
        .sign(&ts, "GET", "/ws/user", b"");
    json!({ "type": "user", "auth": { "apiKey": creds.api_key.to_string(), "passphrase": creds.passphrase, "timestamp": ts, "signature": signature }, "markets": [] }).to_string()
}

/// The `ladder_ws_channel_connections` gauge of `channel` in GET /metrics.
fn channel_gauge(service: &Service, channel: &str) -> String {
    let r = service
        .http()
        .request("GET", "/metrics", &[], None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let prefix = format!("ladder_ws_channel_connections{{channel=\"{channel}\"}} ");
    r.body
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {prefix} in /metrics"))
        .to_string()
}

#[test]
fn the_user_channel_streams_order_and_trade_events_with_a_rising_seq() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    assert_eq!(channel_gauge(&service, "user"), "0");
    let mut ws = open(&service, "/ws/user");
    assert_eq!(channel_gauge(&service, "user"), "1");
    assert_eq!(channel_gauge(&service, "market"), "0");
    ws.send(Message::text(user_subscribe(&alice))).unwrap();
    ws.send(Message::text("PING")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("PONG"));
    let mut q = Vec::new();
    alice
        .place(yes(), Side::Buy, 5_500, 10, OrderType::Gtc)
        .unwrap();
    let placed = next(&mut ws, &mut q);
    assert_eq!(
        (placed["event_type"].clone(), placed["type"].clone()),
        (json!("order"), json!("PLACEMENT"))
    );
    assert_eq!(placed["status"], json!("live"));
    assert_eq!(placed["price"], json!("0.55"));
    assert_eq!(placed["seq"], json!(1));
    bob.place(yes(), Side::Sell, 5_500, 4, OrderType::Gtc)
        .unwrap();
    let mut kinds = Vec::new();
    for expected_seq in 2..=3 {
        let e = next(&mut ws, &mut q);
        assert_eq!(e["seq"], json!(expected_seq));
        kinds.push((
            e["event_type"].as_str().unwrap().to_string(),
            e.get("type").cloned(),
            e.get("trader_side").cloned(),
        ));
    }
    assert!(
        kinds.contains(&("order".into(), Some(json!("UPDATE")), None)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("trade".into(), None, Some(json!("MAKER")))),
        "{kinds:?}"
    );
}

#[test]
fn a_bad_user_subscription_gets_an_error_and_close_1008() {
    let service = Service::start(&[]);
    let mut ws = open(&service, "/ws/user");
    ws.send(Message::text(json!({ "type": "user", "auth": { "apiKey": "00000000-0000-4000-8000-000000000000", "passphrase": "x", "secret": "eA==" } }).to_string())).unwrap();
    let first = ws.read().unwrap();
    assert!(first.to_text().unwrap().contains("\"error\""), "{first:?}");
    match ws.read() {
        Ok(Message::Close(Some(frame))) => assert_eq!(u16::from(frame.code), 1008),
        other => panic!("expected close 1008, got {other:?}"),
    }
}

fn apply(book: &mut BTreeMap<String, String>, price: &str, size: &str) {
    if size == "0" {
        book.remove(price);
    } else {
        book.insert(price.to_string(), size.to_string());
    }
}

fn side_map(levels: &Value) -> BTreeMap<String, String> {
    levels
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["price"].as_str().unwrap().to_string(),
                l["size"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn market_deltas_applied_to_the_snapshot_give_the_book_at_the_same_seq() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    alice
        .place(yes(), Side::Buy, 4_000, 3, OrderType::Gtc)
        .unwrap();
    let mut ws = open(&service, "/ws/market");
    ws.send(Message::text(
        json!({ "type": "market", "assets_ids": [YES, "123"] }).to_string(),
    ))
    .unwrap();
    let mut q = Vec::new();
    let mut got_error = false;
    let mut snapshot = Value::Null;
    while snapshot.is_null() {
        let e = next(&mut ws, &mut q);
        if e.get("error").is_some() {
            got_error = true;
        } else {
            snapshot = e;
        }
    }
    if !got_error {
        assert!(
            next(&mut ws, &mut q).get("error").is_some(),
            "unknown asset reported"
        );
    }
    assert_eq!(snapshot["event_type"], json!("book"));
    let mut seq = snapshot["seq"].as_u64().unwrap();
    let (mut bids, mut asks) = (side_map(&snapshot["bids"]), side_map(&snapshot["asks"]));
    // A stream of orders of both traders on both tokens, with trades.
    let orders: [(usize, bool, Side, u32, u64); 8] = [
        (0, true, Side::Buy, 4_500, 5),
        (1, true, Side::Sell, 6_000, 4),
        (1, false, Side::Buy, 3_000, 2),
        (1, true, Side::Sell, 4_500, 2),
        (0, false, Side::Sell, 5_000, 3),
        (1, true, Side::Buy, 5_200, 1),
        (0, true, Side::Sell, 3_900, 6),
        (1, false, Side::Buy, 6_500, 2),
    ];
    for (who, on_yes, side, price, size) in orders {
        let t: &mut Trader = if who == 0 { &mut alice } else { &mut bob };
        let r = t
            .place(
                if on_yes { yes() } else { no() },
                side,
                price,
                size,
                OrderType::Gtc,
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let book = service
        .http()
        .request("GET", &format!("/book?token_id={YES}"), &[], None)
        .unwrap()
        .json();
    let target_seq = book["seq"].as_u64().unwrap();
    while seq < target_seq {
        let e = next(&mut ws, &mut q);
        assert_eq!(e["seq"].as_u64().unwrap(), seq + 1, "no gap: {e}");
        seq += 1;
        if e["event_type"] == "price_change" {
            for change in e["price_changes"].as_array().unwrap() {
                if change["asset_id"] != json!(YES) {
                    continue;
                }
                let side = if change["side"] == "BUY" {
                    &mut bids
                } else {
                    &mut asks
                };
                apply(
                    side,
                    change["price"].as_str().unwrap(),
                    change["size"].as_str().unwrap(),
                );
            }
        } else {
            assert_eq!(e["event_type"], json!("last_trade_price"));
        }
    }
    assert_eq!(bids, side_map(&book["bids"]));
    assert_eq!(asks, side_map(&book["asks"]));
}
