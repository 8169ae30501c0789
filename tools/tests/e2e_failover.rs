//! Automatic failover through etcd (CONTRACT 22), with real processes and a real etcd on one
//! machine: a killed leader is replaced within three leases by the standby that holds every
//! acknowledged order (a lagging one does not win); a paused leader never acknowledges after
//! the new leader's first write and rejoins as its standby; with etcd down, writes stop within
//! a lease, reads go on, and writes resume when etcd returns.

mod support;

use std::time::{Duration, Instant};

use ladder_client::Trader;
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::{json, Value};

use support::etcd::Etcd;
use support::*;

/// `--coordinator` and friends for node `node` of `cluster`.
fn coordinated<'a>(
    etcd: &'a Etcd,
    cluster: &'a str,
    node: &'a str,
    lease_ms: &'a str,
) -> Vec<&'a str> {
    vec![
        "--coordinator",
        &etcd.url,
        "--cluster",
        cluster,
        "--node-id",
        node,
        "--lease-ms",
        lease_ms,
        "--replication-listen",
        "127.0.0.1:0",
    ]
}

/// A coordinated `ladder standby` (no `--primary`: it follows whoever leads).
fn coordinated_standby(args: &[&str], data_dir: &std::path::Path) -> Standby {
    let mut command = ladder_standby(data_dir);
    command.args(args);
    spawn_standby(command)
}

/// `GET /admin/leader` of the node at `url`.
fn leader_seen(url: &str) -> Option<Value> {
    let mut http = ladder_client::HttpClient::new(url).ok()?;
    let r = http.request("GET", "/admin/leader", &[], None).ok()?;
    (r.status == 200).then(|| r.json())
}

