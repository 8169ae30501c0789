//! `ladder serve` and `ladder standby`: recover, then run the gateway, the sequencer, the
//! feed and (on a primary) settlement and replication, until a signal.
//!
//! The HTTP listeners come up first and answer 503 `service not ready` while the engine is
//! rebuilt from the newest snapshot and the journal; start-up journals nothing (except the
//! demo set-up, asked for with `--demo` on an empty data directory). A standby follows its
//! primary's replication stream and refuses writes until promoted.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use ladder_coordinator::Change;
use ladder_engine::{Command, Engine, EngineLimits, Reply};
use ladder_gateway::app::{
    App, AppConfig, LeaderLookup, LeaderStatus, PromoteError, ServiceState, SnapshotTaken,
};
use ladder_gateway::keys::{KeyTable, MasterKey};
use ladder_gateway::metrics::Metrics;
use ladder_gateway::smart::SmartAccounts;
use ladder_gateway::ws::feed::{FeedPublisher, MarketIds};
use ladder_gateway::{prepare_with_feed, spawn, ServerLimits, ServerShared};
use ladder_history::{Historian, HistorianConfig};
use ladder_journal::{Durability, Journal, JournalOptions};
use ladder_protocol::{Address, AuthDomain, ExchangeDomain, CHAIN_ID};
use ladder_sequencer::replication::client::FollowTarget;
use ladder_sequencer::replication::server::JournalEnd;
use ladder_sequencer::replication::{client, server, LinkSecret, RecordMark, ReplicationHub};
use ladder_sequencer::{
    recover_engine, rings, start_with, ChannelSink, Completion, CompletionSink, CorePin,
    DiscardSink, EventConsumer, QueryOutput, SequencerConfig, SequencerHandle, SequencerParts,
    SequencerStats, Submission, Submitter, Takes, Ticket, Work,
};
use ladder_settlement::{BuiltIn, SettlementHandle};
use uuid::Uuid;

mod coordinated;

use coordinated::{coordinated, CoordinatedNode, Coordination};

use super::chain_link::ChainLink;
use super::{ahead, bootstrap};
use super::{demo, ChainFlags, ServeArgs, StandbyArgs, TlsFlags};

/// Event batches queued for a consumer (settlement, feeds) before the sequencer waits.
pub const EVENT_BATCHES_QUEUED_MAX: usize = 65_536;

/// Resolves `host:port` to one socket address.
pub fn resolve(listen: &str) -> Result<SocketAddr, String> {
    listen
        .to_socket_addrs()
        .map_err(|e| format!("{listen}: {e}"))?
        .next()
        .ok_or_else(|| format!("{listen}: no address"))
}

/// What this process is.
enum Role {
    Primary {
        demo: bool,
        replication_listen: Option<String>,
        replicas: u32,
        secret: LinkSecret,
    },
    Standby {
        primary: FollowTarget,
        secret: LinkSecret,
    },
}

/// Everything `run` needs.
struct RunOptions {
    data_dir: PathBuf,
    listen: String,
    admin_token: Option<String>,
    max_connections_per_ip: usize,
    ws_ping_ms: u64,
    segment_size_bytes: u64,
    heartbeat_timeout_ms: u64,
    /// A snapshot every this many records (`--snapshot-every`).
    snapshot_every: u64,
    /// Snapshots kept (`--keep-snapshots`).
    keep_snapshots: usize,
    /// Where retired journal segments go (`--journal-archive`).
    journal_archive: Option<PathBuf>,
    admin_public: bool,
    durability: Durability,
    gateway_threads: usize,
    sequencer_core: CorePin,
    chain: ChainFlags,
    max_keys_per_user: u32,
    rate_limit_key: u32,
    rate_limit_ip: u32,
    settlement_delay_ms: u64,
    settlement_fail_percent: u8,
    tls: Option<Arc<rustls::ServerConfig>>,
    role: Role,
    signals: Signals,
    /// With `--coordinator`: etcd decides whether this node leads (the role is then a
    /// standby that the coordinator may promote).
    coordination: Option<Arc<Coordination>>,
}

/// The process's signal flags, registered once for its life (a standby may run the
/// service more than once: see [`standby`]).
#[derive(Clone)]
struct Signals {
    /// SIGINT or SIGTERM: stop.
    stop: Arc<AtomicBool>,
    /// SIGUSR1: promote this standby (as `ladder promote`).
    promote: Arc<AtomicBool>,
    /// SIGUSR2: write a snapshot now (as `ladder snapshot`).
    snapshot: Arc<AtomicBool>,
}

impl Signals {
    fn register() -> Result<Signals, String> {
        let signals = Signals {
            stop: Arc::new(AtomicBool::new(false)),
            promote: Arc::new(AtomicBool::new(false)),
            snapshot: Arc::new(AtomicBool::new(false)),
        };
        for (signal, flag) in [
            (signal_hook::consts::SIGINT, &signals.stop),
            (signal_hook::consts::SIGTERM, &signals.stop),
            (signal_hook::consts::SIGUSR1, &signals.promote),
            (signal_hook::consts::SIGUSR2, &signals.snapshot),
        ] {
            signal_hook::flag::register(signal, flag.clone())
                .map_err(|e| format!("signal handler: {e}"))?;
        }
        Ok(signals)
    }
}

/// How a run of the service ended without a failure.
enum RunEnd {
    /// Asked to stop.
    Stopped,
    /// A standby found the primary's journal no longer holds the record it needs next: it
    /// bootstraps and runs again, listening where it listened (`bound`).
    Behind { bound: SocketAddr },
    /// A standby holds records past the primary's journal's `end`: it cuts them and runs
    /// again, listening where it listened (`bound`).
    Ahead { end: JournalEnd, bound: SocketAddr },
    /// A coordinated node that led and lost the lead follows the new leader: it runs again
    /// as a standby, listening where it listened (`bound`).
    Rejoin { bound: SocketAddr },
}

/// `ladder serve`.
pub fn serve(args: &ServeArgs) -> Result<(), String> {
    let signals = Signals::register()?;
    if !args.coordinator.coordinator.is_empty() {
        return coordinated(CoordinatedNode::Serve(args), signals);
    }
    let role = Role::Primary {
        demo: args.demo,
        replication_listen: args.replication_listen.clone(),
        replicas: args.replicas,
        secret: args.replication_secret.link_secret(),
    };
    run(serve_options(args, &args.service.listen, role, signals)?).map(|_| ())
}

