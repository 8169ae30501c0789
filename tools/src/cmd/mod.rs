//! The subcommands of `ladder` and their flags.

mod ahead;
mod allocator;
mod bench;
mod bench_failover;
mod bench_fanout;
mod bench_pipeline;
mod bench_soak;
mod bootstrap;
mod chain_link;
mod client;
mod demo;
mod flags;
mod journal;
mod loadgen;
mod redemption_watch;
mod serve;
pub mod stdout;
mod ws_client;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use ladder_sequencer::replication::LinkSecret;

/// Ladder: a low-latency order book for Yes/No markets.
#[derive(Parser, Debug)]
#[command(
    name = "ladder",
    version = concat!(env!("CARGO_PKG_VERSION"), " (interface 1.0.0, API.md)"),
    about
)]
pub struct Cli {
    /// Log level or filter (error, warn, info, debug, trace; or a tracing filter).
    #[arg(long, global = true, default_value = "info", env = "LADDER_LOG")]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by the commands that run a service.
#[derive(Args, Debug, Clone)]
pub struct ServiceFlags {
    /// Where the journal, snapshots and keys live.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
    /// The HTTP listen address.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = flags::host_port)]
    pub listen: String,
    /// Bearer token of the admin surface (also LADDER_ADMIN_TOKEN).
    #[arg(long, env = "LADDER_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Open connections from one client address; past it a new connection is closed at once
    /// (0: no cap).
    #[arg(long, default_value_t = 256)]
    pub max_connections_per_ip: usize,
    /// A subscribed WebSocket silent this many ms gets a ping, and is closed when silent as
    /// long again (tests shorten it).
    #[arg(long, default_value_t = 30_000, hide = true,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub ws_ping_ms: u64,
    /// Size of each journal segment file in MiB (1 to 1024), allocated on disk before it is
    /// written, so that a full disk is a refusal ahead of time, never a fault.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub segment_size_mb: u64,
    /// Segment size in KiB instead (4 to 1,048,576, a multiple of 4): tests fill segments in
    /// a few hundred records.
    #[arg(long, hide = true, value_parser = clap::value_parser!(u64).range(4..=1 << 20))]
    pub segment_size_kb: Option<u64>,
    /// A key whose heartbeats run (POST /heartbeats) and that does not beat within this many
    /// ms has every open order of its address cancelled.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub heartbeat_timeout_ms: u64,
    /// A snapshot of the state is written every this many journal records (and at shutdown).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_every: u64,
    /// The newest this many snapshots are kept; older ones are removed.
    #[arg(long, default_value_t = 2,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub keep_snapshots: usize,
    /// Journal segments that every kept snapshot, the history store and every connected
    /// standby hold are moved here instead of removed.
    #[arg(long, value_name = "DIR")]
    pub journal_archive: Option<std::path::PathBuf>,
}

impl ServiceFlags {
    /// The journal's segment size in bytes (`--segment-size-mb`, or the hidden
    /// `--segment-size-kb`).
    pub fn segment_size_bytes(&self) -> u64 {
        self.segment_size_kb
            .map_or(self.segment_size_mb << 20, |kb| kb << 10)
    }
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service.
    Serve(Box<ServeArgs>),
    /// Inspect, verify and repair a journal.
    Journal {
        #[command(subcommand)]
        action: journal::JournalCommand,
    },
    /// Follow a primary as a hot standby.
    Standby(Box<StandbyArgs>),
    /// Turn a standby into a primary.
    Promote(AdminCallArgs),
    /// Make a running service write a snapshot of its state now (POST /admin/snapshot).
    Snapshot(AdminCallArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        action: BenchCommand,
    },
    /// Drive a running service with signed orders and measure it.
    Loadgen(LoadgenArgs),
    /// Trade against a running service from the command line.
    Client(client::ClientArgs),
}

/// `ladder serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub service: ServiceFlags,
    #[command(flatten)]
    pub node: NodeFlags,
    /// Create a demo market and funded demo accounts on an empty data directory.
    #[arg(long)]
    pub demo: bool,
    #[command(flatten)]
    pub chain: ChainFlags,
    #[command(flatten)]
    pub tls: TlsFlags,
    /// Where standbys connect for replication.
    #[arg(long, value_parser = flags::host_port)]
    pub replication_listen: Option<String>,
    /// A response leaves only after this many standbys hold its batch (needs
    /// `--replication-listen`).
    #[arg(long, default_value_t = 0)]
    pub replicas: u32,
    #[command(flatten)]
    pub replication_secret: ReplicationSecretFlag,
    /// Built-in settlement: ms from match to MINED, and from MINED to CONFIRMED.
    #[arg(long, default_value_t = 1000)]
    pub settlement_delay_ms: u64,
    /// Built-in settlement: share of batches sent through RETRYING to FAILED (0 to 100).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub settlement_fail_percent: u8,
    #[command(flatten)]
    pub coordinator: CoordinatorFlags,
}

