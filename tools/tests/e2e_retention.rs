//! Journal retention (API.md §19): once a snapshot, the history store and every connected
//! standby hold a segment's records, the segment leaves the journal (or moves to
//! `--journal-archive`); the service restarts from what is left, `ladder journal` works on the
//! trimmed journal, and a connected standby keeps what it has not acknowledged.

mod helpers;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use helpers::*;
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::json;
use support::*;

/// First sequences of the journal's segments, oldest first.
fn segment_firsts(data_dir: &Path) -> Vec<u64> {
    let mut firsts: Vec<u64> = std::fs::read_dir(data_dir.join("journal"))
        .map(|entries| {
            entries
                .filter_map(|e| {
                    let name = e.ok()?.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".seg")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    firsts.sort_unstable();
    firsts
}

fn ladder(args: &[&str], data_dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("run ladder");
    assert!(
        out.status.success(),
        "ladder {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Credits many small deposits: one journal record each.
fn fill_journal(service: &Service, records: usize) {
    let address = ladder_protocol::Address::parse("0x00000000000000000000000000000000000000aa")
        .expect("an address");
    for _ in 0..records {
        deposit(service, &address, "COLLATERAL", 1);
    }
}

/// Waits until the journal's first segment starts after sequence 1.
fn wait_trimmed(data_dir: &Path) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let firsts = segment_firsts(data_dir);
        if firsts.first().is_some_and(|&f| f > 1) {
            return firsts;
        }
        assert!(Instant::now() < deadline, "never trimmed: {firsts:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const SMALL: [&str; 8] = [
    "--segment-size-kb",
    "16",
    "--snapshot-every",
    "200",
    "--keep-snapshots",
    "2",
    "--settlement-delay-ms",
    "20",
];

#[test]
fn retired_segments_leave_and_the_service_tools_and_reads_work_on_what_is_left() {
    let archive = tempfile::tempdir().unwrap();
    let archive_dir: PathBuf = archive.path().join("segments");
    let mut args: Vec<&str> = SMALL.to_vec();
    let archive_arg = archive_dir.to_string_lossy().into_owned();
    args.extend(["--journal-archive", &archive_arg]);
    let mut service = Service::start(&args);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 20);
    let p = place(&mut bob, yes(), Side::Sell, 5_000, 3, OrderType::Fak);
    assert_eq!(p["status"], json!("matched"), "{p}");
    let trade_id = p["tradeIds"][0].as_str().unwrap().to_string();
    fill_journal(&service, 1_500);

    let firsts = wait_trimmed(service.data_dir());
    // A snapshot every 200 records, exactly (not at the history store's next commit).
    let snapshots: Vec<u64> = std::fs::read_dir(service.data_dir().join("snapshots"))
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_prefix("snapshot-")?
                .strip_suffix(".snap")?
                .parse()
                .ok()
        })
        .collect();
    assert!(!snapshots.is_empty());
    assert!(snapshots.iter().all(|seq| seq % 200 == 0), "{snapshots:?}");
    let moved: Vec<u64> = std::fs::read_dir(&archive_dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".seg")?.parse().ok()
        })
        .collect();
    assert!(
        moved.contains(&1),
        "the first segment was archived: {moved:?}"
    );
    assert!(moved.iter().all(|m| m < &firsts[0]));

    // The tools on the trimmed journal of the running service.
    let verify: serde_json::Value =
        serde_json::from_str(ladder(&["journal", "verify"], service.data_dir()).trim()).unwrap();
    assert_eq!(verify["first_seq"], json!(firsts[0]), "{verify}");
    let dump = ladder(&["journal", "dump"], service.data_dir());
    let first_line: serde_json::Value =
        serde_json::from_str(dump.lines().next().expect("records")).unwrap();
    assert_eq!(first_line["seq"], json!(firsts[0]));
    // Asked for records retention removed, dump says where the journal starts.
    let early = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["journal", "dump", "--from", "1", "--to", "3", "--data-dir"])
        .arg(service.data_dir())
        .output()
        .unwrap();
    assert!(early.status.success());
    assert_eq!(
        String::from_utf8_lossy(&early.stderr).trim(),
        format!(
            "ladder: the journal starts at sequence {} (retention removed the records before it)",
            firsts[0]
        )
    );
    // From any sequence before the start (not only 1): from the first record left.
    let from_before = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args([
            "journal",
            "dump",
            "--from",
            &(firsts[0] - 1).to_string(),
            "--data-dir",
        ])
        .arg(service.data_dir())
        .output()
        .unwrap();
    assert!(from_before.status.success());
    let first_dumped: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&from_before.stdout)
            .lines()
            .next()
            .expect("records"),
    )
    .unwrap();
    assert_eq!(first_dumped["seq"], json!(firsts[0]));
    let hash_live = ladder(&["journal", "state-hash"], service.data_dir());
    assert!(hash_live.trim().starts_with("0x"));

    // A restart recovers from a snapshot and the journal left; reads are the same.
    let balance_before = balance(&mut alice, "asset_type=COLLATERAL");
    let trade_before = alice
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap()
        .json();
    service.kill_and_restart();
    let mut alice = service.trader(0);
    assert_eq!(balance(&mut alice, "asset_type=COLLATERAL"), balance_before);
    let trade_after = alice
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap()
        .json();
    assert_eq!(trade_after, trade_before);
    service.kill();
    let last_line = ladder(&["journal", "state-hash"], service.data_dir());
    assert!(last_line.trim().starts_with("0x"));
}