/// The options of a run of `ladder serve`.
fn serve_options(
    args: &ServeArgs,
    listen: &str,
    role: Role,
    signals: Signals,
) -> Result<RunOptions, String> {
    Ok(RunOptions {
        data_dir: args.service.data_dir.clone(),
        listen: listen.to_string(),
        admin_token: args.service.admin_token.clone(),
        max_connections_per_ip: args.service.max_connections_per_ip,
        ws_ping_ms: args.service.ws_ping_ms,
        segment_size_bytes: args.service.segment_size_bytes(),
        heartbeat_timeout_ms: args.service.heartbeat_timeout_ms,
        snapshot_every: args.service.snapshot_every,
        keep_snapshots: args.service.keep_snapshots,
        journal_archive: args.service.journal_archive.clone(),
        admin_public: args.admin_public,
        durability: args.durability,
        gateway_threads: args.gateway_threads,
        sequencer_core: args.sequencer_core,
        chain: args.chain.clone(),
        max_keys_per_user: args.max_keys_per_user,
        rate_limit_key: args.rate_limit_key,
        rate_limit_ip: args.rate_limit_ip,
        settlement_delay_ms: args.settlement_delay_ms,
        settlement_fail_percent: args.settlement_fail_percent,
        tls: tls_config(&args.tls)?,
        role,
        signals,
        coordination: None,
    })
}

/// `ladder standby`: asks the primary first whether its journal holds the next record this
/// standby needs, and takes the primary's state when it does not (see [`bootstrap`]); then
/// runs until stopped, and again after a bootstrap when the primary's journal moved past it
/// while it was away.
pub fn standby(args: &StandbyArgs) -> Result<(), String> {
    let signals = Signals::register()?;
    if !args.coordinator.coordinator.is_empty() {
        return coordinated(CoordinatedNode::Standby(args), signals);
    }
    let primary = args
        .primary
        .clone()
        .ok_or("--primary is required without --coordinator")?;
    let data_dir = &args.service.data_dir;
    ladder_journal::create_dir_durably(data_dir)
        .map_err(|e| format!("--data-dir {}: {e}", data_dir.display()))?;
    let node = node_id(data_dir)?;
    let secret = args.replication_secret.link_secret();
    let mut listen = args.service.listen.clone();
    loop {
        let asking = bootstrap::Asking {
            data_dir,
            node_id: &node,
            primary: &primary,
            secret: &secret,
            journal: JournalOptions {
                segment_size_bytes: args.service.segment_size_bytes(),
            },
            stop: &signals.stop,
        };
        if let Err(e) = bootstrap::when_behind(&asking) {
            // Followed as usual: a primary that refuses this standby as behind its journal
            // brings it back here.
            tracing::warn!(error = %e, %primary, "could not ask the primary for its state; following its journal");
        }
        if signals.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        let role = Role::Standby {
            primary: FollowTarget::fixed(&primary),
            secret: secret.clone(),
        };
        match run(standby_options(args, &listen, role, signals.clone())?)? {
            RunEnd::Stopped => return Ok(()),
            RunEnd::Behind { bound } => {
                tracing::warn!("the primary's journal moved past this standby: bootstrapping");
                listen = bound.to_string();
                std::thread::sleep(Duration::from_secs(1));
            }
            RunEnd::Ahead { end, bound } => {
                ahead::cut_after_primary_end(data_dir, end)
                    .map_err(|why| format!("standby: the primary refused replication: {why}"))?;
                listen = bound.to_string();
            }
            RunEnd::Rejoin { bound } => listen = bound.to_string(),
        }
    }
}

/// The options of one run of a standby.
fn standby_options(
    args: &StandbyArgs,
    listen: &str,
    role: Role,
    signals: Signals,
) -> Result<RunOptions, String> {
    Ok(RunOptions {
        data_dir: args.service.data_dir.clone(),
        listen: listen.to_string(),
        admin_token: args.service.admin_token.clone(),
        max_connections_per_ip: args.service.max_connections_per_ip,
        ws_ping_ms: args.service.ws_ping_ms,
        segment_size_bytes: args.service.segment_size_bytes(),
        heartbeat_timeout_ms: args.service.heartbeat_timeout_ms,
        snapshot_every: args.service.snapshot_every,
        keep_snapshots: args.service.keep_snapshots,
        journal_archive: args.service.journal_archive.clone(),
        admin_public: false,
        durability: Durability::Sync,
        gateway_threads: 2,
        sequencer_core: CorePin::Auto,
        chain: args.chain.clone(),
        max_keys_per_user: 5,
        rate_limit_key: 3500,
        rate_limit_ip: 9000,
        settlement_delay_ms: args.settlement_delay_ms,
        settlement_fail_percent: args.settlement_fail_percent,
        tls: tls_config(&args.tls)?,
        role,
        signals,
        coordination: None,
    })
}

/// The client listener's TLS, when a certificate is given.
fn tls_config(flags: &TlsFlags) -> Result<Option<Arc<rustls::ServerConfig>>, String> {
    match (&flags.tls_cert, &flags.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(ladder_gateway::stream::tls_config(cert, key)?)),
        _ => Ok(None),
    }
}

/// Asks the main loop to promote this standby; answered once done.
type PromoteRequest = Sender<Result<(), PromoteError>>;

/// Asks the main loop for a snapshot now; answered once it is on disk.
type SnapshotRequest = Sender<Result<SnapshotTaken, String>>;

/// A call into the main loop (which owns the runtime's ring into the sequencer): sends a
/// reply channel through `requests` and waits up to `timeout` for the answer.
fn ask_main_loop<T: Send + 'static>(
    requests: Sender<Sender<Result<T, String>>>,
    timeout: Duration,
    what: &'static str,
) -> impl Fn() -> Result<T, String> + Send + Sync {
    move || {
        let (reply_tx, reply_rx) = bounded(1);
        requests
            .send(reply_tx)
            .map_err(|_| "the service is stopping".to_string())?;
        reply_rx
            .recv_timeout(timeout)
            .map_err(|_| format!("the {what} timed out"))?
    }
}

