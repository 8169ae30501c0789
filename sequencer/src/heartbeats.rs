//! The deadlines of running heartbeats, kept by the sequencer's clock (API.md §16): a start
//! or a beat sets a key's deadline to now + the timeout and gives it a new heartbeat id; a
//! beat must name the key's current id. A deadline that passes becomes one journaled
//! `HeartbeatsExpired` (the sequencer applies it like a tick). Beats are not journaled: after
//! a restart (or a promotion) every key the engine says runs gets a full timeout from then.
//! A start, a beat or a stop costs O(log n) in the keys running.

use std::collections::{BTreeSet, HashMap};

use ladder_engine::Address;

/// What a gateway asks about a key's heartbeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeartbeatOp {
    /// Start (or restart) them.
    Start,
    /// A beat naming the id of the last answer.
    Beat(String),
    /// Stop them.
    Stop,
}

impl HeartbeatOp {
    /// Whether it is journaled: a start or a stop is; a beat moves a deadline kept in memory
    /// and journals nothing (so it is taken while writes are refused for want of standbys).
    pub fn journals(&self) -> bool {
        !matches!(self, HeartbeatOp::Beat(_))
    }
}

/// A heartbeat request of API key `key_id` of `address`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// The key that signed the request.
    pub key_id: [u8; 16],
    /// Its address.
    pub address: Address,
    /// What it asks.
    pub op: HeartbeatOp,
}

/// The answer to a heartbeat request (carried by its `Completion::Heartbeat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeartbeatAnswer {
    /// Running; the next beat must name this id.
    Beating {
        /// The new heartbeat id.
        heartbeat_id: String,
    },
    /// The beat named another id than the current one and did not count.
    WrongId {
        /// The current id (`None`: the key has no heartbeats running).
        current: Option<String>,
    },
    /// Stopped (nothing cancelled).
    Stopped,
}

/// More heartbeat ids than one process issues (a million a second for eight years): a
/// counter past it was not made by [`HeartbeatTimers::new_id`].
const ISSUED_IDS_MAX: u64 = 1 << 48;

/// How far apart (ten years, in ns) the start times of two processes of one deployment are
/// taken to be at most: a salt farther from this process's was not a start time.
const SALT_SPREAD_MAX_NS: u64 = 10 * 365 * 86_400 * 1_000_000_000;

/// A key whose heartbeats run.
#[derive(Clone, Debug)]
struct Running {
    address: Address,
    deadline_ns: u64,
    id: String,
    /// Re-armed at a start-up or a promotion: the id the client holds was issued by an
    /// earlier process (or the old primary) and is not known here, so its next beat is taken
    /// with any id such a process could have issued.
    rearmed: bool,
}

/// Deadlines of the running heartbeats, by key and in time order.
#[derive(Debug)]
pub(crate) struct HeartbeatTimers {
    timeout_ns: u64,
    by_key: HashMap<[u8; 16], Running>,
    by_deadline: BTreeSet<(u64, [u8; 16])>,
    /// Heartbeat ids are `salt` and a counter as a UUID: unique per process and across
    /// restarts (the salt is the start time), not secret (requests are L2-authenticated).
    salt: u64,
    issued: u64,
}

impl HeartbeatTimers {
    /// Timers with `timeout_ns` between beats; `salt` makes this process's ids its own.
    pub fn new(timeout_ns: u64, salt: u64) -> HeartbeatTimers {
        HeartbeatTimers {
            timeout_ns,
            by_key: HashMap::new(),
            by_deadline: BTreeSet::new(),
            salt,
            issued: 0,
        }
    }

    /// Whether `id` is a heartbeat id another process issued: a UUID of another salt.
    /// Whether `id` is a heartbeat id another process (an earlier run, or the primary this
    /// node took over from) could have issued: a UUID made of another salt (a process's start
    /// time, within [`SALT_SPREAD_MAX_NS`] of this one's) and a counter of issued ids. A UUID
    /// of any other make (a random one) is no such id.
    fn issued_elsewhere(&self, id: &str) -> bool {
        uuid::Uuid::parse_str(id).is_ok_and(|uuid| {
            let (salt, counter) = uuid.as_u64_pair();
            salt != self.salt
                && salt.abs_diff(self.salt) < SALT_SPREAD_MAX_NS
                && (1..ISSUED_IDS_MAX).contains(&counter)
        })
    }

    fn new_id(&mut self) -> String {
        self.issued += 1;
        uuid::Uuid::from_u64_pair(self.salt, self.issued).to_string()
    }