#[test]
fn a_connected_standby_keeps_its_records_and_a_new_one_behind_the_journal_bootstraps() {
    let replication = free_port();
    let mut args: Vec<&str> = SMALL.to_vec();
    let listen = format!("127.0.0.1:{replication}");
    args.extend(["--replication-listen", &listen]);
    let primary = Service::start(&args);
    let mut alice = primary.trader(0);
    let mut bob = primary.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 20);
    let p = place(&mut bob, yes(), Side::Sell, 5_000, 3, OrderType::Fak);
    let trade_id = p["tradeIds"][0].as_str().expect("a trade").to_string();
    let standby_dir = tempfile::tempdir().unwrap();
    let standby = start_standby_in(replication, &standby_dir.path().join("data"));
    fill_journal(&primary, 1_500);
    // Trimmed with the standby connected: it held (acknowledged) what left.
    let firsts = wait_trimmed(primary.data_dir());
    let status = |url: &str| {
        let mut http = ladder_client::HttpClient::new(url).unwrap();
        http.request("GET", "/time", &[], None).unwrap().status
    };
    assert_eq!(status(&standby.url), 200, "the standby follows on");
    drop(standby);

    // A new standby needs records the primary no longer has: it takes the primary's
    // snapshot and history store, then follows the journal to the same state.
    let fresh = tempfile::tempdir().unwrap();
    let fresh_dir = fresh.path().join("data");
    let standby = start_standby_in(replication, &fresh_dir);
    let (_, primary_hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &primary_hash);
    let started = segment_firsts(&fresh_dir);
    assert!(
        started.first().is_some_and(|&f| f >= firsts[0]),
        "the standby's journal starts after the snapshot it took: {started:?}"
    );
    // History that left the primary's journal long ago is there too.
    let mut on_standby = trader_on(&standby.url, 0, &alice);
    let trade = on_standby
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap();
    assert_eq!(trade.status, 200, "{}", trade.body);
    let on_primary = alice
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap()
        .json();
    assert_eq!(trade.json(), on_primary);
    // It goes on following.
    fill_journal(&primary, 50);
    let (_, primary_hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &primary_hash);
}

#[test]
fn a_standby_whose_primary_moved_past_it_sets_its_records_aside_and_bootstraps() {
    // A primary whose journal is trimmed past what the standby below will hold.
    let replication = free_port();
    let mut args: Vec<&str> = SMALL.to_vec();
    let listen = format!("127.0.0.1:{replication}");
    args.extend(["--replication-listen", &listen]);
    let mut primary = Service::start(&args);
    let standby_dir = tempfile::tempdir().unwrap();
    let data = standby_dir.path().join("data");
    let standby = start_standby_in(replication, &data);
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
    drop(standby);
    fill_journal(&primary, 1_500);
    wait_trimmed(primary.data_dir());
    // Away while the primary is down too: the standby comes up first and waits for it.
    primary.kill();
    let standby = start_standby_in(replication, &data);
    std::thread::sleep(Duration::from_millis(500));
    primary.restart();
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
    let set_aside: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.starts_with("set-aside-"))
        .collect();
    assert_eq!(
        set_aside.len(),
        1,
        "what it held is kept aside: {set_aside:?}"
    );
    assert!(data.join(&set_aside[0]).join("journal").is_dir());
    // The standby answered at the same address throughout its runs.
    fill_journal(&primary, 20);
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
}