fn run(options: RunOptions) -> Result<RunEnd, String> {
    let listen = resolve(&options.listen).map_err(|e| format!("--listen {e}"))?;
    let data_dir = options.data_dir.clone();
    ladder_journal::create_dir_durably(&data_dir)
        .map_err(|e| format!("--data-dir {}: {e}", data_dir.display()))?;
    let exchange = Address::parse_ignoring_checksum(&options.chain.exchange_address)
        .map_err(|e| format!("--exchange-address: {e}"))?;
    let chain = ChainLink::connect(&options.chain, exchange)?;
    let master = MasterKey::load_or_create(&data_dir).map_err(|e| format!("master key: {e}"))?;
    let keys = Arc::new(KeyTable::new(master));
    let standby = matches!(options.role, Role::Standby { .. });
    let state = Arc::new(ServiceState::default());
    state.standby.store(standby, Ordering::Release);
    let metrics = Arc::new(Metrics::default());
    let config = AppConfig {
        exchange: ExchangeDomain::new(CHAIN_ID, exchange),
        auth: AuthDomain::new(CHAIN_ID),
        admin_token: options.admin_token.clone().filter(|t| !t.is_empty()),
        admin_public: options.admin_public,
        max_keys_per_user: options.max_keys_per_user,
        rate_limit_key: options.rate_limit_key,
        rate_limit_ip: options.rate_limit_ip,
        smart_accounts: chain
            .as_ref()
            .map(|link| SmartAccounts::on_chain(link.verifier.clone()))
            .unwrap_or_default(),
        entry_point: Address::parse_ignoring_checksum(&options.chain.entry_point)
            .map_err(|e| format!("--entry-point: {e}"))?,
        chain_bundler: chain.as_ref().map(|link| link.chain_bundler.clone()),
    };
    let (promote_tx, promote_rx) = unbounded::<PromoteRequest>();
    let hook = Arc::new(move || {
        let (reply_tx, reply_rx) = bounded(1);
        promote_tx
            .send(reply_tx)
            .map_err(|_| PromoteError::Failed("the service is stopping".into()))?;
        reply_rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| PromoteError::Failed("the promotion timed out".into()))?
    });
    let (snapshot_tx, snapshot_rx) = unbounded::<SnapshotRequest>();
    let snapshot_hook = Arc::new(ask_main_loop(
        snapshot_tx,
        Duration::from_secs(60),
        "snapshot",
    ));
    let app = Arc::new(
        App::new(config, keys.clone(), metrics.clone(), state.clone())
            .with_promote_hook(hook)
            .with_snapshot_hook(snapshot_hook),
    );

    let threads = options.gateway_threads.clamp(1, 64);
    let (loops, gateway_sinks, feed_targets, bound) =
        prepare_with_feed(listen, threads).map_err(|e| format!("listen on {listen}: {e}"))?;
    let coordination = options.coordination.clone();
    let seq_config = SequencerConfig {
        ack_fence: coordination.as_ref().map_or_else(
            || Arc::new(ladder_sequencer::AckFence::open()),
            |c| c.fence.clone(),
        ),
        durability: options.durability,
        pin: options.sequencer_core,
        // The gateway threads' sinks come first (see `sinks` and `RuntimeProducers`).
        client_sinks: threads,
        heartbeat_timeout: Duration::from_millis(options.heartbeat_timeout_ms),
        ..SequencerConfig::default()
    };
    seq_config.follower.store(standby, Ordering::Release);
    // Rings: one per gateway thread, then the runtime's own producers.
    let (mut submitters, rings) =
        rings(threads + RuntimeProducers::COUNT, seq_config.ring_capacity);
    let mut sinks: Vec<Box<dyn CompletionSink>> = gateway_sinks
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn CompletionSink>)
        .collect();
    let (producers, internal_rx, follower_rx) =
        RuntimeProducers::take(&mut submitters, &mut sinks)?;
    let server_shared = Arc::new(ServerShared::default());
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let limits = ServerLimits {
        tls: options.tls.clone(),
        connections_per_ip_max: options.max_connections_per_ip,
        ws_ping_after: Duration::from_millis(options.ws_ping_ms),
        ..ServerLimits::default()
    };
    let gateway_threads = spawn(
        loops,
        submitters.clone(),
        app,
        limits,
        server_shared.clone(),
    )
    .map_err(|e| format!("gateway threads: {e}"))?;
    tracing::info!(%bound, standby, "listening; recovering");
    println!("ladder: listening on {scheme}://{bound}");

    let started = Instant::now();
    let (journal, report) = Journal::open(
        &data_dir,
        JournalOptions {
            segment_size_bytes: options.segment_size_bytes,
        },
    )
    .map_err(|e| e.to_string())?;
    if let Some(torn) = &report.torn_tail {
        tracing::warn!(segment = %torn.segment.display(), offset = torn.offset, bytes = torn.bytes_dropped, "cut a torn journal tail");
    }
    // A snapshot past the journal's end (an `async` journal's unflushed tail lost with the
    // power, while the snapshot file was synced) cannot be followed by the journal: it is set
    // aside (`.snap.bad`) and the state rebuilt from what the journal holds, without a person.
    let past_end = ladder_journal::latest_valid_snapshot(&data_dir).map_err(|e| e.to_string())?;
    if past_end.is_some_and(|snapshot| snapshot.seq > journal.last_seq()) {
        let journal_end = journal.last_seq();
        let set_aside = ladder_journal::set_aside_snapshots_after(
            &data_dir,
            Some(journal_end).filter(|&s| s > 0),
        )
        .map_err(|e| e.to_string())?;
        tracing::error!(journal_end, snapshots = ?set_aside, "snapshots past the journal's end (its unflushed tail was lost): set aside, recovering from the journal");
    }
    let (engine, recovered) = recover_engine(&data_dir, EngineLimits::default(), None)?;
    // The historian follows the journal as far as the sequencer released it: at start, all
    // of it (recovery found it there), then as far as the sequencer's stats say.
    let stats_cell: Arc<OnceLock<Arc<SequencerStats>>> = Arc::new(OnceLock::new());
    let journal_end = journal.last_seq();
    let released = {
        let cell = stats_cell.clone();
        Arc::new(move || {
            cell.get()
                .map_or(journal_end, |stats| stats.last_seq.load(Ordering::Acquire))
        })
    };
    let journal_full = {
        let cell = stats_cell.clone();
        Arc::new(move || {
            cell.get()
                .is_some_and(|stats| stats.journal_full.load(Ordering::Relaxed))
        })
    };
    // The journal keeps what a connected standby has not acknowledged (the hub is made below).
    let hub_cell: Arc<OnceLock<Arc<ReplicationHub>>> = Arc::new(OnceLock::new());
    let standby_floor = {
        let cell = hub_cell.clone();
        Arc::new(move || {
            cell.get()
                .and_then(|hub| hub.slowest_ack())
                .unwrap_or(u64::MAX)
        })
    };
    let historian = Historian::start(HistorianConfig {
        data_dir: data_dir.clone(),
        limits: EngineLimits::default(),
        released,
        snapshot_every: options.snapshot_every,
        keep_snapshots: options.keep_snapshots,
        journal_last_seq: journal_end,
        journal_full,
        standby_floor,
        journal_archive: options.journal_archive.clone(),
        prices_stored_below: {
            let board = state.board.clone();
            Arc::new(move |below| board.prices_stored_below(below))
        },
    })?;
    let history = historian.reader();
    state.board.fill(&engine);
    *state.history.write() = Some(history);
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
    for (address, nonce, count) in engine.api_key_creation_counts() {
        keys.set_creations(Address(address.0), nonce.0, count);
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
    let last_seq = engine.last_seq();
    let engine_term = engine.term();

    let (settlement_tx, settlement_rx) = ladder_sequencer::bell::channel(EVENT_BATCHES_QUEUED_MAX);
    let hub = match &options.role {
        Role::Primary {
            replication_listen: Some(_),
            replicas,
            ..
        } => Some(Arc::new(ReplicationHub::new(*replicas as usize, last_seq))),
        // A coordinated node serves replication from the start and requires standbys only
        // while it leads.
        _ if coordination.is_some() => Some(Arc::new(ReplicationHub::new(0, last_seq))),
        _ => None,
    };
    if let Some(hub) = &hub {
        hub.set_term_start(engine.term_start_seq());
    }
    if let Some(coordination) = &coordination {
        coordination
            .position
            .held
            .store(last_seq, Ordering::Release);
        coordination
            .position
            .term
            .fetch_max(engine.term(), Ordering::AcqRel);
        *state.leader.write() = Some(coordination.lookup(&state));
    } else {
        *state.leader.write() = Some(uncoordinated_lookup(&state, &bound, scheme));
    }
    *state.replication.write() = hub.clone();
    if let Some(hub) = &hub {
        let _ = hub_cell.set(hub.clone());
    }
    let parts = SequencerParts {
        engine,
        journal,
        sinks,
        events: vec![
            EventConsumer::Thread {
                tx: settlement_tx,
                takes: Takes::WithTrades,
            },
            EventConsumer::Inline(Box::new(FeedPublisher::new(
                directory,
                feed_targets,
                server_shared.clone(),
            ))),
        ],
        replication: hub.clone(),
        board: Some(state.board.clone()),
    };
    let follower_flag = seq_config.follower.clone();
    let handle = start_with(seq_config, parts, rings).map_err(|e| format!("sequencer: {e}"))?;
    let _ = stats_cell.set(handle.stats.clone());
    metrics.attach(handle.stats.clone(), server_shared.clone(), submitters);

    let stop = options.signals.stop.clone();
    // This run's replication listener stops with the run (a coordinated node runs again on
    // the same address when it rejoins).
    let replication_stop = Arc::new(AtomicBool::new(false));
    let mut replication_thread = None;
    let mut internal = Internal {
        submitter: producers.internal.ring.clone(),
        completions: internal_rx,
        sink: producers.internal.sink,
        next: 0,
    };
    let settle = |pending| {
        let on_chain = match &chain {
            Some(link) => link
                .settlement_client()?
                .map(|client| (client, link.settings.clone())),
            None => None,
        };
        let started = match on_chain {
            Some((client, settings)) => ladder_settlement::start_chain(
                client,
                settings,
                settlement_rx.clone(),
                producers.settlement.ring.clone(),
                producers.settlement.sink,
                pending,
            ),
            None => ladder_settlement::start(
                Box::new(BuiltIn::new(
                    options.settlement_delay_ms,
                    options.settlement_fail_percent,
                )),
                settlement_rx.clone(),
                producers.settlement.ring.clone(),
                producers.settlement.sink,
                pending,
            ),
        };
        started.map_err(|e| format!("settlement thread: {e}"))
    };
    let mut settlement: Option<SettlementHandle> = None;
    let mut follower: Option<FollowerThread> = None;
    let mut drain: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)> = None;
    match &options.role {
        Role::Primary {
            demo: want_demo,
            replication_listen,
            secret,
            ..
        } => {
            settlement = Some(settle(pending_settlements)?);
            if let (Some(address), Some(hub)) = (replication_listen, &hub) {
                let (_, thread) =
                    serve_replication(address, hub, &data_dir, &keys, secret, &replication_stop)?;
                replication_thread = Some(thread);
            }
            if *want_demo && fresh {
                for command in demo::commands() {
                    internal.run(Work::Command(command))?;
                }
                demo::print_instructions(&bound);
            } else if *want_demo {
                tracing::info!("--demo ignored: the data directory already holds state");
            }
        }
        Role::Standby { primary, secret } => {
            drain = Some(drain_until_promoted(settlement_rx.clone()));
            if let (Some(coordination), Some(hub)) = (&coordination, &hub) {
                // Without `--replication-listen` a node may lead, alone: none can follow it.
                let mut replication = String::new();
                if let Some(address) = &coordination.replication_listen {
                    let (bound, thread) = serve_replication(
                        address,
                        hub,
                        &data_dir,
                        &keys,
                        secret,
                        &replication_stop,
                    )?;
                    replication = bound.to_string();
                    replication_thread = Some(thread);
                }
                coordination
                    .coordinator
                    .advertise(ladder_coordinator::Addresses {
                        url: format!("{scheme}://{bound}"),
                        replication,
                    });
                primary.set(coordination.leader_replication());
            }
            follower = Some(start_follower(
                primary,
                secret,
                (last_seq, engine_term),
                producers.follower.ring.clone(),
                follower_rx.clone(),
                producers.follower.sink,
                &keys,
                &data_dir,
                coordination.as_ref().map(|c| c.position.clone()),
            )?);
        }
    }
    // SIGUSR1 promotes a standby (as `ladder promote`), SIGUSR2 writes a snapshot now (as
    // `ladder snapshot`): for operators with a process manager rather than the admin token.
    // (Registered before this run began: a test or a script that signals a service that
    // answers never finds the default action, termination, in place.)
    let (promote_signal, snapshot_signal) = (
        options.signals.promote.clone(),
        options.signals.snapshot.clone(),
    );
    state.ready.store(true, Ordering::Release);
    tracing::info!("ready");
    let mut failure = None;
    let mut behind = false;
    let mut primary_end = None;
    let mut forgetting = Forgetting::default();
    let mut redemption_watch = match &chain {
        Some(link) => Some(link.redemption_watch(&data_dir)?),
        None => None,
    };
    let follow_target = match &options.role {
        Role::Standby { primary, .. } => Some(primary.clone()),
        Role::Primary { .. } => None,
    };
    let changes = coordination
        .as_ref()
        .map_or_else(crossbeam_channel::never, |c| {
            c.coordinator.changes().clone()
        });
    // An operator's promotion of a coordinated node: answered once it wins or loses.
    let mut promotion_asked: Option<(PromoteRequest, Instant)> = None;
    let mut rejoin = false;
    while !stop.load(Ordering::Acquire) {
        if let Some(why) = refused_by_primary(&mut follower) {
            if why.starts_with(server::BEHIND_JOURNAL) {
                behind = true;
            } else if let Some(end) = JournalEnd::of_refusal(&why) {
                primary_end = Some(end);
            } else {
                failure = Some(format!("standby: the primary refused replication: {why}"));
            }
            break;
        }
        let (mut promotion, mut snapshot, mut change) = (None, None, None);
        crossbeam_channel::select! {
            recv(promote_rx) -> request => promotion = request.ok().map(Some),
            recv(snapshot_rx) -> request => snapshot = request.ok().map(Some),
            recv(changes) -> next => change = next.ok(),
            default(Duration::from_millis(100)) => {}
        }
        if let Some(coordination) = &coordination {
            let held = handle.stats.last_seq.load(Ordering::Acquire);
            coordination.position.held.store(held, Ordering::Release);
        }
        if snapshot_signal.swap(false, Ordering::AcqRel) {
            snapshot = snapshot.or(Some(None));
        }
        if promote_signal.swap(false, Ordering::AcqRel) {
            promotion = promotion.or(Some(None));
        }
        if let Some(reply) = snapshot {
            let taken = internal.snapshot(
                &data_dir,
                options.keep_snapshots,
                historian.stored_through(),
            );
            if let Err(e) = &taken {
                tracing::warn!(error = %e, "snapshot failed");
            }
            if let Some(reply) = reply {
                let _ = reply.send(taken);
            }
        }
        if let Some(reply) = promotion {
            match &coordination {
                Some(coordination) => {
                    promotion_asked = ask_coordinator(coordination, reply).or(promotion_asked);
                }
                None => {
                    let result = promote_here(
                        Promotion {
                            follower: &mut follower,
                            follower_flag: &follower_flag,
                            drain: &mut drain,
                            internal: &mut internal,
                            state: &state,
                        },
                        |_| Ok(()),
                        |internal: &mut Internal| settle(internal.pending_settlements()?).map(Some),
                        &mut settlement,
                    );
                    answer_promotion(reply, result.map_err(PromoteError::Failed));
                }
            }
        }
        if let (Some(change), Some(coordination)) = (change, &coordination) {
            match change {
                Change::Lead { term } => {
                    let led = lead(
                        (term, coordination.demo),
                        coordination,
                        hub.as_deref(),
                        Promotion {
                            follower: &mut follower,
                            follower_flag: &follower_flag,
                            drain: &mut drain,
                            internal: &mut internal,
                            state: &state,
                        },
                        |internal: &mut Internal| settle(internal.pending_settlements()?).map(Some),
                        &mut settlement,
                    );
                    if let Err(e) = &led {
                        tracing::error!(error = %e, term, "could not take the lead");
                    }
                    if let Some((reply, _)) = promotion_asked.take() {
                        answer_promotion(Some(reply), led.map_err(PromoteError::Failed));
                    }
                }
                Change::Demoted => {
                    // The fence is already closed: nothing applied from now is acknowledged.
                    state.standby.store(true, Ordering::Release);
                    follower_flag.store(true, Ordering::Release);
                    tracing::warn!("lost the lead: writes refused until the next leader is known");
                }
                Change::Follow(leader) => match (&follow_target, follower.is_some()) {
                    (Some(target), true) => {
                        tracing::info!(leader = %leader.node_id, term = leader.term, "following the leader");
                        target.set(Some(leader.replication));
                    }
                    _ => {
                        tracing::warn!(leader = %leader.node_id, term = leader.term, "another node leads: rejoining as its standby");
                        rejoin = true;
                        break;
                    }
                },
            }
        }
        if let Some((reply, deadline)) = promotion_asked.take() {
            match Instant::now() < deadline {
                true => promotion_asked = Some((reply, deadline)),
                false => answer_promotion(
                    Some(reply),
                    Err(PromoteError::Conflict(
                        "not elected within 3 leases (another node won, or etcd is unreachable)"
                            .into(),
                    )),
                ),
            }
        }
        // What the history store holds leaves the engine (a primary's decision, journaled;
        // a standby forgets as its primary's journal says). Not while the journal is full:
        // the record would take room kept for cancels.
        let primary = !follower_flag.load(Ordering::Acquire);
        let journal_full = handle.stats.journal_full.load(Ordering::Relaxed);
        if primary && !journal_full {
            forgetting.when_due(historian.stored_through(), &mut internal);
        }
        if let Some(watch) = redemption_watch.as_mut() {
            watch.tick(primary && !journal_full, |work| internal.run(work));
        }
    }
    if let Some((follow_stop, thread)) = follower {
        follow_stop.store(true, Ordering::Release);
        let _ = thread.join();
    }
    replication_stop.store(true, Ordering::Release);
    if let Some(thread) = replication_thread {
        let _ = thread.join();
    }
    shutdown(
        server_shared,
        gateway_threads,
        handle,
        historian,
        &data_dir,
        options.keep_snapshots,
    );
    if let Some(s) = settlement {
        s.join();
    }
    match (failure, primary_end) {
        (Some(why), _) => Err(why),
        (None, Some(end)) => Ok(RunEnd::Ahead { end, bound }),
        (None, None) if behind => Ok(RunEnd::Behind { bound }),
        (None, None) if rejoin => Ok(RunEnd::Rejoin { bound }),
        (None, None) => Ok(RunEnd::Stopped),
    }
}

