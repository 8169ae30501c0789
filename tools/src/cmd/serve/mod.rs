//! `ladder serve` and `ladder standby`: recover, then run the gateway, the sequencer, the
//! feed and (on a primary) settlement and replication, until a signal.
//!
//! The HTTP listeners come up first and answer 503 `service not ready` while the engine is
//! rebuilt from the newest snapshot and the journal; start-up journals nothing (except the
//! demo set-up, asked for with `--demo` on an empty data directory). A standby follows its
//! primary's replication stream and refuses writes until promoted.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use ladder_gateway::app::{LeaderLookup, LeaderStatus, ServiceState, SnapshotTaken};
use ladder_gateway::keys::{KeyTable, MasterKey};
use ladder_gateway::metrics::Metrics;
use ladder_journal::{Durability, JournalOptions};
use ladder_protocol::Address;
use ladder_sequencer::replication::client::FollowTarget;
use ladder_sequencer::replication::server::JournalEnd;
use ladder_sequencer::replication::LinkSecret;
use ladder_sequencer::{CorePin, SequencerConfig};

mod advertise;
mod boot;
mod coordinated;
mod dead_man;
mod front;
mod promotion;
mod replication;
mod roles;
mod runtime;
mod supervisor;

use boot::{AppParts, LateParts, Recovery, SequencerStart, Sequencing};
use coordinated::{coordinated, CoordinatedNode, Coordination};
use replication::node_id;
use roles::{start_role, RoleStart};
use runtime::{shutdown, stop_gateway, Internal, SettlementStarter};
use supervisor::{Context, LoopEnd, Supervisor};

use super::chain_link::ChainLink;
use super::{ahead, bootstrap};
use super::{ChainFlags, ServeArgs, StandbyArgs, TlsFlags};

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
    /// `--advertise-host`: stands in for an unspecified listen IP in what the node publishes.
    advertise_host: Option<String>,
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

/// Ends `serve` or `standby` at once when another process holds its `--listen` port or its
/// `--replication-listen` port: before anything is written to the data directory (a new one
/// is left uncreated, without a master key or a node id) and before a coordinated node runs
/// for leader.
fn refuse_listen_addresses_in_use(
    listen: &str,
    replication_listen: Option<&str>,
) -> Result<(), String> {
    let address = resolve(listen).map_err(|e| format!("--listen {e}"))?;
    ladder_gateway::refuse_a_port_in_use(address)
        .map_err(|e| format!("listen on {address}: {e}"))?;
    if let Some(replication) = replication_listen {
        let address = resolve(replication).map_err(|e| format!("--replication-listen {e}"))?;
        ladder_gateway::refuse_a_port_in_use(address)
            .map_err(|e| format!("--replication-listen {address}: {e}"))?;
    }
    Ok(())
}

/// `ladder serve`.
pub fn serve(args: &ServeArgs) -> Result<(), String> {
    refuse_listen_addresses_in_use(&args.service.listen, args.replication_listen.as_deref())?;
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
        admin_public: args.node.admin_public,
        durability: args.node.durability,
        gateway_threads: args.node.gateway_threads,
        sequencer_core: args.node.sequencer_core,
        chain: args.chain.clone(),
        max_keys_per_user: args.node.max_keys_per_user,
        rate_limit_key: args.node.rate_limit_key,
        rate_limit_ip: args.node.rate_limit_ip,
        settlement_delay_ms: args.settlement_delay_ms,
        settlement_fail_percent: args.settlement_fail_percent,
        tls: tls_config(&args.tls)?,
        role,
        signals,
        coordination: None,
        advertise_host: args.coordinator.advertise_host.clone(),
    })
}