/// Waits until the node at `url` sees `node` lead.
fn wait_for_leader(url: &str, node: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        if let Some(seen) = leader_seen(url) {
            if seen["leader"] == json!(node) {
                return seen;
            }
        }
        assert!(Instant::now() < deadline, "{url} never saw {node} lead");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A resting buy of one share at a price of its own (nothing crosses): whether it was
/// acknowledged, and its id.
fn place(trader: &mut Trader, i: u32) -> (u16, Option<String>) {
    let price = 1_000 + 10 * (i % 400);
    match trader.place(yes(), Side::Buy, price, 1, OrderType::Gtc) {
        Ok(r) if r.status == 200 && r.json()["success"] == json!(true) => {
            (200, r.json()["orderID"].as_str().map(str::to_string))
        }
        Ok(r) => (r.status, None),
        Err(_) => (0, None),
    }
}

/// The ids of the open orders trader `from`'s account has on the node at `url`.
fn open_order_ids(url: &str, from: &Trader) -> Vec<String> {
    let mut t = trader_on(url, 0, from);
    let r = t.send("GET", "/orders?limit=500", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["order_hash"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until the node at `url` leads and takes writes (`ladder_is_leader 1`).
fn wait_until_leading(url: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let leads = ladder_client::HttpClient::new(url)
            .and_then(|mut http| http.request("GET", "/metrics", &[], None))
            .is_ok_and(|r| r.body.contains("\nladder_is_leader 1\n"));
        if leads {
            return;
        }
        assert!(Instant::now() < deadline, "{url} never took the lead");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn state_hash(url: &str) -> Value {
    admin_at(url, "GET", "/admin/state-hash").1
}

#[test]
fn a_killed_leader_is_replaced_within_three_leases_by_a_standby_that_holds_every_acknowledged_order(
) {
    let Some(etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    let lease_ms = 2_000u64;
    let lease = lease_ms.to_string();
    let mut args_a = coordinated(&etcd, "kill", "a", &lease);
    args_a.extend(["--replicas", "1"]);
    let mut leader = Service::start(&args_a);
    wait_until_leading(&leader.url, Duration::from_secs(20));
    let dirs = tempfile::tempdir().unwrap();
    let mut args_b = coordinated(&etcd, "kill", "b", &lease);
    args_b.extend(["--replicas", "1"]);
    let b = coordinated_standby(&args_b, &dirs.path().join("b"));
    let mut args_c = coordinated(&etcd, "kill", "c", &lease);
    args_c.extend(["--replicas", "1"]);
    let c = coordinated_standby(&args_c, &dirs.path().join("c"));
    for standby in [&b.url, &c.url] {
        wait_for_leader(standby, "a", Duration::from_secs(20));
    }
    // Writes are answered once a standby holds them.
    wait_for_hash(&b.url, &state_hash(&leader.url));
    wait_for_hash(&c.url, &state_hash(&leader.url));
    let mut alice = leader.trader(0);
    wait_for_hash(&c.url, &state_hash(&leader.url));

    // C stops following for a while: it lags, and must not win.
    c.signal("STOP");
    let mut acked = Vec::new();
    for i in 0..40 {
        let (status, id) = place(&mut alice, i);
        assert_eq!(status, 200, "the leader takes writes while b holds them");
        acked.extend(id);
    }
    // Under load: a client keeps placing orders on the leader while it is killed; each one
    // acknowledged must be on the new leader.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (stop, mut client) = (stop.clone(), trader_on(&leader.url, 0, &alice));
        client.http.follow_leader = false;
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut i = 40;
            // At most 400 orders in all: one page of GET /orders lists them.
            while !stop.load(std::sync::atomic::Ordering::Acquire) && i < 400 {
                let (status, id) = place(&mut client, i);
                if status == 200 {
                    acked.extend(id);
                } else {
                    std::thread::sleep(Duration::from_millis(5));
                }
                i += 1;
            }
            acked
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    leader.kill();
    let killed = Instant::now();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let under_load = load.join().unwrap();
    assert!(
        !under_load.is_empty(),
        "the load placed orders before the kill"
    );
    acked.extend(under_load);
    c.signal("CONT");

    // B leads and takes writes within three leases.
    let mut on_b = trader_on(&b.url, 0, &alice);
    let took = loop {
        let (status, id) = place(&mut on_b, 1_000);
        if status == 200 {
            acked.extend(id);
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no standby took writes (last status {status})"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!(
        "e2e_failover: the first acknowledged write on the new leader came {took:?} after the kill"
    );
    assert!(
        took <= Duration::from_millis(3 * lease_ms),
        "the new leader took writes {took:?} after the kill, more than 3 leases"
    );
    let seen = wait_for_leader(&b.url, "b", Duration::from_secs(1));
    assert_eq!(seen["url"], json!(b.url));
    assert!(seen["term"].as_u64().unwrap() >= 2, "{seen}");
    let (_, metrics) = {
        let mut http = ladder_client::HttpClient::new(&b.url).unwrap();
        let r = http.request("GET", "/metrics", &[], None).unwrap();
        (r.status, r.body)
    };
    assert!(metrics.contains("\nladder_is_leader 1\n"), "{metrics}");

    // Every acknowledged order is on the new leader; the lagging standby follows it.
    // (It may hold more: an order the old leader journaled and b held, whose answer the kill
    // cut off, was never acknowledged and may be kept.)
    let open = open_order_ids(&b.url, &alice);
    let missing: Vec<_> = acked.iter().filter(|id| !open.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged orders missing on the new leader: {missing:?}"
    );
    wait_for_leader(&c.url, "b", Duration::from_secs(10));
    wait_for_hash(&c.url, &state_hash(&b.url));
    // Credentials made on the old leader still work on the new leader's standby (an L2
    // read): the new leader hands on the master key it took from the old one, not the key
    // its data directory started with.
    assert_eq!(open_order_ids(&c.url, &alice), open);
    // A standby refuses writes and names the leader.
    let mut on_c = trader_on(&c.url, 0, &alice);
    on_c.http.follow_leader = false;
    let r = on_c
        .place(yes(), Side::Buy, 2_000, 1, OrderType::Gtc)
        .unwrap();
    assert_eq!(
        (r.status, r.json()),
        (
            503,
            json!({ "error": "standby: not primary", "leader": b.url })
        )
    );
    // The client follows it there: the same order, sent to the standby, lands on the leader.
    let mut following = trader_on(&c.url, 0, &alice);
    let r = following
        .place(yes(), Side::Buy, 2_000, 1, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.json()["success"], json!(true), "{}", r.body);
    assert_eq!(following.http.base_url(), b.url);
    let placed = r.json()["orderID"].as_str().unwrap().to_string();
    assert!(open_order_ids(&b.url, &alice).contains(&placed));
    // An operator cannot promote a standby while another node holds the lease.
    let (status, body) = admin_at(&c.url, "POST", "/admin/promote");
    assert_eq!(status, 409, "{body}");
}

#[test]
fn an_operator_promotes_a_standby_of_a_cluster_without_a_leader() {
    let Some(etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A standby waits for a leader to copy from: it never leads an empty cluster by itself.
    let lone = coordinated_standby(
        &coordinated(&etcd, "lone", "s", "1000"),
        &dir.path().join("s"),
    );
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(
        leader_seen(&lone.url).unwrap(),
        json!({ "leader": null, "url": null, "term": 0 })
    );
    // The lease is free: the operator's promotion runs for it and wins.
    let (status, body) = admin_at(&lone.url, "POST", "/admin/promote");
    assert_eq!((status, body), (200, json!({ "promoted": true })));
    wait_until_leading(&lone.url, Duration::from_secs(5));
    assert_eq!(leader_seen(&lone.url).unwrap()["term"], json!(1));
}

#[test]
fn a_paused_leader_never_acknowledges_after_the_new_leader_and_rejoins_as_its_standby() {
    let Some(etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    let lease = "1000";
    let leader = Service::start(&coordinated(&etcd, "pause", "a", lease));
    wait_until_leading(&leader.url, Duration::from_secs(20));
    let dirs = tempfile::tempdir().unwrap();
    let b = coordinated_standby(
        &coordinated(&etcd, "pause", "b", lease),
        &dirs.path().join("b"),
    );
    wait_for_leader(&b.url, "a", Duration::from_secs(20));
    let mut alice = leader.trader(0);
    let (status, _) = place(&mut alice, 0);
    assert_eq!(status, 200);
    wait_for_hash(&b.url, &state_hash(&leader.url));
    // A market feed on the leader: it is told the node changes role, not that it stops.
    let (mut feed, _) = tungstenite::connect(format!(
        "{}/ws/market",
        leader.url.replace("http://", "ws://")
    ))
    .expect("a feed");
    feed.send(tungstenite::Message::text(
        json!({ "type": "market", "assets_ids": [yes().to_string()] }).to_string(),
    ))
    .unwrap();

    leader.signal("STOP");
    // A write sent to the paused leader waits in its socket.
    let mut queued = trader_on(&leader.url, 0, &alice);
    queued.http.follow_leader = false;
    let queued = std::thread::spawn(move || {
        let r = queued.place(yes(), Side::Buy, 1_010, 1, OrderType::Gtc);
        r.map(|r| (r.status, r.json()))
    });
    // B takes over; its first acknowledged write.
    wait_for_leader(&b.url, "b", Duration::from_secs(10));
    let mut on_b = trader_on(&b.url, 0, &alice);
    let deadline = Instant::now() + Duration::from_secs(10);
    while place(&mut on_b, 2).0 != 200 {
        assert!(Instant::now() < deadline, "b never took writes");
        std::thread::sleep(Duration::from_millis(20));
    }
    leader.signal("CONT");
    // Nothing the old leader answers from now on is an acknowledgement, and the write that
    // waited through the pause is refused before it is journaled: past its deadline the old
    // leader is a standby (not `leadership lost`, which would mean journaled and applied).
    let (status, answer) = queued
        .join()
        .unwrap()
        .expect("an answer from the resumed leader");
    assert_eq!(
        (status, &answer["error"]),
        (503, &json!("standby: not primary")),
        "the paused leader took a write after its lease's deadline: {answer}"
    );
    // It names the new leader or none, never itself.
    assert_ne!(answer["leader"], json!(leader.url), "{answer}");
    let mut on_a = trader_on(&leader.url, 0, &alice);
    on_a.http.follow_leader = false;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let (status, _) = place(&mut on_a, 3);
        assert_ne!(
            status, 200,
            "the old leader acknowledged a write after losing the lease"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // It rejoins as B's standby, holding B's state (what it wrote past B's term is cut).
    wait_for_leader(&leader.url, "b", Duration::from_secs(20));
    wait_for_hash(&leader.url, &state_hash(&b.url));
    let close = loop {
        match feed.read() {
            Ok(tungstenite::Message::Close(frame)) => break frame.expect("a close frame"),
            Ok(_) => {}
            Err(e) => panic!("no close frame: {e}"),
        }
    };
    assert_eq!(u16::from(close.code), 1012, "{close:?}");
    assert_eq!(close.reason.as_str(), "node changing role: connect again");
}

#[test]
fn a_node_that_holds_less_than_the_cluster_acknowledged_never_leads_by_itself() {
    let Some(etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    let lease = "1000";
    let mut leader = Service::start(&coordinated(&etcd, "empty", "a", lease));
    wait_until_leading(&leader.url, Duration::from_secs(20));
    let mut alice = leader.trader(0);
    let (status, order) = place(&mut alice, 0);
    assert_eq!(status, 200);
    // Alone with `--replicas 0` for two leases, the leader publishes what it answered as
    // held by the cluster (a standby would have to hold it otherwise).
    std::thread::sleep(Duration::from_millis(2_600));
    leader.kill();

    // A node with an empty data directory joins while no node holding the journal lives: it
    // must not lead the cluster from nothing (its term would cut the old leader's orders).
    let dirs = tempfile::tempdir().unwrap();
    let empty = coordinated_standby(
        &coordinated(&etcd, "empty", "b", lease),
        &dirs.path().join("b"),
    );
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let seen = leader_seen(&empty.url).expect("b answers");
        // (The dead leader's lease outlives it for a while.)
        assert_ne!(
            seen["leader"],
            json!("b"),
            "an empty node took the lead: {seen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The old leader comes back, leads again, and the new node copies its orders.
    leader.restart();
    wait_until_leading(&leader.url, Duration::from_secs(20));
    wait_for_leader(&empty.url, "a", Duration::from_secs(20));
    wait_for_hash(&empty.url, &state_hash(&leader.url));
    assert!(open_order_ids(&empty.url, &alice).contains(&order.unwrap()));
}

#[test]
fn a_write_is_answered_only_once_etcd_names_it_so_a_standby_that_missed_it_never_leads() {
    let Some(etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    let lease = "1000";
    let with_a_replica = |node| {
        let mut args = coordinated(&etcd, "triple", node, lease);
        args.extend(["--replicas", "1"]);
        args
    };
    let mut leader = Service::start(&with_a_replica("a"));
    wait_until_leading(&leader.url, Duration::from_secs(20));
    let dirs = tempfile::tempdir().unwrap();
    let mut b = coordinated_standby(&with_a_replica("b"), &dirs.path().join("b"));
    let mut c = coordinated_standby(&with_a_replica("c"), &dirs.path().join("c"));
    for standby in [&b.url, &c.url] {
        wait_for_leader(standby, "a", Duration::from_secs(20));
    }
    let mut alice = leader.trader(0);
    assert_eq!(place(&mut alice, 0).0, 200);
    wait_for_hash(&b.url, &state_hash(&leader.url));

    // B goes down; the leader answers a write C holds, and the leader and C fail the moment
    // the answer arrives (before the coordinator's next tick).
    b.kill();
    let (status, order) = place(&mut alice, 1);
    assert_eq!(status, 200, "c holds the write");
    leader.kill();
    c.kill();

    // B comes back without the write while no node holding it is alive: it must not lead
    // (its term would cut the acknowledged write on the nodes that come back).
    let b = coordinated_standby(&with_a_replica("b"), &dirs.path().join("b"));
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        let seen = leader_seen(&b.url).expect("b answers");
        assert_ne!(
            seen["leader"],
            json!("b"),
            "a node that missed an acknowledged write took the lead: {seen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // C comes back with it and leads; B follows it and holds the order.
    let c = coordinated_standby(&with_a_replica("c"), &dirs.path().join("c"));
    wait_until_leading(&c.url, Duration::from_secs(20));
    wait_for_leader(&b.url, "c", Duration::from_secs(20));
    wait_for_hash(&b.url, &state_hash(&c.url));
    assert!(open_order_ids(&b.url, &alice).contains(&order.unwrap()));
}

#[test]
fn with_etcd_down_writes_stop_within_a_lease_reads_go_on_and_writes_resume_when_it_returns() {
    let Some(mut etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    let lease_ms = 1_000u64;
    let lease = lease_ms.to_string();
    let leader = Service::start(&coordinated(&etcd, "outage", "a", &lease));
    wait_until_leading(&leader.url, Duration::from_secs(20));
    let mut alice = leader.trader_when_writable(0);
    assert_eq!(place(&mut alice, 0).0, 200);

    etcd.kill();
    let down = Instant::now();
    let mut reader = ladder_client::HttpClient::new(&leader.url).unwrap();
    let refused_after = loop {
        let (status, _) = place(&mut alice, 1);
        let read = reader.request("GET", "/markets", &[], None).unwrap();
        assert_eq!(read.status, 200, "reads go on without etcd");
        if status == 503 {
            break down.elapsed();
        }
        assert_eq!(status, 200);
        assert!(
            down.elapsed() < Duration::from_secs(10),
            "writes never stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        refused_after <= Duration::from_millis(lease_ms + 300),
        "writes went on {refused_after:?} after etcd went down"
    );
    for _ in 0..10 {
        assert_eq!(place(&mut alice, 2).0, 503, "no writes while etcd is down");
        let read = reader.request("GET", "/markets", &[], None).unwrap();
        assert_eq!(read.status, 200, "reads go on without etcd");
        std::thread::sleep(Duration::from_millis(100));
    }
    let hash_while_down = state_hash(&leader.url);
    // No node promotes itself without the coordinator, not even on an operator's word.
    let (status, body) = admin_at(&leader.url, "POST", "/admin/promote");
    assert_eq!(status, 409, "{body}");

    etcd.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    while place(&mut alice, 3).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "writes never resumed after etcd returned"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        leader_seen(&leader.url).unwrap()["leader"],
        json!("a"),
        "the same node leads on"
    );
    assert!(state_hash(&leader.url)["seq"].as_u64() > hash_while_down["seq"].as_u64());
}

#[test]
fn with_etcd_down_a_replicated_write_is_refused_soon_and_holds_no_read_back() {
    let Some(mut etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    // A long lease: a write that waited for etcd until the deadline would hold every read
    // behind it for seconds.
    let lease = "4000";
    let with_a_replica = |node| {
        let mut args = coordinated(&etcd, "outage-replicated", node, lease);
        args.extend(["--replicas", "1"]);
        args
    };
    let leader = Service::start(&with_a_replica("a"));
    wait_until_leading(&leader.url, Duration::from_secs(20));
    let dirs = tempfile::tempdir().unwrap();
    let standby = coordinated_standby(&with_a_replica("b"), &dirs.path().join("b"));
    wait_for_leader(&standby.url, "a", Duration::from_secs(20));
    let mut alice = leader.trader_when_writable(0);
    assert_eq!(place(&mut alice, 0).0, 200);
    let started = alice.send("POST", "/heartbeats", Some("{}")).unwrap();
    assert_eq!(started.status, 200, "{}", started.body);
    let heartbeat_id = started.json()["heartbeat_id"].clone();

    etcd.kill();
    let write = {
        let mut client = trader_on(&leader.url, 0, &alice);
        client.http.follow_leader = false;
        std::thread::spawn(move || {
            let sent = Instant::now();
            let r = client
                .place(yes(), Side::Buy, 1_500, 1, OrderType::Gtc)
                .unwrap();
            (r.status, r.json(), sent.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let mut reader = ladder_client::HttpClient::new(&leader.url).unwrap();
    let asked = Instant::now();
    let read = reader.request("GET", "/markets", &[], None).unwrap();
    let read_took = asked.elapsed();
    assert_eq!(read.status, 200, "{}", read.body);
    let (status, answer, write_took) = write.join().unwrap();
    assert_eq!(
        (status, &answer["error"]),
        (503, &json!(ladder_sequencer::LEADERSHIP_LOST)),
        "{answer}"
    );
    assert!(
        write_took < Duration::from_millis(1_500),
        "the write waited {write_took:?} for etcd"
    );
    assert!(
        read_took < Duration::from_millis(1_000),
        "a read waited {read_took:?} behind the write"
    );
    // While etcd takes nothing, later client writes are refused before they are applied.
    let seq = state_hash(&leader.url)["seq"].clone();
    let mut later = trader_on(&leader.url, 0, &alice);
    later.http.follow_leader = false;
    let r = later
        .place(yes(), Side::Buy, 1_600, 1, OrderType::Gtc)
        .unwrap();
    assert_eq!(
        (r.status, r.json()),
        (503, json!({ "error": "replica unavailable" })),
        "{}",
        r.body
    );
    // A heartbeat start or stop is a write too; a beat writes nothing and is taken.
    for (method, body) in [("POST", Some("{}")), ("DELETE", None)] {
        let r = later.send(method, "/heartbeats", body).unwrap();
        assert_eq!(
            (r.status, r.json()),
            (503, json!({ "error": "replica unavailable" })),
            "{method}: {}",
            r.body
        );
    }
    let beat = json!({ "heartbeat_id": heartbeat_id }).to_string();
    let r = later.send("POST", "/heartbeats", Some(&beat)).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(state_hash(&leader.url)["seq"], seq, "nothing applied");

    etcd.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    while place(&mut alice, 3).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "writes never resumed after etcd returned"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A deposed leader never overwrites its successor's `acknowledged`: the put holds only while
/// the putter's lease holds the leader's key.
#[test]
fn the_acknowledged_position_is_put_only_while_the_putters_lease_holds_the_leader_key() {
    use ladder_coordinator::etcd::Etcd as Client;
    let Some(etcd) = Etcd::start("e2e_failover") else {
        return;
    };
    let client = Client::new(std::slice::from_ref(&etcd.url), Duration::from_secs(2)).unwrap();
    let (old, new) = (client.grant(10).unwrap(), client.grant(10).unwrap());
    let (leader, acknowledged) = ("/ladder/fence/leader", "/ladder/fence/acknowledged");
    let put = |lease: i64, value: &str| {
        client
            .put_while_lease_holds((acknowledged, value.as_bytes()), (leader, lease))
            .unwrap()
    };
    assert!(!put(old.id, "a"), "no leader key: nobody may put");
    client.put(leader, b"old", Some(old.id)).unwrap();
    assert!(put(old.id, "b"));
    assert!(!put(new.id, "c"), "another lease does not hold the key");
    // The old lease goes (and its key with it); the next leader's lease takes the key.
    client.revoke(old.id).unwrap();
    client.put(leader, b"new", Some(new.id)).unwrap();
    assert!(!put(old.id, "d"), "the deposed leader's put fails");
    assert!(put(new.id, "e"));
    assert_eq!(client.get(acknowledged).unwrap(), Some(b"e".to_vec()));
}

#[test]
fn a_node_listening_on_every_interface_advertises_the_host_it_is_reached_at() {
    let Some(etcd) = Etcd::start("e2e_failover_advertise") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("replication.secret");
    std::fs::write(&secret, "e2e advertise secret: 0a1b2c3d4e5f\n").unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ladder"));
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen", "0.0.0.0:0", "--admin-token", ADMIN_TOKEN])
        .args(["--log", "warn", "--coordinator", &etcd.url])
        .args(["--cluster", "advertise", "--lease-ms", "1000"])
        .args([
            "--replication-listen",
            "0.0.0.0:0",
            "--advertise-host",
            "127.0.0.1",
        ])
        .arg("--replication-secret-file")
        .arg(&secret)
        .stdout(std::process::Stdio::piped());
    let node = spawn_standby(command);
    let port = node.url.rsplit(':').next().unwrap().to_string();
    let url = format!("http://127.0.0.1:{port}");
    // Without --node-id the id is the listen address with the advertised host for 0.0.0.0,
    // and the URL others are sent to is one they can dial.
    let seen = wait_for_leader(&url, &format!("127.0.0.1:{port}"), Duration::from_secs(20));
    assert_eq!(seen["url"], json!(url), "{seen}");
}