/// What a promotion changes.
struct Promotion<'a> {
    follower: &'a mut Option<FollowerThread>,
    follower_flag: &'a AtomicBool,
    drain: &'a mut Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
    internal: &'a mut Internal,
    state: &'a ServiceState,
}

/// Turns this standby into the primary: stops following (the last record held is applied),
/// runs `before_writes` (a coordinated node journals its term there), starts settlement and
/// takes writes. `Err` when this is not a standby.
fn promote_here(
    promotion: Promotion<'_>,
    before_writes: impl FnOnce(&mut Internal) -> Result<(), String>,
    start_settlement: impl FnOnce(&mut Internal) -> Result<Option<SettlementHandle>, String>,
    settlement: &mut Option<SettlementHandle>,
) -> Result<(), String> {
    let Some((follow_stop, thread)) = promotion.follower.take() else {
        return Err("not a standby".to_string());
    };
    follow_stop.store(true, Ordering::Release);
    let held = thread.join().ok().and_then(Result::ok).unwrap_or(0);
    promotion.follower_flag.store(false, Ordering::Release);
    if let Some((drain_stop, drain_thread)) = promotion.drain.take() {
        drain_stop.store(true, Ordering::Release);
        let _ = drain_thread.join();
    }
    before_writes(promotion.internal)?;
    *settlement = start_settlement(promotion.internal)?;
    promotion.state.standby.store(false, Ordering::Release);
    tracing::info!(last_seq = held, "promoted to primary");
    Ok(())
}

