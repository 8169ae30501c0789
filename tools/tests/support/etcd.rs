//! A real etcd (Debian's `etcd-server`) on loopback for the failover tests, with its own data
//! directory and a short raft heartbeat, so that etcd grants one-second leases.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set to `1` in CI: a missing etcd fails the test instead of skipping it.
pub const REQUIRE_ETCD_ENV: &str = "LADDER_REQUIRE_ETCD";

/// A running etcd, killed on drop.
pub struct Etcd {
    child: Option<Child>,
    /// Its client URL.
    pub url: String,
    client_port: u16,
    peer_port: u16,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts etcd and waits until it answers; `None` (the test then passes, saying why)
    /// when there is no etcd binary, unless `LADDER_REQUIRE_ETCD=1`.
    pub fn start(test: &str) -> Option<Etcd> {
        if Command::new("etcd").arg("--version").output().is_err() {
            assert!(
                std::env::var(REQUIRE_ETCD_ENV).as_deref() != Ok("1"),
                "{REQUIRE_ETCD_ENV}=1 but no etcd: install Debian's etcd-server"
            );
            eprintln!("{test}: no etcd binary (Debian's etcd-server); skipped");
            return None;
        }
        let (client_port, peer_port) = (super::free_port(), super::free_port());
        let mut etcd = Etcd {
            child: None,
            url: format!("http://127.0.0.1:{client_port}"),
            client_port,
            peer_port,
            dir: tempfile::tempdir().expect("temp dir"),
        };
        etcd.launch();
        Some(etcd)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("etcd")
    }

    fn launch(&mut self) {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(self.data_dir())
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("test={peer}")])
            .args(["--heartbeat-interval", "20", "--election-timeout", "200"])
            .args(["--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn etcd");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let healthy = ladder_client::HttpClient::new(&self.url)
                .and_then(|mut http| http.request("GET", "/health", &[], None))
                .is_ok_and(|r| r.status == 200 && r.body.contains("true"));
            if healthy {
                return;
            }
            assert!(Instant::now() < deadline, "etcd did not become healthy");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills etcd (SIGKILL); its data stays for [`Etcd::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on its data and ports.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}
