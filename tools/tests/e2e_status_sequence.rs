//! The trade status sequence is one story everywhere (settlement issue): a `/ws/user`
//! subscriber on a standby sees the same `trade` events, in the same order, as one on the
//! primary; after a restart the sequence goes on where it stopped (no status repeated or
//! skipped), and GET /trades agrees.

mod support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use ladder_client::{unix_now_s, Trader};
use ladder_protocol::wire::OrderType;
use ladder_protocol::{L2Secret, Side};
use serde_json::{json, Value};
use support::*;
use tungstenite::{connect, Message, WebSocket};

type Ws = WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

/// A `/ws/user` subscription of `trader` on the service at `url`.
fn subscribe(url: &str, trader: &Trader) -> Ws {
    let (mut ws, _) =
        connect(format!("{}/ws/user", url.replace("http://", "ws://"))).expect("websocket connect");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
    }
    let creds = trader.credentials.as_ref().expect("credentials");
    let ts = unix_now_s().to_string();
    let signature = L2Secret::from_base64(&creds.secret)
        .expect("secret")
        .sign(&ts, "GET", "/ws/user", b"");
    let message = json!({ "type": "user", "auth": { "apiKey": creds.api_key.to_string(),
        "passphrase": creds.passphrase, "timestamp": ts, "signature": signature }, "markets": [] });
    ws.send(Message::text(message.to_string()))
        .expect("subscribe");
    ws.send(Message::text("PING")).expect("ping");
    // The PONG says the subscription is in place.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(Message::Text(t)) = ws.read() {
            if t.as_str() == "PONG" {
                return ws;
            }
        }
        assert!(Instant::now() < deadline, "no PONG");
    }
}

/// The statuses of trade `id` in the `trade` events read until `last` (or 20 s).
fn statuses_until(ws: &mut Ws, id: &str, last: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.last().map(String::as_str) != Some(last) {
        assert!(Instant::now() < deadline, "stuck at {seen:?}");
        let Ok(Message::Text(text)) = ws.read() else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        let events = match value {
            Value::Array(list) => list,
            one => vec![one],
        };
        for e in events {
            if e["event_type"] == json!("trade") && e["id"] == json!(id) {
                seen.push(e["status"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    seen
}

/// A trade between demo traders 0 (maker) and 1 (taker); its id.
fn cross(alice: &mut Trader, bob: &mut Trader) -> String {
    let r = alice
        .place(yes(), Side::Buy, 5_500, 10, OrderType::Gtc)
        .expect("maker");
    assert_eq!(r.status, 200, "{}", r.body);
    let r = bob
        .place(yes(), Side::Sell, 5_500, 10, OrderType::Gtc)
        .expect("taker");
    assert_eq!(r.status, 200, "{}", r.body);
    let placed = r.json();
    assert_eq!(placed["status"], json!("matched"), "{placed}");
    placed["tradeIds"][0]
        .as_str()
        .expect("trade id")
        .to_string()
}

fn trade_status(url: &str, trader: &Trader, id: &str) -> String {
    let mut t = Trader::new(url, trader.wallet.clone(), trader.account).expect("trader");
    t.credentials = trader.credentials.clone();
    let r = t
        .send("GET", &format!("/trades/{id}"), None)
        .expect("GET /trades/{id}");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["status"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_standby_subscriber_sees_the_primarys_trade_status_sequence() {
    let replication = free_port();
    let primary = Service::start(&[
        "--replication-listen",
        &format!("127.0.0.1:{replication}"),
        "--settlement-delay-ms",
        "400",
    ]);
    let standby = start_standby(replication);
    let mut alice = primary.trader(0);
    let mut bob = primary.trader(1);
    // The standby holds the keys once it has followed their creation.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut on_standby = loop {
        let mut t = Trader::new(&standby.url, alice.wallet.clone(), alice.account).expect("t");
        t.credentials = alice.credentials.clone();
        if t.send("GET", "/orders", None)
            .is_ok_and(|r| r.status == 200)
        {
            break t;
        }
        assert!(Instant::now() < deadline, "the standby never held the key");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut at_primary = subscribe(&primary.url, &alice);
    let mut at_standby = subscribe(&standby.url, &on_standby);
    let id = cross(&mut alice, &mut bob);
    let primary_seen = statuses_until(&mut at_primary, &id, "CONFIRMED");
    let standby_seen = statuses_until(&mut at_standby, &id, "CONFIRMED");
    assert_eq!(primary_seen, ["MATCHED", "MINED", "CONFIRMED"]);
    assert_eq!(standby_seen, primary_seen);
    assert_eq!(trade_status(&standby.url, &on_standby, &id), "CONFIRMED");
    let r = on_standby
        .send("GET", "/trades", None)
        .expect("GET /trades");
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn after_a_restart_the_status_sequence_goes_on_where_it_stopped() {
    let mut service = Service::start(&["--settlement-delay-ms", "2500"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let id = cross(&mut alice, &mut bob);
    assert_eq!(trade_status(&service.url, &alice, &id), "MATCHED");
    service.kill_and_restart();
    let mut ws = subscribe(&service.url, &alice);
    assert_eq!(trade_status(&service.url, &alice, &id), "MATCHED");
    let seen = statuses_until(&mut ws, &id, "CONFIRMED");
    assert_eq!(seen, ["MINED", "CONFIRMED"]);
    assert_eq!(trade_status(&service.url, &alice, &id), "CONFIRMED");
}
