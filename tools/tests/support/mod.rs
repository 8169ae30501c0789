//! End-to-end harness: runs the real `ladder serve` binary on a free loopback port with
//! its own data directory, and gives traders (the demo accounts) that talk to it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub mod anvil;
pub mod etcd;

use ladder_client::{HttpClient, Trader, Wallet};
use ladder_protocol::{Address, B256, U256};

/// The demo market.
pub const CONDITION_ID: &str = "0x3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b";
/// Its Yes token.
pub const YES: &str =
    "52114319501245915516055106046884209969926127482827954674443846427813813222426";
/// Its No token.
pub const NO: &str =
    "71321045679252212594626385532706912750332728571942532289631379312455583992563";
/// Demo keys and accounts (public development keys from protocol/tests/data/signing.json).
pub const KEYS: [(&str, &str); 2] = [
    (
        "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        "0x5a11c0C0a000000000000000000000000000A001",
    ),
    (
        "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
        "0x5A11C0C0a000000000000000000000000000a002",
    ),
];
/// The admin token the harness starts the service with.
pub const ADMIN_TOKEN: &str = "e2e-admin-token";

/// A running service.
pub struct Service {
    child: Option<Child>,
    /// Its base URL.
    pub url: String,
    /// Its data directory.
    pub data_dir: PathBuf,
    _dir: Option<tempfile::TempDir>,
    extra_args: Vec<String>,
}

impl Service {
    /// A fresh service with `--demo` and `extra_args`.
    pub fn start(extra_args: &[&str]) -> Service {
        let dir = tempfile::tempdir().expect("temp dir");
        let data_dir = dir.path().join("data");
        let mut service = Service {
            child: None,
            url: String::new(),
            data_dir,
            _dir: Some(dir),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
        };
        service.launch(None);
        service
    }

    /// A fresh service with `--demo` and `extra_args` on `data_dir` (kept by the caller).
    pub fn start_on(data_dir: &Path, extra_args: &[&str]) -> Service {
        let mut service = Service {
            child: None,
            url: String::new(),
            data_dir: data_dir.to_path_buf(),
            _dir: None,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
        };
        service.launch(None);
        service
    }

