//! Which API keys have heartbeats running (the market makers' dead-man switch, API.md §16):
//! starts and stops are journaled commands; when the sequencer finds a key's deadline passed
//! it journals one `HeartbeatsExpired`, which cancels every open order of the key's address
//! and stops that key's heartbeats. The deadlines themselves are the sequencer's (beats are
//! not journaled); the engine holds only which keys run, so that a restart, a standby and
//! `journal state-hash` agree.

use crate::engine::Engine;
use crate::reject::Reject;
use crate::reply::Reply;
use crate::types::Address;

impl Engine {
    /// Starts (or restarts) the heartbeats of API key `key_id` of `address`.
    pub(crate) fn start_heartbeats(&mut self, key_id: [u8; 16], address: Address) -> Reply {
        match self.api_keys.get(&key_id) {
            Some(record) if record.address == address => {
                self.heartbeats.insert(key_id, address);
                Reply::Ok
            }
            _ => Reply::Rejected(Reject::UnknownApiKey),
        }
    }

    /// Stops the heartbeats of `key_id`; cancels nothing.
    pub(crate) fn stop_heartbeats(&mut self, key_id: &[u8; 16]) -> Reply {
        self.heartbeats.remove(key_id);
        Reply::Ok
    }

    /// A key's heartbeats ran out: every open order of `address` is cancelled and the key's
    /// heartbeats stop. Nothing happens when they were stopped meanwhile.
    pub(crate) fn expire_heartbeats(&mut self, key_id: &[u8; 16], address: &Address) -> Reply {
        if self.heartbeats.remove(key_id).is_none() {
            return Reply::Canceled(Default::default());
        }
        Reply::Canceled(self.cancel_all(address))
    }

    /// Whether `key_id` has heartbeats running.
    pub fn heartbeats_running(&self, key_id: &[u8; 16]) -> bool {
        self.heartbeats.contains_key(key_id)
    }

    /// How many keys have heartbeats running (a deleted key's stop at once).
    pub fn heartbeat_count(&self) -> usize {
        self.heartbeats.len()
    }

    /// Every key with heartbeats running, and its address, by key id.
    pub fn running_heartbeats(&self) -> Vec<([u8; 16], Address)> {
        self.heartbeats.iter().map(|(k, a)| (*k, *a)).collect()
    }
}
