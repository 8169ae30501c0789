//! A full disk, end to end (API.md §18): the service on a small tmpfs (mounted by the test,
//! which needs root; skipped with a message otherwise), the disk filled under it. Every order
//! acknowledged before is kept (after a restart too); placements and key creations are 503
//! `journal full: no space left on device` while cancels and reads go on; a restart on the
//! full disk starts and refuses the same way; `journal verify` exits with a status, never a
//! signal; freed space lets writes resume without a restart.

mod helpers;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use helpers::*;
use ladder_client::{post_orders_body, OrderBuilder};
use ladder_protocol::wire::{OrderType, PostOrderRequest};
use ladder_protocol::{Side, U256};
use serde_json::Value;
use support::*;

const JOURNAL_FULL: &str = "journal full: no space left on device";

/// A tmpfs of `size_kib` KiB on a fresh directory, unmounted on drop.
struct SmallDisk {
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size_kib: u64) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let mount = dir.path().join("disk");
        std::fs::create_dir(&mount).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kib}k"), "tmpfs"])
            .arg(&mount)
            .output()
            .ok()?;
        if !mounted.status.success() {
            eprintln!(
                "skipped: cannot mount a tmpfs here ({}); the full-disk test needs root",
                String::from_utf8_lossy(&mounted.stderr).trim()
            );
            return None;
        }
        Some(SmallDisk { mount, _dir: dir })
    }

    /// Fills what is left with a file; returns its path (remove it to free the space).
    fn fill(&self) -> PathBuf {
        let filler = self.mount.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5u8; 64 << 10];
        while std::io::Write::write_all(&mut file, &chunk).is_ok() {}
        for _ in 0..4096 {
            if std::io::Write::write_all(&mut file, &[0xa5]).is_err() {
                break;
            }
        }
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .args(["-l"])
            .arg(&self.mount)
            .status();
    }
}

