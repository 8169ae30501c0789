//! What the sequencer and the replication threads share: the last sequence written to the
//! journal (records up to it may be shipped), and how far each connected standby has
//! acknowledged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct HubState {
    written: u64,
    acks: HashMap<u64, u64>,
    /// When a standby last acknowledged more than it held.
    acked_more_at: Option<Instant>,
    /// Set as the run stops: the longest a wait goes on without a standby acknowledging
    /// more, and since when (see [`ReplicationHub::stop_waiting`]).
    stopping: Option<(Instant, Duration)>,
    /// Whether the log said a stopping run gave up on its standbys.
    gave_up_told: bool,
    next_id: u64,
    /// Standbys still in their handshake: the last sequence each holds (retention keeps
    /// what they need next before they are registered).
    pins: HashMap<u64, u64>,
}

/// How often a wait for acknowledgements looks again without being woken (every change
/// wakes it; this only bounds a missed wake-up).
const HELD_RECHECK: Duration = Duration::from_millis(100);

/// Keeps a standby's next records in the journal during its handshake; dropped after.
#[derive(Debug)]
pub struct HandshakePin<'a> {
    hub: &'a ReplicationHub,
    id: u64,
}

impl Drop for HandshakePin<'_> {
    fn drop(&mut self) {
        self.hub.lock().pins.remove(&self.id);
    }
}

/// Written and acknowledged sequences.
#[derive(Debug)]
pub struct ReplicationHub {
    required: AtomicUsize,
    state: Mutex<HubState>,
    changed: Condvar,
    refused_links: AtomicU64,
    term_start: AtomicU64,
}

impl ReplicationHub {
    /// A hub for which `required` standbys must hold each batch before it is answered;
    /// the journal holds records up to `written`.
    pub fn new(required: usize, written: u64) -> ReplicationHub {
        ReplicationHub {
            required: AtomicUsize::new(required),
            state: Mutex::new(HubState {
                written,
                ..HubState::default()
            }),
            changed: Condvar::new(),
            refused_links: AtomicU64::new(0),
            term_start: AtomicU64::new(0),
        }
    }

    /// The run stops: from now on a wait for the standbys ends, not held, once none has
    /// acknowledged more for `patience` (a standby frozen while connected would hold the
    /// stop for ever). A standby that keeps acknowledging, however slowly, is waited for.
    /// What it lacks is then answered as not confirmed (`replica lost`); its records stay in
    /// the primary's journal.
    pub fn stop_waiting(&self, patience: Duration) {
        let mut state = self.lock();
        state.stopping = Some((Instant::now(), patience));
        self.changed.notify_all();
    }

    /// A connection to the replication port was closed unanswered: it did not prove it holds
    /// the secret, or came past the handshake limits.
    pub fn count_refused_link(&self) {
        self.refused_links.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections to the replication port closed unanswered so far.
    pub fn refused_links(&self) -> u64 {
        self.refused_links.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Standbys that must hold a batch before it is answered.
    pub fn required(&self) -> usize {
        self.required.load(Ordering::Acquire)
    }

    /// Sets how many standbys must hold a batch: a coordinated node requires none while it
    /// follows and `--replicas` once it leads.
    pub fn set_required(&self, required: usize) {
        self.required.store(required, Ordering::Release);
        self.changed.notify_all();
    }

    /// The sequence of the record that began this primary's term (0: none): a standby that
    /// holds other records from there on wrote them under an older leader, and is told to cut
    /// them (CONTRACT 22).
    pub fn term_start(&self) -> u64 {
        self.term_start.load(Ordering::Acquire)
    }

    /// Records where this primary's term began.
    pub fn set_term_start(&self, seq: u64) {
        self.term_start.store(seq, Ordering::Release);
    }

    /// Standbys connected now.
    pub fn connected(&self) -> usize {
        self.lock().acks.len()
    }

    /// The sequencer wrote every record up to `seq` into the journal (its flush may still be
    /// under way): standbys may be sent them. Shipping before the local flush overlaps the
    /// standby's flush with the primary's; nothing is answered before both (every state
    /// change is journaled before it is acknowledged).
    pub fn written(&self, seq: u64) {
        let mut state = self.lock();
        if seq > state.written {
            state.written = seq;
            self.changed.notify_all();
        }
    }

    /// The last sequence written to the journal.
    pub fn last_written(&self) -> u64 {
        self.lock().written
    }

    /// Waits until something after `seq` is written (or `timeout`); returns the written sequence.
    pub fn wait_written_after(&self, seq: u64, timeout: Duration) -> u64 {
        let state = self.lock();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |s| s.written <= seq)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.written
    }

    /// A standby connected: its id.
    pub fn register(&self, from_seq: u64) -> u64 {
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.acks.insert(id, from_seq.saturating_sub(1));
        self.changed.notify_all();
        id
    }

    /// A standby disconnected.
    pub fn unregister(&self, id: u64) {
        self.lock().acks.remove(&id);
        self.changed.notify_all();
    }

    /// The lowest sequence the connected standbys (and those still in their handshake) have
    /// all acknowledged (`None` without one): the journal keeps every record after it.
    pub fn slowest_ack(&self) -> Option<u64> {
        let state = self.lock();
        state
            .acks
            .values()
            .chain(state.pins.values())
            .copied()
            .min()
    }

    /// Keeps the records after `held` in the journal while the returned guard lives (a
    /// standby's handshake, before it is registered).
    pub fn pin(&self, held: u64) -> HandshakePin<'_> {
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.pins.insert(id, held);
        HandshakePin { hub: self, id }
    }

