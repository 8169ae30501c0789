//! `ladder serve`: recover, then run the gateway and the sequencer until a signal.
//!
//! The HTTP listeners come up first and answer 503 `service not ready` while the engine is
//! rebuilt from the newest snapshot and the journal; start-up journals nothing (except the
//! demo set-up, asked for with `--demo` on an empty data directory).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver};
use ladder_engine::{Engine, EngineLimits};
use ladder_gateway::app::{App, AppConfig, ServiceState};
use ladder_gateway::keys::{KeyTable, MasterKey};
use ladder_gateway::metrics::Metrics;
use ladder_gateway::ws::feed::MarketIds;
use ladder_gateway::{prepare_with_feed, spawn, ServerLimits, ServerShared};
use ladder_journal::{Durability, Journal, JournalOptions};
use ladder_protocol::{Address, AuthDomain, ExchangeDomain, CHAIN_ID};
use ladder_sequencer::{
    recover_engine, rings, start_with, ChannelSink, Completion, CompletionSink, DiscardSink,
    QueryOutput, SequencerConfig, SequencerHandle, SequencerParts, Submission, Submitter, Ticket,
    Work,
};
use ladder_settlement::BuiltIn;
use uuid::Uuid;

use super::demo;
use super::ServeArgs;

/// How often a snapshot is taken when commands have been applied since the last one.
pub const SNAPSHOT_INTERVAL: Duration = Duration::from_secs(60);
/// Event batches queued for a consumer (settlement, feeds) before the sequencer waits.
pub const EVENT_BATCHES_QUEUED_MAX: usize = 65_536;
/// Snapshots kept on disk.
pub const SNAPSHOTS_KEPT: usize = 3;

/// Resolves `host:port` to one socket address.
pub fn resolve(listen: &str) -> Result<SocketAddr, String> {
    listen
        .to_socket_addrs()
        .map_err(|e| format!("--listen {listen}: {e}"))?
        .next()
        .ok_or_else(|| format!("--listen {listen}: no address"))
}

/// Runs the service.
pub fn serve(args: &ServeArgs) -> Result<(), String> {
    refuse_unbuilt(args)?;
    let durability: Durability = args
        .durability
        .parse()
        .map_err(|e: String| format!("--durability: {e}"))?;
    let listen = resolve(&args.service.listen)?;
    let data_dir = args.service.data_dir.clone();
    std::fs::create_dir_all(&data_dir)
        .map_err(|e| format!("--data-dir {}: {e}", data_dir.display()))?;
    let exchange = Address::parse_ignoring_checksum(&args.exchange_address)
        .map_err(|e| format!("--exchange-address: {e}"))?;
    let master = MasterKey::load_or_create(&data_dir).map_err(|e| format!("master key: {e}"))?;
    let keys = Arc::new(KeyTable::new(master));
    let state = Arc::new(ServiceState::default());
    let metrics = Arc::new(Metrics::default());
    let config = AppConfig {
        exchange: ExchangeDomain::new(CHAIN_ID, exchange),
        auth: AuthDomain::new(CHAIN_ID),
        admin_token: args.service.admin_token.clone().filter(|t| !t.is_empty()),
        admin_public: args.admin_public,
        max_keys_per_user: args.max_keys_per_user,
        rate_limit_key: args.rate_limit_key,
        rate_limit_ip: args.rate_limit_ip,
    };
    let app = Arc::new(App::new(
        config,
        keys.clone(),
        metrics.clone(),
        state.clone(),
    ));

    let threads = args.gateway_threads.clamp(1, 64);
    let (loops, gateway_sinks, feed_targets, bound) =
        prepare_with_feed(listen, threads).map_err(|e| format!("listen on {listen}: {e}"))?;
    let seq_config = SequencerConfig {
        durability,
        ..SequencerConfig::default()
    };
    let (mut submitters, rings) = rings(threads + 2, seq_config.ring_capacity);
    let settlement_ring = submitters.pop().ok_or("no settlement ring")?;
    let internal = submitters.pop().ok_or("no internal ring")?;
    let server = Arc::new(ServerShared::default());
    let gateway_threads = spawn(
        loops,
        submitters.clone(),
        app,
        ServerLimits::default(),
        server.clone(),
    )
    .map_err(|e| format!("gateway threads: {e}"))?;
    tracing::info!(%bound, "listening; recovering");
    println!("ladder: listening on http://{bound}");

    let started = Instant::now();
    let (journal, report) =
        Journal::open(&data_dir, JournalOptions::default()).map_err(|e| e.to_string())?;
    if let Some(torn) = &report.torn_tail {
        tracing::warn!(segment = %torn.segment.display(), offset = torn.offset, bytes = torn.bytes_dropped, "cut a torn journal tail");
    }
    let (engine, recovered) = recover_engine(&data_dir, EngineLimits::default(), None)?;
    if engine.last_seq() != journal.last_seq() {
        return Err(format!(
            "recovery reached sequence {} but the journal ends at {}",
            engine.last_seq(),
            journal.last_seq()
        ));
    }
    for (key_id, record) in engine.api_key_records() {
        keys.insert(Uuid::from_bytes(key_id), Address(record.address.0));
    }
    tracing::info!(
        snapshot_seq = recovered.snapshot_seq,
        replayed = recovered.replayed,
        last_seq = recovered.last_seq,
        ms = started.elapsed().as_millis() as u64,
        "recovered"
    );
    let fresh = engine.market_count() == 0 && journal.last_seq() == 0;
    let pending_settlements = ladder_settlement::pending_batches(&engine);
    let directory: Vec<MarketIds> = engine
        .markets()
        .map(|m| MarketIds {
            condition_id: m.condition_id,
            yes: m.yes_token_id,
            no: m.no_token_id,
        })
        .collect();

    let (internal_tx, internal_rx) = unbounded();
    let mut sinks: Vec<Box<dyn CompletionSink>> = gateway_sinks
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn CompletionSink>)
        .collect();
    sinks.push(Box::new(ChannelSink(internal_tx)));
    sinks.push(Box::new(DiscardSink));
    let internal_sink = threads as u16;
    let (settlement_tx, settlement_rx) = bounded(EVENT_BATCHES_QUEUED_MAX);
    let (feed_tx, feed_rx) = bounded(EVENT_BATCHES_QUEUED_MAX);
    let events = vec![settlement_tx, feed_tx];
    let handle = start_with(
        seq_config,
        SequencerParts {
            engine,
            journal,
            sinks,
            events,
        },
        rings,
    )
    .map_err(|e| format!("sequencer: {e}"))?;
    let feed = ladder_gateway::ws::feed::start(feed_rx, directory, feed_targets)
        .map_err(|e| format!("feed thread: {e}"))?;
    let backend = Box::new(BuiltIn::new(
        args.settlement_delay_ms,
        args.settlement_fail_percent,
    ));
    let settlement = ladder_settlement::start(
        backend,
        settlement_rx,
        settlement_ring,
        internal_sink + 1,
        pending_settlements,
    )
    .map_err(|e| format!("settlement thread: {e}"))?;
    metrics.attach(handle.stats.clone(), server.clone(), submitters);

    let mut internal = Internal {
        submitter: internal,
        completions: internal_rx,
        sink: internal_sink,
        next: 0,
    };
    if args.demo && fresh {
        for command in demo::commands() {
            internal.run(Work::Command(command))?;
        }
        demo::print_instructions(&bound);
    } else if args.demo {
        tracing::info!("--demo ignored: the data directory already holds state");
    }
    state.ready.store(true, Ordering::Release);
    tracing::info!("ready");

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    let mut last_snapshot = (
        Instant::now(),
        handle.stats.last_seq.load(Ordering::Acquire),
    );
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(100));
        let seq = handle.stats.last_seq.load(Ordering::Acquire);
        if last_snapshot.0.elapsed() >= SNAPSHOT_INTERVAL && seq > last_snapshot.1 {
            match internal.snapshot(&data_dir) {
                Ok(at) => last_snapshot = (Instant::now(), at),
                Err(e) => tracing::warn!(error = %e, "snapshot failed"),
            }
        }
    }
    shutdown(server, gateway_threads, handle, &data_dir);
    settlement.join();
    let _ = feed.join();
    Ok(())
}

