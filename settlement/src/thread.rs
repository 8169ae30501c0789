//! The settlement thread: learns of new batches and status changes from the published
//! events, keeps a timer per batch, and submits `SettlementUpdate` commands when they fall
//! due. After a restart, timers re-arm from the engine's trades (`pending_batches`).

use std::collections::{BTreeSet, HashMap};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use ladder_engine::{Command, Engine, Event, Hash32, TimestampNs, TradeStatus};
use ladder_sequencer::{PublishedBatch, Submission, SubmitError, Submitter, Ticket, Work};

use crate::backend::{Backend, Step};

/// Most batches waiting for a status change; past it, new batches wait in the journal
/// until the next restart re-arms them (logged).
pub const PENDING_BATCHES_MAX: usize = 1_000_000;

/// A running settlement thread.
pub struct SettlementHandle {
    thread: Option<JoinHandle<()>>,
}

impl SettlementHandle {
    /// Waits for the thread to end (it ends when the event channel closes).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Batches whose status is not final, with their status and last change: what a restart
/// re-arms.
pub fn pending_batches(engine: &Engine) -> Vec<(Hash32, TradeStatus, TimestampNs)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for trade in engine.all_trades() {
        if !trade.status.is_final() && seen.insert(trade.transaction_hash) {
            out.push((trade.transaction_hash, trade.status, trade.last_update_ns));
        }
    }
    out
}

/// Starts the thread: `events` are the sequencer's published batches, `submitter` its own
/// ring into the sequencer (completions go to sink `sink`), `pending` the batches to re-arm.
pub fn start(
    mut backend: Box<dyn Backend>,
    events: Receiver<PublishedBatch>,
    submitter: Submitter,
    sink: u16,
    pending: Vec<(Hash32, TradeStatus, TimestampNs)>,
) -> std::io::Result<SettlementHandle> {
    let thread = std::thread::Builder::new()
        .name("settlement".into())
        .spawn(move || {
            let mut timers = Timers::default();
            for (tx, status, at) in pending {
                if let Some(step) = backend.next_step(&tx, status, at) {
                    timers.arm(tx, step);
                }
            }
            let mut next_token = 0u64;
            loop {
                let wait = timers.wait(now_ns());
                match events.recv_timeout(wait) {
                    Ok(batch) => observe(&mut *backend, &mut timers, &batch),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                for (tx, step) in timers.due(now_ns()) {
                    next_token += 1;
                    let command = Command::SettlementUpdate {
                        transaction_hash: tx,
                        status: step.status,
                    };
                    let submission = Submission {
                        ticket: Ticket {
                            sink,
                            token: next_token,
                        },
                        work: Work::Command(command),
                    };
                    match submitter.try_submit(submission) {
                        Ok(()) => {}
                        Err(SubmitError::Full(_)) => timers.arm(
                            tx,
                            Step {
                                due_ns: now_ns() + 10_000_000,
                                ..step
                            },
                        ),
                        Err(SubmitError::Stopped(_)) => return,
                    }
                }
            }
        })?;
    Ok(SettlementHandle {
        thread: Some(thread),
    })
}

fn now_ns() -> TimestampNs {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Each trade event tells a batch's current status; the backend says what comes next.
fn observe(backend: &mut dyn Backend, timers: &mut Timers, batch: &PublishedBatch) {
    for published in batch.iter() {
        for event in &published.events {
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

    fn wait(&self, now: TimestampNs) -> Duration {
        match self.by_due.first() {
            Some((due, _)) => {
                Duration::from_nanos(due.saturating_sub(now)).min(Duration::from_millis(250))
            }
            None => Duration::from_millis(250),
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
