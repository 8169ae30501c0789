//! The market makers' dead-man switch end to end (API.md §16): heartbeats with chained ids,
//! the expiry that cancels every open order of the key's address (journaled, so a replay
//! agrees), a stop that cancels nothing, a fresh full timeout after a restart, and
//! `/ws/user` cancel-on-disconnect.

mod helpers;
mod support;

use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use helpers::*;
use ladder_client::{OrderSpec, Trader};
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::{json, Value};
use support::*;
use tungstenite::{connect, Message, WebSocket};

type Ws = WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

fn start(trader: &mut Trader) -> String {
    let (status, body) = beat(trader, None);
    assert_eq!(status, 200, "{body}");
    body["heartbeat_id"].as_str().unwrap().to_string()
}

/// Waits up to `within` for `trader` to have no open order; panics otherwise.
fn wait_until_no_orders(trader: &mut Trader, within: Duration) {
    let deadline = Instant::now() + within;
    while !open_ids(trader).is_empty() {
        assert!(
            Instant::now() < deadline,
            "orders still open: {:?}",
            open_ids(trader)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn user_ws(service: &Service, trader: &Trader, cancel_on_disconnect: bool) -> Ws {
    user_ws_at(&service.url, trader, cancel_on_disconnect)
}

/// The `order` events of type CANCELLATION read from `ws` until `n` arrived (5 s at most).
fn cancellations(ws: &mut Ws, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    while got.len() < n {
        let Message::Text(text) = ws.read().expect("an event") else {
            continue;
        };
        let value: Value = serde_json::from_str(text.as_str()).unwrap();
        let events = match value {
            Value::Array(list) => list,
            one => vec![one],
        };
        got.extend(
            events
                .into_iter()
                .filter(|e| e["event_type"] == "order" && e["type"] == "CANCELLATION"),
        );
    }
    got
}

#[test]
fn beats_keep_orders_and_a_key_that_stops_beating_loses_its_orders_only() {
    let service = Service::start(&["--heartbeat-timeout-ms", "1000"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    rest(&mut alice, yes(), Side::Buy, 1_100, 1);
    rest(&mut bob, yes(), Side::Buy, 1_200, 1);
    let mut ws = user_ws(&service, &alice, false);

    // Beats for 2.5 s, 2.5 timeouts: nothing is cancelled.
    let mut id = start(&mut alice);
    let until = Instant::now() + Duration::from_millis(2_500);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(300));
        let (status, body) = beat(&mut alice, Some(&id));
        assert_eq!(status, 200, "{body}");
        let next = body["heartbeat_id"].as_str().unwrap().to_string();
        assert_ne!(next, id, "each beat gets a new id");
        id = next;
    }
    assert_eq!(open_ids(&mut alice).len(), 2);
    // A wrong id is a 400 with the current id and does not count as a beat.
    let (status, body) = beat(&mut alice, Some("not-the-id"));
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({ "error": "invalid heartbeat id", "heartbeat_id": id })
    );

    // No more beats: within the timeout and a second, alice's orders go, bob's stay.
    wait_until_no_orders(&mut alice, Duration::from_millis(2_000));
    assert_eq!(open_ids(&mut bob).len(), 1);
    assert_eq!(cancellations(&mut ws, 2).len(), 2);
    assert_eq!(metric(&service, "ladder_heartbeat_expiries_total"), "1");
    // Its heartbeats stopped: the last id is no longer current.
    let (status, body) = beat(&mut alice, Some(&id));
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({ "error": "invalid heartbeat id", "heartbeat_id": null })
    );
}

#[test]
fn delete_stops_the_heartbeats_without_cancelling() {
    let service = Service::start(&["--heartbeat-timeout-ms", "500"]);
    let mut alice = service.trader(0);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    start(&mut alice);
    let r = alice.send("DELETE", "/heartbeats", None).unwrap();
    assert_eq!((r.status, r.json()), (200, json!({ "stopped": true })));
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(open_ids(&mut alice).len(), 1);
}

#[test]
fn a_deleted_keys_heartbeats_stop_at_once_and_the_gauge_says_so() {
    let service = Service::start(&["--heartbeat-timeout-ms", "60000"]);
    let mut alice = service.trader(0);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    start(&mut alice);
    wait_for_metric(&service, "ladder_heartbeats_running", "1");
    let r = alice.send("DELETE", "/auth/api-key", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // Long before the timeout: the key's heartbeats ended with it.
    wait_for_metric(&service, "ladder_heartbeats_running", "0");
    assert_eq!(metric(&service, "ladder_heartbeat_expiries_total"), "0");
}

#[test]
fn a_restart_gives_running_heartbeats_a_full_timeout_and_the_journal_replays_to_the_same_state() {
    let mut service = Service::start(&["--heartbeat-timeout-ms", "3000"]);
    let mut alice = service.trader(0);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    let before = start(&mut alice);
    std::thread::sleep(Duration::from_millis(2_000));
    service.kill_and_restart();
    let ready = Instant::now();
    // The id given before the restart still beats (beats are not journaled, so the service
    // cannot know it), and the chain goes on from the answer.
    // A UUID the service never made does not count, and leaves the real one its turn.
    let (status, body) = beat(&mut alice, Some("1b4e28ba-2fa1-41d2-883f-0016d3cca427"));
    assert_eq!(status, 400, "{body}");
    let (status, body) = beat(&mut alice, Some(&before));
    assert_eq!(status, 200, "{body}");
    let next = body["heartbeat_id"].as_str().unwrap().to_string();
    let (status, body) = beat(&mut alice, Some(&next));
    assert_eq!(status, 200, "{body}");
    let (status, body) = beat(&mut alice, Some(&before));
    assert_eq!(status, 400, "an old id is refused again: {body}");
    // Then the client stops beating.
    // The old deadline (3 s after the start) passes here; the fresh one is 3 s after ready.
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(
        open_ids(&mut alice).len(),
        1,
        "a fresh full timeout after the restart"
    );
    wait_until_no_orders(&mut alice, Duration::from_millis(4_000));
    assert!(ready.elapsed() >= Duration::from_millis(2_900));
    // The expiry is a journaled command: the journal's replay gives the live state.
    kill_and_check_replay(&mut service, "heartbeats after a restart");
    let dump = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args([
            "journal",
            "dump",
            "--type",
            "heartbeats_expired",
            "--data-dir",
        ])
        .arg(service.data_dir())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&dump.stdout).lines().count(), 1);
}

