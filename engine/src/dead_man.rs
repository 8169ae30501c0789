//! The `/ws/user` connections armed with `cancel_on_disconnect` (API.md §16). The gateway
//! journals each one's arming and its end; the engine holds those still open, so that when
//! the process that held them is gone without a clean stop (a crash, a power cut, a failover)
//! the process serving next finds them and cancels for them (`DeadManSwitchesLost`), while a
//! clean stop disarms them first (`DisarmDeadManSwitches`): a service shutdown does not count
//! as a disconnect.

use crate::engine::Engine;
use crate::reply::{CancelReport, Reply};
use crate::types::Address;

/// A connection: the process that holds it and its number within that process.
pub type ConnectionKey = (u64, u64);

impl Engine {
    /// Records that `connection` of `address` is armed.
    pub(crate) fn arm_dead_man_switch(
        &mut self,
        connection: ConnectionKey,
        address: Address,
    ) -> Reply {
        self.dead_man_switches.insert(connection, address);
        Reply::Ok
    }

    /// `connection` ended: every open order of `address` goes, whether or not its arming was
    /// journaled (a refused arming leaves the switch in the gateway's memory only).
    pub(crate) fn trip_dead_man_switch(
        &mut self,
        connection: ConnectionKey,
        address: &Address,
    ) -> Reply {
        self.dead_man_switches.remove(&connection);
        Reply::Canceled(self.cancel_all(address))
    }

    /// `process` serves now: the connections armed by any other process ended with it, and
    /// each one's address loses its open orders, oldest arming first.
    pub(crate) fn lose_dead_man_switches(&mut self, process: u64) -> Reply {
        let lost: Vec<ConnectionKey> = self
            .dead_man_switches
            .keys()
            .filter(|(holder, _)| *holder != process)
            .copied()
            .collect();
        let mut report = CancelReport::default();
        for connection in lost {
            if let Some(address) = self.dead_man_switches.remove(&connection) {
                report.canceled.extend(self.cancel_all(&address).canceled);
            }
        }
        Reply::Canceled(report)
    }

    /// A clean stop: every arming but those of `keep` is forgotten, nothing cancelled.
    pub(crate) fn disarm_dead_man_switches(&mut self, keep: &[ConnectionKey]) -> Reply {
        self.dead_man_switches
            .retain(|connection, _| keep.contains(connection));
        Reply::Ok
    }

    /// How many armed connections processes other than `process` hold.
    pub fn dead_man_switches_elsewhere(&self, process: u64) -> usize {
        self.dead_man_switches
            .keys()
            .filter(|(holder, _)| *holder != process)
            .count()
    }

    /// How many connections are armed.
    pub fn dead_man_switches_armed(&self) -> usize {
        self.dead_man_switches.len()
    }
}