/// A coordinated node won the lease for `term`: it journals the term (and with `demo` the
/// demo market), then takes writes
/// (waiting for `--replicas` standbys from now on). A node that led already (its lease held
/// through an outage of etcd) only takes writes again.
fn lead(
    (term, demo): (u64, bool),
    coordination: &Coordination,
    hub: Option<&ReplicationHub>,
    promotion: Promotion<'_>,
    start_settlement: impl FnOnce(&mut Internal) -> Result<Option<SettlementHandle>, String>,
    settlement: &mut Option<SettlementHandle>,
) -> Result<(), String> {
    let begin_term = |internal: &mut Internal| -> Result<(), String> {
        match internal.run(Work::Command(Command::BeginTerm { term }))? {
            Completion::Applied { seq, .. } => {
                if let Some(hub) = hub {
                    if seq > 0 && term > coordination.position.term.load(Ordering::Acquire) {
                        hub.set_term_start(seq);
                    }
                }
                coordination.position.term.fetch_max(term, Ordering::AcqRel);
                // `serve --demo` on an empty journal (the term is its first record): the demo
                // market, before any write.
                if demo && seq == 1 {
                    for command in demo::commands() {
                        internal.run(Work::Command(command))?;
                    }
                }
                Ok(())
            }
            Completion::Refused { reason, .. } => {
                Err(format!("the term was not journaled: {reason}"))
            }
            _ => Err("the term was not journaled".to_string()),
        }
    };
    // The term's record is this node's own: no standby follows it yet. Writes from then on
    // wait for `--replicas` standbys.
    let begin_term = |internal: &mut Internal| -> Result<(), String> {
        begin_term(internal)?;
        if let Some(hub) = hub {
            hub.set_required(coordination.replicas as usize);
        }
        Ok(())
    };
    if promotion.follower.is_some() {
        promote_here(promotion, begin_term, start_settlement, settlement)?;
    } else {
        begin_term(promotion.internal)?;
        promotion.follower_flag.store(false, Ordering::Release);
        promotion.state.standby.store(false, Ordering::Release);
    }
    tracing::info!(term, "leading");
    Ok(())
}