/// How a node serves, whether it starts as `serve` or `standby` (CONTRACT 22: the two differ
/// only in how a node starts on an empty coordinator; a standby uses these once it leads,
/// and for its reads before).
#[derive(Args, Debug, Clone)]
pub struct NodeFlags {
    /// `sync`: answer only once the journal is on disk; `async`: page cache only.
    #[arg(long, default_value = "sync")]
    pub durability: ladder_journal::Durability,
    /// API keys per address.
    #[arg(long, default_value_t = 5)]
    pub max_keys_per_user: u32,
    /// Requests per 10 s per API key (0: no limit).
    #[arg(long, default_value_t = 3500)]
    pub rate_limit_key: u32,
    /// Requests per 10 s per client IP (0: no limit).
    #[arg(long, default_value_t = 9000)]
    pub rate_limit_ip: u32,
    /// Gateway event-loop threads (1 to 64).
    #[arg(long, default_value_t = 2,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub gateway_threads: usize,
    /// The sequencer thread's core: `auto` (the last core this process may use, when it may
    /// use 4 or more), `none` (not pinned) or a core number.
    #[arg(long, default_value = "auto")]
    pub sequencer_core: ladder_sequencer::CorePin,
    /// Serve the admin surface and /metrics to any address, not only loopback.
    #[arg(long)]
    pub admin_public: bool,
}

/// Automatic failover through etcd (CONTRACT 22).
#[derive(Args, Debug, Clone)]
pub struct CoordinatorFlags {
    /// etcd v3 endpoints (`http://HOST:PORT[,http://HOST:PORT...]`): the leader is the node
    /// holding the lease on `/ladder/<cluster>/leader`, and only it takes writes.
    #[arg(long, value_delimiter = ',', value_parser = flags::etcd_endpoint)]
    pub coordinator: Vec<String>,
    /// The cluster's name in etcd (letters, digits, `.`, `_`, `-`).
    #[arg(long, default_value = "ladder", value_parser = flags::cluster_name,
          requires = "coordinator")]
    pub cluster: String,
    /// This node's id in the cluster (default: the listen address, with the advertised host
    /// in place of an unspecified IP).
    #[arg(long, value_parser = flags::node_id, requires = "coordinator")]
    pub node_id: Option<String>,
    /// The host name or IP that other nodes and clients reach this node at: it stands in for
    /// an unspecified listen IP (`0.0.0.0`, `::`) in the URL and the replication address the
    /// node advertises (default: this machine's host name).
    #[arg(long, value_parser = flags::advertise_host)]
    pub advertise_host: Option<String>,
    /// The leader's lease in ms: a leader that cannot renew it stops acknowledging writes
    /// within it, and a standby takes over within 3 times it.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=600_000),
          requires = "coordinator")]
    pub lease_ms: u64,
}