fn refuse_unbuilt(args: &ServeArgs) -> Result<(), String> {
    if args.tls_cert.is_some() {
        return Err("--tls-cert: TLS is not built yet (gateway issue)".into());
    }
    if args.rpc_url.is_some() {
        return Err("--rpc-url: the ERC-1271 verifier and chain settlement are not built yet (settlement issue)".into());
    }
    if args.replicas > 0 || args.replication_listen.is_some() {
        return Err("--replicas/--replication-listen: replication is not built yet (sequencer and journal issue)".into());
    }
    Ok(())
}

/// Stops accepting, drains what the gateway holds, stops the sequencer and snapshots.
fn shutdown(
    server: Arc<ServerShared>,
    gateway_threads: Vec<std::thread::JoinHandle<()>>,
    handle: SequencerHandle,
    data_dir: &Path,
) {
    tracing::info!("stopping: draining connections");
    server.stop.store(true, Ordering::Release);
    for thread in gateway_threads {
        let _ = thread.join();
    }
    if let Some(engine) = handle.stop() {
        write_snapshot(data_dir, &engine);
    }
    tracing::info!("stopped");
}

fn write_snapshot(data_dir: &Path, engine: &Engine) {
    let seq = engine.last_seq();
    if seq == 0 {
        return;
    }
    match ladder_journal::write_snapshot(data_dir, seq, &engine.snapshot_bytes()) {
        Ok(path) => tracing::info!(seq, path = %path.display(), "snapshot written"),
        Err(e) => tracing::warn!(error = %e, "snapshot failed"),
    }
    let _ = ladder_journal::prune_snapshots(data_dir, SNAPSHOTS_KEPT);
}

/// The runtime's own ring into the sequencer (demo set-up, snapshots).
struct Internal {
    submitter: Submitter,
    completions: Receiver<Completion>,
    sink: u16,
    next: u64,
}

impl Internal {
    fn run(&mut self, work: Work) -> Result<Completion, String> {
        self.next += 1;
        let ticket = Ticket {
            sink: self.sink,
            token: self.next,
        };
        self.submitter
            .try_submit(Submission { ticket, work })
            .map_err(|_| "the sequencer is not taking work".to_string())?;
        self.completions
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| "the sequencer did not answer".to_string())
    }

    /// Serializes the engine on the sequencer thread and writes the snapshot here.
    fn snapshot(&mut self, data_dir: &Path) -> Result<u64, String> {
        let query =
            Box::new(|e: &Engine| Box::new((e.last_seq(), e.snapshot_bytes())) as QueryOutput);
        match self.run(Work::Query(query))? {
            Completion::Answered { output, .. } => {
                let (seq, bytes) = *output
                    .downcast::<(u64, Vec<u8>)>()
                    .map_err(|_| "bad snapshot answer")?;
                ladder_journal::write_snapshot(data_dir, seq, &bytes).map_err(|e| e.to_string())?;
                let _ = ladder_journal::prune_snapshots(data_dir, SNAPSHOTS_KEPT);
                tracing::info!(seq, "snapshot written");
                Ok(seq)
            }
            _ => Err("unexpected completion".into()),
        }
    }
}
