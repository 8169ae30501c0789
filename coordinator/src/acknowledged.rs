//! How far the cluster holds its records for good (`/ladder/<cluster>/acknowledged`), and
//! the thread that publishes it. A leader publishes it **before** it answers the writes it
//! names: once a client holds an answer, etcd names a position that only the nodes holding
//! the write reach, so a node that missed it never leads by itself, even when the leader and
//! every standby that held the write fail together a moment after the answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::etcd::Etcd;
use crate::records::{AcknowledgedRecord, Keys};

/// How long a writer waits between two looks at whether it should give up.
const GIVE_UP_RECHECK: Duration = Duration::from_millis(5);
/// How long the publisher waits before it tries etcd again after a failed put, at first;
/// doubled at each failure in a row up to the tick.
const RETRY_AFTER: Duration = Duration::from_millis(10);

/// The acknowledged position this node wants published and the one etcd holds.
#[derive(Debug, Default)]
pub struct Acknowledgements {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The term this node leads and the lease holding its leader key (`None`: not leading).
    lead: Option<(u64, i64)>,
    /// The newest position asked for.
    wanted: AcknowledgedRecord,
    /// The newest position etcd holds from this node.
    published: AcknowledgedRecord,
    /// The publisher stops.
    stopping: bool,
    /// Whether the publisher's last put failed (etcd did not answer, or the lead is gone).
    failing: bool,
    /// Failed puts so far.
    failures: u64,
}

impl Acknowledgements {
    /// Asks for `record` to be published, without waiting (ignored unless this node leads
    /// `record.term`).
    pub fn raise(&self, record: AcknowledgedRecord) {
        let mut state = self.state.lock();
        if state.lead.is_some_and(|(term, _)| term == record.term) {
            self.want(&mut state, record);
        }
    }

    /// Raises the wanted position to `record` (of the term led), waking the publisher.
    fn want(&self, state: &mut State, record: AcknowledgedRecord) {
        if record > state.wanted {
            state.wanted = record;
            self.changed.notify_all();
        }
    }

    /// The standbys this node needs hold every record through `seq` of the term it leads:
    /// publishes that and waits until etcd holds it (true), or until this node no longer
    /// leads, a put fails, or `give_up` says so (false: the writes may not be answered as
    /// acknowledged). While etcd does not answer, it is false at once: the releaser must not
    /// hold the answers (and the reads behind them) for the rest of the lease.
    pub fn witness(&self, seq: u64, give_up: &dyn Fn() -> bool) -> bool {
        let mut state = self.state.lock();
        let Some((term, _)) = state.lead else {
            return false;
        };
        let record = AcknowledgedRecord { term, seq };
        self.want(&mut state, record);
        let failures = state.failures;
        loop {
            if state.published >= record {
                return true;
            }
            if state.lead.map(|(t, _)| t) != Some(term)
                || state.stopping
                || state.failing
                || state.failures != failures
                || give_up()
            {
                return false;
            }
            self.changed.wait_for(&mut state, GIVE_UP_RECHECK);
        }
    }

    /// Whether etcd holds every record through `seq` of the term this node leads, without
    /// waiting; asks for it to be published when not.
    pub fn holds(&self, seq: u64) -> bool {
        let mut state = self.state.lock();
        let Some((term, _)) = state.lead else {
            return false;
        };
        let record = AcknowledgedRecord { term, seq };
        if state.published >= record {
            return true;
        }
        self.want(&mut state, record);
        false
    }

    /// Whether the last put for the term this node leads failed: writes that would wait for
    /// it are refused before they are applied until a put succeeds.
    pub fn failing(&self) -> bool {
        self.state.lock().failing
    }

    /// This node leads `term` under lease `lease`, or (`None`) no longer leads; a new lead
    /// starts with no failure.
    pub(crate) fn set_lead(&self, lead: Option<(u64, i64)>) {
        let mut state = self.state.lock();
        state.lead = lead;
        state.failing = false;
        self.changed.notify_all();
    }

