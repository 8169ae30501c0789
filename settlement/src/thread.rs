//! The settlement thread: learns of new batches and status changes from the published
//! events, keeps a timer per batch, and submits `SettlementUpdate` commands when they fall
//! due. After a restart, timers re-arm from the engine's trades (`pending_batches`).

use std::collections::{BTreeSet, HashMap};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::RecvTimeoutError;
use ladder_engine::{Engine, Event, Hash32, TimestampNs, TradeStatus, TradeView};
use ladder_sequencer::bell::BellReceiver;
use ladder_sequencer::PublishedBatch;

use crate::backend::{Backend, Step};
use crate::outbox::{Outbox, SettlementRing};

/// Most batches waiting for a status change; past it, new batches wait in the journal
/// until the next restart re-arms them (logged).
pub const PENDING_BATCHES_MAX: usize = 1_000_000;

/// How long after a timer falls due the thread may wait for others to fall due too, so that
/// one wake-up fires them all: under a steady flow of trades the timers lie a few
/// milliseconds apart, and a wake-up per timer cost more than the thread's other work (a
/// wake-up costs tens of microseconds on the machines measured). A step is never early,
/// and late by at most this (against the second-scale default delay).
pub const TIMER_COALESCE: Duration = Duration::from_millis(5);

/// Longest sleep without a timer due, so that a stopped service is noticed.
const IDLE_WAIT: Duration = Duration::from_millis(250);

/// A running settlement thread.
pub struct SettlementHandle {
    thread: Option<JoinHandle<()>>,
}

impl SettlementHandle {
    /// Wraps a started thread.
    pub(crate) fn new(thread: JoinHandle<()>) -> SettlementHandle {
        SettlementHandle {
            thread: Some(thread),
        }
    }