#[test]
fn a_user_connection_with_cancel_on_disconnect_cancels_when_it_ends_and_one_without_does_not() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    rest(&mut alice, yes(), Side::Buy, 1_100, 1);
    rest(&mut bob, yes(), Side::Buy, 1_200, 1);

    // Without the flag: closing changes nothing.
    let mut plain = user_ws(&service, &bob, false);
    std::thread::sleep(Duration::from_millis(200));
    plain.close(None).unwrap();
    let _ = plain.flush();
    drop(plain);

    // With it: a clean close cancels alice's orders...
    let mut ws = user_ws(&service, &alice, true);
    std::thread::sleep(Duration::from_millis(200));
    ws.close(None).unwrap();
    let _ = ws.flush();
    drop(ws);
    wait_until_no_orders(&mut alice, Duration::from_secs(3));
    assert_eq!(open_ids(&mut bob).len(), 1, "bob's connection had no flag");

    // ...and so does a connection that just vanishes (the client process killed: its
    // socket closed without a close frame).
    rest(&mut alice, yes(), Side::Buy, 1_300, 1);
    let ws = user_ws(&service, &alice, true);
    std::thread::sleep(Duration::from_millis(200));
    drop(ws);
    wait_until_no_orders(&mut alice, Duration::from_secs(3));
    wait_for_metric(&service, "ladder_cancel_on_disconnect_total", "2");
}

