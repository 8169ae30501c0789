//! Hot standby end to end: a primary with `--replicas 1` under a stream of orders, a standby
//! following it; SIGKILL the primary, promote the standby: every acknowledged order is there,
//! the state hashes match, and the promoted standby takes writes.

mod support;

use std::time::{Duration, Instant};

use ladder_client::{HttpClient, Trader};
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::json;

use support::*;

#[test]
fn a_promoted_standby_holds_every_acknowledged_order() {
    let (mut primary, replication) = start_replicated(&["--settlement-delay-ms", "600000"]);
    let standby = start_standby(replication);
    // Writes are refused until the standby is connected; then keys can be made.
    let mut alice = primary.trader_when_writable(0);
    let mut bob = primary.trader_when_writable(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut acked = Vec::new();
    for i in 0..60u32 {
        let (t, side, price) = if i % 2 == 0 {
            (&mut alice, Side::Buy, 4_000 + 10 * (i % 50))
        } else {
            (&mut bob, Side::Sell, 5_000 + 10 * (i % 50))
        };
        let r = t
            .place(yes(), side, price, 1 + u64::from(i % 3), OrderType::Gtc)
            .unwrap();
        if r.status == 200 && r.json()["success"] == json!(true) {
            acked.push(r.json()["orderID"].as_str().unwrap().to_string());
        } else {
            assert!(
                Instant::now() < deadline,
                "writes never succeeded: {}",
                r.body
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(
        acked.len() >= 50,
        "most orders acknowledged: {}",
        acked.len()
    );
    let (_, primary_hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    let views = |a: &mut Trader, b: &mut Trader| {
        ["/orders?limit=500", "/trades?limit=500"]
            .iter()
            .flat_map(|p| {
                [
                    a.send("GET", p, None).unwrap().body,
                    b.send("GET", p, None).unwrap().body,
                ]
            })
            .collect::<Vec<_>>()
    };
    let before = views(&mut alice, &mut bob);
    let (status, refused) = {
        let mut t = trader_on(&standby.url, 0, &alice);
        let r = t.place(yes(), Side::Buy, 4_000, 1, OrderType::Gtc).unwrap();
        (r.status, r.json())
    };
    assert_eq!(
        (status, refused),
        (503, json!({ "error": "standby: not primary" }))
    );
    // Every write, authenticated or not.
    let mut anonymous = HttpClient::new(&standby.url).unwrap();
    let r = anonymous
        .request("DELETE", "/cancel-all", &[], Some(""))
        .unwrap();
    assert_eq!(
        (r.status, r.json()),
        (503, json!({ "error": "standby: not primary" }))
    );

    primary.kill();
    let (status, body) = admin_at(&standby.url, "POST", "/admin/promote");
    assert_eq!(status, 200, "{body}");
    let (_, standby_hash) = admin_at(&standby.url, "GET", "/admin/state-hash");
    assert_eq!(
        standby_hash, primary_hash,
        "the standby holds exactly the primary's state"
    );

    let mut alice_b = trader_on(&standby.url, 0, &alice);
    let mut bob_b = trader_on(&standby.url, 1, &bob);
    assert_eq!(
        views(&mut alice_b, &mut bob_b),
        before,
        "the same open orders and trades"
    );
    let r = alice_b
        .place(yes(), Side::Buy, 4_100, 1, OrderType::Gtc)
        .unwrap();
    assert_eq!(
        r.json()["success"],
        json!(true),
        "the promoted standby takes writes: {}",
        r.body
    );
}

#[test]
fn a_standby_resumes_after_its_last_record_and_one_whose_journal_diverged_is_refused() {
    let replication = free_port();
    let primary = Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let dir = tempfile::tempdir().unwrap();
    let standby_dir = dir.path().join("standby");

    // A standby follows from nothing, stops, and resumes after the record it holds.
    let standby = start_standby_in(replication, &standby_dir);
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
    drop(standby);
    let mut alice = primary.trader(0);
    let r = alice
        .place(yes(), Side::Buy, 4_200, 2, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.json()["success"], json!(true), "{}", r.body);
    let standby = start_standby_in(replication, &standby_dir);
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
    drop(standby);

    // Another primary's journal: the same demo commands at other times. As a standby of the
    // first primary it holds records that primary never wrote, so it is refused and stops
    // with the reason, instead of following into a state no journal explains.
    let mut other = Service::start(&[]);
    let other_dir = other.data_dir().to_path_buf();
    other.kill();
    let mut refused = standby_command(replication, &other_dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = refused.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "a diverged standby kept running");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut refused.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the primary refused replication") && stderr.contains("diverged"),
        "{stderr}"
    );

    // The refusal changed nothing on the primary, which still serves standbys.
    let standby = start_standby_in(replication, &standby_dir);
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
}

/// A primary that lost its unflushed tail (power) restarts shorter than its standby, which was
/// sent those records as soon as they were written: the standby cuts them by itself (they were
/// never answered), keeps a copy, and follows the primary's new records.
#[test]
fn a_standby_ahead_of_its_restarted_primary_cuts_what_the_primary_lost_and_follows() {
    let replication = free_port();
    let mut primary =
        Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let dir = tempfile::tempdir().unwrap();
    let standby_dir = dir.path().join("standby");
    let standby = start_standby_in(replication, &standby_dir);
    let mut alice = primary.trader(0);
    let (_, kept) = admin_at(&primary.url, "GET", "/admin/state-hash");
    for price in [4_100, 4_200, 4_300] {
        let r = alice
            .place(yes(), Side::Buy, price, 2, OrderType::Gtc)
            .unwrap();
        assert_eq!(r.json()["success"], json!(true), "{}", r.body);
    }
    let (_, ahead) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &ahead);

    // The primary loses everything after `kept` and comes back.
    primary.kill();
    let cut_after = kept["seq"].as_u64().expect("a sequence").to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args([
            "journal",
            "repair",
            "--truncate-after",
            &cut_after,
            "--data-dir",
        ])
        .arg(primary.data_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    primary.restart();
    let (_, restarted) = admin_at(&primary.url, "GET", "/admin/state-hash");
    assert_eq!(restarted, kept);
    wait_for_hash(&standby.url, &kept);
    let copies: Vec<String> = std::fs::read_dir(standby_dir.join("journal"))
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.contains(".bad"))
        .collect();
    assert!(!copies.is_empty(), "the cut records are kept aside");

    // New records after the cut reach the standby.
    let mut alice = primary.trader(0);
    let r = alice
        .place(yes(), Side::Buy, 4_400, 3, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.json()["success"], json!(true), "{}", r.body);
    let (_, now) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &now);
}

/// Operators with a process manager signal instead of calling the admin surface: SIGUSR2
/// writes a snapshot now, SIGUSR1 promotes a standby.
#[test]
fn sigusr2_writes_a_snapshot_and_sigusr1_promotes_a_standby() {
    let replication = free_port();
    let primary = Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let snapshots = |dir: &std::path::Path| {
        std::fs::read_dir(dir.join("snapshots"))
            .map(|entries| entries.count())
            .unwrap_or(0)
    };
    let before = snapshots(primary.data_dir());
    primary.signal("USR2");
    let deadline = Instant::now() + Duration::from_secs(10);
    while snapshots(primary.data_dir()) == before {
        assert!(Instant::now() < deadline, "no snapshot after SIGUSR2");
        std::thread::sleep(Duration::from_millis(50));
    }

    let standby = start_standby(replication);
    // A write to a standby is refused before the body is read; on a primary this body is a
    // 400 (not JSON).
    let write = |url: &str| {
        let mut http = HttpClient::new(url).unwrap();
        let headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
        http.request("POST", "/admin/deposits", &headers, Some("not json"))
            .unwrap()
            .status
    };
    assert_eq!(write(&standby.url), 503);
    standby.signal("USR1");
    let deadline = Instant::now() + Duration::from_secs(10);
    while write(&standby.url) == 503 {
        assert!(
            Instant::now() < deadline,
            "SIGUSR1 did not promote the standby"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(write(&standby.url), 400);
}

/// A primary frozen mid-stream (SIGSTOP: its sockets stay open, nothing answers): `POST
/// /admin/promote` on the standby answers within 5 s and the standby takes writes.
#[test]
fn a_standby_promotes_within_5_s_while_its_primary_is_frozen() {
    let replication = free_port();
    let mut primary =
        Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let standby = start_standby(replication);
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
    primary.signal("STOP");
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (status, body) = admin_at(&standby.url, "POST", "/admin/promote");
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(took < Duration::from_secs(5), "promotion took {took:?}");
    let mut http = HttpClient::new(&standby.url).unwrap();
    let headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
    let r = http
        .request("POST", "/admin/deposits", &headers, Some("not json"))
        .unwrap();
    assert_eq!(r.status, 400, "a primary now: the body is read");
    primary.signal("CONT");
    primary.kill();
}

#[test]
fn a_standby_stopped_and_continued_keeps_its_link_and_the_write_it_held_up_is_acknowledged() {
    let (primary, replication) = start_replicated(&[]);
    let standby = start_standby(replication);
    let mut alice = primary.trader_when_writable(0);
    // Frozen as a debugger or a paused VM freezes it: its read of the stream, which has a
    // timeout, comes back interrupted once it runs again.
    standby.signal("STOP");
    let continued = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1_500));
        standby.signal("CONT");
        standby
    });
    let r = alice
        .place(yes(), Side::Buy, 4_000, 1, OrderType::Gtc)
        .unwrap();
    let standby = continued.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["success"], json!(true), "{}", r.body);
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
}