/// `ladder standby`: asks the primary first whether its journal holds the next record this
/// standby needs, and takes the primary's state when it does not (see [`bootstrap`]); then
/// runs until stopped, and again after a bootstrap when the primary's journal moved past it
/// while it was away.
pub fn standby(args: &StandbyArgs) -> Result<(), String> {
    refuse_listen_addresses_in_use(&args.service.listen, args.replication_listen.as_deref())?;
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
                ahead::cut_after_primary_end(data_dir, end, ahead::Ahead::LostFlush)
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
        admin_public: args.node.admin_public,
        durability: args.node.durability,
        gateway_threads: args.node.gateway_threads,
        sequencer_core: args.node.sequencer_core,
        chain: args.chain.clone(),
        max_keys_per_user: args.node.max_keys_per_user,
        rate_limit_key: args.node.rate_limit_key,
        rate_limit_ip: args.node.rate_limit_ip,
        settlement_delay_ms: args.settlement_delay_ms,
        settlement_fail_percent: args.settlement_fail_percent,
        tls: tls_config(&args.tls)?,
        role,
        signals,
        coordination: None,
        advertise_host: args.coordinator.advertise_host.clone(),
    })
}

/// The client listener's TLS, when a certificate is given.
fn tls_config(flags: &TlsFlags) -> Result<Option<Arc<rustls::ServerConfig>>, String> {
    match (&flags.tls_cert, &flags.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(ladder_gateway::stream::tls_config(cert, key)?)),
        _ => Ok(None),
    }
}

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