    fn launch(&mut self, port: Option<u16>) {
        let mut child = self
            .serve_command(port)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn ladder serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("ladder serve exited before listening")
                .expect("read stdout");
            if let Some(url) = line.strip_prefix("ladder: listening on ") {
                break url.trim().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        self.child = Some(child);
        self.url = url;
        self.wait_ready();
    }

    /// `ladder serve` with this service's arguments, on `port` (0: any free port).
    fn serve_command(&self, port: Option<u16>) -> Command {
        let listen = format!("127.0.0.1:{}", port.unwrap_or(0));
        let mut command = Command::new(env!("CARGO_BIN_EXE_ladder"));
        command
            .args(["serve", "--demo", "--data-dir"])
            .arg(&self.data_dir)
            .args([
                "--listen",
                &listen,
                "--admin-token",
                ADMIN_TOKEN,
                "--log",
                "warn",
            ])
            .args(&self.extra_args);
        command
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        if let Some(authority) = self.url.strip_prefix("https://") {
            // TLS: the test talks to it itself; wait for the port only.
            while std::net::TcpStream::connect(authority).is_err() {
                assert!(Instant::now() < deadline, "service did not listen");
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(200));
            return;
        }
        loop {
            if let Ok(mut http) = HttpClient::new(&self.url) {
                if let Ok(r) = http.request("GET", "/time", &[], None) {
                    if r.status == 200 {
                        return;
                    }
                }
            }
            assert!(Instant::now() < deadline, "service did not become ready");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port")
    }

    /// SIGKILL, then start again on the same data directory and port.
    pub fn kill_and_restart(&mut self) {
        let port = self.port();
        self.kill();
        self.launch(Some(port));
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The running server's process id (`None` once killed or reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` (a name `kill -s` knows: `TERM`, `KILL`, ...) to the running server,
    /// without waiting for it. The child is not reaped, so its pid cannot be reused meanwhile.
    pub fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill")
                .args(["-s", signal, &pid.to_string()])
                .status()
                .expect("run kill");
            assert!(status.success(), "kill -s {signal} {pid} failed");
        }
    }

    /// Waits up to `timeout` for the server to exit on its own; its exit status, or `None`
    /// when it is still running (it stays owned, and `kill` still works).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let child = self.child.as_mut()?;
            if let Some(status) = child.try_wait().expect("wait for ladder serve") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the service again on the same data directory and port, after `kill`,
    /// `wait_exit` or a crash (SIGKILL first if it still runs).
    pub fn restart(&mut self) {
        let port = self.port();
        self.kill();
        self.launch(Some(port));
    }

    /// Starts the server again on the same data directory and port and SIGKILLs it `after`
    /// later, whatever it is doing by then (recovering, cutting a torn tail, serving). It
    /// stays down: `restart` brings it back.
    pub fn start_and_kill_after(&mut self, after: Duration) {
        let port = self.port();
        self.kill();
        let mut child = self
            .serve_command(Some(port))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn ladder serve");
        std::thread::sleep(after);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// A plain HTTP client.
    pub fn http(&self) -> HttpClient {
        HttpClient::new(&self.url).expect("client")
    }

    /// Trader `i`, with an API key made once writes are taken (with `--replicas`, only once
    /// a standby is connected; until then creations are refused).
    pub fn trader_when_writable(&self, i: usize) -> Trader {
        let mut t = demo_trader_at(&self.url, i);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let r = t.create_api_key(0).expect("create key");
            if r.status == 200 {
                return t;
            }
            // A creation applied on the primary while the standby was still connecting was
            // answered 503 without being undone: its key is derived, not created again.
            if r.status == 400 && r.body.contains("SVC_NONCE") {
                let d = t.derive_api_key(0).expect("derive key");
                assert_eq!(d.status, 200, "{}", d.body);
                return t;
            }
            assert_eq!(
                r.json(),
                serde_json::json!({ "error": "replica unavailable" }),
                "while writes are refused"
            );
            assert!(Instant::now() < deadline, "writes never taken");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Demo trader `i` (0 or 1) with fresh API credentials.
    pub fn trader(&self, i: usize) -> Trader {
        let mut t = demo_trader_at(&self.url, i);
        let r = t.create_api_key(0).expect("create key");
        if r.status != 200 {
            let r = t.derive_api_key(0).expect("derive key");
            assert_eq!(r.status, 200, "{}", r.body);
        }
        t
    }

    /// An admin request.
    pub fn admin(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> ladder_client::HttpResponse {
        let headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
        self.http()
            .request(method, path, &headers, body)
            .expect("admin request")
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The Yes token.
pub fn yes() -> U256 {
    U256::from_dec_str(YES).expect("token")
}

/// The No token.
pub fn no() -> U256 {
    U256::from_dec_str(NO).expect("token")
}

/// The demo market.
pub fn market() -> B256 {
    CONDITION_ID.parse().expect("market")
}

/// A loopback port free when asked (for a replication listener), below Linux's ephemeral
/// range (32768 and up): a port the kernel handed out (`bind :0`) could be taken as the source
/// port of another test's outgoing connection before the service binds it (a clean-clone CI
/// run failed so, "Address already in use"). Each test binary walks its own stretch of ports
/// (by its process id), one port per call.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u16 = 20_000;
    const SPAN: u16 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id() % u32::from(SPAN);
    for _ in 0..SPAN {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FIRST + ((start + offset) % u32::from(SPAN)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN)
}

/// An admin request to the service at `url`: its status and JSON body.
pub fn admin_at(url: &str, method: &str, path: &str) -> (u16, serde_json::Value) {
    let mut http = HttpClient::new(url).expect("client");
    let headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
    let r = http
        .request(method, path, &headers, Some(""))
        .expect("admin request");
    (r.status, r.json())
}

/// Waits until the state hash of the service at `url` (a standby) equals `want` (what
/// `GET /admin/state-hash` answered elsewhere), within 30 s.
pub fn wait_for_hash(url: &str, want: &serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
    loop {
        // A standby that bootstraps again is briefly not listening.
        let hash = HttpClient::new(url)
            .and_then(|mut http| http.request("GET", "/admin/state-hash", &headers, Some("")))
            .map(|r| r.json())
            .unwrap_or_default();
        if &hash == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "standby at {hash}, primary {want}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Demo trader `i` on the service at `url` (a standby), with `from`'s API credentials.
pub fn trader_on(url: &str, i: usize, from: &Trader) -> Trader {
    let mut t = demo_trader_at(url, i);
    t.credentials = from.credentials.clone();
    t
}

/// Demo trader `i` of the service at `url`, without API credentials.
pub fn demo_trader_at(url: &str, i: usize) -> Trader {
    let (key, account) = KEYS[i];
    Trader::new(
        url,
        Wallet::from_hex(key).expect("key"),
        Address::parse(account).expect("address"),
    )
    .expect("trader")
}

/// A `u64` from the environment variable `name`, when set and a number.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The seed of a randomised crash or power-cut run: `LADDER_CRASH_SEED` (to replay one), else
/// the clock.
pub fn crash_seed() -> u64 {
    env_u64("LADDER_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
}

/// splitmix64: small, seedable, the same everywhere.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// In `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// An independent stream.
    pub fn fork(&mut self) -> Rng {
        Rng(self.next())
    }
}

/// The power-cut filesystem's binary (`powercut/`), built beside `ladder` (`cargo test
/// --workspace` builds it).
pub fn powercut_binary() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_ladder")).with_file_name("ladder-powercut");
    assert!(
        binary.exists(),
        "{} is missing: cargo build -p ladder-powercut (cargo test --workspace builds it)",
        binary.display()
    );
    binary
}

/// A running `ladder standby`, killed on drop.
pub struct Standby {
    child: Child,
    /// Its base URL.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl Standby {
    /// Kills it (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (a name `kill -s` knows) to the standby.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {signal} {pid} failed");
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A primary that takes `--replicas 1` (and `extra_args`), and the replication port its
/// standbys follow it on.
pub fn start_replicated(extra_args: &[&str]) -> (Service, u16) {
    let replication = free_port();
    let listen = format!("127.0.0.1:{replication}");
    let mut args = vec!["--replication-listen", listen.as_str(), "--replicas", "1"];
    args.extend_from_slice(extra_args);
    (Service::start(&args), replication)
}

/// Starts a standby following the primary's replication port, with its own data directory,
/// and waits until it answers `GET /time`.
pub fn start_standby(replication: u16) -> Standby {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut standby = start_standby_in(replication, &dir.path().join("data"));
    standby._dir = Some(dir);
    standby
}

/// `ladder standby` following the primary's replication port with `data_dir`, its output
/// piped (stderr too) so that a test can read why it stopped.
pub fn standby_command(replication: u16, data_dir: &Path) -> Command {
    let mut command = ladder_standby(data_dir);
    command.args(["--primary", &format!("127.0.0.1:{replication}")]);
    command
}

/// `ladder standby` on `data_dir`, listening on any free port, its stdout piped.
pub fn ladder_standby(data_dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ladder"));
    command
        .arg("standby")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", "127.0.0.1:0", "--admin-token", ADMIN_TOKEN])
        .args(["--log", "warn"])
        .stdout(Stdio::piped());
    command
}

/// Starts a standby on `data_dir` (kept by the caller) and waits until it answers
/// `GET /time`.
pub fn start_standby_in(replication: u16, data_dir: &Path) -> Standby {
    start_standby_with(replication, data_dir, &[])
}

/// Starts a standby on `data_dir` with `extra_args` and waits until it answers `GET /time`.
pub fn start_standby_with(replication: u16, data_dir: &Path, extra_args: &[&str]) -> Standby {
    let mut command = standby_command(replication, data_dir);
    command.args(extra_args);
    spawn_standby(command)
}

/// Spawns `command` (a `ladder standby` with its stdout piped) and waits until it answers
/// `GET /time`.
pub fn spawn_standby(mut command: Command) -> Standby {
    let mut child = command.spawn().expect("spawn standby");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let url = loop {
        let line = lines.next().expect("standby exited").expect("read");
        if let Some(url) = line.strip_prefix("ladder: listening on ") {
            break url.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ok = HttpClient::new(&url)
            .and_then(|mut h| h.request("GET", "/time", &[], None))
            .is_ok_and(|r| r.status == 200);
        if ok {
            break;
        }
        assert!(Instant::now() < deadline, "standby not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    Standby {
        child,
        url,
        _dir: None,
    }
}

/// Stops `service` (SIGKILL) and checks that its journal, replayed up to the sequence the
/// running service reported, gives the state hash it reported then; `context` names the
/// caller in a failure.
pub fn kill_and_check_replay(service: &mut Service, context: &str) {
    let live = service.admin("GET", "/admin/state-hash", None).json();
    service.kill();
    let seq = live["seq"].as_u64().expect("seq is a number");
    let replayed = replayed_state_hash(service.data_dir(), Some(seq), context);
    assert_eq!(
        live["state_hash"],
        serde_json::Value::from(replayed),
        "{context}"
    );
}

/// `ladder journal state-hash` of `data_dir`'s journal replayed up to `at` (default its end);
/// `context` names the caller in a failure.
pub fn replayed_state_hash(data_dir: &Path, at: Option<u64>, context: &str) -> String {
    let at = at.map(|seq| seq.to_string());
    let mut args = vec!["journal", "state-hash"];
    if let Some(at) = &at {
        args.extend(["--at", at.as_str()]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(&args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("run ladder");
    assert!(
        out.status.success(),
        "{context}: `ladder {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// A `/ws/user` connection of `trader` to the service at `base_url`, subscribed to every
/// market (`cancel_on_disconnect` arms it as a dead-man switch), with a 5 s read timeout.
pub fn user_ws_at(
    base_url: &str,
    trader: &Trader,
    cancel_on_disconnect: bool,
) -> tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>> {
    let url = format!("{}/ws/user", base_url.replace("http://", "ws://"));
    let (mut ws, _) = tungstenite::connect(url).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    let creds = trader.credentials.as_ref().unwrap();
    let ts = ladder_client::unix_now_s().to_string();
    let signature = ladder_protocol::L2Secret::from_base64(&creds.secret)
        .unwrap()
        .sign(&ts, "GET", "/ws/user", b"");
    let subscribe = serde_json::json!({ "type": "user", "auth": { "apiKey": creds.api_key.to_string(),
        "passphrase": creds.passphrase, "timestamp": ts, "signature": signature },
        "markets": [], "cancel_on_disconnect": cancel_on_disconnect });
    ws.send(tungstenite::Message::text(subscribe.to_string()))
        .unwrap();
    ws
}
