//! The phases of a run's start that each have one job: the application the gateway threads
//! serve, the engine and history store recovered from the data directory, and the
//! replication hub.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crossbeam_channel::{bounded, unbounded, Receiver};
use ladder_engine::{Engine, EngineLimits};
use ladder_gateway::app::{App, AppConfig, LeaderLookup, LeaderStatus, PromoteError, ServiceState};
use ladder_gateway::keys::KeyTable;
use ladder_gateway::metrics::Metrics;
use ladder_gateway::smart::SmartAccounts;
use ladder_gateway::ws::feed::{FeedPublisher, FeedTarget, MarketIds};
use ladder_gateway::ServerShared;
use ladder_history::{Historian, HistorianConfig};
use ladder_journal::{Journal, JournalOptions};
use ladder_protocol::{Address, AuthDomain, ExchangeDomain, CHAIN_ID};
use ladder_sequencer::bell::BellReceiver;
use ladder_sequencer::replication::ReplicationHub;
use ladder_sequencer::{
    recover_engine, start_with, CompletionSink, EventConsumer, PublishedBatch, Rings,
    SequencerConfig, SequencerHandle, SequencerParts, SequencerStats, Takes,
};
use uuid::Uuid;

use super::coordinated::Coordination;
use super::promotion::PromoteRequest;
use super::{ask_main_loop, Role, RunOptions, SnapshotRequest, EVENT_BATCHES_QUEUED_MAX};
use crate::cmd::chain_link::ChainLink;

/// The application and the two requests it passes to the main loop.
pub(super) struct AppParts {
    /// What the gateway threads serve.
    pub(super) app: Arc<App>,
    /// `POST /admin/promote`: promote this standby.
    pub(super) promotions: Receiver<PromoteRequest>,
    /// `POST /admin/snapshot`: write a snapshot now.
    pub(super) snapshots: Receiver<SnapshotRequest>,
}

/// The application of this run: its configuration from the options, with hooks that pass
/// promotions and snapshots to the main loop (which owns the runtime's ring).
pub(super) fn app(
    options: &RunOptions,
    exchange: Address,
    chain: Option<&ChainLink>,
    shared: (&Arc<KeyTable>, &Arc<Metrics>, &Arc<ServiceState>),
) -> Result<AppParts, String> {
    let (keys, metrics, state) = shared;
    let config = AppConfig {
        exchange: ExchangeDomain::new(CHAIN_ID, exchange),
        auth: AuthDomain::new(CHAIN_ID),
        admin_token: options.admin_token.clone().filter(|t| !t.is_empty()),
        admin_public: options.admin_public,
        max_keys_per_user: options.max_keys_per_user,
        rate_limit_key: options.rate_limit_key,
        rate_limit_ip: options.rate_limit_ip,
        smart_accounts: chain
            .map(|link| SmartAccounts::on_chain(link.verifier.clone()))
            .unwrap_or_default(),
        entry_point: Address::parse_ignoring_checksum(&options.chain.entry_point)
            .map_err(|e| format!("--entry-point: {e}"))?,
        chain_bundler: chain.map(|link| link.chain_bundler.clone()),
    };
    let (promote_tx, promotions) = unbounded::<PromoteRequest>();
    let promote_hook = Arc::new(move || {
        let (reply_tx, reply_rx) = bounded(1);
        promote_tx
            .send(reply_tx)
            .map_err(|_| PromoteError::Failed("the service is stopping".into()))?;
        reply_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .map_err(|_| PromoteError::Failed("the promotion timed out".into()))?
    });
    let (snapshot_tx, snapshots) = unbounded::<SnapshotRequest>();
    let snapshot_hook = Arc::new(ask_main_loop(
        snapshot_tx,
        std::time::Duration::from_secs(60),
        "snapshot",
    ));
    let app = Arc::new(
        App::new(config, keys.clone(), metrics.clone(), state.clone())
            .with_promote_hook(promote_hook)
            .with_snapshot_hook(snapshot_hook),
    );
    Ok(AppParts {
        app,
        promotions,
        snapshots,
    })
}

/// Values the historian reads from parts made after it: the sequencer's stats (how far the
/// journal is released, whether it is full) and the replication hub (what standbys hold).
#[derive(Default)]
pub(super) struct LateParts {
    /// Set once the sequencer runs.
    pub(super) stats: Arc<OnceLock<Arc<SequencerStats>>>,
    /// Set once the hub is made (never, without replication).
    pub(super) hub: Arc<OnceLock<Arc<ReplicationHub>>>,
}

/// What recovery rebuilt.
pub(super) struct Recovery {
    /// The journal, open for appending.
    pub(super) journal: Journal,
    /// The engine at the journal's end.
    pub(super) engine: Engine,
    /// The history store's writer, following the journal.
    pub(super) historian: Historian,
}