/// Waits until the gauge `ladder_journal_full` reads `value`, with no write meanwhile.
fn wait_for_journal_full(service: &Service, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric(service, "ladder_journal_full") != value {
        assert!(
            Instant::now() < deadline,
            "ladder_journal_full never read {value}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A POST /orders body of 15 resting bids of 1 share at 0.01, salts from `salt`.
fn fifteen_bids(trader: &ladder_client::Trader, salt: u64) -> (String, usize) {
    let requests: Vec<PostOrderRequest> = (salt..salt + 15)
        .map(|s| PostOrderRequest {
            order: OrderBuilder::new(yes(), Side::Buy, 100, 1)
                .maker(trader.account)
                .salt(U256::from(s))
                .sign(&trader.wallet, &trader.exchange)
                .unwrap(),
            order_type: OrderType::Gtc,
            post_only: false,
        })
        .collect();
    (post_orders_body(&requests), requests.len())
}

fn open_count(trader: &mut ladder_client::Trader) -> usize {
    open_hashes(trader).len()
}

fn verify_exit(data_dir: &Path) -> std::process::ExitStatus {
    Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["journal", "verify", "--data-dir"])
        .arg(data_dir)
        .output()
        .unwrap()
        .status
}

#[test]
fn a_full_disk_refuses_writes_keeps_every_acknowledged_order_and_resumes_by_itself() {
    let Some(disk) = SmallDisk::mount(8 << 10) else {
        return;
    };
    let data_dir = disk.mount.join("data");
    let mut service = Service::start_on(&data_dir, &["--segment-size-mb", "1"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    // A trade that becomes final and leaves the engine for history.db before the disk fills.
    alice
        .place(yes(), Side::Buy, 5_500, 4, OrderType::Gtc)
        .unwrap();
    let r = bob
        .place(yes(), Side::Sell, 5_000, 4, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.json()["status"], "matched", "{}", r.body);
    let deadline = Instant::now() + Duration::from_secs(15);
    while metric(&service, "ladder_engine_trades_held") != "0" {
        assert!(Instant::now() < deadline, "the trade never left the engine");
        std::thread::sleep(Duration::from_millis(100));
    }
    let trades_before = alice.send("GET", "/trades", None).unwrap();
    assert_eq!(trades_before.status, 200, "{}", trades_before.body);
    let filler = disk.fill();
    // Alice's dead-man switch runs from before the disk is full.
    let mut heartbeat = beat(&mut alice, None).1["heartbeat_id"].clone();

    // Orders until the journal refuses: every batch is placed whole or refused whole.
    let mut acknowledged = 0usize;
    let mut salt = 1_000;
    let refusal = loop {
        let (status, answer) = beat(&mut alice, heartbeat.as_str());
        assert_eq!(status, 200, "{answer}");
        heartbeat = answer["heartbeat_id"].clone();
        let (body, n) = fifteen_bids(&alice, salt);
        salt += n as u64;
        let r = alice.send("POST", "/orders", Some(&body)).unwrap();
        if r.status != 200 {
            break r;
        }
        let results = r.json();
        let placed = results
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["success"] == Value::Bool(true))
            .count();
        assert_eq!(placed, n, "{}", r.body);
        acknowledged += placed;
        assert!(acknowledged < 20_000, "never refused");
    };
    assert_eq!(refusal.status, 503, "{}", refusal.body);
    assert_eq!(refusal.json()["error"], JOURNAL_FULL);
    assert!(acknowledged > 0);
    assert_eq!(metric(&service, "ladder_journal_full"), "1");
    // A key creation is refused too; reads and cancels go on.
    let r = alice.create_api_key(9).unwrap();
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (503, Value::from(JOURNAL_FULL))
    );
    assert_eq!(open_count(&mut alice), acknowledged);
    let id = open_ids(&mut alice)[0];
    let r = alice.cancel(id, market()).unwrap();
    assert_eq!(
        r.json()["canceled"][0],
        Value::from(id.to_string()),
        "{}",
        r.body
    );
    let kept = acknowledged - 1;
    // Beats journal nothing and go on; a start or a stop would spend the cancels' reserve
    // and is refused (no client can drain it).
    let (status, answer) = beat(&mut alice, heartbeat.as_str());
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = beat(&mut bob, None);
    assert_eq!(
        (status, &answer["error"]),
        (503, &Value::from(JOURNAL_FULL))
    );
    let r = alice.send("DELETE", "/heartbeats", None).unwrap();
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (503, Value::from(JOURNAL_FULL))
    );

    // A restart on the full disk recovers, keeps every acknowledged order and refuses.
    service.kill_and_restart();
    // The gauge says so before any write is refused.
    let deadline = Instant::now() + Duration::from_secs(3);
    while metric(&service, "ladder_journal_full") != "1" {
        assert!(Instant::now() < deadline, "ladder_journal_full stayed 0");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(open_count(&mut alice), kept);
    // Reads of what only history.db holds answer as before, though it cannot be written.
    let trades_after = alice.send("GET", "/trades", None).unwrap();
    assert_eq!(
        (trades_after.status, trades_after.json()),
        (200, trades_before.json())
    );
    let (body, _) = fifteen_bids(&alice, salt);
    let r = alice.send("POST", "/orders", Some(&body)).unwrap();
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (503, Value::from(JOURNAL_FULL))
    );
    let status = verify_exit(&data_dir);
    assert!(
        status.code().is_some(),
        "journal verify died by a signal: {status:?}"
    );

    // Space returns: the gauge drops before any write, and writes resume without a restart.
    std::fs::remove_file(filler).unwrap();
    wait_for_journal_full(&service, "0");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (body, n) = fifteen_bids(&alice, salt);
        salt += n as u64;
        let r = alice.send("POST", "/orders", Some(&body)).unwrap();
        if r.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writes did not resume: {}",
            r.body
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(metric(&service, "ladder_journal_full"), "0");
    assert_eq!(open_count(&mut alice), kept + 15);
}

/// A first start on a full disk (room for the service's small files, none for a journal
/// segment): `ladder_journal_full` is 1 before any write, `--demo` created nothing (the
/// journal refused it), and once space returns the gauge drops to 0 before any write.
#[test]
fn a_first_start_on_a_full_disk_shows_it_and_the_gauge_follows_the_space() {
    let Some(disk) = SmallDisk::mount(4 << 10) else {
        return;
    };
    let filler = disk.fill();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap();
    let len = file.metadata().unwrap().len();
    file.set_len(len - (256 << 10)).unwrap();
    drop(file);
    let data_dir = disk.mount.join("data");
    let service = Service::start_on(&data_dir, &["--segment-size-mb", "1"]);
    wait_for_journal_full(&service, "1");
    // A bench on the full disk fails with a status and one line, not a panic.
    let bench = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["bench", "replay", "--commands", "1000", "--dir"])
        .arg(&disk.mount)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bench.stderr);
    assert_eq!(bench.status.code(), Some(1), "{stderr}");
    // (the journal's own log line may come before it)
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(last.starts_with("ladder: bench failed: "), "{stderr}");
    let hash = service.admin("GET", "/admin/state-hash", None);
    assert_eq!(
        (hash.status, &hash.json()["seq"]),
        (200, &Value::from(0)),
        "{}",
        hash.body
    );
    std::fs::remove_file(filler).unwrap();
    wait_for_journal_full(&service, "0");
}

