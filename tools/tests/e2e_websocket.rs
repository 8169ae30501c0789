//! WebSocket channels end to end: `/ws/user` order and trade events with a rising `seq`,
//! bad auth closed with 1008, PING/PONG; `/ws/market` book snapshot then deltas whose
//! sequence rises by one and which, applied to the snapshot, give `GET /book`.

mod helpers;
mod support;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::Duration;

use helpers::metric;
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

/// A `/ws/market` connection subscribed to the Yes token, its first book read; and the
/// queue of objects read but not yet taken.
fn following_yes(service: &Service) -> (Ws, Vec<Value>) {
    let mut ws = open(service, "/ws/market");
    ws.send(Message::text(
        json!({ "type": "market", "assets_ids": [YES] }).to_string(),
    ))
    .unwrap();
    let mut q = Vec::new();
    assert_eq!(next(&mut ws, &mut q)["event_type"], json!("book"));
    (ws, q)
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
    metric(
        service,
        &format!("ladder_ws_channel_connections{{channel=\"{channel}\"}}"),
    )
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
fn a_taker_is_announced_by_a_placement_before_its_trade_and_final_update() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    alice
        .place(yes(), Side::Buy, 5_500, 4, OrderType::Gtc)
        .unwrap();
    let mut ws = open(&service, "/ws/user");
    ws.send(Message::text(user_subscribe(&bob))).unwrap();
    ws.send(Message::text("PING")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("PONG"));
    let mut q = Vec::new();
    bob.place(yes(), Side::Sell, 5_000, 4, OrderType::Gtc)
        .unwrap();
    let events: Vec<Value> = (1..=3).map(|_| next(&mut ws, &mut q)).collect();
    let seqs: Vec<Value> = events.iter().map(|e| e["seq"].clone()).collect();
    assert_eq!(seqs, [json!(1), json!(2), json!(3)]);
    let placement = &events[0];
    assert_eq!(
        (
            &placement["event_type"],
            &placement["type"],
            &placement["status"]
        ),
        (&json!("order"), &json!("PLACEMENT"), &json!("live"))
    );
    assert_eq!(placement["size_matched"], json!("0"));
    let kinds: Vec<(Value, Value, Value)> = events[1..]
        .iter()
        .map(|e| {
            (
                e["event_type"].clone(),
                e.get("type").cloned().unwrap_or(Value::Null),
                e.get("status").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    assert!(
        kinds.contains(&(json!("order"), json!("UPDATE"), json!("matched"))),
        "{kinds:?}"
    );
    assert!(
        kinds
            .iter()
            .any(|(event_type, _, _)| event_type == &json!("trade")),
        "{kinds:?}"
    );
    for e in &events {
        if e["event_type"] == json!("order") {
            assert_eq!(e["id"], placement["id"], "the taker's own order");
        }
    }
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
    // A field of the wrong type is named as such, not taken for a missing one.
    let mut ws = open(&service, "/ws/user");
    ws.send(Message::text(json!({ "type": "user", "auth": { "apiKey": "00000000-0000-4000-8000-000000000000", "passphrase": "x", "timestamp": 1_700_000_000u64, "signature": "x" } }).to_string())).unwrap();
    let first: Value = serde_json::from_str(ws.read().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(
        first,
        json!({ "error": "auth.timestamp: expected a string" })
    );
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

/// The next frame's text (panics on a close or a timeout).
fn next_text(ws: &mut Ws) -> String {
    loop {
        match ws.read().expect("a frame") {
            Message::Text(text) => return text.as_str().to_string(),
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

#[test]
fn bad_ids_get_errors_the_connection_stays_and_a_market_stops_when_no_token_of_it_is_subscribed() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut ws = open(&service, "/ws/market");
    ws.send(Message::text(
        json!({ "type": "market", "assets_ids": ["0xnot-decimal", YES] }).to_string(),
    ))
    .unwrap();
    let error: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("assets_ids[0]"),
        "{error}"
    );
    let book: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert_eq!(book["event_type"], json!("book"), "{book}");
    assert_eq!(book["asset_id"], json!(YES));

    // An empty snapshot request sends the books of the tokens subscribed so far.
    ws.send(Message::text(
        json!({ "operation": "snapshot", "assets_ids": [] }).to_string(),
    ))
    .unwrap();
    let again: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert_eq!(
        (again["event_type"].clone(), again["asset_id"].clone()),
        (json!("book"), json!(YES))
    );

    // The set names both tokens; taking one out keeps the market (the other still delivers
    // all of it), taking out the other stops it. An id not in the set (unknown, or taken
    // out before) gets an error naming it; the connection stays.
    ws.send(Message::text(
        json!({ "operation": "subscribe", "assets_ids": [NO] }).to_string(),
    ))
    .unwrap();
    let book: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert_eq!(book["asset_id"], json!(NO), "{book}");
    ws.send(Message::text(
        json!({ "operation": "unsubscribe", "assets_ids": [YES, "77"] }).to_string(),
    ))
    .unwrap();
    let error: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert_eq!(
        error,
        json!({"error": "unsubscribe: asset id 77 is not subscribed"})
    );
    let r = alice
        .place(yes(), Side::Buy, 4_100, 2, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let change: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert_eq!(change["event_type"], json!("price_change"), "{change}");
    ws.send(Message::text(
        json!({ "operation": "unsubscribe", "assets_ids": [NO, YES] }).to_string(),
    ))
    .unwrap();
    let error: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert_eq!(
        error,
        json!({"error": format!("unsubscribe: asset id {YES} is not subscribed")})
    );
    ws.send(Message::text("PING")).unwrap();
    assert_eq!(next_text(&mut ws), "PONG");
    let r = alice
        .place(yes(), Side::Buy, 4_200, 2, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    std::thread::sleep(Duration::from_millis(300));
    ws.send(Message::text("PING")).unwrap();
    assert_eq!(next_text(&mut ws), "PONG", "no event after unsubscribing");
}

#[test]
fn a_consumer_that_stops_reading_is_closed_with_1013_after_what_it_was_sent() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    for price in (3_000..4_000).step_by(100) {
        let r = alice
            .place(yes(), Side::Buy, price, 1, OrderType::Gtc)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let mut slow = open(&service, "/ws/market");
    slow.send(Message::text(
        json!({ "type": "market", "assets_ids": [YES] }).to_string(),
    ))
    .unwrap();
    // Each request asks for 500 books (~0.7 KB each) and nothing is read: far more than the
    // 1 MiB bound plus what the kernel buffers on both sides.
    let request = json!({ "operation": "snapshot", "assets_ids": vec![YES; 500] }).to_string();
    for _ in 0..60 {
        if slow.send(Message::text(request.clone())).is_err() {
            break;
        }
    }
    // Another subscriber is served meanwhile.
    let mut other = open(&service, "/ws/market");
    other
        .send(Message::text(
            json!({ "type": "market", "assets_ids": [NO] }).to_string(),
        ))
        .unwrap();
    let book: Value = serde_json::from_str(&next_text(&mut other)).unwrap();
    assert_eq!(book["asset_id"], json!(NO), "{book}");
    // The slow one is closed once its queue passes the bound (counted in /metrics)...
    wait_for(
        Duration::from_secs(30),
        "no slow-consumer close counted",
        || metric(&service, "ladder_ws_slow_consumer_closes_total") == "1",
    );
    // ...and, reading at last, it gets what it was sent, the error, then the close.

    let (mut books, mut last_text) = (0usize, String::new());
    let close = loop {
        match slow.read() {
            Ok(Message::Text(text)) => {
                if text.as_str().contains("\"event_type\":\"book\"") {
                    books += 1;
                }
                last_text = text.as_str().to_string();
            }
            Ok(Message::Close(frame)) => break frame,
            Ok(_) => {}
            Err(e) => panic!("no close frame after {books} books: {e}"),
        }
    };
    let frame = close.expect("a close frame with a code");
    assert_eq!(u16::from(frame.code), 1013, "{frame:?}");
    assert!(frame.reason.contains("slow consumer"), "{frame:?}");
    assert!(last_text.contains("slow consumer"), "{last_text}");
    assert!(books > 1_000, "only {books} books before the close");
    // Once the client answers the close, the connection is released.
    let _ = slow.flush();
    wait_for(
        Duration::from_secs(5),
        "the slow socket is still counted",
        || channel_gauge(&service, "market") == "1",
    );
}

/// Polls `done` every 50 ms until it holds; fails with `failure` after `limit`.
fn wait_for(limit: Duration, failure: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{failure}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads `ws` for `how_long`, answering the server's pings as any client library does;
/// panics if it closes.
fn stay_for(ws: &mut Ws, how_long: Duration) {
    let until = std::time::Instant::now() + how_long;
    while std::time::Instant::now() < until {
        match ws.read() {
            Ok(Message::Close(frame)) => panic!("closed: {frame:?}"),
            Ok(_) => {}
            Err(e) if read_timed_out(&e) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// Whether a read ended at the socket's read timeout (nothing to read yet), not in a fault.
fn read_timed_out(error: &tungstenite::Error) -> bool {
    matches!(
        error,
        tungstenite::Error::Io(e) if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    )
}

#[test]
fn a_silent_subscriber_is_pinged_and_closed_when_it_never_answers() {
    let service = Service::start(&["--ws-ping-ms", "500"]);
    let subscribe = json!({ "type": "market", "assets_ids": [YES] }).to_string();
    let mut live = open(&service, "/ws/market");
    let mut gone = open(&service, "/ws/market");
    for ws in [&mut live, &mut gone] {
        ws.send(Message::text(subscribe.clone())).unwrap();
        let mut q = Vec::new();
        assert_eq!(next(ws, &mut q)["event_type"], json!("book"));
    }
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = live.get_ref() {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
    }
    // `live` reads (and so answers pings) for 3 s: it stays. `gone` reads nothing meanwhile.
    stay_for(&mut live, Duration::from_secs(3));
    live.send(Message::text("PING")).unwrap();
    let pong = loop {
        match live.read() {
            Ok(Message::Text(text)) => break text.to_string(),
            Ok(_) => {}
            Err(tungstenite::Error::Io(_)) => {}
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(pong, "PONG");
    // `gone` was pinged, did not answer within the same time, and was closed.
    let close = loop {
        match gone.read() {
            Ok(Message::Close(frame)) => break frame,
            Ok(_) => {}
            Err(e) => panic!("no close frame: {e}"),
        }
    };
    let close = close.expect("a close frame with a reason");
    assert_eq!(u16::from(close.code), 1008);
    assert!(close.reason.contains("no pong"), "{close:?}");
}

#[test]
fn snapshot_requests_cost_a_token_per_book_and_past_the_limit_get_an_error() {
    let service = Service::start(&["--rate-limit-ip", "40"]);
    let (mut ws, mut q) = following_yes(&service);
    let snapshot = json!({ "operation": "snapshot", "assets_ids": [YES, NO] }).to_string();
    for _ in 0..30 {
        ws.send(Message::text(snapshot.clone())).unwrap();
    }
    // Each snapshot answered is two books (Yes, then No); each refused one an error.
    let (mut answered, mut refusals) = (0, 0);
    while answered + refusals < 30 {
        let e = next(&mut ws, &mut q);
        if e["event_type"] == json!("book") {
            if e["asset_id"] == json!(NO) {
                answered += 1;
            }
        } else {
            let error = e["error"].as_str().unwrap_or_default().to_string();
            assert!(error.starts_with("rate limit exceeded"), "{e}");
            refusals += 1;
        }
    }
    // 40 tokens, a few spent on the upgrade and the subscription: about 18 snapshots of two
    // books pass, the rest are refused; the connection stays.
    assert!(refusals >= 10, "{refusals} refusals");
    ws.send(Message::text("PING")).unwrap();
    let pong = loop {
        if let Message::Text(text) = ws.read().unwrap() {
            if text.as_str() == "PONG" {
                break true;
            }
        }
    };
    assert!(pong);
}

#[test]
fn a_message_far_larger_than_the_read_buffer_is_read_whole() {
    // Connections read into a 4 KiB buffer (gateway::ws::INBOUND_READ_BUFFER_BYTES), which
    // grows for a larger frame: a 40 KiB subscription (padded with JSON whitespace) works.
    let service = Service::start(&[]);
    let mut ws = open(&service, "/ws/market");
    let padding = " ".repeat(40 * 1024);
    ws.send(Message::text(format!(
        r#"{{"type":"market",{padding}"assets_ids":["{YES}"]}}"#
    )))
    .unwrap();
    let book: Value = serde_json::from_str(&next_text(&mut ws)).unwrap();
    assert_eq!(book["event_type"], json!("book"), "{book}");
    assert_eq!(book["asset_id"], json!(YES));
    ws.send(Message::text("PING")).unwrap();
    assert_eq!(next_text(&mut ws), "PONG");
}

#[test]
fn an_open_websocket_costs_the_service_kilobytes_not_a_read_buffer_of_128_kib() {
    // tungstenite's default read buffer (128 KiB, zeroed at the first read) stayed resident
    // per connection: 129 KiB each, measured with 1,000 connections. Now 4 KiB. Measured past
    // a first batch, which also pays for what the service sets up once.
    const WARM_UP: usize = 100;
    const CONNECTIONS: usize = 200;
    let service = Service::start(&["--max-connections-per-ip", "1000"]);
    // Anonymous memory only (RssAnon): the journal's mapped segments, which the service
    // touches ahead of its writes, count in the resident size too and moved it by megabytes
    // in a clean-clone CI run.
    let pid = service.pid().expect("running");
    let resident = || -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kib: f64 = status
            .lines()
            .find_map(|line| line.strip_prefix("RssAnon:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("RssAnon in /proc/PID/status");
        kib * 1024.0
    };
    let connect = |count: usize| -> Vec<Ws> {
        (0..count)
            .map(|_| {
                let mut ws = open(&service, "/ws/market");
                ws.send(Message::text("PING")).unwrap();
                assert_eq!(next_text(&mut ws), "PONG");
                ws
            })
            .collect()
    };
    let warm = connect(WARM_UP);
    let before = resident();
    let measured = connect(CONNECTIONS);
    let per_connection = (resident() - before) / CONNECTIONS as f64;
    assert!(
        per_connection < 40.0 * 1024.0,
        "{per_connection:.0} bytes per WebSocket connection"
    );
    drop((warm, measured));
}

#[test]
fn a_client_that_floods_tiny_frames_does_not_hold_up_its_loops_other_connections() {
    // One gateway loop: the flooder and the other client share it.
    let service = Service::start(&["--gateway-threads", "1"]);
    let ws = open(&service, "/ws/market");
    let tungstenite::stream::MaybeTlsStream::Plain(stream) = ws.get_ref() else {
        panic!("a plain stream");
    };
    let mut raw = stream.try_clone().unwrap();
    let flooding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flood = {
        let flooding = flooding.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            // Empty masked pong frames, a thousand to a write, for four seconds.
            let batch: Vec<u8> = [0x8A, 0x80, 1, 2, 3, 4].repeat(1000);
            let until = std::time::Instant::now() + Duration::from_secs(4);
            while std::time::Instant::now() < until {
                if raw.write_all(&batch).is_err() {
                    break;
                }
            }
            flooding.store(false, std::sync::atomic::Ordering::Release);
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    // Another client is served while the flood goes on, not after it.
    let mut http = ladder_client::HttpClient::new(&service.url).unwrap();
    let r = http.request("GET", "/time", &[], None).unwrap();
    assert_eq!(r.status, 200);
    assert!(
        flooding.load(std::sync::atomic::Ordering::Acquire),
        "GET /time was answered only once the flood stopped"
    );
    flood.join().unwrap();
    drop(ws);
}

#[test]
fn a_frame_the_protocol_forbids_is_answered_with_a_close_frame() {
    let service = Service::start(&[]);
    // (the frame's bytes, the close code expected)
    let cases: [(&[u8], u16); 5] = [
        // RSV1 set on a text frame.
        (&[0xC1, 0x80, 1, 2, 3, 4], 1002),
        // A 64-bit length with its most significant bit set (RFC 6455 5.2 forbids it).
        (&[0x81, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0], 1002),
        // A well-formed length over the 64 KiB inbound limit.
        (&[0x81, 0xFF, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0], 1009),
        // An unmasked client frame.
        (&[0x81, 0x01, b'x'], 1002),
        // Text that is not UTF-8 (0xC3 0x28 masked with 0).
        (&[0x81, 0x82, 0, 0, 0, 0, 0xC3, 0x28], 1007),
    ];
    for (frame, code) in cases {
        let mut ws = open(&service, "/ws/market");
        if let tungstenite::stream::MaybeTlsStream::Plain(stream) = ws.get_mut() {
            use std::io::Write;
            stream.write_all(frame).unwrap();
        }
        let mut raw = match ws.get_ref() {
            tungstenite::stream::MaybeTlsStream::Plain(s) => s.try_clone().unwrap(),
            _ => panic!("a plain stream"),
        };
        // The server's close frame: 0x88, a length, then the code.
        let mut head = [0u8; 4];
        use std::io::Read;
        raw.read_exact(&mut head).unwrap();
        assert_eq!(head[0], 0x88, "{frame:?}: a close frame");
        assert_eq!(u16::from_be_bytes([head[2], head[3]]), code, "{frame:?}");
    }
}

/// A snapshot asked for on a market already followed loses none of the events already on
/// their way: those up to the book's `seq` come before it, so the events' `seq`s (books
/// aside) rise by exactly one, trade prints included (CONTRACT 16).
#[test]
fn a_snapshot_request_loses_no_event_already_on_its_way() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let service = Service::start(&["--rate-limit-key", "0", "--rate-limit-ip", "0"]);
    let (mut ws, mut q) = following_yes(&service);
    // Orders fly meanwhile: a bid rests, a seller takes it.
    let stop = Arc::new(AtomicBool::new(false));
    let trading = {
        let stop = stop.clone();
        let (mut alice, mut bob) = (service.trader(0), service.trader(1));
        std::thread::spawn(move || {
            let mut price = 3_000;
            while !stop.load(Ordering::Relaxed) {
                price = if price >= 6_000 { 3_000 } else { price + 10 };
                let _ = alice.place(yes(), Side::Buy, price, 1, OrderType::Gtc);
                let _ = bob.place(yes(), Side::Sell, price, 1, OrderType::Fak);
            }
        })
    };
    let snapshot = json!({ "operation": "snapshot", "assets_ids": [YES] }).to_string();
    let started = std::time::Instant::now();
    let mut asked = std::time::Instant::now();
    let (mut events, mut books) = (Vec::new(), 0);
    while started.elapsed() < Duration::from_secs(4) {
        if asked.elapsed() > Duration::from_millis(50) {
            ws.send(Message::text(snapshot.clone())).unwrap();
            asked = std::time::Instant::now();
        }
        let e = next(&mut ws, &mut q);
        let seq = e["seq"].as_u64().expect("seq");
        if e["event_type"] == json!("book") {
            books += 1;
            // The book comes after every event it is current as of, and before any later.
            if let Some((last, _)) = events.last() {
                assert_eq!(seq, *last, "a book at seq {seq} after event {last}");
            }
        } else {
            events.push((
                seq,
                e["event_type"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    stop.store(true, Ordering::Relaxed);
    trading.join().unwrap();
    assert!(books > 20, "{books} books");
    assert!(events.len() > 50, "{} events", events.len());
    for pair in events.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "a hole after {:?}", pair[0]);
    }
}

/// One command's `price_change` can pass the 1 MiB outbound bound alone (a cancel-all of
/// 6,000 levels of a 0.0001-tick market lists 12,000 changes). The bound is on what waits
/// unread before a frame: a subscriber that reads gets the whole event and stays open.
#[test]
fn an_event_larger_than_the_outbound_bound_reaches_a_subscriber_that_reads() {
    use ladder_client::{post_orders_body, OrderBuilder};
    use ladder_protocol::wire::PostOrderRequest;
    use ladder_protocol::U256;

    let service = Service::start(&["--rate-limit-key", "0", "--rate-limit-ip", "0"]);
    let fine = helpers::create_market(&service, 7, json!({ "minimum_tick_size": 0.0001 }));
    let token: U256 = fine.yes.parse().unwrap();
    let mut alice = service.trader(0);
    const LEVELS: u32 = 6_000;
    let prices: Vec<u32> = (1..=LEVELS).collect();
    for chunk in prices.chunks(15) {
        let requests: Vec<PostOrderRequest> = chunk
            .iter()
            .map(|&price| PostOrderRequest {
                order: OrderBuilder::new(token, Side::Buy, price, 1)
                    .maker(alice.account)
                    .salt(U256::from(u64::from(price)))
                    .sign(&alice.wallet, &alice.exchange)
                    .unwrap(),
                order_type: OrderType::Gtc,
                post_only: false,
            })
            .collect();
        let r = alice
            .send("POST", "/orders", Some(&post_orders_body(&requests)))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let mut ws = open(&service, "/ws/market");
    ws.send(Message::text(
        json!({ "type": "market", "assets_ids": [fine.yes] }).to_string(),
    ))
    .unwrap();
    let mut queue = Vec::new();
    let book = next(&mut ws, &mut queue);
    assert_eq!(book["bids"].as_array().unwrap().len(), LEVELS as usize);

    let r = alice.send("DELETE", "/cancel-all", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let change = next(&mut ws, &mut queue);
    assert_eq!(change["event_type"], json!("price_change"), "{change}");
    assert_eq!(
        change["price_changes"].as_array().unwrap().len(),
        2 * LEVELS as usize,
        "every level, for both tokens"
    );
    assert_eq!(
        metric(&service, "ladder_ws_slow_consumer_closes_total"),
        "0"
    );
    // Still subscribed.
    ws.send(Message::text("PING")).unwrap();
    loop {
        match ws.read().expect("a frame") {
            Message::Text(text) if text.as_str() == "PONG" => break,
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

/// Places `count` GTC orders of one share each for `trader` at `price_ticks`, 15 to a
/// request.
fn rest_many(
    trader: &mut Trader,
    token: ladder_protocol::U256,
    side: Side,
    price_ticks: u32,
    count: u64,
) {
    use ladder_client::{post_orders_body, OrderBuilder};
    use ladder_protocol::wire::PostOrderRequest;
    use ladder_protocol::U256;

    let salts: Vec<u64> = (1..=count).collect();
    for chunk in salts.chunks(15) {
        let requests: Vec<PostOrderRequest> = chunk
            .iter()
            .map(|&salt| PostOrderRequest {
                order: OrderBuilder::new(token, side, price_ticks, 1)
                    .maker(trader.account)
                    .salt(U256::from(salt + u64::from(price_ticks) * 1_000_000))
                    .sign(&trader.wallet, &trader.exchange)
                    .unwrap(),
                order_type: OrderType::Gtc,
                post_only: false,
            })
            .collect();
        let r = trader
            .send("POST", "/orders", Some(&post_orders_body(&requests)))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(!r.body.contains("\"success\":false"), "{}", r.body);
    }
}

/// What a [`UserFeedReader`] counted: `order` UPDATEs, `trade`s, `order` CANCELLATIONs, and
/// the bytes of every text frame.
#[derive(Clone, Copy, Debug, Default)]
struct FeedCounts {
    updates: usize,
    trades: usize,
    cancellations: usize,
    pongs: usize,
    bytes: usize,
}

/// Reads a `/ws/user` connection on a thread of its own, counting its events, and can be told
/// to stop reading for a while (a client busy elsewhere).
struct UserFeedReader {
    paused: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Asks the paused reader to send one `PING` (an application ping while it reads nothing).
    ping: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    counts: std::sync::Arc<std::sync::Mutex<FeedCounts>>,
    thread: std::thread::JoinHandle<Ws>,
}

impl UserFeedReader {
    fn start(mut ws: Ws) -> UserFeedReader {
        use std::sync::atomic::Ordering;
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
        }
        let paused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let counts = std::sync::Arc::new(std::sync::Mutex::new(FeedCounts::default()));
        let (p, pi, st, c) = (paused.clone(), ping.clone(), stop.clone(), counts.clone());
        let thread = std::thread::spawn(move || loop {
            while p.load(Ordering::SeqCst) {
                if pi.swap(false, Ordering::SeqCst) {
                    ws.send(Message::text("PING")).expect("a PING sent");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if st.load(Ordering::SeqCst) {
                return ws;
            }
            let text = match ws.read() {
                Ok(Message::Text(text)) => text,
                Ok(Message::Close(frame)) => panic!("closed after {:?}: {frame:?}", c.lock()),
                Ok(_) => continue,
                Err(e) if read_timed_out(&e) => continue,
                Err(e) => panic!("read failed after {:?}: {e}", c.lock()),
            };
            // Counted from the text (a client that reads as fast as it can).
            let text = text.as_str();
            let mut counts = c.lock().unwrap();
            counts.bytes += text.len();
            counts.updates += text.matches(r#""type":"UPDATE""#).count();
            counts.trades += text.matches(r#""event_type":"trade""#).count();
            counts.cancellations += text.matches(r#""type":"CANCELLATION""#).count();
            counts.pongs += usize::from(text == "PONG");
        });
        UserFeedReader {
            paused,
            ping,
            stop,
            counts,
            thread,
        }
    }

    fn counts(&self) -> FeedCounts {
        *self.counts.lock().unwrap()
    }

    /// Runs `command` while the client reads nothing, and for half a second after it, in
    /// which the client sends an application `PING` (answered behind the burst).
    fn busy_during(&self, command: impl FnOnce()) {
        use std::sync::atomic::Ordering;
        self.paused.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(150));
        command();
        std::thread::sleep(Duration::from_millis(100));
        self.ping.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(400));
        self.paused.store(false, Ordering::SeqCst);
    }

    fn finish(self) -> Ws {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().expect("the reader saw no close")
    }
}

/// Orders of demo trader 0 (a market maker) for the bursts: this many at 0.50.
const ORDERS: u64 = 2_400;

/// Demo trader 0 with [`ORDERS`] resting buys of one Yes share at 0.50 and one more at 0.30
/// (which a sweep at 0.50 does not reach: a dropped feed would cancel it), and its `/ws/user`
/// feed as a market maker has it: a dead-man switch, whose kernel share of the queue is small.
fn maker_with_a_dead_man_feed(service: &Service) -> (Trader, Ws) {
    let mut alice = service.trader(0);
    rest_many(&mut alice, yes(), Side::Buy, 5_000, ORDERS);
    let r = alice
        .place(yes(), Side::Buy, 3_000, 1, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let mut subscription: Value = serde_json::from_str(&user_subscribe(&alice)).unwrap();
    subscription["cancel_on_disconnect"] = json!(true);
    let mut ws = open(service, "/ws/user");
    ws.send(Message::text(subscription.to_string())).unwrap();
    ws.send(Message::text("PING")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("PONG"));
    (alice, ws)
}

#[test]
fn a_sweep_or_cancel_all_of_thousands_of_a_makers_orders_reaches_its_user_feed_whole() {
    let service = Service::start(&["--rate-limit-key", "0", "--rate-limit-ip", "0"]);
    let (mut alice, ws) = maker_with_a_dead_man_feed(&service);
    let mut bob = service.trader(1);

    // One taker fills every one of alice's orders at 0.50: one command, an UPDATE and a trade
    // each, all queued before the client, busy for a moment, reads the first.
    let reader = UserFeedReader::start(ws);
    let before = reader.counts();
    reader.busy_during(|| {
        let r = bob
            .place(no(), Side::Buy, 5_000, ORDERS, OrderType::Fak)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("\"status\":\"matched\""), "{}", r.body);
    });
    wait_for(
        Duration::from_secs(30),
        "not every event of the sweep",
        || {
            let now = reader.counts();
            now.updates == ORDERS as usize && now.trades >= ORDERS as usize
        },
    );
    wait_for(Duration::from_secs(10), "no PONG after the burst", || {
        reader.counts().pongs > before.pongs
    });
    let swept_bytes = reader.counts().bytes - before.bytes;
    assert!(
        swept_bytes > 2 << 20,
        "only {swept_bytes} bytes: not past the bound"
    );
    assert_eq!(
        helpers::open_orders(&mut alice).len(),
        1,
        "the other order stays"
    );

    // One cancel-all of as many orders and the other one: a CANCELLATION each (once the
    // trades' settlement has stopped sending status changes).
    rest_many(&mut alice, yes(), Side::Buy, 4_000, ORDERS);
    let mut settled = reader.counts().trades;
    wait_for(Duration::from_secs(30), "trades still changing", || {
        std::thread::sleep(Duration::from_millis(1_000));
        let now = reader.counts().trades;
        std::mem::replace(&mut settled, now) == now
    });
    let before = reader.counts();
    reader.busy_during(|| {
        let r = alice.send("DELETE", "/cancel-all", None).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    });
    wait_for(Duration::from_secs(30), "not every cancellation", || {
        reader.counts().cancellations == ORDERS as usize + 1
    });
    wait_for(Duration::from_secs(10), "no PONG after the burst", || {
        reader.counts().pongs > before.pongs
    });
    let cancelled_bytes = reader.counts().bytes - before.bytes;
    assert!(
        cancelled_bytes > 1 << 20,
        "only {cancelled_bytes} bytes: not past the bound"
    );
    assert_eq!(
        metric(&service, "ladder_ws_slow_consumer_closes_total"),
        "0"
    );
    let mut ws = reader.finish();
    ws.send(Message::text("PING")).unwrap();
    loop {
        match ws.read() {
            Ok(Message::Text(text)) if text.as_str() == "PONG" => break,
            Ok(Message::Close(frame)) => panic!("closed: {frame:?}"),
            Ok(_) => {}
            Err(tungstenite::Error::Io(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// A service without rate limits whose settlement is far off: the trades' status changes come
/// long after the test.
fn service_settling_late() -> Service {
    Service::start(&[
        "--rate-limit-key",
        "0",
        "--rate-limit-ip",
        "0",
        "--settlement-delay-ms",
        "600000",
    ])
}

/// A dead-man switch's client that stops reading during a burst of its own events is closed
/// within the catch-up second (and its other orders cancelled), though no event follows.
#[test]
fn a_user_feed_that_stops_reading_in_a_burst_is_closed_without_waiting_for_more_events() {
    let service = service_settling_late();
    let (mut alice, hung) = maker_with_a_dead_man_feed(&service);
    let mut bob = service.trader(1);
    // The client hangs: it reads nothing more, and its receive buffer is small.
    if let tungstenite::stream::MaybeTlsStream::Plain(stream) = hung.get_ref() {
        socket2::SockRef::from(stream)
            .set_recv_buffer_size(4096)
            .unwrap();
    }
    let r = bob
        .place(no(), Side::Buy, 5_000, ORDERS, OrderType::Fak)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // No event of alice's follows; she is dropped within the catch-up second and a sweep.
    wait_for(
        Duration::from_secs(5),
        "the hung feed was not dropped",
        || metric(&service, "ladder_ws_slow_consumer_closes_total") == "1",
    );
    wait_for(
        Duration::from_secs(5),
        "the other order was not cancelled",
        || helpers::open_orders(&mut alice).is_empty(),
    );
    drop(hung);
}

/// A stopping service hands a client that reads everything queued for it before its close
/// frame, the frames waiting past the outbound bound included (API.md §16).
#[test]
fn a_stopping_service_hands_a_reading_client_its_whole_feed_before_the_close() {
    let mut service = service_settling_late();
    let (_alice, mut ws) = maker_with_a_dead_man_feed(&service);
    let mut bob = service.trader(1);
    // The client is busy while a taker sweeps its orders and the service stops.
    let r = bob
        .place(no(), Side::Buy, 5_000, ORDERS, OrderType::Fak)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    service.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    // While the stop waits for the feed's client, a new request on an open connection is
    // refused and its connection closed.
    let r = bob.send("GET", "/orders", None).unwrap();
    assert_eq!(
        (r.status, r.json()),
        (503, json!({ "error": "service shutting down" })),
        "{}",
        r.body
    );
    let mut counts = FeedCounts::default();
    let close = loop {
        match ws.read() {
            Ok(Message::Text(text)) => {
                counts.bytes += text.len();
                counts.updates += text.as_str().matches(r#""type":"UPDATE""#).count();
                counts.trades += text.as_str().matches(r#""event_type":"trade""#).count();
            }
            Ok(Message::Close(frame)) => break frame.expect("a close frame"),
            Ok(_) => {}
            Err(e) => panic!("no close frame after {counts:?}: {e}"),
        }
    };
    assert!(counts.bytes > 2 << 20, "{counts:?}: not past the bound");
    assert_eq!(
        (counts.updates, counts.trades),
        (ORDERS as usize, ORDERS as usize),
        "{counts:?}"
    );
    assert_eq!(u16::from(close.code), 1001, "{close:?}");
    assert_eq!(close.reason.as_str(), "service shutting down");
    let status = service
        .wait_exit(Duration::from_secs(30))
        .expect("the service stopped");
    assert!(status.success(), "{status:?}");
}

/// A stopping service closes its feeds only once every loop's writes are answered: a write
/// held by a frozen standby when the stop comes has its PLACEMENT reach the author's
/// `/ws/user` connections, whichever loops serve them, before their close (API.md §16).
#[test]
fn a_stop_closes_the_feeds_after_the_events_of_a_write_another_loop_still_waits_on() {
    let (mut service, replication) = start_replicated(&["--gateway-threads", "4"]);
    let standby_dir = tempfile::tempdir().unwrap();
    let standby = start_standby_in(replication, standby_dir.path());
    let alice = service.trader_when_writable(0);
    // Connections spread over the loops by the kernel: with 6 feeds and 4 loops, some are
    // on a loop other than the placing connection's.
    let mut feeds: Vec<Ws> = (0..6)
        .map(|_| {
            let mut ws = open(&service, "/ws/user");
            ws.send(Message::text(user_subscribe(&alice))).unwrap();
            ws
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));

    standby.signal("STOP");
    let placing = {
        let mut alice = service.trader(0);
        std::thread::spawn(move || {
            alice
                .place(yes(), Side::Buy, 1_000, 1, OrderType::Gtc)
                .unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    service.signal("TERM");
    // The write waits for the standby well past the loops' 20 ms of quiet.
    std::thread::sleep(Duration::from_millis(600));
    standby.signal("CONT");
    let continued = std::time::Instant::now();
    let answer = placing.join().unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);

    for (i, ws) in feeds.iter_mut().enumerate() {
        let mut placements = 0;
        let close = loop {
            match ws.read() {
                Ok(Message::Text(text)) => {
                    placements += text.as_str().matches(r#""type":"PLACEMENT""#).count();
                }
                Ok(Message::Close(frame)) => break frame.expect("a close frame"),
                Ok(_) => {}
                Err(e) => panic!("feed {i}: no close frame: {e}"),
            }
        };
        assert_eq!(u16::from(close.code), 1001, "feed {i}: {close:?}");
        assert_eq!(placements, 1, "feed {i}: the PLACEMENT before the close");
    }
    // Closed once the write was answered, not at the 2 s cap after the stop.
    assert!(
        continued.elapsed() < Duration::from_millis(1_200),
        "the feeds closed {:?} after the standby went on",
        continued.elapsed()
    );
    let status = service
        .wait_exit(Duration::from_secs(30))
        .expect("the service stopped");
    assert!(status.success(), "{status:?}");
}