    /// Waits for the thread to end (it ends when the event channel closes).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A batch whose status is not final: what a restart re-arms.
#[derive(Clone, Debug)]
pub struct PendingBatch {
    /// The batch's transaction hash (Ladder's batch id).
    pub transaction_hash: Hash32,
    /// Its status.
    pub status: TradeStatus,
    /// When it last changed.
    pub last_update_ns: TimestampNs,
    /// Its trades, in trade-log order.
    pub trades: Vec<TradeView>,
}

/// Batches whose status is not final, with their trades.
pub fn pending_batches(engine: &Engine) -> Vec<PendingBatch> {
    let mut index: HashMap<Hash32, usize> = HashMap::new();
    let mut out: Vec<PendingBatch> = Vec::new();
    for trade in engine.held_trades() {
        if trade.status.is_final() {
            continue;
        }
        let slot = *index.entry(trade.transaction_hash).or_insert_with(|| {
            out.push(PendingBatch {
                transaction_hash: trade.transaction_hash,
                status: trade.status,
                last_update_ns: trade.last_update_ns,
                trades: Vec::new(),
            });
            out.len() - 1
        });
        out[slot].trades.push(*trade);
    }
    out
}

/// Starts the thread: `events` are the sequencer's published batches, `ring` its own way
/// into the sequencer and its answers, `pending` the batches to re-arm.
pub fn start(
    mut backend: Box<dyn Backend>,
    events: BellReceiver<PublishedBatch>,
    ring: SettlementRing,
    pending: Vec<PendingBatch>,
) -> std::io::Result<SettlementHandle> {
    let thread = std::thread::Builder::new()
        .name("settlement".into())
        .spawn(move || {
            let mut timers = Timers::default();
            for batch in pending {
                let tx = batch.transaction_hash;
                if let Some(step) = backend.next_step(&tx, batch.status, batch.last_update_ns) {
                    timers.arm(tx, step);
                }
            }
            let mut outbox = Outbox::new(ring);
            loop {
                let wait = if outbox.is_backed_up() {
                    Duration::from_millis(10)
                } else {
                    timers.wait(now_ns())
                };
                match events.recv_timeout(wait) {
                    Ok(batch) => observe(&mut *backend, &mut timers, &batch),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                for (tx, step) in timers.due(now_ns()) {
                    if outbox.send(tx, step.status).is_err() {
                        return;
                    }
                }
                if outbox.flush().is_err() {
                    return;
                }
            }
        })?;
    Ok(SettlementHandle::new(thread))
}

pub(crate) fn now_ns() -> TimestampNs {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Each trade event tells a batch's current status; the backend says what comes next.
fn observe(backend: &mut dyn Backend, timers: &mut Timers, batch: &PublishedBatch) {
    for published in batch.iter() {
        for event in published.events {
            let Event::Trade(trade) = event else { continue };
            let tx = trade.transaction_hash;
            match backend.next_step(&tx, trade.status, trade.last_update_ns) {
                Some(step) => timers.arm(tx, step),
                None => timers.disarm(&tx),
            }
        }
    }
}

/// One timer per batch, ordered by due time.
#[derive(Default)]
struct Timers {
    by_due: BTreeSet<(TimestampNs, Hash32)>,
    by_tx: HashMap<Hash32, Step>,
}

impl Timers {
    fn arm(&mut self, tx: Hash32, step: Step) {
        if let Some(old) = self.by_tx.get(&tx) {
            if *old == step {
                return;
            }
            self.by_due.remove(&(old.due_ns, tx));
        } else if self.by_tx.len() >= PENDING_BATCHES_MAX {
            tracing::warn!(
                "settlement: too many pending batches; this one re-arms at the next restart"
            );
            return;
        }
        self.by_tx.insert(tx, step);
        self.by_due.insert((step.due_ns, tx));
    }

    fn disarm(&mut self, tx: &Hash32) {
        if let Some(old) = self.by_tx.remove(tx) {
            self.by_due.remove(&(old.due_ns, *tx));
        }
    }

    /// How long to sleep at `now`: until the first timer's due time plus
    /// [`TIMER_COALESCE`], when the timers due by then fire together.
    fn wait(&self, now: TimestampNs) -> Duration {
        match self.by_due.first() {
            Some((due, _)) => {
                let fire_at = due.saturating_add(TIMER_COALESCE.as_nanos() as u64);
                Duration::from_nanos(fire_at.saturating_sub(now)).min(IDLE_WAIT)
            }
            None => IDLE_WAIT,
        }
    }

    /// Takes the timers due at `now`.
    fn due(&mut self, now: TimestampNs) -> Vec<(Hash32, Step)> {
        let mut out = Vec::new();
        while let Some(&(due, tx)) = self.by_due.first() {
            if due > now {
                break;
            }
            self.by_due.pop_first();
            if let Some(step) = self.by_tx.remove(&tx) {
                out.push((tx, step));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn step(due_ns: TimestampNs) -> Step {
        Step {
            due_ns,
            status: TradeStatus::Mined,
        }
    }

    fn tx(n: u8) -> Hash32 {
        ladder_engine::FixedBytes([n; 32])
    }

    #[test]
    fn timers_due_close_together_fire_in_one_wake_up_and_none_early() {
        let mut timers = Timers::default();
        let now = 1_000 * MS;
        timers.arm(tx(1), step(now + 100 * MS));
        timers.arm(tx(2), step(now + 102 * MS));
        timers.arm(tx(3), step(now + 104 * MS));
        timers.arm(tx(4), step(now + 200 * MS));
        // The sleep runs to the first due time plus the coalescing window.
        let woken = now + timers.wait(now).as_nanos() as u64;
        assert_eq!(woken, now + 100 * MS + TIMER_COALESCE.as_nanos() as u64);
        // Nothing fires before it is due.
        assert!(timers.due(now + 99 * MS).is_empty());
        let fired: Vec<Hash32> = timers.due(woken).into_iter().map(|(t, _)| t).collect();
        assert_eq!(fired, vec![tx(1), tx(2), tx(3)]);
        // The next one waits for its own time.
        assert_eq!(
            timers.wait(woken),
            Duration::from_nanos(now + 200 * MS - woken) + TIMER_COALESCE
        );
    }

    #[test]
    fn an_overdue_timer_waits_out_only_what_is_left_of_its_window() {
        let mut timers = Timers::default();
        timers.arm(tx(1), step(10 * MS));
        assert_eq!(
            timers.wait(12 * MS),
            TIMER_COALESCE - Duration::from_millis(2)
        );
        assert_eq!(timers.wait(60 * MS), Duration::ZERO);
        assert_eq!(Timers::default().wait(0), IDLE_WAIT);
    }
}