/// Opens the journal (cutting a torn tail), sets aside snapshots past its end, rebuilds the
/// engine from the newest snapshot and the journal, starts the historian, and fills the
/// board, the history reads and the key table from what was recovered.
pub(super) fn recover(
    options: &RunOptions,
    state: &ServiceState,
    keys: &KeyTable,
    late: &LateParts,
) -> Result<Recovery, String> {
    let data_dir = &options.data_dir;
    let started = Instant::now();
    let (journal, report) = Journal::open(
        data_dir,
        JournalOptions {
            segment_size_bytes: options.segment_size_bytes,
        },
    )
    .map_err(|e| e.to_string())?;
    if let Some(torn) = &report.torn_tail {
        tracing::warn!(segment = %torn.segment.display(), offset = torn.offset, bytes = torn.bytes_dropped, "cut a torn journal tail");
    }
    set_aside_snapshots_past(data_dir, journal.last_seq())?;
    let (engine, recovered) = recover_engine(data_dir, EngineLimits::default(), None)?;
    if engine.last_seq() != journal.last_seq() {
        return Err(format!(
            "recovery reached sequence {} but the journal ends at {}",
            engine.last_seq(),
            journal.last_seq()
        ));
    }
    let historian = start_historian(options, state, late, journal.last_seq())?;
    state.board.fill(&engine);
    *state.history.write() = Some(historian.reader());
    for (key_id, record) in engine.api_key_records() {
        keys.insert(Uuid::from_bytes(key_id), record.address);
    }
    for (address, nonce, count) in engine.api_key_creation_counts() {
        keys.set_creations(address, nonce.0, count);
    }
    tracing::info!(
        snapshot_seq = recovered.snapshot_seq,
        replayed = recovered.replayed,
        last_seq = recovered.last_seq,
        ms = started.elapsed().as_millis() as u64,
        "recovered"
    );
    Ok(Recovery {
        journal,
        engine,
        historian,
    })
}

/// A snapshot past the journal's end (an `async` journal's unflushed tail lost with the
/// power, while the snapshot file was synced) cannot be followed by the journal: it is set
/// aside (`.snap.bad`) and the state rebuilt from what the journal holds, without a person.
fn set_aside_snapshots_past(data_dir: &Path, journal_end: u64) -> Result<(), String> {
    let newest = ladder_journal::latest_valid_snapshot(data_dir).map_err(|e| e.to_string())?;
    if newest.is_some_and(|snapshot| snapshot.seq > journal_end) {
        let set_aside = ladder_journal::set_aside_snapshots_after(
            data_dir,
            Some(journal_end).filter(|&s| s > 0),
        )
        .map_err(|e| e.to_string())?;
        tracing::error!(journal_end, snapshots = ?set_aside, "snapshots past the journal's end (its unflushed tail was lost): set aside, recovering from the journal");
    }
    Ok(())
}

/// The historian follows the journal as far as the sequencer released it: at start, all of
/// it (recovery found it there), then as far as the sequencer's stats say. The journal keeps
/// what a connected standby has not acknowledged.
fn start_historian(
    options: &RunOptions,
    state: &ServiceState,
    late: &LateParts,
    journal_end: u64,
) -> Result<Historian, String> {
    let released = {
        let cell = late.stats.clone();
        Arc::new(move || {
            cell.get()
                .map_or(journal_end, |stats| stats.last_seq.load(Ordering::Acquire))
        })
    };
    let journal_full = {
        let cell = late.stats.clone();
        Arc::new(move || {
            cell.get()
                .is_some_and(|stats| stats.journal_full.load(Ordering::Relaxed))
        })
    };
    let standby_floor = {
        let cell = late.hub.clone();
        Arc::new(move || {
            cell.get()
                .and_then(|hub| hub.slowest_ack())
                .unwrap_or(u64::MAX)
        })
    };
    let board = state.board.clone();
    Historian::start(HistorianConfig {
        data_dir: options.data_dir.clone(),
        limits: EngineLimits::default(),
        released,
        snapshot_every: options.snapshot_every,
        keep_snapshots: options.keep_snapshots,
        journal_last_seq: journal_end,
        journal_full,
        standby_floor,
        journal_archive: options.journal_archive.clone(),
        prices_stored_below: Arc::new(move |below| board.prices_stored_below(below)),
    })
}