/// HTTPS and WSS on the client listener.
#[derive(Args, Debug, Clone)]
pub struct TlsFlags {
    /// TLS certificate (PEM).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// The replication link's shared secret.
#[derive(Args, Debug, Clone)]
pub struct ReplicationSecretFlag {
    /// A file holding the replication secret (at least 16 bytes; the same file on the primary
    /// and its standbys): the two ends authenticate each other and the link is encrypted.
    /// Required unless the replication address is a loopback address.
    #[arg(long = "replication-secret-file", value_parser = flags::secret_file)]
    pub secret: Option<LinkSecret>,
}

/// Where the chain is: the exchange contract (also the EIP-712 verifyingContract) and, with
/// `--rpc-url`, the node that answers ERC-1271 checks and receives settlement batches.
#[derive(Args, Debug, Clone)]
pub struct ChainFlags {
    /// Ethereum JSON-RPC URL (ERC-1271 checks and chain settlement).
    #[arg(long, value_parser = flags::rpc_url)]
    pub rpc_url: Option<String>,
    /// Address of the exchange contract (EIP-712 verifyingContract; settlement target).
    #[arg(long, default_value = "0x000000000000000000000000000000000000C10b",
          value_parser = flags::address)]
    pub exchange_address: String,
    /// Chain settlement: the account that sends batches (one the node signs for, e.g. an
    /// unlocked development account or a Web3Signer/Clef proxy); default the node's first.
    #[arg(long, value_parser = flags::address)]
    pub chain_from: Option<String>,
    /// Chain settlement: blocks, the batch's own included, before CONFIRMED (at least 1).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub chain_confirmations: u64,
    /// Chain settlement: how often receipts and the head are read, in ms.
    #[arg(long, default_value_t = 500)]
    pub chain_poll_ms: u64,
    /// ERC-1271 and settlement calls give up after this many ms.
    #[arg(long, default_value_t = 3000)]
    pub rpc_timeout_ms: u64,
    /// The ERC-4337 EntryPoint (v0.7) the bundler (POST /bundler) serves.
    #[arg(long, default_value = ladder_protocol::user_op::ENTRY_POINT_V07,
          value_parser = flags::address)]
    pub entry_point: String,
    /// With `--rpc-url`: the ERC-4337 bundler run beside the node (its JSON-RPC URL), where
    /// POST /bundler sends redeem operations.
    #[arg(long, value_parser = flags::rpc_url)]
    pub bundler_url: Option<String>,
}

/// `ladder standby`.
#[derive(Args, Debug, Clone)]
pub struct StandbyArgs {
    /// The primary's replication address (with `--coordinator`: optional, the standby
    /// follows whoever leads).
    #[arg(long, value_parser = flags::host_port, required_unless_present = "coordinator")]
    pub primary: Option<String>,
    /// With `--coordinator`: where standbys connect for replication while this node leads.
    #[arg(long, value_parser = flags::host_port)]
    pub replication_listen: Option<String>,
    /// With `--coordinator`: while this node leads, a response leaves only after this many
    /// standbys hold its batch.
    #[arg(long, default_value_t = 0)]
    pub replicas: u32,
    #[command(flatten)]
    pub coordinator: CoordinatorFlags,
    #[command(flatten)]
    pub replication_secret: ReplicationSecretFlag,
    #[command(flatten)]
    pub service: ServiceFlags,
    #[command(flatten)]
    pub node: NodeFlags,
    #[command(flatten)]
    pub tls: TlsFlags,
    /// Built-in settlement after promotion (as `serve`).
    #[arg(long, default_value_t = 1000)]
    pub settlement_delay_ms: u64,
    /// Built-in settlement after promotion (as `serve`, 0 to 100).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub settlement_fail_percent: u8,
    #[command(flatten)]
    pub chain: ChainFlags,
}

/// `ladder promote` and `ladder snapshot`: a running service's admin surface.
#[derive(Args, Debug, Clone)]
pub struct AdminCallArgs {
    /// The service's HTTP listen address.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = flags::host_port)]
    pub listen: String,
    /// Its admin token (also LADDER_ADMIN_TOKEN).
    #[arg(long, env = "LADDER_ADMIN_TOKEN", hide_env_values = true, required = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub admin_token: String,
}

/// `ladder bench ...`.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Replay a generated exchange-core-style stream through the engine alone.
    Engine(EngineBenchArgs),
    /// Rings, journal (group commit), engine and answers, end to end.
    Sequencer(bench_pipeline::SequencerBenchArgs),
    /// Rebuild the engine from a journal, cold.
    Replay(bench_pipeline::ReplayBenchArgs),
    /// Write and restore a snapshot of an engine with many open orders.
    Snapshot(bench_pipeline::SnapshotBenchArgs),
    /// A primary and a standby over loopback: how far behind the standby holds each command.
    Standby(bench_pipeline::StandbyBenchArgs),
    /// One synced journal commit at a time, with busy threads beside it: the disk's cost and
    /// the pauses it brings to the machine (steal).
    Flush(bench_pipeline::FlushBenchArgs),
    /// Many /ws/market subscribers on one busy market of a running service.
    Fanout(bench_fanout::FanoutArgs),
    /// Start a service and drive it with the market makers' mix for millions of commands:
    /// memory, snapshot, data directory and restart time at checkpoints.
    Soak(bench_soak::SoakArgs),
    /// Three coordinated nodes and etcd: kill the leader again and again; how long until the
    /// new leader acknowledges a write (median and max).
    Failover(bench_failover::FailoverBenchArgs),
}

