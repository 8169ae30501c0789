//! `ladder journal` on a real service's journal (API.md §19): `dump` lines with `seq`,
//! `timestamp` (Unix ms) and `type`, its inclusive `--from`/`--to` and `--type` filter;
//! `stats` agreeing with it; `state-hash --at` the last sequence equal to `state-hash`.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::Value;
use support::*;

fn journal(args: &[&str], data_dir: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .arg("journal")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("run ladder journal");
    assert!(
        out.status.success(),
        "ladder journal {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn dump_filters_stats_and_state_hash_agree_on_a_live_services_journal() {
    let started_ms = now_ms();
    let mut service = Service::start(&[]);
    let mut alice = service.trader(0);
    for price in [3_000, 3_100, 3_200] {
        let r = alice
            .place(yes(), Side::Buy, price, 1, OrderType::Gtc)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    service.kill();
    let dir = service.data_dir.clone();

    let all = lines(&journal(&["dump"], &dir));
    assert!(all.len() >= 4, "{all:?}");
    for (i, record) in all.iter().enumerate() {
        assert_eq!(record["seq"].as_u64(), Some(i as u64 + 1), "{record}");
        let ms = record["timestamp"].as_u64().expect("timestamp");
        assert!(
            (started_ms.saturating_sub(1_000)..=now_ms()).contains(&ms),
            "timestamp {ms} is not Unix ms of this run: {record}"
        );
        assert_eq!(
            record["timestamp_ns"].as_u64().map(|ns| ns / 1_000_000),
            Some(ms)
        );
        assert!(record["type"].is_string(), "{record}");
    }
    // Values are spelled as the API spells them.
    let deposits: Vec<&Value> = all.iter().filter(|r| r["type"] == "deposit").collect();
    assert!(
        deposits
            .iter()
            .any(|r| r["command"]["Deposit"]["asset"] == "COLLATERAL"),
        "{deposits:?}"
    );
    let placed = lines(&journal(&["dump", "--type", "place_order"], &dir));
    assert_eq!(placed.len(), 3, "{placed:?}");
    assert!(placed.iter().all(|r| r["type"] == "place_order"));

    let last = all.len() as u64;
    let window = lines(&journal(
        &["dump", "--from", "2", "--to", &(last - 1).to_string()],
        &dir,
    ));
    let seqs: Vec<u64> = window.iter().filter_map(|r| r["seq"].as_u64()).collect();
    assert_eq!(seqs, (2..last).collect::<Vec<_>>());
    // `tail -n N`: the last N records, none for 0.
    for n in [0, 1, 2] {
        let tailed = lines(&journal(&["tail", "-n", &n.to_string()], &dir));
        let seqs: Vec<u64> = tailed.iter().filter_map(|r| r["seq"].as_u64()).collect();
        assert_eq!(
            seqs,
            (last + 1 - n..=last).collect::<Vec<_>>(),
            "tail -n {n}"
        );
    }

    let stats: Value =
        serde_json::from_slice(&journal(&["stats"], &dir).stdout).expect("stats prints JSON");
    assert_eq!(stats["records"].as_u64(), Some(last), "{stats}");
    assert_eq!(stats["last_seq"].as_u64(), Some(last), "{stats}");
    assert_eq!(
        stats["by_type"]["place_order"]["records"].as_u64(),
        Some(3),
        "{stats}"
    );

    let hash_line = |out: Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    };
    let end = hash_line(journal(&["state-hash"], &dir));
    assert!(end.starts_with("0x") && end.len() == 66, "{end}");
    assert_eq!(
        hash_line(journal(&["state-hash", "--at", &last.to_string()], &dir)),
        end
    );
    assert_ne!(
        hash_line(journal(
            &["state-hash", "--at", &(last - 1).to_string()],
            &dir
        )),
        end,
        "the last order changes the state"
    );

    // Output that cannot be written ends the command by its rules, never with a panic: a
    // full disk under a redirect is exit 1 with a one-line reason; a reader that stops
    // early (`| head -1`) is a success.
    for args in [&["dump"][..], &["stats"], &["verify"], &["state-hash"]] {
        let full = Command::new(env!("CARGO_BIN_EXE_ladder"))
            .arg("journal")
            .args(args)
            .arg("--data-dir")
            .arg(&dir)
            .stdout(std::fs::File::create("/dev/full").expect("/dev/full"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&full.stderr);
        assert_eq!(full.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "ladder: standard output: No space left on device (os error 28)",
            "{args:?}"
        );
    }
    let mut dump = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["journal", "dump", "--data-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(dump.stdout.take());
    let done = dump.wait_with_output().unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// A service whose standard output, or standard error too, is a full disk runs all the
/// same: its notices (where it listens, the demo's accounts) and log lines are dropped; with
/// standard error writable, that is said once there.
#[test]
fn serve_runs_with_its_standard_output_and_error_on_a_full_disk() {
    for stderr_full in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let port = support::free_port();
        let full = || std::fs::File::create("/dev/full").expect("/dev/full");
        let mut serve = Command::new(env!("CARGO_BIN_EXE_ladder"))
            .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(dir.path())
            .stdout(full())
            .stderr(if stderr_full {
                full().into()
            } else {
                std::process::Stdio::piped()
            })
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let answered = loop {
            let mut http = ladder_client::HttpClient::new(&url).unwrap();
            if http
                .request("GET", "/time", &[], None)
                .is_ok_and(|r| r.status == 200)
            {
                break true;
            }
            if std::time::Instant::now() > deadline || serve.try_wait().unwrap().is_some() {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let _ = serve.kill();
        let out = serve.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            answered,
            "stderr full: {stderr_full}: the service did not come up ({:?}): {stderr}",
            out.status
        );
        if !stderr_full {
            assert_eq!(stderr.matches("notices are dropped").count(), 1, "{stderr}");
        }
    }
}

fn admin_state_hash(service: &Service) -> Value {
    let r = service.admin("GET", "/admin/state-hash", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// A snapshot that cannot be written is a 500 that says so without the internals (the
/// file system's error goes to the service's log; API.md §18).
#[test]
fn a_snapshot_that_cannot_be_written_is_a_500_that_leaks_nothing() {
    let service = Service::start(&[]);
    let snapshots = service.data_dir.join("snapshots");
    let _ = std::fs::remove_dir_all(&snapshots);
    std::fs::write(&snapshots, b"not a directory").expect("a file where the directory goes");
    let r = service.admin("POST", "/admin/snapshot", None);
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"error": "snapshot failed; see the service log"})
    );
    std::fs::remove_file(&snapshots).expect("the file goes");
    let r = service.admin("POST", "/admin/snapshot", None);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Issue 4: snapshots are written periodically and on command. `POST /admin/snapshot` (and
/// `ladder snapshot`) writes one at once, names its sequence and file, and a restart after
/// a kill (no shutdown snapshot) comes back to the same state.
#[test]
fn a_snapshot_on_command_is_written_at_once_and_a_restart_keeps_the_state() {
    let mut service = Service::start(&[]);
    let mut alice = service.trader(0);
    for price in [3_000, 3_100] {
        let r = alice
            .place(yes(), Side::Buy, price, 1, OrderType::Gtc)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let before = admin_state_hash(&service);
    let r = service.admin("POST", "/admin/snapshot", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let taken = r.json();
    assert_eq!(taken["seq"], before["seq"], "{taken}");
    let path = Path::new(taken["path"].as_str().expect("path"));
    assert!(path.starts_with(&service.data_dir), "{taken}");
    assert!(path.is_file(), "{taken}");

    let out = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args([
            "snapshot",
            "--listen",
            &format!("127.0.0.1:{}", service.port()),
        ])
        .args(["--admin-token", ADMIN_TOKEN])
        .output()
        .expect("run ladder snapshot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    assert_eq!(again["seq"], before["seq"], "{again}");

    service.kill_and_restart();
    assert_eq!(admin_state_hash(&service), before);
    let r = service.admin("GET", "/admin/snapshot", None);
    assert_eq!(r.header("Allow"), Some("POST"));
}

/// `repair --truncate-after SEQ` quarantines the records after SEQ (as for a record every
/// replay fails on): the journal ends at SEQ, a `.bad` copy keeps what was cut, and the
/// service starts at SEQ's state.
#[test]
fn repair_truncate_after_quarantines_later_records_and_keeps_a_copy() {
    let mut service = Service::start(&[]);
    let mut alice = service.trader(0);
    alice
        .place(yes(), Side::Buy, 1_000, 1, OrderType::Gtc)
        .unwrap();
    let kept = admin_state_hash(&service);
    let kept_seq = kept["seq"].as_u64().unwrap();
    alice
        .place(yes(), Side::Buy, 1_100, 1, OrderType::Gtc)
        .unwrap();
    service.kill();
    let data_dir = service.data_dir().to_path_buf();
    let out = journal(
        &["repair", "--truncate-after", &kept_seq.to_string()],
        &data_dir,
    );
    let report = &lines(&out)[0];
    assert_eq!(report["truncated_after"], kept_seq);
    let copies = report["kept"].as_array().unwrap();
    assert!(
        copies
            .iter()
            .any(|p| p.as_str().unwrap().ends_with(".seg.bad")),
        "{report}"
    );
    let hash = journal(&["state-hash"], &data_dir);
    let hash_line = String::from_utf8_lossy(&hash.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert_eq!(hash_line, kept["state_hash"].as_str().unwrap());
    service.restart();
    assert_eq!(admin_state_hash(&service), kept);
}

/// `--snapshot-every N` writes a snapshot every N records and `--keep-snapshots K` keeps the
/// newest K; a restart starts from the newest.
#[test]
fn snapshots_follow_snapshot_every_and_keep_snapshots() {
    let mut service = Service::start(&["--snapshot-every", "3", "--keep-snapshots", "2"]);
    let mut alice = service.trader(0);
    let snapshots = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("snapshots"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| n.ends_with(".snap"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    for i in 0..12u32 {
        alice
            .place(yes(), Side::Buy, 1_000 + 100 * i, 1, OrderType::Gtc)
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let data_dir = service.data_dir().to_path_buf();
    let taken = snapshots(&data_dir);
    assert_eq!(taken.len(), 2, "the newest two are kept: {taken:?}");
    let hash = admin_state_hash(&service);
    service.kill_and_restart();
    assert_eq!(admin_state_hash(&service), hash);
}
