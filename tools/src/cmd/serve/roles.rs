//! What each role starts once the sequencer runs: a primary settles, serves replication and
//! sets up the demo market; a standby follows its primary (and, coordinated, serves
//! replication too, so that it can lead).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::advertise::advertised;
use crossbeam_channel::Receiver;
use ladder_gateway::keys::KeyTable;
use ladder_sequencer::bell::BellReceiver;
use ladder_sequencer::replication::ReplicationHub;
use ladder_sequencer::{Completion, PublishedBatch};
use ladder_settlement::{PendingBatch, SettlementHandle};

use super::coordinated::Coordination;
use super::replication::{drain_until_promoted, serve_replication, start_follower, FollowerThread};
use super::runtime::{Internal, Producer, SettlementStarter};
use super::Role;
use crate::cmd::demo;

/// The threads a role started.
#[derive(Default)]
pub(super) struct RoleThreads {
    /// A primary's settlement.
    pub(super) settlement: Option<SettlementHandle>,
    /// A standby's follower of its primary.
    pub(super) follower: Option<FollowerThread>,
    /// A standby's drain of the settlement feed (nothing settles on a standby).
    pub(super) drain: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    /// The replication listener, when this node serves replication.
    pub(super) replication: Option<JoinHandle<()>>,
}

/// What starting a role needs.
pub(super) struct RoleStart<'a> {
    /// This run's role.
    pub(super) role: &'a Role,
    /// The replication hub, when this node serves replication.
    pub(super) hub: Option<&'a Arc<ReplicationHub>>,
    /// With `--coordinator`.
    pub(super) coordination: Option<&'a Coordination>,
    /// The data directory.
    pub(super) data_dir: &'a Path,
    /// The API keys (the replication greeting hands the master key to a standby).
    pub(super) keys: &'a Arc<KeyTable>,
    /// Stops the replication listener when the run ends.
    pub(super) replication_stop: &'a Arc<AtomicBool>,
    /// Where clients reach this node, and its scheme (`http` or `https`).
    pub(super) bound: (SocketAddr, &'a str),
    /// `--advertise-host`: stands in for an unspecified IP in the addresses it publishes.
    pub(super) advertise_host: Option<&'a str>,
    /// Whether the data directory was empty (the demo market goes only there).
    pub(super) fresh: bool,
    /// The engine's last sequence and term.
    pub(super) position: (u64, u64),
    /// The batches the engine holds unsettled.
    pub(super) pending: Vec<PendingBatch>,
    /// Starts settlement.
    pub(super) settlement: &'a SettlementStarter<'a>,
    /// The sequencer's event batches for settlement (a standby drains them).
    pub(super) settlement_events: &'a BellReceiver<PublishedBatch>,
    /// The follower's ring into the sequencer and the channel of its answers.
    pub(super) follower: (&'a Producer, &'a Receiver<Completion>),
}

/// Starts what `start.role` runs; the demo set-up goes through `internal`.
pub(super) fn start_role(
    start: RoleStart<'_>,
    internal: &mut Internal,
) -> Result<RoleThreads, String> {
    let mut threads = RoleThreads::default();
    let (bound, scheme) = start.bound;
    let (data_dir, keys, stop) = (start.data_dir, start.keys, start.replication_stop);
    let replicate = |address: &str, hub: &Arc<ReplicationHub>, secret| {
        serve_replication(address, hub, data_dir, keys, secret, stop)
    };
    match start.role {
        Role::Primary {
            demo: want_demo,
            replication_listen,
            secret,
            ..
        } => {
            threads.settlement = Some(start.settlement.start(start.pending)?);
            if let (Some(address), Some(hub)) = (replication_listen, start.hub) {
                let (_, thread) = replicate(address, hub, secret)?;
                threads.replication = Some(thread);
            }
            if *want_demo && start.fresh {
                match internal.create_demo()? {
                    None => demo::print_instructions(&bound),
                    Some(reason) => demo::say_not_created(reason),
                }
            } else if *want_demo {
                tracing::info!("--demo ignored: the data directory already holds state");
            }
        }
        Role::Standby { primary, secret } => {
            threads.drain = Some(drain_until_promoted(start.settlement_events.clone()));
            if let (Some(coordination), Some(hub)) = (start.coordination, start.hub) {
                // Without `--replication-listen` a node may lead, alone: none can follow it.
                let mut replication = String::new();
                let host = start.advertise_host;
                if let Some(address) = &coordination.replication_listen {
                    let (bound, thread) = replicate(address, hub, secret)?;
                    replication = advertised(bound, host);
                    threads.replication = Some(thread);
                }
                coordination
                    .coordinator
                    .advertise(ladder_coordinator::Addresses {
                        url: format!("{scheme}://{}", advertised(bound, host)),
                        replication,
                    });
                primary.set(coordination.leader_replication());
            }
            let (producer, completions) = start.follower;
            threads.follower = Some(start_follower(
                primary,
                secret,
                start.position,
                producer.ring.clone(),
                completions.clone(),
                producer.sink,
                start.keys,
                start.data_dir,
                start.coordination.map(|c| c.position.clone()),
            )?);
        }
    }
    Ok(threads)
}