/// `history.db` lost after retention (API.md §19): the historian cannot rebuild it from a
/// journal that starts later, so every read that needs what the engine forgot, and every
/// placement (whose duplicate check needs it), is 503 `history store unavailable`, not a
/// wrong answer (`not found`, an empty price history) nor a wait that never ends.
#[test]
fn a_history_store_lost_after_retention_makes_what_needs_it_unavailable() {
    let mut service = Service::start(&SMALL);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let hash = rest(&mut alice, yes(), Side::Buy, 5_000, 20);
    let order = id_of(&mut alice, &hash);
    let p = place(&mut bob, yes(), Side::Sell, 5_000, 20, OrderType::Fak);
    assert_eq!(p["status"], json!("matched"), "{p}");
    let trade_id = p["tradeIds"][0].as_str().unwrap().to_string();
    fill_journal(&service, 1_500);
    wait_trimmed(service.data_dir());
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&service, "ladder_engine_trades_held") != "0"
        || metric(&service, "ladder_engine_orders_held") != "0"
    {
        assert!(
            Instant::now() < deadline,
            "the engine still holds the trade"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let live_hash = rest(&mut alice, yes(), Side::Buy, 3_000, 1);
    let live = id_of(&mut alice, &live_hash);

    service.kill();
    for name in ["history.db", "history.db-wal", "history.db-shm"] {
        let _ = std::fs::remove_file(service.data_dir().join(name));
    }
    service.restart();
    let mut alice = service.trader(0);
    let unavailable = |r: &ladder_client::HttpResponse| {
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(r.json(), json!({"error": "history store unavailable"}));
    };
    // From the first request on (the store is judged before the service answers).
    unavailable(
        &alice
            .send("GET", &format!("/trades/{trade_id}"), None)
            .unwrap(),
    );
    unavailable(&alice.send("GET", "/data/trades", None).unwrap());
    unavailable(&alice.cancel(order, market()).unwrap());
    // A batch that cancels an order the engine holds is answered: the forgotten one says why.
    let requests: Vec<_> = [live, order]
        .iter()
        .map(|&id| {
            ladder_client::cancel_order_request(
                &alice.wallet,
                &alice.exchange,
                id,
                market(),
                ladder_protocol::SignatureType::SmartAccount,
            )
        })
        .collect();
    let r = alice
        .send(
            "DELETE",
            "/orders",
            Some(&ladder_client::cancel_orders_body(&requests)),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["canceled"],
        json!([live.to_string()]),
        "{}",
        r.body
    );
    assert_eq!(
        r.json()["notCanceled"],
        json!({ order.to_string(): "history store unavailable" }),
        "{}",
        r.body
    );
    unavailable(
        &alice
            .place(yes(), Side::Buy, 4_000, 1, OrderType::Gtc)
            .unwrap(),
    );
    let prices = format!("/prices-history?market={}&startTs=0&fidelity=1", yes());
    unavailable(&alice.send("GET", &prices, None).unwrap());
    // What the engine holds is still answered.
    assert_eq!(
        alice
            .send("GET", "/balance-allowance?asset_type=COLLATERAL", None)
            .unwrap()
            .status,
        200
    );
}

/// The store's backup restored after a run without it (API.md §19): that run keeps every
/// snapshot (it cannot know which one the backup needs), so the restored store finds one at
/// or before where it stands and everything is answered again, with `--keep-snapshots 1`.
#[test]
fn a_history_store_backup_restored_after_a_run_without_it_is_answered_again() {
    let small_keep_one: Vec<&str> = SMALL
        .iter()
        .map(|arg| if *arg == "2" { "1" } else { arg })
        .collect();
    let mut service = Service::start(&small_keep_one);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 20);
    let p = place(&mut bob, yes(), Side::Sell, 5_000, 20, OrderType::Fak);
    assert_eq!(p["status"], json!("matched"), "{p}");
    let trade_id = p["tradeIds"][0].as_str().unwrap().to_string();
    fill_journal(&service, 1_500);
    wait_trimmed(service.data_dir());
    let before = alice
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap();
    assert_eq!(before.status, 200, "{}", before.body);
    let stop = |service: &mut Service| {
        service.signal("TERM");
        assert!(
            service.wait_exit(Duration::from_secs(30)).is_some(),
            "no clean stop"
        );
    };
    stop(&mut service);
    let backup = tempfile::tempdir().unwrap();
    let names = ["history.db", "history.db-wal", "history.db-shm"];
    for name in names {
        let from = service.data_dir().join(name);
        if from.exists() {
            std::fs::copy(&from, backup.path().join(name)).unwrap();
            std::fs::remove_file(&from).unwrap();
        }
    }
    // A run without the store that writes (deposits) and stops cleanly (its stop writes a
    // snapshot past the backup's position).
    service.restart();
    let mut alice = service.trader(0);
    let lost = alice
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap();
    assert_eq!(lost.status, 503, "{}", lost.body);
    fill_journal(&service, 5);
    stop(&mut service);
    // The backup back, with the service stopped.
    for name in names {
        let _ = std::fs::remove_file(service.data_dir().join(name));
        let from = backup.path().join(name);
        if from.exists() {
            std::fs::copy(&from, service.data_dir().join(name)).unwrap();
        }
    }
    service.restart();
    let mut alice = service.trader(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let r = alice
            .send("GET", &format!("/trades/{trade_id}"), None)
            .unwrap();
        if r.status == 200 || Instant::now() >= deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(after.json(), before.json());
}