/// The history store on a full disk: its writes fail while the journal (allocated ahead) still
/// takes orders; nothing is forgotten meanwhile, every read answers from the engine, and once
/// space returns the store catches up by itself with every final trade exactly once.
/// A SIGTERM while the disk is full and the history store behind: the service stops within
/// seconds (the store cannot catch up; it will at the next start), not after a 30 s wait.
#[test]
fn a_stop_on_a_full_disk_does_not_wait_for_a_store_that_cannot_write() {
    let Some(disk) = SmallDisk::mount(16 << 10) else {
        return;
    };
    let data_dir = disk.mount.join("data");
    let mut service = Service::start_on(&data_dir, &["--segment-size-mb", "4"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 500);
    let _filler = disk.fill();
    for _ in 0..20 {
        let p = place(&mut bob, yes(), Side::Sell, 5_000, 1, OrderType::Fak);
        assert_eq!(p["success"], Value::Bool(true), "{p}");
    }
    let last: u64 = metric(&service, "ladder_last_seq").parse().unwrap();
    let stored: u64 = metric(&service, "ladder_history_stored_seq")
        .parse()
        .unwrap();
    assert!(stored < last, "the store wrote on the full disk");
    let stopping = Instant::now();
    service.signal("TERM");
    let status = service.wait_exit(Duration::from_secs(20));
    assert!(status.is_some(), "still running 20 s after SIGTERM");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "took {:?} to stop",
        stopping.elapsed()
    );
}