    /// The next position to publish and the lease that must hold the leader's key meanwhile,
    /// waiting up to `patience` for one (`None`: nothing to do, or stopping).
    fn next(&self, patience: Duration) -> Option<(AcknowledgedRecord, i64)> {
        let mut state = self.state.lock();
        let due = |state: &State| match state.lead {
            Some((term, lease)) if state.wanted.term == term && state.wanted > state.published => {
                Some((state.wanted, lease))
            }
            _ => None,
        };
        if state.stopping {
            return None;
        }
        if let Some(due) = due(&state) {
            return Some(due);
        }
        self.changed.wait_for(&mut state, patience);
        if state.stopping {
            return None;
        }
        due(&state)
    }

    /// etcd holds `record`.
    fn published(&self, record: AcknowledgedRecord) {
        let mut state = self.state.lock();
        if record > state.published {
            state.published = record;
        }
        state.failing = false;
        self.changed.notify_all();
    }

    /// A put of `record` failed: the writers waiting give up (unless the lead changed
    /// meanwhile). Whether this begins a run of failures.
    fn failed(&self, record: AcknowledgedRecord) -> bool {
        let mut state = self.state.lock();
        if state.lead.map(|(term, _)| term) != Some(record.term) {
            return false;
        }
        let began = !state.failing;
        state.failing = true;
        state.failures += 1;
        self.changed.notify_all();
        began
    }

    /// Waits `pause` (less when this node's lead changes or the publisher stops).
    fn rest(&self, pause: Duration) {
        let mut state = self.state.lock();
        if !state.stopping {
            self.changed.wait_for(&mut state, pause);
        }
    }

    fn stop(&self) {
        self.state.lock().stopping = true;
        self.changed.notify_all();
    }
}