/// An operator asked a coordinated node to promote itself: refused while another node holds
/// the lease; else the coordinator runs for leader now, and the answer waits for the outcome.
fn ask_coordinator(
    coordination: &Coordination,
    reply: Option<PromoteRequest>,
) -> Option<(PromoteRequest, Instant)> {
    match coordination.coordinator.view().leader {
        Some(leader) => {
            answer_promotion(
                reply,
                Err(PromoteError::Conflict(format!(
                    "{} holds the coordinator's lease (term {}): promotion is by election",
                    leader.node_id, leader.term
                ))),
            );
            None
        }
        None => {
            coordination.coordinator.run_now();
            let wait = coordination.coordinator.config().lease * 3;
            reply.map(|reply| (reply, Instant::now() + wait))
        }
    }
}

/// Answers an operator's promotion (the admin call's channel, or the log for SIGUSR1).
fn answer_promotion(reply: Option<PromoteRequest>, result: Result<(), PromoteError>) {
    match reply {
        Some(reply) => {
            let _ = reply.send(result);
        }
        None => {
            if let Err(e) = result {
                tracing::warn!(error = ?e, "SIGUSR1: no promotion");
            }
        }
    }
}

/// The leader as an uncoordinated node sees it: itself while it is the primary.
fn uncoordinated_lookup(
    state: &Arc<ServiceState>,
    bound: &SocketAddr,
    scheme: &str,
) -> LeaderLookup {
    let state = state.clone();
    let url = format!("{scheme}://{bound}");
    let node = bound.to_string();
    LeaderLookup(Arc::new(move || {
        let leading = !state.standby.load(Ordering::Acquire);
        LeaderStatus {
            node_id: leading.then(|| node.clone()),
            url: leading.then(|| url.clone()),
            term: 0,
            leading,
            coordinated: false,
        }
    }))
}

