//! The `/ws/user` dead-man switches across runs (API.md §16). Each gateway loop journals a
//! connection's arming and its end, so the engine knows which armed connections are open.
//! A run that ended without a clean stop (a crash, a power cut, a primary that a standby
//! replaced) ended its connections unseen: the run that writes next cancels for them, once
//! it takes writes. A clean stop (SIGTERM) disarms them first, since a service shutdown is no
//! disconnect.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ladder_engine::{Command, Engine};
use ladder_gateway::server::ServerShared;
use ladder_sequencer::replication::ReplicationHub;
use ladder_sequencer::{Completion, Work};

use super::runtime::Internal;

/// Whether this run has cancelled for the connections earlier runs left armed.
#[derive(Debug, Default)]
pub(super) struct LostSwitches {
    settled: bool,
}

impl LostSwitches {
    /// Run at each turn of the supervisor: while this run takes writes and has not yet done
    /// so, journals one `DeadManSwitchesLost` if the engine holds connections of other runs,
    /// and counts them in `ladder_cancel_on_disconnect_total`. A refusal (too few standbys, a
    /// full journal) is tried again at the next turn; a node that stops writing looks again
    /// when it writes again.
    pub(super) fn settle(&mut self, writes: bool, server: &ServerShared, internal: &mut Internal) {
        if !writes {
            self.settled = false;
            return;
        }
        if self.settled {
            return;
        }
        let process = server.process;
        let lost = match internal.query(move |e: &Engine| e.dead_man_switches_elsewhere(process)) {
            Ok(lost) => lost,
            Err(_) => return,
        };
        if lost == 0 {
            self.settled = true;
            return;
        }
        if let Ok(Completion::Applied { .. }) =
            internal.run(Work::Command(Command::DeadManSwitchesLost { process }))
        {
            server
                .cancels_on_disconnect
                .fetch_add(lost as u64, Ordering::Relaxed);
            tracing::info!(
                connections = lost,
                "cancel-on-disconnect: cancelled for the connections an earlier run left open"
            );
            self.settled = true;
        }
    }
}

/// How long a stop waits for connected standbys to hold its disarming.
const STANDBYS_HOLD_WAIT: Duration = Duration::from_secs(2);

/// A clean stop, once the gateway loops have ended: journals the cancels of connections
/// that ended before the stop and that the loops could not see journaled (a connection that
/// ended is a disconnect, stop or not), then forgets every other armed connection, so that
/// the next run, or a standby that takes over, cancels nothing for them. A cancel refused
/// again (a full disk) keeps its connection armed: the next start cancels for it. Waits a
/// little for connected standbys to hold the record.
pub(super) fn disarm_at_stop(
    internal: &mut Internal,
    server: &ServerShared,
    hub: Option<&ReplicationHub>,
) {
    let process = server.process;
    let mut keep = Vec::new();
    let unfinished = std::mem::take(&mut *server.dead_man_unfinished.lock());
    for (address, connection) in unfinished {
        let tripped = Command::DeadManSwitchTripped {
            process,
            connection,
            address,
        };
        match internal.run(Work::Command(tripped)) {
            Ok(Completion::Applied { .. }) => {
                server.cancels_on_disconnect.fetch_add(1, Ordering::Relaxed);
            }
            // Journaled and applied, only not confirmed (a lost standby, or etcd that took
            // no position): the switch is gone from the engine.
            Ok(Completion::Refused { reason, .. }) if ladder_sequencer::applied_anyway(reason) => {
                server.cancels_on_disconnect.fetch_add(1, Ordering::Relaxed);
            }
            _ => keep.push((process, connection)),
        }
    }
    let armed = internal
        .query(|e: &Engine| e.dead_man_switches_armed())
        .unwrap_or(0);
    if armed == keep.len() {
        return;
    }
    let disarm = Command::DisarmDeadManSwitches { keep };
    let why = match internal.run(Work::Command(disarm)) {
        Ok(Completion::Applied { seq, .. }) => {
            wait_held(hub, seq);
            return;
        }
        Ok(Completion::Refused { reason, .. }) if ladder_sequencer::applied_anyway(reason) => {
            tracing::warn!(
                connections = armed,
                why = reason,
                "cancel-on-disconnect: disarmed at the stop, not confirmed"
            );
            return;
        }
        Ok(Completion::Refused { reason, .. }) => reason.to_string(),
        Ok(_) => "not journaled".to_string(),
        Err(e) => e,
    };
    tracing::warn!(
        connections = armed,
        why,
        "cancel-on-disconnect: not disarmed at the stop; the next start cancels their orders"
    );
}

/// Waits up to [`STANDBYS_HOLD_WAIT`] for the connected standbys to hold record `seq`.
fn wait_held(hub: Option<&ReplicationHub>, seq: u64) {
    let Some(hub) = hub else {
        return;
    };
    let deadline = Instant::now() + STANDBYS_HOLD_WAIT;
    while hub.slowest_ack().is_some_and(|held| held < seq) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}