/// `ladder bench engine`.
#[derive(Args, Debug, Clone)]
pub struct EngineBenchArgs {
    /// Offered rate in commands/s (open loop, printed with the machine's own floor: the same
    /// schedule with a busy wait of the engine's median per command); closed loop without it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
    /// Commands to replay (at most 20,000,000: the stream is held in memory, about 150
    /// bytes a command).
    #[arg(long, default_value_t = 2_000_000,
          value_parser = clap::value_parser!(u64).range(1..=20_000_000))]
    pub commands: u64,
    /// Let the books grow (places outnumber cancels, about a tenth of an order per command)
    /// instead of keeping each near its starting thousand orders as exchange-core does.
    #[arg(long)]
    pub growing_books: bool,
}

/// `ladder loadgen`.
#[derive(Args, Debug, Clone)]
pub struct LoadgenArgs {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080", value_parser = flags::http_url)]
    pub url: String,
    /// Its admin token (also LADDER_ADMIN_TOKEN): loadgen creates its own market and accounts.
    #[arg(long, env = "LADDER_ADMIN_TOKEN", hide_env_values = true, required = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub admin_token: String,
    /// Offered rate in requests/s (open loop); closed loop without it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
    /// Seconds to run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub duration: u64,
    /// Keep-alive connections, 1 to 1024.
    #[arg(long, default_value_t = 8,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=loadgen::CONNECTIONS_MAX as u64))]
    pub connections: usize,
    /// resting, mm or burst.
    #[arg(long, default_value = "mm")]
    pub scenario: loadgen::Scenario,
    /// Where plots and the full result go.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Requests in flight per connection (HTTP pipelining), 1 to 64.
    #[arg(long, default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=loadgen::PIPELINE_MAX as u64))]
    pub pipeline: usize,
    /// At the end, leave the market makers' heartbeats running instead of stopping them: once
    /// their beats are overdue the service's dead-man switch cancels every quote they left, as
    /// for makers that went away (`ladder bench soak` uses it).
    #[arg(long)]
    pub leave_heartbeats: bool,
}

impl ReplicationSecretFlag {
    /// Bad usage when the replication link would leave this machine without a secret.
    fn unsecured_beyond_loopback(&self, address: &str, flag: &str) -> Option<String> {
        (self.secret.is_none() && !flags::is_loopback(address)).then(|| {
            format!(
                "{flag} {address} is not a loopback address: give --replication-secret-file \
                 (the same secret on the primary and its standbys)"
            )
        })
    }

    /// The link's secret: the configured one, or on loopback the built-in one.
    pub fn link_secret(&self) -> LinkSecret {
        self.secret
            .clone()
            .unwrap_or_else(LinkSecret::loopback_default)
    }
}

/// What `ladder standby`'s flags cannot mean together.
/// Why `--durability async` and `--replicas` cannot go together.
const ASYNC_WITH_REPLICAS: &str = "--durability async with --replicas: the primary would \
     acknowledge what its own disk may lose; use --durability sync";

impl NodeFlags {
    /// Whether answers leave before the journal is on disk.
    fn is_async(&self) -> bool {
        self.durability == ladder_journal::Durability::Async
    }
}

fn standby_usage_problem(args: &StandbyArgs) -> Option<String> {
    let coordinated = !args.coordinator.coordinator.is_empty();
    if !coordinated && (args.replication_listen.is_some() || args.replicas > 0) {
        return Some(
            "--replication-listen and --replicas on a standby need --coordinator (they apply \
             while it leads)"
                .into(),
        );
    }
    if args.replicas > 0 && args.replication_listen.is_none() {
        return Some("--replicas needs --replication-listen (where standbys connect)".into());
    }
    if args.replicas > 0 && args.node.is_async() {
        return Some(ASYNC_WITH_REPLICAS.into());
    }
    let secret = &args.replication_secret;
    args.primary
        .as_deref()
        .and_then(|primary| secret.unsecured_beyond_loopback(primary, "--primary"))
        .or_else(|| {
            args.replication_listen.as_deref().and_then(|address| {
                secret.unsecured_beyond_loopback(address, "--replication-listen")
            })
        })
}

/// Sets up structured logs on stderr, coloured only when stderr is a terminal (a log file or
/// a pipe gets plain text).
pub fn init_logging(level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        // A log line that cannot be written (standard error on a full disk) is dropped: the
        // subscriber's own report of it would panic, and the service must run on.
        .log_internal_errors(false)
        .try_init();
}