    /// Starts (or restarts) `key`'s heartbeats at `now_ns`; its new id.
    pub fn start(&mut self, key: [u8; 16], address: Address, now_ns: u64) -> String {
        self.remove(&key);
        let id = self.new_id();
        let deadline_ns = now_ns.saturating_add(self.timeout_ns);
        self.by_deadline.insert((deadline_ns, key));
        self.by_key.insert(
            key,
            Running {
                address,
                deadline_ns,
                id: id.clone(),
                rearmed: false,
            },
        );
        id
    }

    /// A beat of `key` naming `id` at `now_ns`: the new id, or (the id is not the current
    /// one, or nothing runs) the current id, and the deadline stays. The first beat after
    /// a re-arm counts with an id issued by another process (a UUID whose salt is not this
    /// process's): the client holds the last id it was given before the restart, which
    /// beats did not journal.
    pub fn beat(
        &mut self,
        key: &[u8; 16],
        id: &str,
        now_ns: u64,
    ) -> Result<String, Option<String>> {
        let address = match self.by_key.get(key) {
            Some(running) if running.id == id || (running.rearmed && self.issued_elsewhere(id)) => {
                running.address
            }
            Some(running) => return Err(Some(running.id.clone())),
            None => return Err(None),
        };
        Ok(self.start(*key, address, now_ns))
    }

    /// Stops `key`'s heartbeats.
    pub fn remove(&mut self, key: &[u8; 16]) {
        if let Some(running) = self.by_key.remove(key) {
            self.by_deadline.remove(&(running.deadline_ns, *key));
        }
    }