#[test]
fn a_full_disk_under_the_history_store_loses_and_doubles_no_row() {
    let Some(disk) = SmallDisk::mount(16 << 10) else {
        return;
    };
    let data_dir = disk.mount.join("data");
    let service = Service::start_on(
        &data_dir,
        &["--segment-size-mb", "4", "--settlement-delay-ms", "10"],
    );
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 500);
    let filler = disk.fill();
    let mut ids = Vec::new();
    for shares in 1..=40u64 {
        let p = place(
            &mut bob,
            yes(),
            Side::Sell,
            5_000,
            1 + shares % 3,
            OrderType::Fak,
        );
        assert_eq!(p["success"], Value::Bool(true), "{p}");
        ids.push(p["tradeIds"][0].as_str().unwrap().to_string());
    }
    // Every trade reads (from the engine: the store cannot take them).
    for id in &ids {
        let r = alice.send("GET", &format!("/trades/{id}"), None).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    std::thread::sleep(Duration::from_millis(500));
    let last: u64 = metric(&service, "ladder_last_seq").parse().unwrap();
    let stored_while_full: u64 = metric(&service, "ladder_history_stored_seq")
        .parse()
        .unwrap();
    assert!(
        stored_while_full < last,
        "the store wrote on the full disk (through {stored_while_full} of {last})"
    );
    let held: u64 = metric(&service, "ladder_engine_trades_held")
        .parse()
        .unwrap();
    assert!(held > 0, "nothing forgotten while the store cannot write");

    std::fs::remove_file(filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let held: u64 = metric(&service, "ladder_engine_trades_held")
            .parse()
            .unwrap();
        let stored: u64 = metric(&service, "ladder_history_stored_seq")
            .parse()
            .unwrap();
        if held == 0 && stored >= last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store never caught up: {held} trades held, stored through {stored} of {last} \
             (through {stored_while_full} while the disk was full)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let db = rusqlite::Connection::open_with_flags(
        data_dir.join("history.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let (rows, distinct): (i64, i64) = db
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT trade_id) FROM trades",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((rows, distinct), (ids.len() as i64, ids.len() as i64));
    for id in &ids {
        let r = alice.send("GET", &format!("/trades/{id}"), None).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["status"], Value::from("CONFIRMED"));
    }
}

/// The value of gauge `name` in the `/metrics` of the node at `url` (`None`: no answer).
fn metric_at(url: &str, name: &str) -> Option<String> {
    let mut http = ladder_client::HttpClient::new(url).ok()?;
    let r = http.request("GET", "/metrics", &[], None).ok()?;
    let prefix = format!("{name} ");
    r.body
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map(str::to_string)
}

/// A coordinated standby whose disk is full wins the lease when the leader dies but cannot
/// journal its term: it gives the lease back instead of holding it while refusing every
/// write, and leads (with every acknowledged order) once space returns.
#[test]
fn a_node_that_wins_the_lease_on_a_full_disk_gives_it_back_and_leads_once_space_returns() {
    let Some(etcd) = support::etcd::Etcd::start("e2e_full_disk") else {
        return;
    };
    let Some(disk) = SmallDisk::mount(8 << 10) else {
        return;
    };
    let coordinated = |node: &'static str| {
        vec![
            "--coordinator".to_string(),
            etcd.url.clone(),
            "--cluster".into(),
            "full".into(),
            "--node-id".into(),
            node.into(),
            "--lease-ms".into(),
            "1000".into(),
            "--replication-listen".into(),
            "127.0.0.1:0".into(),
        ]
    };
    let args_a = coordinated("a");
    let mut leader = Service::start(&args_a.iter().map(String::as_str).collect::<Vec<_>>());
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric_at(&leader.url, "ladder_is_leader").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "a never took the lead");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut alice = leader.trader(0);
    let first = alice
        .place(yes(), Side::Buy, 4_200, 3, OrderType::Gtc)
        .unwrap();
    assert_eq!(first.status, 200, "{}", first.body);
    let first_hash = first.json()["orderID"].as_str().unwrap().to_string();
    let mut command = ladder_standby(&disk.mount.join("b"));
    command
        .args(coordinated("b"))
        .args(["--segment-size-mb", "1"]);
    let b = spawn_standby(command);
    wait_for_hash(&b.url, &admin_at(&leader.url, "GET", "/admin/state-hash").1);

    // B's disk fills; the leader writes until B's journal has spent its last segment and
    // stops following (its copies may use the cancel reserve; a term may not).
    let filler = disk.fill();
    let seq_at = |url: &str| -> u64 {
        metric_at(url, "ladder_last_seq")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let mut salt = 50_000;
    let mut b_was = 0;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(Instant::now() < deadline, "b's journal never filled");
        for _ in 0..10 {
            let (body, n) = fifteen_bids(&alice, salt);
            salt += n as u64;
            let r = alice.send("POST", "/orders", Some(&body)).unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
        }
        std::thread::sleep(Duration::from_millis(200));
        let b_now = seq_at(&b.url);
        if b_now == b_was && seq_at(&leader.url) > b_now + 300 {
            break;
        }
        b_was = b_now;
    }
    assert_eq!(
        metric_at(&b.url, "ladder_journal_full").as_deref(),
        Some("1")
    );
    let mut on_b = trader_on(&b.url, 0, &alice);
    on_b.http.follow_leader = false;
    let try_write = |trader: &mut ladder_client::Trader, price: u32| {
        trader
            .place(yes(), Side::Buy, price, 1, OrderType::Gtc)
            .map(|r| r.status)
            .unwrap_or(0)
    };

    // The leader dies: B is the only node holding its journal, wins, and cannot journal its
    // term. It takes no write meanwhile.
    leader.kill();
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        // (No answer while it starts again as a standby.)
        if let Ok(r) = on_b.place(yes(), Side::Buy, 1_100, 1, OrderType::Gtc) {
            assert_ne!(r.status, 200, "a write on a full disk: {}", r.body);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Space returns: B leads by itself and takes writes, the leader's orders with it.
    std::fs::remove_file(filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while try_write(&mut on_b, 1_200) != 200 {
        assert!(
            Instant::now() < deadline,
            "b never took writes after space returned (it holds the lease: {:?})",
            metric_at(&b.url, "ladder_is_leader")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        open_hashes(&mut on_b).contains(&first_hash),
        "the leader's acknowledged order is not open on b"
    );
}

/// The hashes of every open order of `trader`'s account.
fn open_hashes(trader: &mut ladder_client::Trader) -> Vec<String> {
    let mut hashes = Vec::new();
    let mut cursor = String::new();
    loop {
        let r = trader
            .send(
                "GET",
                &format!("/orders?limit=500&next_cursor={cursor}"),
                None,
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let page = r.json();
        hashes.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["order_hash"].as_str().unwrap().to_string()),
        );
        cursor = page["next_cursor"].as_str().unwrap().to_string();
        if cursor == "LTE=" {
            return hashes;
        }
    }
}

/// `journal repair` on a full disk fails with a status and leaves no partial `.bad` copy
/// (which would pass for the damaged data), and the journal as it was; with room it works.
#[test]
fn a_repair_that_cannot_keep_its_copy_leaves_no_partial_copy_and_the_journal_unchanged() {
    let Some(disk) = SmallDisk::mount(8 << 10) else {
        return;
    };
    let data_dir = disk.mount.join("data");
    let mut service = Service::start_on(&data_dir, &["--segment-size-mb", "1"]);
    let mut alice = service.trader(0);
    alice
        .place(yes(), Side::Buy, 1_000, 1, OrderType::Gtc)
        .unwrap();
    let kept_seq = service.admin("GET", "/admin/state-hash", None).json()["seq"]
        .as_u64()
        .unwrap();
    alice
        .place(yes(), Side::Buy, 1_100, 1, OrderType::Gtc)
        .unwrap();
    service.kill();
    let filler = disk.fill();
    let repair = || {
        Command::new(env!("CARGO_BIN_EXE_ladder"))
            .args([
                "journal",
                "repair",
                "--truncate-after",
                &kept_seq.to_string(),
            ])
            .arg("--data-dir")
            .arg(&data_dir)
            .output()
            .unwrap()
    };
    let bad_copies = || {
        std::fs::read_dir(data_dir.join("journal"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().contains(".bad"))
            .count()
    };
    let refused = repair();
    assert_eq!(
        refused.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(bad_copies(), 0, "a partial .bad copy was left");
    assert!(verify_exit(&data_dir).success());
    std::fs::remove_file(filler).unwrap();
    let repaired = repair();
    assert!(
        repaired.status.success(),
        "{}",
        String::from_utf8_lossy(&repaired.stderr)
    );
    assert_eq!(bad_copies(), 1);
}
