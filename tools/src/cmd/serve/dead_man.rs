//! The `/ws/user` dead-man switches across runs (API.md §16). Each gateway loop journals a
//! connection's arming and its end, so the engine knows which armed connections are open.
//! A run that ended without a clean stop (a crash, a power cut, a primary that a standby
//! replaced) ended its connections unseen: the run that writes next cancels for them, once
//! it takes writes. A clean stop (SIGTERM) disarms them first, since a service shutdown is no
//! disconnect.

use std::sync::atomic::Ordering;

use ladder_engine::{Command, Engine};
use ladder_gateway::server::ServerShared;
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

/// A clean stop: forgets every armed connection (journaled), so that the next run cancels
/// nothing for them. When the journal refuses it (a full disk), the next run cancels for
/// them as after a crash; that is logged.
pub(super) fn disarm_at_stop(internal: &mut Internal) {
    let armed = internal
        .query(|e: &Engine| e.dead_man_switches_armed())
        .unwrap_or(0);
    if armed == 0 {
        return;
    }
    let why = match internal.run(Work::Command(Command::DisarmDeadManSwitches)) {
        Ok(Completion::Applied { .. }) => return,
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
