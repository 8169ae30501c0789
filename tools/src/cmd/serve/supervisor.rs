//! The main loop of a run: answers operators (snapshots, promotions, signals), follows the
//! coordinator's changes, and keeps house (`ForgetHistory`, redemptions) until asked to
//! stop or until the node must run again in another role.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use ladder_coordinator::Change;
use ladder_gateway::app::{PromoteError, ServiceState};
use ladder_history::Historian;
use ladder_sequencer::replication::client::FollowTarget;
use ladder_sequencer::replication::server::{self, JournalEnd};
use ladder_sequencer::replication::ReplicationHub;
use ladder_sequencer::SequencerStats;
use ladder_settlement::SettlementHandle;

use super::coordinated::Coordination;
use super::dead_man::LostSwitches;
use super::promotion::{
    answer_promotion, ask_coordinator, lead, promote_here, PromoteRequest, Promotion,
};
use super::replication::{refused_by_primary, FollowerThread};
use super::runtime::{Forgetting, Internal, SettlementStarter};
use super::{Signals, SnapshotRequest};
use crate::cmd::ahead::Ahead;
use crate::cmd::redemption_watch::RedemptionWatch;

/// How long the loop waits for a request before it keeps house again.
const LOOP_TICK: Duration = Duration::from_millis(100);

/// Why the main loop ended.
pub(super) enum LoopEnd {
    /// Asked to stop (SIGINT, SIGTERM).
    Stopped,
    /// The primary's journal no longer holds the record this standby needs next.
    Behind,
    /// This standby holds records past the primary's journal's end.
    Ahead(JournalEnd),
    /// Another node leads: run again as its standby.
    Rejoin,
    /// The primary refused this standby for good.
    Failed(String),
}

/// What the loop reads and never changes.
pub(super) struct Context<'a> {
    /// Shared with the gateway threads (standby flag, leader).
    pub(super) state: &'a ServiceState,
    /// With `--coordinator`.
    pub(super) coordination: Option<&'a Coordination>,
    /// The replication hub, when this node serves replication.
    pub(super) hub: Option<&'a ReplicationHub>,
    /// The history store's writer: how far it holds the journal.
    pub(super) historian: &'a Historian,
    /// The sequencer's counters.
    pub(super) stats: &'a SequencerStats,
    /// Starts settlement on a promotion.
    pub(super) settlement: &'a SettlementStarter<'a>,
    /// Whether the sequencer follows (refuses clients' writes).
    pub(super) follower_flag: &'a AtomicBool,
    /// The process's signal flags.
    pub(super) signals: &'a Signals,
    /// `POST /admin/promote`.
    pub(super) promotions: &'a Receiver<PromoteRequest>,
    /// `POST /admin/snapshot`.
    pub(super) snapshots: &'a Receiver<SnapshotRequest>,
    /// Snapshots kept (`--keep-snapshots`).
    pub(super) keep_snapshots: usize,
    /// The data directory.
    pub(super) data_dir: &'a std::path::Path,
    /// Shared with the gateway loops (this run's id, the cancel-on-disconnect count).
    pub(super) server: &'a ladder_gateway::server::ServerShared,
}

/// What the loop owns and changes.
pub(super) struct Supervisor<'a> {
    context: Context<'a>,
    /// The runtime's ring into the sequencer.
    pub(super) internal: Internal,
    /// A standby's follower of its primary.
    pub(super) follower: Option<FollowerThread>,
    /// A standby's drain of the settlement feed.
    pub(super) drain: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
    /// A primary's settlement thread.
    pub(super) settlement: Option<SettlementHandle>,
    /// With `--rpc-url`: redemptions seen on the chain.
    redemption_watch: Option<RedemptionWatch>,
    /// A standby's primary, which the coordinator may change.
    follow_target: Option<FollowTarget>,
    forgetting: Forgetting,
    /// An operator's promotion of a coordinated node: answered once it wins or loses.
    promotion_asked: Option<(PromoteRequest, Instant)>,
    /// The dead-man switches earlier runs left armed.
    lost_switches: LostSwitches,
    /// Since when this node has led with `--replicas 0` and no standby connected.
    alone_since: Option<Instant>,
}