#[test]
fn a_standby_takes_the_serving_flags_of_serve() {
    let replication = free_port();
    let _primary = Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let dir = tempfile::tempdir().unwrap();
    // CONTRACT 22: serve and standby differ only in how a node starts; its limits apply to
    // its reads at once.
    let standby = start_standby_with(
        replication,
        &dir.path().join("data"),
        &[
            "--rate-limit-ip",
            "40",
            "--rate-limit-key",
            "0",
            "--max-keys-per-user",
            "3",
            "--gateway-threads",
            "1",
            "--sequencer-core",
            "none",
            "--durability",
            "async",
        ],
    );
    let mut http = HttpClient::new(&standby.url).unwrap();
    let statuses: Vec<u16> = (0..80)
        .map(|_| http.request("GET", "/time", &[], None).unwrap().status)
        .collect();
    assert!(statuses.contains(&429), "{statuses:?}");
}

/// A primary asked to stop while its standby is frozen (connected, not acknowledging) with a
/// write waiting for it stops all the same, a few seconds later: the write is answered as not
/// confirmed by a standby, and it is in the primary's journal when it starts again. The stop
/// is a clean one: a market maker's cancel-on-disconnect connection cancels nothing.
#[test]
fn a_primary_stops_while_its_standby_is_frozen() {
    let (mut primary, replication) = start_replicated(&[]);
    let standby = start_standby(replication);
    let mut alice = primary.trader_when_writable(0);
    let r = alice
        .place(yes(), Side::Buy, 3_000, 1, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let _dead_man = dead_man_feed(&primary, &alice);
    // Its credentials before the freeze: asking for them is a write the standby would hold.
    let placer = primary.trader(0);
    standby.signal("STOP");
    let placing = {
        let mut alice = placer;
        std::thread::spawn(move || {
            alice
                .place(yes(), Side::Buy, 4_000, 1, OrderType::Gtc)
                .unwrap()
        })
    };
    // The write has waited a while when the stop comes (the node's own periodic work, queued
    // behind it, waits too).
    std::thread::sleep(Duration::from_millis(1_500));
    primary.signal("TERM");
    let stopping = Instant::now();
    let status = primary.wait_exit(Duration::from_secs(15));
    standby.signal("CONT");
    let status = status.expect("the primary stopped with its standby frozen");
    assert!(status.success(), "{status:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(12),
        "{:?}",
        stopping.elapsed()
    );
    let answer = placing.join().unwrap();
    assert_eq!(
        (answer.status, &answer.json()["error"]),
        (503, &json!(ladder_sequencer::REPLICA_LOST)),
        "{}",
        answer.body
    );
    // Applied on the primary: there after its restart, beside the order placed before, and
    // the clean stop cancelled neither.
    drop(standby);
    primary.restart();
    let open = alice.send("GET", "/orders", None).unwrap();
    assert_eq!(open.json()["count"], json!(2), "{}", open.body);
}

/// `trader`'s `/ws/user` connection armed as a dead-man switch (`cancel_on_disconnect`).
fn dead_man_feed(
    service: &Service,
    trader: &Trader,
) -> tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>> {
    let mut ws = user_ws_at(&service.url, trader, true);
    // Subscribed (and armed) once the answer to a later PING comes.
    ws.send(tungstenite::Message::text("PING")).unwrap();
    while ws.read().unwrap() != tungstenite::Message::text("PONG") {}
    ws
}