#[test]
fn ladder_client_heartbeat_beats_with_chained_ids() {
    let service = Service::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials.json");
    let client = |args: &[&str]| ladder_client_as_trader_0(&service.url, &credentials, args);
    assert!(client(&["create-key"]).status.success());
    let out = client(&["heartbeat", "--every", "0.2", "--count", "3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["heartbeat_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids[0] != ids[1] && ids[1] != ids[2]);
    let out = client(&["stop-heartbeats"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"stopped\": true"));
}

#[test]
fn a_user_connection_ends_when_its_key_is_deleted_and_its_orders_go_with_it() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    rest(&mut bob, yes(), Side::Buy, 1_100, 1);
    let mut ws = user_ws(&service, &alice, true);
    // The subscription is live: alice's next order reaches it.
    rest(&mut alice, yes(), Side::Buy, 1_050, 1);
    let placed = loop {
        let Message::Text(text) = ws.read().expect("the placement") else {
            continue;
        };
        if text.as_str().contains("PLACEMENT") {
            break text;
        }
    };
    assert!(placed.as_str().contains("\"order\""), "{placed}");

    let r = alice.send("DELETE", "/auth/api-key", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let deleted = Instant::now();
    // A deleted key fails at once on every channel: the connection is told and closed
    // (at the loop's next turn when no event comes for it, within its 250 ms poll)...
    let deadline = Instant::now() + Duration::from_secs(3);
    let (mut told, mut closed) = (false, None);
    while closed.is_none() && Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(text)) => told |= text.as_str().contains("API key deleted"),
            Ok(Message::Close(frame)) => closed = Some(frame.map(|f| u16::from(f.code))),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert!(told, "an error frame names the deleted key");
    assert_eq!(closed, Some(Some(1008)), "closed as a policy violation");
    let took = deleted.elapsed();
    assert!(
        took < Duration::from_millis(600),
        "closed {took:?} after the deletion"
    );
    // The client's reply to the close ends the connection.
    let _ = ws.flush();
    drop(ws);
    // ...and, as with any end of a cancel-on-disconnect connection, alice's orders are
    // cancelled (read with a new key); bob's stay.
    let created = alice.create_api_key(1).unwrap();
    assert_eq!(created.status, 200, "{}", created.body);
    alice.credentials = serde_json::from_value(created.json()).ok();
    wait_until_no_orders(&mut alice, Duration::from_secs(3));
    assert_eq!(open_ids(&mut bob).len(), 1);
}

#[test]
fn a_disconnect_cancel_refused_for_want_of_a_standby_is_carried_out_once_one_is_back() {
    let (service, replication) = start_replicated(&[]);
    let standby_dir = tempfile::tempdir().unwrap();
    let standby = start_standby_in(replication, standby_dir.path());
    let mut alice = service.trader_when_writable(0);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    let ws = user_ws(&service, &alice, true);
    std::thread::sleep(Duration::from_millis(200));

    // The standby goes: writes are refused...
    drop(standby);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = alice.send("POST", "/heartbeats", Some("{}")).unwrap();
        // A start journaled while the standby's loss was not yet seen is answered as a write
        // that no standby held (replica lost); once it is seen, starts are refused up front.
        if r.status == 503 && r.json() == json!({ "error": "replica unavailable" }) {
            break;
        }
        assert!(
            r.status == 200 || r.json()["error"] == json!(ladder_sequencer::REPLICA_LOST),
            "{}",
            r.body
        );
        assert!(Instant::now() < deadline, "writes still taken: {}", r.body);
        std::thread::sleep(Duration::from_millis(50));
    }
    // ...so the cancel of the connection that now ends is refused, and kept: over several
    // of the loop's half-second sweeps the order stays, and nothing is counted.
    drop(ws);
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(open_ids(&mut alice).len(), 1, "no write can be taken yet");
    assert_eq!(metric(&service, "ladder_cancel_on_disconnect_total"), "0");

    // A standby is back: the cancel is carried out without anyone asking again.
    let _standby = start_standby_in(replication, standby_dir.path());
    wait_until_no_orders(&mut alice, Duration::from_secs(15));
    wait_for_metric(&service, "ladder_cancel_on_disconnect_total", "1");
}

