//! Promotion: a standby becoming the primary, by an operator (`POST /admin/promote`,
//! SIGUSR1) or by winning the coordinator's lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;
use ladder_engine::Command;
use ladder_gateway::app::{PromoteError, ServiceState};
use ladder_sequencer::replication::ReplicationHub;
use ladder_sequencer::{Completion, Work};
use ladder_settlement::SettlementHandle;

use super::coordinated::Coordination;
use super::replication::FollowerThread;
use super::runtime::Internal;
use crate::cmd::demo;

/// Asks the main loop to promote this standby; answered once done.
pub(super) type PromoteRequest = Sender<Result<(), PromoteError>>;

/// What a promotion changes.
pub(super) struct Promotion<'a> {
    pub(super) follower: &'a mut Option<FollowerThread>,
    pub(super) follower_flag: &'a AtomicBool,
    pub(super) drain: &'a mut Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
    pub(super) internal: &'a mut Internal,
    pub(super) state: &'a ServiceState,
}

/// Turns this standby into the primary: stops following (the last record held is applied),
/// runs `before_writes` (a coordinated node journals its term there), starts settlement and
/// takes writes. `Err` when this is not a standby.
pub(super) fn promote_here(
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
    if let Some((drain_stop, drain_thread)) = promotion.drain.take() {
        drain_stop.store(true, Ordering::Release);
        let _ = drain_thread.join();
    }
    // The node's own work goes through while it is still marked a follower; its timers fire
    // only once it is not, so nothing but the term is journaled before the term is.
    before_writes(promotion.internal)?;
    promotion.follower_flag.store(false, Ordering::Release);
    *settlement = start_settlement(promotion.internal)?;
    promotion.state.standby.store(false, Ordering::Release);
    tracing::info!(last_seq = held, "promoted to primary");
    Ok(())
}

/// A coordinated node won the lease for `term`: it journals the term (and with `demo` the
/// demo market), then takes writes
/// (waiting for `--replicas` standbys from now on). A node that led already (its lease held
/// through an outage of etcd) only takes writes again.
pub(super) fn lead(
    (term, demo): (u64, bool),
    coordination: &Coordination,
    hub: Option<&ReplicationHub>,
    promotion: Promotion<'_>,
    start_settlement: impl FnOnce(&mut Internal) -> Result<Option<SettlementHandle>, String>,
    settlement: &mut Option<SettlementHandle>,
) -> Result<(), String> {
    let begin_term = |internal: &mut Internal| -> Result<(), String> {
        match internal.run(Work::Command(Command::BeginTerm { term }))? {
            // The sequencer gave the hub the term's start as it applied the record.
            Completion::Applied { seq, .. } => {
                coordination.position.term.fetch_max(term, Ordering::AcqRel);
                // `serve --demo` on an empty journal (the term is its first record): the demo
                // market, before any write.
                if demo && seq == 1 {
                    if let Some(reason) = internal.create_demo()? {
                        demo::say_not_created(reason);
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
pub(super) fn ask_coordinator(
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
pub(super) fn answer_promotion(reply: Option<PromoteRequest>, result: Result<(), PromoteError>) {
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
