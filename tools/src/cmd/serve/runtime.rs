//! The runtime's own producers beside the gateway threads (demo set-up, snapshots, promotion,
//! settlement, the follower), its periodic `ForgetHistory`, and the orderly shutdown.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver};
use ladder_engine::{Command, Engine};
use ladder_gateway::app::SnapshotTaken;
use ladder_gateway::ServerShared;
use ladder_history::Historian;
use ladder_sequencer::bell::BellReceiver;
use ladder_sequencer::PublishedBatch;
use ladder_settlement::{BuiltIn, PendingBatch, SettlementHandle, SettlementRing};

use crate::cmd::chain_link::ChainLink;
use ladder_sequencer::{
    ChannelSink, Completion, CompletionSink, SequencerHandle, Submission, Submitter, Ticket, Work,
    JOURNAL_FULL, STANDBY_REFUSAL,
};

/// When the runtime journals a `ForgetHistory`: once the history store holds records past
/// the last one, and either `FORGET_EVERY_RECORDS` more or `FORGET_INTERVAL` has passed.
///
/// The first one waits for the store to hold a record journaled by this run: start-up
/// journals nothing (CONTRACT 18 (17)), so what an earlier run stored but did not forget
/// (it was killed within a second of storing it) leaves the engine with the first
/// `ForgetHistory` after the next command.
#[derive(Debug)]
pub(super) struct Forgetting {
    through: u64,
    at: Instant,
}

/// Records the store must gain for a `ForgetHistory` at once.
const FORGET_EVERY_RECORDS: u64 = 8_192;

/// The longest wait between two `ForgetHistory` while the store gains anything.
const FORGET_INTERVAL: Duration = Duration::from_secs(1);

impl Forgetting {
    /// For a run whose journal ended at `started_at_seq`.
    pub(super) fn after_start_at(started_at_seq: u64) -> Forgetting {
        Forgetting {
            through: started_at_seq,
            at: Instant::now(),
        }
    }

    /// Journals a `ForgetHistory` through `stored` when one is due. The engine answers one
    /// that would forget nothing without a journal record, so an idle service writes none.
    pub(super) fn when_due(&mut self, stored: u64, internal: &mut Internal) {
        let due = stored > self.through
            && (stored - self.through >= FORGET_EVERY_RECORDS
                || self.at.elapsed() >= FORGET_INTERVAL);
        if !due {
            return;
        }
        match internal.run(Work::Command(Command::ForgetHistory {
            through_seq: stored,
        })) {
            // Journaled, or answered without a record when there was nothing to forget.
            Ok(Completion::Applied { .. }) => {
                self.through = stored;
                self.at = Instant::now();
            }
            // Refused (a full journal, say): tried again after the interval.
            Ok(_) => self.at = Instant::now(),
            Err(e) => tracing::warn!(error = %e, "forget history: not journaled"),
        }
    }
}

/// How long a stopping run waits for connected standbys that acknowledge nothing more (a
/// standby frozen while connected would hold the stop for ever): longer than the loops'
/// wait for the events of their writes (2 s) and than the disarming's own wait (2 s), each
/// counted again from the standbys' last acknowledgement.
pub(super) const STOP_STANDBYS_PATIENCE: Duration = Duration::from_secs(3);

/// Stops accepting and drains what the gateway holds: its loops end once their requests are
/// answered.
pub(super) fn stop_gateway(
    server: &ServerShared,
    gateway_threads: Vec<std::thread::JoinHandle<()>>,
) {
    tracing::info!("stopping: draining connections");
    server.stop.store(true, Ordering::Release);
    for thread in gateway_threads {
        let _ = thread.join();
    }
}

/// Stops the sequencer (after the gateway) and snapshots.
pub(super) fn shutdown(
    handle: SequencerHandle,
    historian: Historian,
    data_dir: &Path,
    keep_snapshots: usize,
) {
    let engine = handle.stop();
    // The history store catches up with the last record before the historian stops, so
    // that the next start finds a snapshot at or before where it stands.
    let end = engine.as_ref().map_or(0, Engine::last_seq);
    drain_history(&historian, end);
    let needed = historian.snapshot_needed_through();
    historian.stop();
    if let Some(engine) = engine {
        write_snapshot(data_dir, &engine, keep_snapshots, needed);
    }
    tracing::info!("stopped");
}