/// The thread that puts the wanted position in etcd, in one transaction that succeeds only
/// while this node's lease holds the leader's key (a deposed leader never overwrites its
/// successor's position).
pub(crate) struct Publisher {
    acknowledgements: Arc<Acknowledgements>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Starts publishing `acknowledgements` on `keys.acknowledged` through `etcd`.
    pub(crate) fn start(
        etcd: Etcd,
        keys: Keys,
        acknowledgements: Arc<Acknowledgements>,
        patience: Duration,
    ) -> Result<Publisher, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, shared) = (stop.clone(), acknowledgements.clone());
        let thread = std::thread::Builder::new()
            .name("acknowledged".into())
            .spawn(move || publish(&etcd, &keys, &shared, &flag, patience))
            .map_err(|e| format!("acknowledged publisher thread: {e}"))?;
        Ok(Publisher {
            acknowledgements,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.acknowledgements.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The publisher's loop: puts each wanted position; after a failure, tries again after a
/// pause that doubles up to `patience`, saying once that etcd does not take it and once that
/// it does again.
fn publish(
    etcd: &Etcd,
    keys: &Keys,
    shared: &Acknowledgements,
    stop: &AtomicBool,
    patience: Duration,
) {
    let mut pause = RETRY_AFTER;
    let mut failing = false;
    while !stop.load(Ordering::Acquire) {
        let Some((record, lease)) = shared.next(patience) else {
            continue;
        };
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        let why =
            match etcd.put_while_lease_holds((&keys.acknowledged, &bytes), (&keys.leader, lease)) {
                Ok(true) => {
                    shared.published(record);
                    if std::mem::take(&mut failing) {
                        tracing::info!(
                            term = record.term,
                            seq = record.seq,
                            "etcd holds the acknowledged position again: writes are taken"
                        );
                    }
                    pause = RETRY_AFTER;
                    continue;
                }
                // The key is no longer this lease's: the campaign demotes.
                Ok(false) => "this node's lease no longer holds the leader's key".to_string(),
                Err(e) => e.to_string(),
            };
        if shared.failed(record) && !failing {
            failing = true;
            tracing::warn!(error = %why, "etcd did not take the acknowledged position: with --replicas, clients' writes are refused until it does");
        }
        shared.rest(pause);
        pause = (pause * 2).min(patience);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(term: u64, seq: u64) -> AcknowledgedRecord {
        AcknowledgedRecord { term, seq }
    }

    #[test]
    fn a_writer_waits_until_its_position_is_published_and_not_while_not_leading() {
        let acks = Arc::new(Acknowledgements::default());
        assert!(
            !acks.witness(5, &|| false),
            "not leading: nothing to wait for"
        );
        acks.set_lead(Some((3, 77)));
        assert_eq!(acks.next(Duration::ZERO), None, "nothing wanted yet");
        let writer = {
            let acks = acks.clone();
            std::thread::spawn(move || acks.witness(5, &|| false))
        };
        let due = loop {
            if let Some(due) = acks.next(Duration::from_millis(50)) {
                break due;
            }
        };
        assert_eq!(due, (record(3, 5), 77));
        assert!(!writer.is_finished(), "answered before etcd held it");
        acks.published(record(3, 5));
        assert!(writer.join().unwrap());
        // Already held: no wait.
        assert!(acks.witness(4, &|| false));
    }

    #[test]
    fn a_writer_gives_up_when_the_lead_goes_or_it_is_told_to() {
        let acks = Arc::new(Acknowledgements::default());
        acks.set_lead(Some((2, 1)));
        assert!(!acks.witness(9, &|| true), "told to give up");
        let writer = {
            let acks = acks.clone();
            std::thread::spawn(move || acks.witness(10, &|| false))
        };
        std::thread::sleep(Duration::from_millis(20));
        acks.set_lead(None);
        assert!(!writer.join().unwrap(), "the lead went: not witnessed");
        assert_eq!(acks.next(Duration::ZERO), None, "not leading: nothing due");
    }

    #[test]
    fn while_etcd_fails_writers_give_up_at_once_until_a_put_succeeds() {
        let acks = Arc::new(Acknowledgements::default());
        acks.set_lead(Some((2, 1)));
        let writer = {
            let acks = acks.clone();
            std::thread::spawn(move || acks.witness(10, &|| false))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(acks.failed(record(2, 10)), "a run of failures begins");
        assert!(acks.failing());
        assert!(!writer.join().unwrap(), "a failed put: not witnessed");
        assert!(!acks.witness(11, &|| false), "etcd still failing: at once");
        assert_eq!(
            acks.next(Duration::ZERO),
            Some((record(2, 11), 1)),
            "tried again"
        );
        acks.published(record(2, 11));
        assert!(!acks.failing());
        assert!(acks.witness(11, &|| false));
        // A failure of an older term's put, or one before a new lead, counts for nothing.
        assert!(!acks.failed(record(1, 99)));
        assert!(acks.failed(record(2, 12)));
        acks.set_lead(Some((3, 4)));
        assert!(!acks.failing(), "a new lead starts with no failure");
        let writer = {
            let acks = acks.clone();
            std::thread::spawn(move || acks.witness(12, &|| false))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !writer.is_finished(),
            "etcd answers again: the writer waits"
        );
        acks.published(record(3, 12));
        assert!(writer.join().unwrap());
    }

    #[test]
    fn a_raise_counts_only_for_the_term_this_node_leads() {
        let acks = Acknowledgements::default();
        acks.raise(record(1, 4));
        acks.set_lead(Some((2, 1)));
        assert_eq!(acks.next(Duration::ZERO), None);
        acks.raise(record(1, 40));
        assert_eq!(acks.next(Duration::ZERO), None, "an older term's position");
        acks.raise(record(2, 6));
        assert_eq!(acks.next(Duration::ZERO), Some((record(2, 6), 1)));
        acks.published(record(2, 6));
        acks.raise(record(2, 6));
        assert_eq!(acks.next(Duration::ZERO), None, "already held");
    }
}