/// One run of the service: starts the gateway threads (answering 503 while recovering),
/// recovers, starts the sequencer and what the role runs, then supervises until the node
/// stops or must run again in another role.
fn run(options: RunOptions) -> Result<RunEnd, String> {
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
    let AppParts {
        app,
        promotions,
        snapshots,
    } = boot::app(
        &options,
        exchange,
        chain.as_ref(),
        (&keys, &metrics, &state),
    )?;
    let seq_config = sequencer_config(&options, front::gateway_threads(&options), standby);
    let front = front::start_front(&options, app, seq_config.ring_capacity)?;
    tracing::info!(bound = %front.bound.0, standby, "listening; recovering");

    let late = LateParts::default();
    let Recovery {
        journal,
        engine,
        historian,
    } = boot::recover(&options, &state, &keys, &late)?;
    let fresh = engine.market_count() == 0 && journal.last_seq() == 0;
    let pending = ladder_settlement::pending_batches(&engine);
    let position = (engine.last_seq(), engine.term());
    let Sequencing {
        handle,
        hub,
        settlement_events,
        follower_flag,
    } = boot::start_sequencer(
        &options,
        seq_config,
        SequencerStart {
            journal,
            engine,
            sinks: front.sinks,
            rings: front.rings,
            feed_targets: front.feed_targets,
            server: front.shared.clone(),
            bound: front.bound,
        },
        (&state, &late),
    )?;
    metrics.attach(handle.stats.clone(), front.shared.clone(), front.submitters);

    // This run's replication listener stops with the run (a coordinated node runs again on
    // the same address when it rejoins).
    let replication_stop = Arc::new(AtomicBool::new(false));
    let producers = &front.producers;
    let mut internal = Internal {
        submitter: producers.internal.ring.clone(),
        completions: front.internal_answers,
        sink: producers.internal.sink,
        next: 0,
        interrupt: None,
    };
    let settlement = SettlementStarter {
        chain: chain.as_ref(),
        events: settlement_events.clone(),
        producer: &producers.settlement,
        answers: &producers.settlement_answers,
        built_in: (options.settlement_delay_ms, options.settlement_fail_percent),
    };
    let mut roles = start_role(
        RoleStart {
            role: &options.role,
            hub: hub.as_ref(),
            coordination: options.coordination.as_deref(),
            advertise_host: options.advertise_host.as_deref(),
            data_dir: &data_dir,
            keys: &keys,
            replication_stop: &replication_stop,
            bound: front.bound,
            fresh,
            position,
            pending,
            settlement: &settlement,
            settlement_events: &settlement_events,
            follower: (&producers.follower, &front.follower_answers),
        },
        &mut internal,
    )?;
    let replication_thread = roles.replication.take();
    // A primary cancels for the dead-man switches a crashed run left armed before it takes
    // any request: an order placed after its start is never one of those it cancels.
    let mut lost_switches = dead_man::LostSwitches::default();
    let writes = !state.standby.load(Ordering::Acquire) && !follower_flag.load(Ordering::Acquire);
    lost_switches.settle(writes, &front.shared, &mut internal);
    state.ready.store(true, Ordering::Release);
    tracing::info!("ready");
    let redemption_watch = match &chain {
        Some(link) => Some(link.redemption_watch(&data_dir)?),
        None => None,
    };
    let follow_target = match &options.role {
        Role::Standby { primary, .. } => Some(primary.clone()),
        Role::Primary { .. } => None,
    };
    let mut supervisor = Supervisor::new(
        Context {
            state: &state,
            coordination: options.coordination.as_deref(),
            hub: hub.as_deref(),
            historian: &historian,
            stats: &handle.stats,
            settlement: &settlement,
            follower_flag: &follower_flag,
            signals: &options.signals,
            promotions: &promotions,
            snapshots: &snapshots,
            keep_snapshots: options.keep_snapshots,
            data_dir: &data_dir,
            server: &front.shared,
        },
        (internal, lost_switches),
        roles,
        redemption_watch,
        follow_target,
        position.0,
    );
    let end = supervisor.run();

    supervisor.stop_follower();
    let settlement_thread = supervisor.settlement.take();
    let mut internal = supervisor.into_internal();
    // The gateway stops first, while standbys still follow: what it drains is replicated.
    if !matches!(end, LoopEnd::Stopped | LoopEnd::Failed(_)) {
        front.shared.changing_role.store(true, Ordering::Release);
    }
    if let Some(hub) = &hub {
        hub.stop_waiting(runtime::STOP_STANDBYS_PATIENCE);
    }
    stop_gateway(&front.shared, front.threads);
    // A clean stop is no disconnect of a dead-man switch: its armings go, journaled once the
    // gateway loops take no more and before replication stops, so that a standby that takes
    // over knows them disarmed.
    if matches!(end, LoopEnd::Stopped) && !state.standby.load(Ordering::Acquire) {
        dead_man::disarm_at_stop(&mut internal, &front.shared, hub.as_deref());
    }
    replication_stop.store(true, Ordering::Release);
    if let Some(thread) = replication_thread {
        let _ = thread.join();
    }
    shutdown(handle, historian, &data_dir, options.keep_snapshots);
    if let Some(s) = settlement_thread {
        s.join();
    }
    let bound = front.bound.0;
    match end {
        LoopEnd::Failed(why) => Err(why),
        LoopEnd::Ahead(end) => Ok(RunEnd::Ahead { end, bound }),
        LoopEnd::Behind => Ok(RunEnd::Behind { bound }),
        LoopEnd::Rejoin => Ok(RunEnd::Rejoin { bound }),
        LoopEnd::Stopped => Ok(RunEnd::Stopped),
    }
}

/// The sequencer's configuration for this run: the gateway threads' sinks come first (see
/// `RuntimeProducers`), and a standby's sequencer starts as a follower.
fn sequencer_config(
    options: &RunOptions,
    gateway_threads: usize,
    standby: bool,
) -> SequencerConfig {
    let config = SequencerConfig {
        ack_fence: options.coordination.as_ref().map_or_else(
            || Arc::new(ladder_sequencer::AckFence::open()),
            |c| c.fence.clone(),
        ),
        durability: options.durability,
        pin: options.sequencer_core,
        client_sinks: gateway_threads,
        heartbeat_timeout: Duration::from_millis(options.heartbeat_timeout_ms),
        ..SequencerConfig::default()
    };
    config.follower.store(standby, Ordering::Release);
    config
}