/// How long a stopping service waits for the history store to catch up, at most.
const HISTORY_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a stopping service waits for a history store that makes no progress (a full
/// disk): it catches up at the next start in any case.
const HISTORY_STALL: Duration = Duration::from_secs(3);

/// Waits for the history store to hold every record up to `end`, while it makes progress
/// (and [`HISTORY_DRAIN_TIMEOUT`] at most), saying what it waits for.
fn drain_history(historian: &Historian, end: u64) {
    let started = Instant::now();
    let mut stored = historian.stored_through();
    if stored < end {
        tracing::info!(stored, end, "stopping: the history store catches up");
    }
    let mut progress_at = Instant::now();
    while !historian.wait_stored(end, Duration::from_millis(250)) {
        let now_stored = historian.stored_through();
        if now_stored != stored {
            stored = now_stored;
            progress_at = Instant::now();
        }
        if progress_at.elapsed() >= HISTORY_STALL || started.elapsed() >= HISTORY_DRAIN_TIMEOUT {
            tracing::warn!(
                stored,
                end,
                "the history store did not catch up before stopping; it will at the next start"
            );
            return;
        }
    }
}

/// Writes a snapshot of `engine` and prunes (see [`prune_snapshots`]).
fn write_snapshot(data_dir: &Path, engine: &Engine, keep_snapshots: usize, needed: Option<u64>) {
    let seq = engine.last_seq();
    if seq == 0 {
        return;
    }
    match ladder_journal::write_snapshot(data_dir, seq, &engine.snapshot_bytes()) {
        Ok(path) => tracing::info!(seq, path = %path.display(), "snapshot written"),
        Err(e) => tracing::warn!(error = %e, "snapshot failed"),
    }
    prune_snapshots(data_dir, keep_snapshots, needed);
}

/// Prunes the snapshots, keeping the one the history store starts from (at or before
/// `needed`); none while the store is stranded (`None`): the snapshot its backup needs,
/// when an operator restores it, is unknown.
pub(super) fn prune_snapshots(data_dir: &Path, keep: usize, needed: Option<u64>) {
    match needed {
        Some(stored) => {
            let _ = ladder_journal::prune_snapshots(data_dir, keep, stored);
        }
        None => tracing::warn!("history store stranded: no snapshot is pruned"),
    }
}

/// A producer of the runtime's own: its ring into the sequencer and the sink its answers
/// come back to.
pub(super) struct Producer {
    pub(super) ring: Submitter,
    pub(super) sink: u16,
}

/// The runtime's producers beside the gateway threads (whose rings and sinks come first).
pub(super) struct RuntimeProducers {
    /// The main loop: the demo market, snapshots on command, `ForgetHistory`, redemptions.
    /// Its answers come back on a channel.
    pub(super) internal: Producer,
    /// The settlement thread: it follows trades through events; its answers come back on a
    /// channel (a status change refused for want of journal space is sent again).
    pub(super) settlement: Producer,
    /// The settlement thread's answers.
    pub(super) settlement_answers: Receiver<Completion>,
    /// A standby's follower of its primary's journal: answers come back on a channel.
    pub(super) follower: Producer,
}

impl RuntimeProducers {
    /// The rings they need after the gateway threads'.
    pub(super) const COUNT: usize = 3;

    /// Takes their rings, the last [`Self::COUNT`] of `submitters`, and appends their sinks to
    /// `sinks`; returns them with the internal and follower answer channels.
    pub(super) fn take(
        submitters: &mut Vec<Submitter>,
        sinks: &mut Vec<Box<dyn CompletionSink>>,
    ) -> Result<(RuntimeProducers, Receiver<Completion>, Receiver<Completion>), String> {
        let first = submitters
            .len()
            .checked_sub(Self::COUNT)
            .ok_or("too few rings for the runtime's producers")?;
        let mut rings = submitters.split_off(first).into_iter();
        let mut producer = |sink: Box<dyn CompletionSink>| -> Result<Producer, String> {
            let ring = rings
                .next()
                .ok_or("too few rings for the runtime's producers")?;
            let index = u16::try_from(sinks.len()).map_err(|_| "too many sinks")?;
            sinks.push(sink);
            Ok(Producer { ring, sink: index })
        };
        // Answers to the main loop and the follower hold at most what each has in flight: the
        // main loop waits for every answer before it submits again; the follower takes all
        // its answers whenever its 1 MiB read buffer runs dry, so at most the records of one
        // buffer are in flight.
        let (internal_tx, internal_rx) = unbounded();
        let (follower_tx, follower_rx) = unbounded();
        // Settlement takes its answers at each of its turns (at least every 250 ms): at most
        // what it sent since.
        let (settlement_tx, settlement_answers) = unbounded();
        let producers = RuntimeProducers {
            internal: producer(Box::new(ChannelSink(internal_tx)))?,
            settlement: producer(Box::new(ChannelSink(settlement_tx)))?,
            settlement_answers,
            follower: producer(Box::new(ChannelSink(follower_tx)))?,
        };
        Ok((producers, internal_rx, follower_rx))
    }
}

/// The runtime's own ring into the sequencer (demo set-up, snapshots, promotion), waiting for
/// each answer.
pub(super) struct Internal {
    pub(super) submitter: Submitter,
    pub(super) completions: Receiver<Completion>,
    pub(super) sink: u16,
    pub(super) next: u64,
    /// While set (the supervisor's turns), a wait for an answer ends when this flag is
    /// raised (SIGTERM): a sequencer that waits for a frozen standby must not keep the
    /// supervisor from seeing the stop. The stop's own records wait (it is cleared then).
    pub(super) interrupt: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// How long the runtime waits for the sequencer's answer to its own work.
const INTERNAL_ANSWER_WAIT: Duration = Duration::from_secs(30);

/// Why the runtime's own work was not waited for: the node stops.
const STOPPING: &str = "stopping: not waiting for the sequencer";

/// How often a wait for the sequencer's answer looks at its interrupt flag.
const INTERRUPT_CHECK: Duration = Duration::from_millis(50);

impl Internal {
    /// Submits `work` and waits for its answer ([`INTERNAL_ANSWER_WAIT`] at most, less if
    /// interrupted). An answer that comes after its wait ended is skipped by the next wait.
    pub(super) fn run(&mut self, work: Work) -> Result<Completion, String> {
        // Nothing new is queued in front of the stop's own records.
        if self.interrupted() {
            return Err(STOPPING.into());
        }
        self.next += 1;
        let ticket = Ticket {
            sink: self.sink,
            token: self.next,
        };
        self.submitter
            .try_submit(Submission { ticket, work })
            .map_err(|_| "the sequencer is not taking work".to_string())?;
        let deadline = Instant::now() + INTERNAL_ANSWER_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("the sequencer did not answer".to_string());
            }
            match self.completions.recv_timeout(left.min(INTERRUPT_CHECK)) {
                Ok(completion) if completion.ticket().token == ticket.token => {
                    return Ok(completion)
                }
                // The answer to work whose wait ended earlier.
                Ok(_) => {}
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if self.interrupted() {
                        return Err(STOPPING.into());
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return Err("the sequencer did not answer".to_string())
                }
            }
        }
    }

    /// Whether the stop was asked for while the supervisor runs (see `interrupt`).
    fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Acquire))
    }

    /// Creates the demo market and accounts (`--demo` on an empty journal); returns why the
    /// sequencer refused them unwritten (a full disk, say), when it did, having created what
    /// it took. A command applied and answered as not yet held by a standby was created.
    pub(super) fn create_demo(&mut self) -> Result<Option<&'static str>, String> {
        for command in super::super::demo::commands() {
            if let Completion::Refused {
                reason: reason @ (JOURNAL_FULL | STANDBY_REFUSAL),
                ..
            } = self.run(Work::Command(command))?
            {
                return Ok(Some(reason));
            }
        }
        Ok(None)
    }

    /// Reads the engine on the sequencer thread, after every record submitted before.
    pub(super) fn query<T: Send + 'static>(
        &mut self,
        read: impl FnOnce(&Engine) -> T + Send + 'static,
    ) -> Result<T, String> {
        crate::cmd::redemption_watch::query_through(&mut |work| self.run(work), read)
    }

    /// Serializes the engine on the sequencer thread and writes the snapshot here, then
    /// prunes (see [`prune_snapshots`]).
    pub(super) fn snapshot(
        &mut self,
        data_dir: &Path,
        keep: usize,
        needed: Option<u64>,
    ) -> Result<SnapshotTaken, String> {
        let (seq, bytes) = self.query(|e| (e.last_seq(), e.snapshot_bytes()))?;
        let path =
            ladder_journal::write_snapshot(data_dir, seq, &bytes).map_err(|e| e.to_string())?;
        prune_snapshots(data_dir, keep, needed);
        tracing::info!(seq, path = %path.display(), "snapshot written");
        Ok(SnapshotTaken {
            seq,
            path: path.display().to_string(),
        })
    }

    pub(super) fn pending_settlements(
        &mut self,
    ) -> Result<Vec<ladder_settlement::PendingBatch>, String> {
        self.query(ladder_settlement::pending_batches)
    }
}