    /// The earliest deadline.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.by_deadline.first().map(|(deadline, _)| *deadline)
    }

    /// The keys whose deadline is at or before `now_ns`, earliest first (they stay until
    /// removed).
    pub fn due(&self, now_ns: u64) -> Vec<([u8; 16], Address)> {
        self.by_deadline
            .iter()
            .take_while(|(deadline, _)| *deadline <= now_ns)
            .filter_map(|(_, key)| self.by_key.get(key).map(|r| (*key, r.address)))
            .collect()
    }

    /// Takes the keys whose deadline is at or before `now_ns`, earliest first.
    #[cfg(test)]
    pub fn take_due(&mut self, now_ns: u64) -> Vec<([u8; 16], Address)> {
        let due = self.due(now_ns);
        for (key, _) in &due {
            self.remove(key);
        }
        due
    }

    /// Pushes back, by `by_ns`, every deadline after `after_ns` (at most to a full timeout
    /// from `now_ns`), ids unchanged: answers waited `by_ns` from `after_ns` (a frozen
    /// standby, a stalled disk), and a client waiting for its beat's answer could not beat.
    pub fn postpone(&mut self, after_ns: u64, by_ns: u64, now_ns: u64) {
        let latest_ns = now_ns.saturating_add(self.timeout_ns);
        let moved: Vec<(u64, [u8; 16])> = self
            .by_deadline
            .range((after_ns.saturating_add(1), [0; 16])..)
            .copied()
            .collect();
        for (old, key) in moved {
            let new = old.saturating_add(by_ns).min(latest_ns).max(old);
            if new == old {
                continue;
            }
            self.by_deadline.remove(&(old, key));
            self.by_deadline.insert((new, key));
            if let Some(running) = self.by_key.get_mut(&key) {
                running.deadline_ns = new;
            }
        }
    }

    /// Gives every key in `running` a full timeout from `now_ns` (at start-up and at a
    /// promotion: beats were not journaled, so no deadline survives a restart).
    pub fn arm_all(&mut self, running: Vec<([u8; 16], Address)>, now_ns: u64) {
        for (key, address) in running {
            self.start(key, address, now_ns);
            if let Some(running) = self.by_key.get_mut(&key) {
                running.rearmed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_stall_pushes_back_the_deadlines_after_its_start_by_its_length_at_most_to_a_timeout() {
        let mut timers = HeartbeatTimers::new(10 * SECOND, 1);
        let a = timers.start([1; 16], Address([1; 20]), 0); // due at 10 s
        let _ = timers.start([2; 16], Address([2; 20]), 8 * SECOND); // due at 18 s
        let _ = timers.start([3; 16], Address([3; 20]), 14 * SECOND); // due at 24 s
                                                                      // Answers waited from 9 s to 15 s (6 s): pushed to 16 s, 24 s and, at most a
                                                                      // timeout from 15 s, 25 s.
        timers.postpone(9 * SECOND, 6 * SECOND, 15 * SECOND);
        assert!(timers.due(16 * SECOND - 1).is_empty());
        assert_eq!(timers.due(16 * SECOND).len(), 1);
        assert_eq!(timers.due(24 * SECOND).len(), 2);
        assert_eq!(timers.due(25 * SECOND).len(), 3);
        assert!(
            timers.beat(&[1; 16], &a, 15 * SECOND).is_ok(),
            "the id stays"
        );
        // A deadline before the stall's start stays.
        let mut timers = HeartbeatTimers::new(10 * SECOND, 1);
        let _ = timers.start([1; 16], Address([1; 20]), 0);
        timers.postpone(10 * SECOND, 5 * SECOND, 15 * SECOND);
        assert_eq!(timers.next_deadline_ns(), Some(10 * SECOND));
    }

    #[test]
    fn beats_chain_ids_and_push_the_deadline_and_a_wrong_id_changes_nothing() {
        let mut timers = HeartbeatTimers::new(10 * SECOND, 7);
        let key = [1; 16];
        let address = Address([9; 20]);
        let first = timers.start(key, address, 0);
        assert_eq!(timers.next_deadline_ns(), Some(10 * SECOND));
        assert_eq!(
            timers.beat(&key, "nope", 5 * SECOND),
            Err(Some(first.clone()))
        );
        assert_eq!(
            timers.next_deadline_ns(),
            Some(10 * SECOND),
            "a wrong id does not count"
        );
        let second = timers.beat(&key, &first, 5 * SECOND).unwrap();
        assert_ne!(second, first);
        assert_eq!(timers.next_deadline_ns(), Some(15 * SECOND));
        assert!(timers.take_due(14 * SECOND).is_empty());
        assert_eq!(timers.take_due(15 * SECOND), vec![(key, address)]);
        assert_eq!(
            timers.next_deadline_ns(),
            None,
            "nothing runs after the expiry"
        );
        assert_eq!(
            timers.beat(&key, &second, 16 * SECOND),
            Err(None),
            "expired: nothing runs"
        );
    }

    #[test]
    fn stops_and_restarts_replace_the_deadline_and_due_keys_come_in_time_order() {
        let mut timers = HeartbeatTimers::new(10 * SECOND, 7);
        let (a, b, c) = ([1; 16], [2; 16], [3; 16]);
        timers.start(a, Address([1; 20]), 3 * SECOND);
        timers.start(b, Address([2; 20]), SECOND);
        timers.start(c, Address([3; 20]), 2 * SECOND);
        timers.remove(&c);
        timers.start(b, Address([2; 20]), 4 * SECOND);
        let due: Vec<_> = timers
            .take_due(20 * SECOND)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(due, vec![a, b]);
        timers.arm_all(vec![(a, Address([1; 20]))], 30 * SECOND);
        assert_eq!(timers.next_deadline_ns(), Some(40 * SECOND));
    }

    #[test]
    fn the_first_beat_after_a_rearm_counts_an_id_an_earlier_process_gave_and_later_ones_chain() {
        let mut timers = HeartbeatTimers::new(10 * SECOND, 8);
        let key = [1; 16];
        // The id the client holds from before the restart (salt 7) is unknown here.
        timers.arm_all(vec![(key, Address([1; 20]))], 0);
        let before = uuid::Uuid::from_u64_pair(7, 41).to_string();
        let mine = uuid::Uuid::from_u64_pair(8, 99).to_string();
        let far = uuid::Uuid::from_u64_pair(8 + SALT_SPREAD_MAX_NS, 1).to_string();
        let random = "1b4e28ba-2fa1-41d2-883f-0016d3cca427";
        let no_counter = uuid::Uuid::from_u64_pair(7, 0).to_string();
        for not_issued_elsewhere in [
            "nope",
            mine.as_str(),
            far.as_str(),
            random,
            no_counter.as_str(),
        ] {
            assert!(
                timers.beat(&key, not_issued_elsewhere, SECOND).is_err(),
                "{not_issued_elsewhere}: not an id an earlier process gave"
            );
        }
        let next = timers.beat(&key, &before, SECOND).unwrap();
        assert_eq!(timers.next_deadline_ns(), Some(11 * SECOND));
        assert_eq!(
            timers.beat(&key, &before, 2 * SECOND),
            Err(Some(next.clone())),
            "only the first beat after the re-arm"
        );
        assert!(timers.beat(&key, &next, 3 * SECOND).is_ok());
    }
}
