//! `ladder bench soak` (API.md §19): does the service's footprint follow its live state or its
//! history? It starts `ladder serve` (this binary) on a data directory of its own, drives it
//! with `ladder loadgen --scenario mm` (signed orders over HTTP, the market makers' mix of
//! quotes, cancels and takers) chunk after chunk until the journal holds `--commands` records,
//! and at every `--every` records (after the chunk's makers' dead-man switch has cancelled the
//! quotes they left) prints one JSON line: the process's resident memory, the
//! newest snapshot's size, the data directory's size (journal, snapshots, history.db), and what
//! the engine holds. At the first checkpoint and at the end it also kills the service (SIGKILL)
//! and times its restart until it answers again. The last line compares the end with the first
//! checkpoint (API.md §19's target: within 1.25×).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};

use ladder_client::HttpClient;

use super::loadgen::setup::Admin;

/// `ladder bench soak`.
#[derive(Args, Debug, Clone)]
pub struct SoakArgs {
    /// Journal records to reach (commands, with the service's own: settlement, timers).
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub commands: u64,
    /// A checkpoint every this many records.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub every: u64,
    /// Requests per second offered by each loadgen chunk (open loop).
    #[arg(long, default_value_t = 6_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: u64,
    /// Seconds per loadgen chunk (each signs its orders first, on a fresh market).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk_s: u64,
    /// The service's `--snapshot-every`.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_every: u64,
    /// Data directory (a temporary one, removed at the end, without it).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// The admin token of the service the soak starts.
const ADMIN_TOKEN: &str = "soak-admin-token";
/// The service's heartbeat timeout: loadgen's market makers beat their dead-man switch and
/// leave it running at the end (`--leave-heartbeats`), so once a chunk ends the service
/// cancels the quotes they left (as it would a real maker's that went away), and a checkpoint
/// measures what a market keeps, not what a chunk left behind (the `mm` mix places more quotes
/// than it cancels).
const HEARTBEAT_TIMEOUT_MS: u64 = 2_000;
/// How long after a chunk a checkpoint waits: the switch fires, the store and the engine's
/// forgetting catch up.
const SETTLE_AFTER_CHUNK: Duration = Duration::from_secs(5);

/// The longest wait for the store and the engine's forgetting to catch up after a chunk.
const SETTLE_MAX: Duration = Duration::from_secs(60);

/// How long a start or restart may take before the soak gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// The service under test.
struct Service {
    exe: PathBuf,
    data_dir: PathBuf,
    port: u16,
    snapshot_every: u64,
    child: Option<Child>,
}

impl Service {
    /// Starts it and waits until it answers: the time that took.
    fn start(&mut self) -> Result<Duration, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join("soak-service.log"))
            .map_err(|e| format!("service log: {e}"))?;
        let started = Instant::now();
        let child = Command::new(&self.exe)
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--admin-token", ADMIN_TOKEN])
            .args(["--durability", "async"])
            .args(["--rate-limit-key", "0", "--rate-limit-ip", "0"])
            .args(["--settlement-delay-ms", "100"])
            .args(["--heartbeat-timeout-ms", &HEARTBEAT_TIMEOUT_MS.to_string()])
            .args(["--snapshot-every", &self.snapshot_every.to_string()])
            .args(["--log", "warn"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("start ladder serve: {e}"))?;
        self.child = Some(child);
        while !self.answers() {
            if started.elapsed() > READY_TIMEOUT {
                return Err("the service did not answer within 5 minutes".into());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(format!(
                    "the service stopped ({status}); see {}",
                    self.data_dir.join("soak-service.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(started.elapsed())
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn answers(&self) -> bool {
        HttpClient::new(&self.url())
            .and_then(|mut http| http.request("GET", "/time", &[], None))
            .is_ok_and(|r| r.status == 200)
    }

    /// SIGKILL.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Resident memory, MB: `VmRSS` in all, or one of its parts (`RssAnon`: the heap, what
    /// the engines and buffers hold; `RssFile`: mapped journal pages, bounded by retention).
    fn resident_mb(&self, field: &str) -> Option<f64> {
        let pid = self.child.as_ref()?.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(kb / 1024.0)
    }

    /// CPU seconds spent so far by the service's threads named `name` (its `/metrics`).
    fn thread_cpu_s(&self, name: &str) -> Option<f64> {
        let used = super::loadgen::service_use(&self.url())?;
        used.threads.get(name).map(|thread| thread.cpu_s)
    }

    /// Resident memory, MB.
    fn rss_mb(&self) -> Option<f64> {
        self.resident_mb("VmRSS")
    }

    /// `/metrics` as name → value (labelled series left out).
    fn metrics(&self) -> Result<std::collections::HashMap<String, f64>, String> {
        let mut http = HttpClient::new(&self.url())?;
        let r = http.request("GET", "/metrics", &[], None)?;
        Ok(r.body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.contains('{'))
            .filter_map(|l| {
                let (name, value) = l.split_once(' ')?;
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Bytes under `path` (a file, or a directory walked).
fn size_of(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| size_of(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// The newest snapshot's size, MB.
fn newest_snapshot_mb(data_dir: &Path) -> f64 {
    let newest = std::fs::read_dir(data_dir.join("snapshots"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".snap"))
                .max_by_key(|e| e.file_name())
                .map(|e| size_of(&e.path()))
        })
        .ok()
        .flatten()
        .unwrap_or(0);
    mb(newest)
}

/// Writes a snapshot now, with the service at rest (`POST /admin/snapshot`): its size, MB.
/// The periodic snapshots are written in the middle of the load, with quotes resting and
/// trades settling, so they do not measure what the service keeps.
fn settled_snapshot_mb(service: &Service) -> Result<f64, String> {
    let mut http = HttpClient::new(&service.url())?;
    let auth = [("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
    let r = http.request("POST", "/admin/snapshot", &auth, Some(""))?;
    if r.status != 200 {
        return Err(format!("POST /admin/snapshot: {} {}", r.status, r.body));
    }
    let path = r.json()["path"]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| format!("POST /admin/snapshot named no file: {}", r.body))?;
    Ok(mb(size_of(&path)))
}

/// One checkpoint's line.
fn checkpoint(service: &Service, restart_s: Option<f64>) -> Result<Value, String> {
    let periodic_snapshot_mb = newest_snapshot_mb(&service.data_dir);
    let snapshot_mb = settled_snapshot_mb(service)?;
    let metrics = service.metrics()?;
    let get = |name: &str| metrics.get(name).copied().unwrap_or(0.0) as u64;
    let dir = &service.data_dir;
    Ok(json!({
        "commands": get("ladder_last_seq"),
        "rss_mb": service.rss_mb(),
        "rss_anon_mb": service.resident_mb("RssAnon"),
        "rss_file_mb": service.resident_mb("RssFile"),
        "heap_in_use_mb": get("ladder_heap_in_use_bytes") as f64 / 1_048_576.0,
        "heap_free_mb": get("ladder_heap_free_bytes") as f64 / 1_048_576.0,
        "snapshot_mb": snapshot_mb,
        "periodic_snapshot_mb": periodic_snapshot_mb,
        "data_dir_mb": mb(size_of(dir)),
        "journal_mb": mb(size_of(&dir.join("journal"))),
        "history_db_mb": mb(size_of(&dir.join("history.db"))
            + size_of(&dir.join("history.db-wal"))),
        "orders_held": get("ladder_engine_orders_held"),
        "trades_held": get("ladder_engine_trades_held"),
        "order_hashes_held": get("ladder_engine_order_hashes_held"),
        "history_stored_seq": get("ladder_history_stored_seq"),
        "historian_cpu_s": service.thread_cpu_s("historian"),
        "process_cpu_s": metrics.get("process_cpu_seconds_total"),
        "restart_s": restart_s,
    }))
}

/// Runs one loadgen chunk against the service, then resolves the chunk's market (as markets
/// end), so that what the service holds stays one market's worth however many chunks ran.
fn drive(exe: &Path, service: &Service, args: &SoakArgs) -> Result<(), String> {
    let out = service.data_dir.join("loadgen-chunk");
    let status = Command::new(exe)
        .arg("loadgen")
        .args(["--url", &service.url()])
        .args(["--admin-token", ADMIN_TOKEN])
        .args(["--scenario", "mm"])
        .args(["--rate", &args.rate.to_string()])
        .args(["--duration", &args.chunk_s.to_string()])
        .arg("--leave-heartbeats")
        .arg("--out")
        .arg(&out)
        .args(["--log", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("run ladder loadgen: {e}"))?;
    if !status.success() {
        return Err(format!("ladder loadgen failed ({status})"));
    }
    let result = std::fs::read_to_string(out.join("result.json"))
        .map_err(|e| format!("ladder loadgen's result.json: {e}"))?;
    let result: Value =
        serde_json::from_str(&result).map_err(|e| format!("ladder loadgen's result.json: {e}"))?;
    let market = result["market"]
        .as_str()
        .ok_or("ladder loadgen's result.json names no market")?;
    let admin = Admin::new(&service.url(), ADMIN_TOKEN);
    admin.post(
        &mut admin.http()?,
        &format!("/admin/markets/{market}/resolve"),
        &json!({"outcome": "Yes"}),
    )
}

/// Waits (at most [`SETTLE_MAX`]) until the history store holds every record and the
/// engine has let go of what it holds (its count of held orders stops changing), so that a
/// checkpoint measures the service at rest, not the store catching up with a chunk.
fn settle(service: &Service) -> Result<(), String> {
    let started = Instant::now();
    let mut last_held = None;
    while started.elapsed() < SETTLE_MAX {
        let metrics = service.metrics()?;
        let get = |name: &str| metrics.get(name).copied().unwrap_or(0.0) as u64;
        let caught_up = get("ladder_history_stored_seq") >= get("ladder_last_seq");
        let held = get("ladder_engine_orders_held");
        if caught_up && last_held == Some(held) {
            return Ok(());
        }
        last_held = Some(held);
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(())
}

/// Kills the service, restarts it and returns how long it took to answer again.
fn restart(service: &mut Service) -> Result<f64, String> {
    service.kill();
    Ok(service.start()?.as_secs_f64())
}

/// Runs the soak.
pub fn soak(args: &SoakArgs) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    let temp = match &args.dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?),
    };
    let data_dir = match (&args.dir, &temp) {
        (Some(dir), _) => dir.clone(),
        (None, Some(temp)) => temp.path().join("data"),
        (None, None) => unreachable!("a directory either way"),
    };
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let port = super::bench_failover::free_port()?;
    let mut service = Service {
        exe: exe.clone(),
        data_dir,
        port,
        snapshot_every: args.snapshot_every,
        child: None,
    };
    service.start()?;
    let mut lines: Vec<Value> = Vec::new();
    let mut next = args.every.min(args.commands);
    loop {
        drive(&exe, &service, args)?;
        std::thread::sleep(SETTLE_AFTER_CHUNK);
        settle(&service)?;
        let seq = service
            .metrics()?
            .get("ladder_last_seq")
            .copied()
            .unwrap_or(0.0) as u64;
        if seq < next {
            continue;
        }
        let finished = seq >= args.commands;
        let mut line = checkpoint(&service, None)?;
        // A restart at the first checkpoint and at the end, timed until the service answers.
        if lines.is_empty() || finished {
            let restart_s = restart(&mut service)?;
            line["restart_s"] = json!(restart_s);
            line["rss_after_restart_mb"] = json!(service.rss_mb());
        }
        crate::cmd::stdout::print_line(&line);
        lines.push(line);
        if finished {
            break;
        }
        while next <= seq {
            next = next.saturating_add(args.every);
        }
        next = next.min(args.commands);
    }
    let (first, last) = (&lines[0], &lines[lines.len() - 1]);
    let ratio = |key: &str| match (first[key].as_f64(), last[key].as_f64()) {
        (Some(a), Some(b)) if a > 0.0 => json!(b / a),
        _ => Value::Null,
    };
    crate::cmd::stdout::print_line(json!({
        "summary": true,
        "commands_first": first["commands"],
        "commands_last": last["commands"],
        "rss_ratio": ratio("rss_mb"),
        "rss_anon_ratio": ratio("rss_anon_mb"),
        "heap_in_use_ratio": ratio("heap_in_use_mb"),
        "snapshot_ratio": ratio("snapshot_mb"),
        "restart_s_first": first["restart_s"],
        "restart_s_last": last["restart_s"],
        "data_dir_mb_last": last["data_dir_mb"],
    }));
    Ok(())
}