/// Serves replication on `address` until `stop`; returns where it listens and the listener's
/// thread.
fn serve_replication(
    address: &str,
    hub: &Arc<ReplicationHub>,
    data_dir: &Path,
    keys: &KeyTable,
    secret: &LinkSecret,
    stop: &Arc<AtomicBool>,
) -> Result<(SocketAddr, std::thread::JoinHandle<()>), String> {
    let listener = std::net::TcpListener::bind(resolve(address)?)
        .map_err(|e| format!("--replication-listen {address}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    println!("ladder: replication on {bound}");
    let history_dir = data_dir.to_path_buf();
    let thread = server::serve(
        listener,
        server::Primary {
            data_dir: data_dir.to_path_buf(),
            hub: hub.clone(),
            master_key: keys.master_bytes(),
            secret: secret.clone(),
            stop: stop.clone(),
            history_copy: Some(Arc::new(move |to: &Path| {
                ladder_history::copy_store(&history_dir, to)
            })),
        },
    )
    .map_err(|e| format!("replication: {e}"))?;
    Ok((bound, thread))
}

/// The standby's follower: its stop flag and its thread (the last sequence held, or why the
/// primary refused it).
type FollowerThread = (
    Arc<AtomicBool>,
    std::thread::JoinHandle<Result<u64, String>>,
);

/// Why the primary refused to be followed, once the follower has ended for that reason (a
/// standby whose journal diverged cannot follow, and must not go on serving as if it did).
fn refused_by_primary(follower: &mut Option<FollowerThread>) -> Option<String> {
    if !follower.as_ref()?.1.is_finished() {
        return None;
    }
    let (_, thread) = follower.take()?;
    match thread.join() {
        Ok(Err(why)) => Some(why),
        Ok(Ok(_)) => None,
        Err(_) => Some("the follower thread panicked".to_string()),
    }
}

/// On a standby, nothing settles: the settlement feed is drained (promotion re-arms every
/// pending batch from the engine) so that it never holds the sequencer back.
fn drain_until_promoted(
    events: ladder_sequencer::bell::BellReceiver<ladder_sequencer::PublishedBatch>,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        while !flag.load(Ordering::Acquire) {
            let _ = events.recv_timeout(Duration::from_millis(50));
        }
    });
    (stop, thread)
}

#[allow(clippy::too_many_arguments)]
fn start_follower(
    primary: &FollowTarget,
    secret: &LinkSecret,
    (last_seq, term): (u64, u64),
    submitter: Submitter,
    completions: Receiver<Completion>,
    sink: u16,
    keys: &Arc<KeyTable>,
    data_dir: &Path,
    position: Option<Arc<ladder_coordinator::Position>>,
) -> Result<FollowerThread, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let applied_keys = keys.clone();
    let master_keys = keys.clone();
    let key_dir = data_dir.to_path_buf();
    let last_mark = match last_seq {
        0 => None,
        seq => {
            // Right after a bootstrap the journal does not hold the snapshot's record.
            let held = match bootstrap::mark_of_start(data_dir, seq)? {
                Some(mark) => Some(mark),
                None => RecordMark::of_journal(data_dir, seq)?,
            };
            Some(held.ok_or_else(|| format!("the journal does not hold its last record {seq}"))?)
        }
    };
    let follower = client::Follower {
        primary: primary.clone(),
        term,
        secret: secret.clone(),
        node_id: node_id(data_dir)?,
        last_seq,
        last_mark,
        submitter,
        completions,
        sink,
        stop: stop.clone(),
        on_applied: Box::new(move |command, reply, _| match (command, reply) {
            (Command::CreateApiKey(spec), Reply::Ok) => {
                let address = Address(spec.address.0);
                let before = applied_keys.creations(&address, &spec.nonce.0);
                applied_keys.set_creations(address, spec.nonce.0, before.saturating_add(1));
                applied_keys.insert(Uuid::from_bytes(spec.key_id), address);
            }
            (
                Command::CreateCountedApiKey {
                    spec,
                    creations_before,
                },
                Reply::Ok,
            ) => {
                let address = Address(spec.address.0);
                applied_keys.set_creations(
                    address,
                    spec.nonce.0,
                    creations_before.saturating_add(1),
                );
                applied_keys.insert(Uuid::from_bytes(spec.key_id), address);
            }
            (Command::DeleteApiKey { key_id, .. }, Reply::Ok) => {
                applied_keys.remove(&Uuid::from_bytes(*key_id))
            }
            (Command::BeginTerm { term }, _) => {
                if let Some(position) = &position {
                    position.term.fetch_max(*term, Ordering::AcqRel);
                }
            }
            _ => {}
        }),
        on_master_key: Box::new(move |key| {
            if master_keys.master_bytes() != key {
                let master = MasterKey::from_bytes(key);
                if let Err(e) = master.store(&key_dir) {
                    tracing::warn!(error = %e, "could not keep the primary's master key");
                }
                master_keys.replace_master(master);
            }
        }),
    };
    let thread = client::follow(follower).map_err(|e| format!("standby thread: {e}"))?;
    Ok((stop, thread))
}

/// The file in a data directory that holds its node id.
pub const NODE_ID_FILE: &str = "node.id";