/// A mistake in how flags go together that their parsers cannot see alone (bad usage, exit
/// code 2, like a malformed value).
pub fn usage_problem(cli: &Cli) -> Option<String> {
    let chain = match &cli.command {
        Command::Serve(args) => Some(&args.chain),
        Command::Standby(args) => Some(&args.chain),
        _ => None,
    };
    if chain.is_some_and(|chain| chain.bundler_url.is_some() && chain.rpc_url.is_none()) {
        return Some(
            "--bundler-url needs --rpc-url (the bundler submits to that node's EntryPoint)".into(),
        );
    }
    match &cli.command {
        Command::Serve(args) if args.replicas > 0 && args.replication_listen.is_none() => {
            Some("--replicas needs --replication-listen (where standbys connect)".into())
        }
        Command::Serve(args) if args.replicas > 0 && args.node.is_async() => {
            Some(ASYNC_WITH_REPLICAS.into())
        }
        Command::Serve(args) => args.replication_listen.as_deref().and_then(|address| {
            args.replication_secret
                .unsecured_beyond_loopback(address, "--replication-listen")
        }),
        Command::Standby(args) => standby_usage_problem(args),
        Command::Loadgen(args)
            if args.rate.is_some_and(|rate| {
                rate.saturating_mul(args.duration) > loadgen::OPEN_LOOP_REQUESTS_MAX
            }) =>
        {
            Some(format!(
                "--rate x --duration: at most {} requests are signed ahead",
                loadgen::OPEN_LOOP_REQUESTS_MAX
            ))
        }
        Command::Client(args) if args.trader.is_none() && args.private_key.is_none() => {
            Some("give --trader 0|1 (demo) or --private-key".into())
        }
        Command::Journal {
            action: journal::JournalCommand::Dump(args),
        } if args.from.zip(args.to).is_some_and(|(from, to)| from > to) => {
            Some("--from is after --to: the range holds no record".into())
        }
        _ => None,
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Journal { action } => journal::run(action),
        Command::Serve(args) => {
            allocator::tune_for_a_long_run();
            serve::serve(&args)
        }
        Command::Standby(args) => {
            allocator::tune_for_a_long_run();
            serve::standby(&args)
        }
        Command::Promote(args) => admin_call(&args, "/admin/promote", "promotion"),
        Command::Snapshot(args) => admin_call(&args, "/admin/snapshot", "snapshot"),
        Command::Bench { action } => one_line_failures(|| match action {
            BenchCommand::Engine(args) => bench::engine(&args),
            BenchCommand::Sequencer(args) => bench_pipeline::sequencer(&args),
            BenchCommand::Replay(args) => bench_pipeline::replay(&args),
            BenchCommand::Snapshot(args) => bench_pipeline::snapshot(&args),
            BenchCommand::Standby(args) => bench_pipeline::standby(&args),
            BenchCommand::Flush(args) => bench_pipeline::flush(&args),
            BenchCommand::Fanout(args) => bench_fanout::fanout(&args),
            BenchCommand::Soak(args) => bench_soak::soak(&args),
            BenchCommand::Failover(args) => bench_failover::failover(&args),
        }),
        Command::Client(args) => client::run(args),
        Command::Loadgen(args) => loadgen::run(&args),
    }
}

/// Runs a bench: one whose harness fails (a full disk under `--dir`, say) panics deep inside
/// it; the panic unwinds (the benches' guards stop the processes they started) and is
/// reported as a failure on one line with exit 1 (CONTRACT 17), not with a panic's message
/// and status 101.
fn one_line_failures(bench: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    static FIRST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "an unexpected failure".to_string());
        let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut first = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert(message);
    }));
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(bench)).unwrap_or_else(|_| {
        let first = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
        Err(format!(
            "bench failed: {}",
            first.unwrap_or_else(|| "an unexpected failure".to_string())
        ))
    })
}

/// `ladder promote` (a standby becomes the primary) and `ladder snapshot` (a snapshot now):
/// one POST to the service's admin surface; prints the answer.
fn admin_call(args: &AdminCallArgs, path: &str, what: &str) -> Result<(), String> {
    let token = &args.admin_token;
    let mut http = ladder_client::HttpClient::new(&format!("http://{}", args.listen))?;
    let headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
    let response = http.request("POST", path, &headers, Some(""))?;
    stdout::print_line(&response.body);
    if response.status == 200 {
        Ok(())
    } else {
        Err(format!("{what} refused: HTTP {}", response.status))
    }
}