    /// Standby `id` holds everything up to `seq`.
    pub fn ack(&self, id: u64, seq: u64) {
        let mut state = self.lock();
        if let Some(acked) = state.acks.get_mut(&id) {
            if seq > *acked {
                *acked = seq;
                state.acked_more_at = Some(Instant::now());
            }
        }
        self.changed.notify_all();
    }

    /// The last sequence `count` connected standbys all hold now (`None` for 0, or when fewer
    /// are connected).
    pub fn held_by_standbys(&self, count: usize) -> Option<u64> {
        if count == 0 {
            return None;
        }
        let mut acks: Vec<u64> = self.lock().acks.values().copied().collect();
        if acks.len() < count {
            return None;
        }
        acks.sort_unstable_by(|a, b| b.cmp(a));
        Some(acks[count - 1])
    }

    /// Whether `required` standbys hold `seq` now (without waiting).
    pub fn holds(&self, seq: u64) -> bool {
        let required = self.required();
        required == 0 || self.lock().acks.values().filter(|&&a| a >= seq).count() >= required
    }

    /// Waits until `required` standbys hold `seq` (true), for as long as that many stay
    /// connected, however slow they are; false as soon as fewer are connected.
    pub fn wait_held(&self, seq: u64) -> bool {
        if self.required() == 0 {
            return true;
        }
        let mut state = self.lock();
        loop {
            let required = self.required();
            if state.acks.values().filter(|&&a| a >= seq).count() >= required {
                return true;
            }
            if state.acks.len() < required || gave_up_at_stop(&mut state) {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, HELD_RECHECK)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }
}

/// Whether a stopping run's wait ends here: no standby acknowledged more for the stop's
/// patience (counted from the stop, or from the last acknowledgement after it).
fn gave_up_at_stop(state: &mut HubState) -> bool {
    let Some((since, patience)) = state.stopping else {
        return false;
    };
    let progress = state.acked_more_at.map_or(since, |at| at.max(since));
    let gave_up = progress.elapsed() >= patience;
    if gave_up && !std::mem::replace(&mut state.gave_up_told, true) {
        tracing::warn!(
            "stopping: no standby acknowledged more for {patience:?}; what they lack is \
             answered replica lost"
        );
    }
    gave_up
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holding_is_told_without_waiting() {
        let hub = ReplicationHub::new(1, 0);
        assert!(!hub.holds(1), "no standby holds anything");
        let id = hub.register(1);
        hub.ack(id, 4);
        assert!(hub.holds(4));
        assert!(!hub.holds(5), "not yet acknowledged");
        hub.unregister(id);
        assert!(!hub.holds(4), "gone with its standby");
        assert!(ReplicationHub::new(0, 0).holds(9), "none required");
    }

    #[test]
    fn a_stopping_run_waits_for_a_standby_while_it_acknowledges_more_and_no_longer() {
        let hub = std::sync::Arc::new(ReplicationHub::new(1, 0));
        let id = hub.register(1);
        hub.ack(id, 4);
        hub.stop_waiting(Duration::from_millis(300));
        let waiter = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.wait_held(8))
        };
        // A slow standby that keeps acknowledging is waited for past the patience.
        for seq in 5..=7 {
            std::thread::sleep(Duration::from_millis(200));
            hub.ack(id, seq);
        }
        assert!(!waiter.is_finished(), "still acknowledging: waited for");
        // It stops acknowledging: the wait ends, not held.
        let stopped = Instant::now();
        assert!(!waiter.join().unwrap(), "not held: answered as lost");
        assert!(stopped.elapsed() >= Duration::from_millis(150));
        assert!(hub.wait_held(7), "what it holds is still held");
    }

    #[test]
    fn answers_wait_for_the_required_acknowledgements() {
        let hub = std::sync::Arc::new(ReplicationHub::new(1, 0));
        assert!(!hub.wait_held(5), "no standby: lost at once");
        let id = hub.register(1);
        hub.ack(id, 4);
        // A connected standby that has not reached 5 is waited for, however long.
        let waiter = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.wait_held(5))
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !waiter.is_finished(),
            "still waiting while the standby is connected"
        );
        hub.ack(id, 5);
        assert!(waiter.join().unwrap());
        // A standby that leaves before holding it: the wait ends, not held.
        let waiter = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.wait_held(6))
        };
        std::thread::sleep(Duration::from_millis(50));
        hub.unregister(id);
        assert!(!waiter.join().unwrap());
        let id = hub.register(6);
        hub.ack(id, 6);
        hub.unregister(id);
        assert_eq!(hub.connected(), 0);
        hub.written(9);
        hub.written(7);
        assert_eq!(hub.wait_written_after(3, Duration::from_millis(1)), 9);
        assert_eq!(hub.wait_written_after(9, Duration::from_millis(1)), 9);
    }

    #[test]
    fn the_slowest_standby_or_handshake_holds_the_journal_back() {
        let hub = ReplicationHub::new(0, 100);
        assert_eq!(hub.slowest_ack(), None);
        let a = hub.register(51);
        hub.ack(a, 80);
        assert_eq!(hub.slowest_ack(), Some(80));
        let pin = hub.pin(30);
        assert_eq!(
            hub.slowest_ack(),
            Some(30),
            "a standby still in its handshake"
        );
        drop(pin);
        assert_eq!(hub.slowest_ack(), Some(80));
        hub.unregister(a);
        assert_eq!(hub.slowest_ack(), None);
    }
}