/// Starts the settlement thread, on a primary's start and on each promotion: the chain
/// backend when the exchange contract is on the chain, else the built-in one.
pub(super) struct SettlementStarter<'a> {
    /// The chain, with `--rpc-url`.
    pub(super) chain: Option<&'a ChainLink>,
    /// The sequencer's event batches that hold trades.
    pub(super) events: BellReceiver<PublishedBatch>,
    /// Settlement's ring into the sequencer and its sink.
    pub(super) producer: &'a Producer,
    /// The answers that sink receives.
    pub(super) answers: &'a Receiver<Completion>,
    /// `--settlement-delay-ms` and `--settlement-fail-percent` of the built-in backend.
    pub(super) built_in: (u64, u8),
}

impl SettlementStarter<'_> {
    /// Starts settlement, re-arming `pending` (the batches the engine holds unsettled).
    pub(super) fn start(&self, pending: Vec<PendingBatch>) -> Result<SettlementHandle, String> {
        let on_chain = match self.chain {
            Some(link) => link
                .settlement_client()?
                .map(|client| (client, link.settings.clone())),
            None => None,
        };
        let ring = |submitter: Submitter| SettlementRing {
            submitter,
            sink: self.producer.sink,
            answers: self.answers.clone(),
        };
        let started = match on_chain {
            Some((client, settings)) => ladder_settlement::start_chain(
                client,
                settings,
                self.events.clone(),
                ring(self.producer.ring.clone()),
                pending,
            ),
            None => {
                // The built-in thread submits between its waits and holds nothing: it may do
                // a sleeping sequencer's round itself, while its own event channel has room
                // for the round's batch (a round never waits for the thread that runs it).
                let events = self.events.clone();
                let submitter = self
                    .producer
                    .ring
                    .clone()
                    .taking_seat(Arc::new(move || events.has_room()));
                ladder_settlement::start(
                    Box::new(BuiltIn::new(self.built_in.0, self.built_in.1)),
                    self.events.clone(),
                    ring(submitter),
                    pending,
                )
            }
        };
        started.map_err(|e| format!("settlement thread: {e}"))
    }

    /// Starts settlement for a promoted node, with what its engine holds unsettled.
    pub(super) fn start_promoted(
        &self,
        internal: &mut Internal,
    ) -> Result<Option<SettlementHandle>, String> {
        self.start(internal.pending_settlements()?).map(Some)
    }
}
