//! `ladder bench failover`: three coordinated nodes on one machine (`--replicas 1`) and an
//! etcd; the leader is killed (SIGKILL) again and again, and each time the bench measures how
//! long after the kill a write is first acknowledged by the new leader (a deposit through the
//! admin surface, tried on every live node every 10 ms). The killed node comes back as a
//! standby before the next kill. Prints one JSON line: the kills, their median and max.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use ladder_client::HttpClient;
use serde_json::json;

/// `ladder bench failover`.
#[derive(Args, Debug, Clone)]
pub struct FailoverBenchArgs {
    /// How many times the leader is killed.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub kills: u64,
    /// The nodes' `--lease-ms`.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub lease_ms: u64,
    /// An etcd to use (`http://HOST:PORT`); without it one is started from `etcd` on the
    /// PATH (Debian's etcd-server), with a short raft heartbeat.
    #[arg(long)]
    pub etcd: Option<String>,
    /// Where the nodes' data directories go (a temporary directory without it).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// The admin token of the nodes the bench starts.
const ADMIN_TOKEN: &str = "failover-bench-token";
/// The longest a failover may take before the bench gives up.
const FAILOVER_MAX: Duration = Duration::from_secs(60);

/// One node of the cluster.
struct Node {
    name: String,
    data_dir: PathBuf,
    port: u16,
    replication_port: u16,
    child: Option<Child>,
}

impl Node {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(
        &mut self,
        exe: &Path,
        command: &str,
        etcd: &str,
        lease_ms: u64,
    ) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.with_extension("log"))
            .map_err(|e| format!("node log: {e}"))?;
        let child = Command::new(exe)
            .arg(command)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args([
                "--replication-listen",
                &format!("127.0.0.1:{}", self.replication_port),
            ])
            .args(["--replicas", "1", "--admin-token", ADMIN_TOKEN])
            .args(["--coordinator", etcd, "--cluster", "bench"])
            .args(["--node-id", &self.name, "--lease-ms", &lease_ms.to_string()])
            .args(["--log", "warn"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("start node {}: {e}", self.name))?;
        self.child = Some(child);
        Ok(())
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn leads(&self) -> bool {
        HttpClient::new(&self.url())
            .and_then(|mut http| http.request("GET", "/metrics", &[], None))
            .is_ok_and(|r| r.body.contains("\nladder_is_leader 1\n"))
    }

    /// Tries one acknowledged write (a deposit), here only.
    fn write(&self) -> bool {
        let Ok(mut http) = HttpClient::new(&self.url()) else {
            return false;
        };
        http.follow_leader = false;
        let body = json!({
            "address": "0x00000000000000000000000000000000000b3c11",
            "asset": "COLLATERAL",
            "amount": "1",
        })
        .to_string();
        let auth = [("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
        http.request("POST", "/admin/deposits", &auth, Some(&body))
            .is_ok_and(|r| r.status == 200)
    }

    fn state_hash(&self) -> Option<serde_json::Value> {
        let mut http = HttpClient::new(&self.url()).ok()?;
        let auth = [("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
        let r = http.request("GET", "/admin/state-hash", &auth, None).ok()?;
        (r.status == 200).then(|| r.json())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An etcd the bench started.
struct OwnEtcd(Child);

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port nothing listens on now.
pub(super) fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("a free port: {e}"))
}

fn start_etcd(dir: &Path) -> Result<(OwnEtcd, String), String> {
    let (client, peer) = (free_port()?, free_port()?);
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new("etcd")
        .args(["--name", "bench", "--data-dir"])
        .arg(dir.join("etcd"))
        .args([
            "--listen-client-urls",
            &client_url,
            "--advertise-client-urls",
            &client_url,
        ])
        .args([
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
        ])
        .args(["--initial-cluster", &format!("bench={peer_url}")])
        .args([
            "--heartbeat-interval",
            "20",
            "--election-timeout",
            "200",
            "--log-level",
            "error",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start etcd (Debian's etcd-server, or give --etcd): {e}"))?;
    let etcd = OwnEtcd(child);
    wait_until(Duration::from_secs(20), "etcd to answer", || {
        HttpClient::new(&client_url)
            .and_then(|mut http| http.request("GET", "/health", &[], None))
            .is_ok_and(|r| r.status == 200)
    })?;
    Ok((etcd, client_url))
}

fn wait_until(within: Duration, what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + within;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("gave up waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// The index of the node that leads, once one does and takes writes.
fn leader(nodes: &[Node]) -> Result<usize, String> {
    let mut found = None;
    wait_until(FAILOVER_MAX, "a leader", || {
        found = nodes.iter().position(Node::leads);
        found.is_some_and(|i| nodes[i].write())
    })?;
    found.ok_or_else(|| "no leader".to_string())
}

/// Waits until every node holds the leader's state.
fn converge(nodes: &[Node], leader: usize) -> Result<(), String> {
    wait_until(FAILOVER_MAX, "the standbys to catch up", || {
        let Some(want) = nodes[leader].state_hash() else {
            return false;
        };
        nodes.iter().all(|n| n.state_hash().as_ref() == Some(&want))
    })
}

/// Runs the bench.
pub fn failover(args: &FailoverBenchArgs) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    let scratch = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (_own_etcd, etcd) = match &args.etcd {
        Some(url) => (None, url.clone()),
        None => {
            let (own, url) = start_etcd(&dir)?;
            (Some(own), url)
        }
    };
    let mut nodes = Vec::new();
    for name in ["a", "b", "c"] {
        nodes.push(Node {
            name: name.to_string(),
            data_dir: dir.join(name),
            port: free_port()?,
            replication_port: free_port()?,
            child: None,
        });
    }
    nodes[0].start(&exe, "serve", &etcd, args.lease_ms)?;
    for node in nodes.iter_mut().skip(1) {
        node.start(&exe, "standby", &etcd, args.lease_ms)?;
    }
    // Writes are answered once a standby holds them (`--replicas 1`).
    let mut current = leader(&nodes)?;
    converge(&nodes, current)?;
    let mut took_ms = Vec::new();
    for kill in 0..args.kills {
        nodes[current].kill();
        let killed = Instant::now();
        let next = loop {
            if let Some(i) = (0..nodes.len()).find(|&i| i != current && nodes[i].write()) {
                break i;
            }
            if killed.elapsed() > FAILOVER_MAX {
                return Err(format!("kill {kill}: no node took writes within 60 s"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let ms = killed.elapsed().as_secs_f64() * 1e3;
        tracing::info!(kill, ms, leader = %nodes[next].name, "failed over");
        took_ms.push(ms);
        nodes[current].start(&exe, "standby", &etcd, args.lease_ms)?;
        current = next;
        converge(&nodes, current)?;
    }
    let mut sorted = took_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let max = sorted.last().copied().unwrap_or(0.0);
    crate::cmd::stdout::print_line(json!({
        "kills": took_ms.len(),
        "lease_ms": args.lease_ms,
        "bound_ms": 3 * args.lease_ms,
        "first_write_after_kill_ms": {"median": median, "max": max, "each": took_ms},
    }));
    Ok(())
}