impl<'a> Supervisor<'a> {
    /// A supervisor of what the run started.
    pub(super) fn new(
        context: Context<'a>,
        (mut internal, lost_switches): (Internal, LostSwitches),
        roles: super::roles::RoleThreads,
        redemption_watch: Option<RedemptionWatch>,
        follow_target: Option<FollowTarget>,
        started_at_seq: u64,
    ) -> Supervisor<'a> {
        // Its turns' waits for the sequencer end at SIGTERM (see `Internal::interrupt`).
        internal.interrupt = Some(context.signals.stop.clone());
        Supervisor {
            context,
            internal,
            follower: roles.follower,
            drain: roles.drain,
            settlement: roles.settlement,
            redemption_watch,
            follow_target,
            forgetting: Forgetting::after_start_at(started_at_seq),
            promotion_asked: None,
            lost_switches,
            alone_since: None,
        }
    }

    /// The runtime's ring, for what the run does after the loop (a clean stop's records).
    pub(super) fn into_internal(self) -> Internal {
        let mut internal = self.internal;
        // The stop's own records are waited for.
        internal.interrupt = None;
        internal
    }

    /// Runs until the node stops or must run again in another role.
    pub(super) fn run(&mut self) -> LoopEnd {
        let changes = self
            .context
            .coordination
            .map_or_else(crossbeam_channel::never, |c| {
                c.coordinator.changes().clone()
            });
        while !self.context.signals.stop.load(Ordering::Acquire) {
            if let Some(end) = self.refused_by_primary() {
                return end;
            }
            let (mut promotion, mut snapshot, mut change) = (None, None, None);
            crossbeam_channel::select! {
                recv(self.context.promotions) -> request => promotion = request.ok().map(Some),
                recv(self.context.snapshots) -> request => snapshot = request.ok().map(Some),
                recv(changes) -> next => change = next.ok(),
                default(LOOP_TICK) => {}
            }
            if let Some(coordination) = self.context.coordination {
                let held = self.context.stats.last_seq.load(Ordering::Acquire);
                coordination.position.held.store(held, Ordering::Release);
                self.raise_acknowledged(coordination);
            }
            // SIGUSR2 writes a snapshot now (as `ladder snapshot`), SIGUSR1 promotes a standby
            // (as `ladder promote`): for operators with a process manager, not the token.
            if self.context.signals.snapshot.swap(false, Ordering::AcqRel) {
                snapshot = snapshot.or(Some(None));
            }
            if self.context.signals.promote.swap(false, Ordering::AcqRel) {
                promotion = promotion.or(Some(None));
            }
            if let Some(reply) = snapshot {
                self.snapshot(reply);
            }
            if let Some(reply) = promotion {
                self.promote(reply);
            }
            if let Some(change) = change {
                if let Some(end) = self.follow(change) {
                    return end;
                }
            }
            self.expire_promotion();
            self.keep_house();
        }
        LoopEnd::Stopped
    }

    /// The end of a standby whose primary refused it (its follower thread ended).
    fn refused_by_primary(&mut self) -> Option<LoopEnd> {
        let why = refused_by_primary(&mut self.follower)?;
        Some(if why.starts_with(server::BEHIND_JOURNAL) {
            LoopEnd::Behind
        } else if let Some(end) = JournalEnd::of_refusal(&why) {
            // A cut that would be refused ends the run as a failure (its clients are told the
            // service stops, not to connect again).
            let (ahead, refused) = match self.context.coordination {
                Some(_) => (Ahead::OlderTerm, "the leader refused replication"),
                None => (Ahead::LostFlush, "standby: the primary refused replication"),
            };
            let held = self.context.stats.last_seq.load(Ordering::Acquire);
            match crate::cmd::ahead::plan_cut(self.context.data_dir, held, &end, ahead) {
                Ok(_) => LoopEnd::Ahead(end),
                Err(why) => LoopEnd::Failed(format!("{refused}: {why}")),
            }
        } else {
            LoopEnd::Failed(format!("standby: the primary refused replication: {why}"))
        })
    }

    /// Writes a snapshot now; answers the admin call, if one asked.
    fn snapshot(&mut self, reply: Option<SnapshotRequest>) {
        let taken = self.internal.snapshot(
            self.context.data_dir,
            self.context.keep_snapshots,
            self.context.historian.snapshot_needed_through(),
        );
        if let Err(e) = &taken {
            tracing::warn!(error = %e, "snapshot failed");
        }
        if let Some(reply) = reply {
            let _ = reply.send(taken);
        }
    }

    /// What a promotion changes, borrowed from this supervisor, with the settlement thread it
    /// starts and what starts it.
    fn promotion(
        &mut self,
    ) -> (
        Promotion<'_>,
        &mut Option<SettlementHandle>,
        &'a SettlementStarter<'a>,
    ) {
        let promotion = Promotion {
            follower: &mut self.follower,
            follower_flag: self.context.follower_flag,
            drain: &mut self.drain,
            internal: &mut self.internal,
            state: self.context.state,
        };
        (promotion, &mut self.settlement, self.context.settlement)
    }

    /// An operator's promotion: at once for an uncoordinated standby; by election for a
    /// coordinated node (answered when it wins, loses or times out).
    fn promote(&mut self, reply: Option<PromoteRequest>) {
        match self.context.coordination {
            Some(coordination) => {
                self.promotion_asked =
                    ask_coordinator(coordination, reply).or(self.promotion_asked.take());
            }
            None => {
                let (promotion, settlement, starter) = self.promotion();
                let result = promote_here(
                    promotion,
                    |_| Ok(()),
                    |internal: &mut Internal| starter.start_promoted(internal),
                    settlement,
                );
                answer_promotion(reply, result.map_err(PromoteError::Failed));
            }
        }
    }

    /// A change the coordinator saw: this node leads, lost the lead, or follows another.
    fn follow(&mut self, change: Change) -> Option<LoopEnd> {
        let coordination = self.context.coordination?;
        match change {
            Change::Lead { term } => {
                let hub = self.context.hub;
                let (promotion, settlement, starter) = self.promotion();
                let led = lead(
                    (term, coordination.demo),
                    coordination,
                    hub,
                    promotion,
                    |internal: &mut Internal| starter.start_promoted(internal),
                    settlement,
                );
                let failed = led.is_err();
                if let Err(e) = &led {
                    tracing::error!(error = %e, term, "could not take the lead: giving it up");
                }
                if let Some((reply, _)) = self.promotion_asked.take() {
                    answer_promotion(Some(reply), led.map_err(PromoteError::Failed));
                }
                if failed {
                    // Holding the lease without taking writes would stall the cluster: the
                    // lease goes back, and this node starts again as a standby of whoever
                    // leads next (its follower may already be stopped). Nothing is written
                    // meanwhile: the fence closes now, not at the coordinator's next tick.
                    coordination.fence.allow_until(None);
                    self.context.follower_flag.store(true, Ordering::Release);
                    coordination.coordinator.resign(term);
                    return Some(LoopEnd::Rejoin);
                }
            }
            Change::Demoted => {
                // The fence is already closed: nothing applied from now is acknowledged.
                self.context.state.standby.store(true, Ordering::Release);
                self.context.follower_flag.store(true, Ordering::Release);
                tracing::warn!("lost the lead: writes refused until the next leader is known");
            }
            Change::Follow(leader) => match (&self.follow_target, self.follower.is_some()) {
                (Some(target), true) => {
                    tracing::info!(leader = %leader.node_id, term = leader.term, "following the leader");
                    target.set(Some(leader.replication));
                }
                _ => {
                    tracing::warn!(leader = %leader.node_id, term = leader.term, "another node leads: rejoining as its standby");
                    return Some(LoopEnd::Rejoin);
                }
            },
        }
        None
    }

    /// While this node leads and may acknowledge: what its standbys hold of its term, for the
    /// coordinator to publish (CONTRACT 22: no node holding less runs for leader by itself).
    /// Only records a standby holds count, and only once a standby holds the term's first
    /// record, so that a successor always exists among the standbys.
    fn raise_acknowledged(&mut self, coordination: &Coordination) {
        let leading = !self.context.follower_flag.load(Ordering::Acquire)
            && !self.context.state.standby.load(Ordering::Acquire)
            && coordination.fence.may_acknowledge();
        let Some(hub) = self.context.hub.filter(|_| leading) else {
            self.alone_since = None;
            return;
        };
        // With `--replicas 0` and no standby for two leases (a single node, not a takeover
        // whose standbys are still connecting), what it answered is held by it alone: no
        // node that joins empty may lead over it.
        let alone = hub.required() == 0 && hub.connected() == 0;
        let alone_since = if alone {
            *self.alone_since.get_or_insert_with(Instant::now)
        } else {
            self.alone_since = None;
            Instant::now()
        };
        let held = match hub.held_by_standbys(hub.required().max(1)) {
            Some(held) if held >= hub.term_start() => held,
            _ if alone && alone_since.elapsed() >= coordination.coordinator.config().lease * 2 => {
                self.context.stats.last_seq.load(Ordering::Acquire)
            }
            _ => return,
        };
        let term = coordination.position.term.load(Ordering::Acquire);
        coordination
            .position
            .acknowledged
            .raise(ladder_coordinator::AcknowledgedRecord { term, seq: held });
    }

    /// Refuses an operator's promotion that was not elected within its deadline.
    fn expire_promotion(&mut self) {
        if let Some((reply, deadline)) = self.promotion_asked.take() {
            if Instant::now() < deadline {
                self.promotion_asked = Some((reply, deadline));
            } else {
                answer_promotion(
                    Some(reply),
                    Err(PromoteError::Conflict(
                        "not elected within 3 leases (another node won, or etcd is unreachable)"
                            .into(),
                    )),
                );
            }
        }
    }

    /// What the history store holds leaves the engine (a primary's decision, journaled; a
    /// standby forgets as its primary's journal says), and redemptions seen on the chain are
    /// journaled. Not while the journal is full: the records would take room kept for
    /// cancels.
    fn keep_house(&mut self) {
        let primary = !self.context.follower_flag.load(Ordering::Acquire);
        let journal_full = self.context.stats.journal_full.load(Ordering::Relaxed);
        if primary && !journal_full {
            self.forgetting
                .when_due(self.context.historian.stored_through(), &mut self.internal);
        }
        if let Some(watch) = self.redemption_watch.as_mut() {
            let internal = &mut self.internal;
            watch.tick(primary && !journal_full, |work| internal.run(work));
        }
        let writes = primary && !self.context.state.standby.load(Ordering::Acquire);
        self.lost_switches
            .settle(writes, self.context.server, &mut self.internal);
    }

    /// Stops a standby's follower (the run is ending).
    pub(super) fn stop_follower(&mut self) {
        if let Some((follow_stop, thread)) = self.follower.take() {
            follow_stop.store(true, Ordering::Release);
            let _ = thread.join();
        }
    }
}