/// The replication hub of this run, if it serves replication: a primary with
/// `--replication-listen`, or any coordinated node (which serves replication from the start
/// and requires standbys only while it leads).
pub(super) fn replication_hub(
    role: &Role,
    coordination: Option<&Coordination>,
    engine: &Engine,
) -> Option<Arc<ReplicationHub>> {
    let last_seq = engine.last_seq();
    let hub = match role {
        Role::Primary {
            replication_listen: Some(_),
            replicas,
            ..
        } => Arc::new(ReplicationHub::new(*replicas as usize, last_seq)),
        _ if coordination.is_some() => Arc::new(ReplicationHub::new(0, last_seq)),
        _ => return None,
    };
    hub.set_term_start(engine.term_start_seq());
    Some(hub)
}

/// What the sequencer is started with.
pub(super) struct SequencerStart {
    /// The recovered journal.
    pub(super) journal: Journal,
    /// The recovered engine.
    pub(super) engine: Engine,
    /// Every producer's completion sink, in ring order.
    pub(super) sinks: Vec<Box<dyn CompletionSink>>,
    /// The sequencer's end of every ring.
    pub(super) rings: Rings,
    /// Each gateway loop's end of the WebSocket feed.
    pub(super) feed_targets: Vec<FeedTarget>,
    /// What the gateway threads share.
    pub(super) server: Arc<ServerShared>,
    /// Where clients reach this node, and its scheme.
    pub(super) bound: (SocketAddr, &'static str),
}

/// The running sequencer and the parts made for it.
pub(super) struct Sequencing {
    /// The sequencer thread and its counters.
    pub(super) handle: SequencerHandle,
    /// The replication hub, when this node serves replication.
    pub(super) hub: Option<Arc<ReplicationHub>>,
    /// The event batches that hold trades, for settlement.
    pub(super) settlement_events: BellReceiver<PublishedBatch>,
    /// Whether the sequencer follows a primary (refuses clients' writes).
    pub(super) follower_flag: Arc<AtomicBool>,
}

/// Starts the sequencer on the recovered state: settlement and the WebSocket feed consume
/// its events, the replication hub (if any) its records; the leader is published first.
pub(super) fn start_sequencer(
    options: &RunOptions,
    config: SequencerConfig,
    start: SequencerStart,
    (state, late): (&Arc<ServiceState>, &LateParts),
) -> Result<Sequencing, String> {
    let coordination = options.coordination.as_ref();
    let directory: Vec<MarketIds> = start
        .engine
        .markets()
        .map(|m| MarketIds {
            condition_id: m.condition_id,
            yes: m.yes_token_id,
            no: m.no_token_id,
        })
        .collect();
    let (settlement_tx, settlement_events) =
        ladder_sequencer::bell::channel(EVENT_BATCHES_QUEUED_MAX);
    let hub = replication_hub(&options.role, coordination.map(Arc::as_ref), &start.engine);
    publish_leader(
        state,
        coordination,
        &start.engine,
        (start.bound, options.advertise_host.as_deref()),
    );
    *state.replication.write() = hub.clone();
    if let Some(hub) = &hub {
        let _ = late.hub.set(hub.clone());
    }
    let parts = SequencerParts {
        engine: start.engine,
        journal: start.journal,
        sinks: start.sinks,
        events: vec![
            EventConsumer::Thread {
                tx: settlement_tx,
                takes: Takes::WithTrades,
            },
            EventConsumer::Inline(Box::new(FeedPublisher::new(
                directory,
                start.feed_targets,
                start.server,
            ))),
        ],
        replication: hub.clone(),
        board: Some(state.board.clone()),
    };
    let follower_flag = config.follower.clone();
    let handle = start_with(config, parts, start.rings).map_err(|e| format!("sequencer: {e}"))?;
    let _ = late.stats.set(handle.stats.clone());
    Ok(Sequencing {
        handle,
        hub,
        settlement_events,
        follower_flag,
    })
}

/// Who leads, as `GET /leader` and the write refusals say: the coordinator's view (this node
/// publishes its position there first), or this node itself while it is the primary.
fn publish_leader(
    state: &Arc<ServiceState>,
    coordination: Option<&Arc<Coordination>>,
    engine: &Engine,
    ((bound, scheme), advertise_host): ((SocketAddr, &str), Option<&str>),
) {
    let lookup = match coordination {
        Some(coordination) => {
            coordination
                .position
                .held
                .store(engine.last_seq(), Ordering::Release);
            coordination
                .position
                .term
                .fetch_max(engine.term(), Ordering::AcqRel);
            coordination.lookup(state)
        }
        None => uncoordinated_lookup(state, bound, scheme, advertise_host),
    };
    *state.leader.write() = Some(lookup);
}

/// The leader as an uncoordinated node sees it: itself while it is the primary.
fn uncoordinated_lookup(
    state: &Arc<ServiceState>,
    bound: SocketAddr,
    scheme: &str,
    advertise_host: Option<&str>,
) -> LeaderLookup {
    let state = state.clone();
    let node = super::advertise::advertised(bound, advertise_host);
    let url = format!("{scheme}://{node}");
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