/// This data directory's node id, made (a random UUID) the first time: a standby names it to
/// its primary, which keeps one replication session per node.
pub(super) fn node_id(data_dir: &Path) -> Result<String, String> {
    let path = data_dir.join(NODE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if ladder_sequencer::replication::valid_node_id(text.trim()) => {
            Ok(text.trim().to_string())
        }
        // Empty: an older version's write that a power loss emptied. A new id only makes the
        // primary see a new standby.
        Ok(text) if !text.trim().is_empty() => Err(format!("{}: not a node id", path.display())),
        Ok(_) => new_node_id(&path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => new_node_id(&path),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Makes a node id (a random UUID) and keeps it at `path`, durably.
fn new_node_id(path: &Path) -> Result<String, String> {
    let id = Uuid::new_v4().to_string();
    ladder_journal::write_file_durably(path, format!("{id}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    Ok(id)
}

/// When the runtime journals a `ForgetHistory`: once the history store holds records past
/// the last one, and either `FORGET_EVERY_RECORDS` more or `FORGET_INTERVAL` has passed.
#[derive(Debug)]
struct Forgetting {
    through: u64,
    at: Instant,
}

/// Records the store must gain for a `ForgetHistory` at once.
const FORGET_EVERY_RECORDS: u64 = 8_192;
/// The longest wait between two `ForgetHistory` while the store gains anything.
const FORGET_INTERVAL: Duration = Duration::from_secs(1);

impl Default for Forgetting {
    fn default() -> Self {
        Forgetting {
            through: 0,
            at: Instant::now(),
        }
    }
}

impl Forgetting {
    /// Journals a `ForgetHistory` through `stored` when one is due. The engine answers one
    /// that would forget nothing without a journal record, so an idle service writes none.
    fn when_due(&mut self, stored: u64, internal: &mut Internal) {
        let due = stored > self.through
            && (stored - self.through >= FORGET_EVERY_RECORDS
                || self.at.elapsed() >= FORGET_INTERVAL);
        if !due {
            return;
        }
        match internal.run(Work::Command(Command::ForgetHistory {
            through_seq: stored,
        })) {
            // Journaled, or answered without a record when there was nothing to forget.
            Ok(Completion::Applied { .. }) => {
                self.through = stored;
                self.at = Instant::now();
            }
            // Refused (a full journal, say): tried again after the interval.
            Ok(_) => self.at = Instant::now(),
            Err(e) => tracing::warn!(error = %e, "forget history: not journaled"),
        }
    }
}

/// Stops accepting, drains what the gateway holds, stops the sequencer and snapshots.
fn shutdown(
    server: Arc<ServerShared>,
    gateway_threads: Vec<std::thread::JoinHandle<()>>,
    handle: SequencerHandle,
    historian: Historian,
    data_dir: &Path,
    keep_snapshots: usize,
) {
    tracing::info!("stopping: draining connections");
    server.stop.store(true, Ordering::Release);
    for thread in gateway_threads {
        let _ = thread.join();
    }
    let engine = handle.stop();
    // The history store catches up with the last record before the historian stops, so
    // that the next start finds a snapshot at or before where it stands.
    let end = engine.as_ref().map_or(0, Engine::last_seq);
    if !historian.wait_stored(end, HISTORY_DRAIN_TIMEOUT) {
        tracing::warn!(
            stored = historian.stored_through(),
            end,
            "the history store did not catch up before stopping; it will at the next start"
        );
    }
    let stored = historian.stored_through();
    historian.stop();
    if let Some(engine) = engine {
        write_snapshot(data_dir, &engine, keep_snapshots, stored);
    }
    tracing::info!("stopped");
}

/// How long a stopping service waits for the history store to catch up.
const HISTORY_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes a snapshot of `engine` and prunes, keeping the one the history store (at
/// `stored`) starts from.
fn write_snapshot(data_dir: &Path, engine: &Engine, keep_snapshots: usize, stored: u64) {
    let seq = engine.last_seq();
    if seq == 0 {
        return;
    }
    match ladder_journal::write_snapshot(data_dir, seq, &engine.snapshot_bytes()) {
        Ok(path) => tracing::info!(seq, path = %path.display(), "snapshot written"),
        Err(e) => tracing::warn!(error = %e, "snapshot failed"),
    }
    let _ = ladder_journal::prune_snapshots(data_dir, keep_snapshots, stored);
}

/// A producer of the runtime's own: its ring into the sequencer and the sink its answers
/// come back to.
struct Producer {
    ring: Submitter,
    sink: u16,
}

/// The runtime's producers beside the gateway threads (whose rings and sinks come first).
struct RuntimeProducers {
    /// The main loop: the demo market, snapshots on command, `ForgetHistory`, redemptions.
    /// Its answers come back on a channel.
    internal: Producer,
    /// The settlement thread: its answers are dropped (it follows trades through events).
    settlement: Producer,
    /// A standby's follower of its primary's journal: answers come back on a channel.
    follower: Producer,
}

impl RuntimeProducers {
    /// The rings they need after the gateway threads'.
    const COUNT: usize = 3;

    /// Takes their rings, the last [`Self::COUNT`] of `submitters`, and appends their sinks to
    /// `sinks`; returns them with the internal and follower answer channels.
    fn take(
        submitters: &mut Vec<Submitter>,
        sinks: &mut Vec<Box<dyn CompletionSink>>,
    ) -> Result<(RuntimeProducers, Receiver<Completion>, Receiver<Completion>), String> {
        let first = submitters
            .len()
            .checked_sub(Self::COUNT)
            .ok_or("too few rings for the runtime's producers")?;
        let mut rings = submitters.split_off(first).into_iter();
        let mut producer = |sink: Box<dyn CompletionSink>| -> Result<Producer, String> {
            let ring = rings
                .next()
                .ok_or("too few rings for the runtime's producers")?;
            let index = u16::try_from(sinks.len()).map_err(|_| "too many sinks")?;
            sinks.push(sink);
            Ok(Producer { ring, sink: index })
        };
        // Answers to the main loop and the follower hold at most what each has in flight: the
        // main loop waits for every answer before it submits again; the follower takes all
        // its answers whenever its 1 MiB read buffer runs dry, so at most the records of one
        // buffer are in flight.
        let (internal_tx, internal_rx) = unbounded();
        let (follower_tx, follower_rx) = unbounded();
        let producers = RuntimeProducers {
            internal: producer(Box::new(ChannelSink(internal_tx)))?,
            settlement: producer(Box::new(DiscardSink))?,
            follower: producer(Box::new(ChannelSink(follower_tx)))?,
        };
        Ok((producers, internal_rx, follower_rx))
    }
}

/// The runtime's own ring into the sequencer (demo set-up, snapshots, promotion), waiting for
/// each answer.
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

    fn query<T: Send + 'static>(
        &mut self,
        read: impl FnOnce(&Engine) -> T + Send + 'static,
    ) -> Result<T, String> {
        let query = Box::new(move |e: &Engine| Box::new(read(e)) as QueryOutput);
        match self.run(Work::Query(query))? {
            Completion::Answered { output, .. } => output
                .downcast::<T>()
                .map(|b| *b)
                .map_err(|_| "bad answer".to_string()),
            _ => Err("unexpected completion".into()),
        }
    }

    /// Serializes the engine on the sequencer thread and writes the snapshot here, keeping
    /// the one the history store (at `stored`) starts from.
    fn snapshot(
        &mut self,
        data_dir: &Path,
        keep: usize,
        stored: u64,
    ) -> Result<SnapshotTaken, String> {
        let (seq, bytes) = self.query(|e| (e.last_seq(), e.snapshot_bytes()))?;
        let path =
            ladder_journal::write_snapshot(data_dir, seq, &bytes).map_err(|e| e.to_string())?;
        let _ = ladder_journal::prune_snapshots(data_dir, keep, stored);
        tracing::info!(seq, path = %path.display(), "snapshot written");
        Ok(SnapshotTaken {
            seq,
            path: path.display().to_string(),
        })
    }

    fn pending_settlements(&mut self) -> Result<Vec<ladder_settlement::PendingBatch>, String> {
        self.query(ladder_settlement::pending_batches)
    }
}