#[test]
fn beats_are_taken_while_a_standby_is_missing_so_a_live_makers_orders_stay() {
    let (service, replication) = start_replicated(&["--heartbeat-timeout-ms", "1000"]);
    let standby_dir = tempfile::tempdir().unwrap();
    let standby = start_standby_in(replication, standby_dir.path());
    let mut alice = service.trader_when_writable(0);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    let mut id = start(&mut alice);

    // The standby goes; alice keeps beating through three timeouts. Her beats journal
    // nothing, so they are taken: her order stays while placements are refused.
    drop(standby);
    let mut bob = service.trader(1);
    let mut beat_on = |alice: &mut Trader| {
        std::thread::sleep(Duration::from_millis(250));
        let (status, body) = beat(alice, Some(&id));
        assert_eq!(status, 200, "{body}");
        id = body["heartbeat_id"].as_str().unwrap().to_string();
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while bob.send("DELETE", "/heartbeats", None).unwrap().status != 503 {
        assert!(Instant::now() < deadline, "the standby's loss is not seen");
        beat_on(&mut alice);
    }
    let until = Instant::now() + Duration::from_millis(3_000);
    while Instant::now() < until {
        beat_on(&mut alice);
    }
    let refused = alice.send("POST", "/heartbeats", Some("{}")).unwrap();
    assert_eq!(refused.status, 503, "a start journals: {}", refused.body);
    assert_eq!(refused.json(), json!({ "error": "replica unavailable" }));
    assert_eq!(open_ids(&mut alice).len(), 1);
    assert_eq!(metric(&service, "ladder_heartbeat_expiries_total"), "0");

    // She stops beating: the expiry, the service's own record, cancels her order (its
    // events wait for a standby to hold it, as every write's do).
    wait_until_no_orders(&mut alice, Duration::from_secs(15));
    wait_for_metric(&service, "ladder_heartbeat_expiries_total", "1");
}

/// Answers that wait for a frozen standby (connected, not acknowledging) hold the beats'
/// answers too: a market maker that beats on time but cannot get its next id is not expired
/// for it; every running heartbeat gets a full timeout once answers flow again.
#[test]
fn a_maker_beating_through_a_frozen_standby_keeps_its_orders() {
    let (service, replication) = start_replicated(&["--heartbeat-timeout-ms", "1000"]);
    let standby_dir = tempfile::tempdir().unwrap();
    let standby = start_standby_in(replication, standby_dir.path());
    let mut alice = service.trader_when_writable(0);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    let first = start(&mut alice);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let beating = {
        let (mut alice, stop) = (service.trader(0), stop.clone());
        std::thread::spawn(move || {
            let mut id = first;
            let mut answers = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(250));
                let (status, body) = beat(&mut alice, Some(&id));
                if let Some(next) = body["heartbeat_id"].as_str() {
                    id = next.to_string();
                }
                answers.push((status, body));
            }
            answers
        })
    };
    let mut bob = service.trader(1);
    std::thread::sleep(Duration::from_millis(500));
    // Frozen for 2.5 timeouts while a write waits for it.
    standby.signal("STOP");
    let placing = {
        std::thread::spawn(move || {
            bob.place(yes(), Side::Buy, 1_100, 1, OrderType::Gtc)
                .unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(2_500));
    standby.signal("CONT");
    assert_eq!(placing.join().unwrap().status, 200);
    std::thread::sleep(Duration::from_millis(1_500));
    stop.store(true, std::sync::atomic::Ordering::Release);
    for (status, body) in beating.join().unwrap() {
        assert_eq!(status, 200, "every beat counted: {body}");
    }
    assert_eq!(open_ids(&mut alice).len(), 1, "her order stays");
    assert_eq!(metric(&service, "ladder_heartbeat_expiries_total"), "0");
    // She stops: her order goes a timeout later.
    wait_until_no_orders(&mut alice, Duration::from_secs(5));
}

#[test]
fn a_cancel_on_disconnect_subscriber_that_stops_reading_loses_its_orders_when_it_is_dropped() {
    let service = Service::start(&["--rate-limit-key", "0", "--rate-limit-ip", "0"]);
    let mut alice = service.trader(0);
    let quote_hash = rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    let quote = id_of(&mut alice, &quote_hash);
    // A market maker's process hangs: its connection stays up but it reads nothing more.
    let ws = user_ws(&service, &alice, true);
    if let tungstenite::stream::MaybeTlsStream::Plain(stream) = ws.get_ref() {
        socket2::SockRef::from(stream)
            .set_recv_buffer_size(4096)
            .unwrap();
    }
    // Its own events pile up (each placement ~0.6 KB) until the queue passes its bound.
    let mut batches = 0;
    while metric(&service, "ladder_ws_slow_consumer_closes_total") == "0" {
        assert!(batches < 400, "never dropped as a slow consumer");
        let bodies: Vec<String> = (0..15)
            .map(|i| {
                let spec = OrderSpec::gtc(yes(), Side::Buy, 1_000 + 10 * i, 1);
                alice.order_body(&spec).unwrap()
            })
            .collect();
        let r = alice
            .send("POST", "/orders", Some(&format!("[{}]", bodies.join(","))))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        batches += 1;
    }
    // Dropped, it loses its orders at once, not after the close's grace (a batch placed
    // while the cancel was on its way may stay: it came after the connection's end).
    let dropped = Instant::now();
    while open_ids(&mut alice).contains(&quote) {
        assert!(
            dropped.elapsed() < Duration::from_secs(3),
            "the quote is still open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Counted when the cancel's answer reaches the connection's loop, which may come just
    // after a read sees the orders gone.
    wait_for_metric(&service, "ladder_cancel_on_disconnect_total", "1");
    drop(ws);
}

/// A stopping service (SIGTERM) says so to every WebSocket client with a 1001 close (RFC 6455
/// 7.4.1, "going away"), and a stop is no disconnect of a dead-man switch: the orders stay,
/// and are there after the restart.
#[test]
fn sigterm_closes_websockets_with_going_away_and_cancels_nothing() {
    let mut service = Service::start(&[]);
    let mut alice = service.trader(0);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    let mut user = user_ws(&service, &alice, true);
    let url = format!("{}/ws/market", service.url.replace("http://", "ws://"));
    let (mut market, _) = connect(url).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = market.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    let subscribe = json!({ "type": "market", "assets_ids": [YES] });
    market.send(Message::text(subscribe.to_string())).unwrap();
    std::thread::sleep(Duration::from_millis(300));

    service.signal("TERM");
    for (name, ws) in [("/ws/user", &mut user), ("/ws/market", &mut market)] {
        let close = loop {
            match ws.read() {
                Ok(Message::Close(frame)) => break frame,
                Ok(_) => continue,
                Err(e) => panic!("{name}: no close frame before the end: {e}"),
            }
        };
        let frame = close.unwrap_or_else(|| panic!("{name}: a close frame without a code"));
        assert_eq!(
            frame.code,
            tungstenite::protocol::frame::coding::CloseCode::Away,
            "{name}"
        );
        assert_eq!(frame.reason.as_str(), "service shutting down", "{name}");
    }
    assert!(
        service
            .wait_exit(Duration::from_secs(30))
            .is_some_and(|s| s.success()),
        "a clean stop"
    );
    // The stop journaled the disarming; the next start finds nothing armed.
    assert_eq!(journal_types(&service, "disarm_dead_man_switches"), 1);
    service.restart();
    // Past the start's settling of lost switches (before it answers) and a few of the
    // supervisor's turns.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(open_ids(&mut alice).len(), 1, "a stop cancels nothing");
    assert_eq!(metric(&service, "ladder_cancel_on_disconnect_total"), "0");
    assert_eq!(journal_types(&service, "dead_man_switches_lost"), 0);
}

/// Waits up to 3 s for the metric `name` to read `value`; panics otherwise.
fn wait_for_metric(service: &Service, name: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let now = metric(service, name);
        if now == value {
            return;
        }
        assert!(Instant::now() < deadline, "{name} is {now}, not {value}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many records of `record_type` the service's journal holds.
fn journal_types(service: &Service, record_type: &str) -> usize {
    let dump = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["journal", "dump", "--type", record_type, "--data-dir"])
        .arg(service.data_dir())
        .output()
        .unwrap();
    assert!(dump.status.success(), "{dump:?}");
    String::from_utf8_lossy(&dump.stdout).lines().count()
}

/// A standby that takes over from its primary knows the primary's dead-man switches: after
/// a clean stop of the primary (SIGTERM) they were disarmed and the promoted standby cancels
/// nothing; after a crash (SIGKILL) their connections ended unseen and it cancels for them.
#[test]
fn a_promoted_standby_cancels_for_a_crashed_primarys_switches_and_not_for_a_stopped_ones() {
    for crash in [false, true] {
        let replication = free_port();
        let mut primary =
            Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
        let standby = start_standby(replication);
        let mut alice = primary.trader(0);
        rest(&mut alice, yes(), Side::Buy, 1_000, 1);
        let _armed = user_ws(&primary, &alice, true);
        std::thread::sleep(Duration::from_millis(300));
        let (_, held) = admin_at(&standby.url, "GET", "/admin/state-hash");
        let (_, live) = admin_at(&primary.url, "GET", "/admin/state-hash");
        assert_eq!(held, live, "the standby holds the arming");
        if crash {
            primary.kill();
        } else {
            primary.signal("TERM");
            assert!(primary
                .wait_exit(Duration::from_secs(30))
                .is_some_and(|s| s.success()));
        }
        let (status, body) = admin_at(&standby.url, "POST", "/admin/promote");
        assert_eq!(status, 200, "{body}");
        let mut alice_b = trader_on(&standby.url, 0, &alice);
        if crash {
            wait_until_no_orders(&mut alice_b, Duration::from_secs(5));
        } else {
            std::thread::sleep(Duration::from_millis(500));
            assert_eq!(open_ids(&mut alice_b).len(), 1, "a stop is no disconnect");
        }
    }
}

/// A crash ends a dead-man switch's connection as surely as a network loss (API.md §16):
/// the connection's arming is journaled, so the next run cancels the orders once it takes
/// writes, counts it, and a replay of the journal agrees.
#[test]
fn a_crash_of_the_service_trips_the_cancel_on_disconnect_of_the_connections_it_held() {
    let mut service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    rest(&mut alice, yes(), Side::Buy, 1_100, 1);
    rest(&mut bob, yes(), Side::Buy, 1_200, 1);
    // Alice's connection is armed; bob's is not.
    let _armed = user_ws(&service, &alice, true);
    let _plain = user_ws(&service, &bob, false);
    std::thread::sleep(Duration::from_millis(300));
    service.kill_and_restart();
    wait_until_no_orders(&mut alice, Duration::from_secs(3));
    assert_eq!(open_ids(&mut bob).len(), 1, "bob's connection had no flag");
    wait_for_metric(&service, "ladder_cancel_on_disconnect_total", "1");
    // Once only: a second crash finds nothing armed.
    rest(&mut alice, yes(), Side::Buy, 1_000, 1);
    service.kill_and_restart();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(open_ids(&mut alice).len(), 1, "the switch tripped once");
    kill_and_check_replay(&mut service, "dead-man switches after a crash");
}

/// A standby cannot journal a dead-man switch: a subscription asking for one is refused
/// there (1008, saying why), and one without it is served.
#[test]
fn a_standby_refuses_a_cancel_on_disconnect_subscription() {
    let replication = free_port();
    let primary = Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let standby = start_standby(replication);
    let alice = primary.trader(0);
    std::thread::sleep(Duration::from_millis(300));
    let mut armed = user_ws_at(&standby.url, &alice, true);
    let refusal = loop {
        match armed.read() {
            Ok(Message::Text(text)) => break text.to_string(),
            Ok(_) => continue,
            Err(e) => panic!("no refusal: {e}"),
        }
    };
    assert_eq!(
        serde_json::from_str::<Value>(&refusal).unwrap(),
        json!({ "error": "cancel_on_disconnect: this node is a standby (not primary); subscribe on the primary" })
    );
    let close = loop {
        match armed.read() {
            Ok(Message::Close(frame)) => break frame,
            Ok(_) => continue,
            Err(e) => panic!("no close frame: {e}"),
        }
    };
    assert_eq!(
        close.map(|f| f.code),
        Some(tungstenite::protocol::frame::coding::CloseCode::Policy)
    );
    // Without the switch, the standby serves the subscription: a PING is answered.
    let mut plain = user_ws_at(&standby.url, &alice, false);
    plain.send(Message::text("PING")).unwrap();
    let pong = loop {
        match plain.read() {
            Ok(Message::Text(text)) => break text.to_string(),
            Ok(_) => continue,
            Err(e) => panic!("no answer: {e}"),
        }
    };
    assert_eq!(pong, "PONG");
}
