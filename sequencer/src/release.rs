//! Releasing a batch: once its journal records are durable (and, with required standbys,
//! held by them), its completions go to their sinks and its events to their consumers, in
//! batch order; the read side of the books (`BookBoard`) gets the batch's snapshots before
//! any of its completions leaves.
//!
//! With `sync` durability the waiting happens on a committer thread, so the sequencer
//! applies batch N+1 while the disk flushes batch N (the commit is pipelined; nothing is
//! answered or published earlier than before). With `async` durability and no standbys there
//! is nothing to wait for, and the sequencer releases the batch itself.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use ladder_journal::FlushTicket;
use parking_lot::Mutex;

use crate::bell::BellSender;
use crate::board::{BoardUpdates, BookBoard};
use crate::fence::{AckFence, LEADERSHIP_LOST};
use crate::replication::ReplicationHub;
use crate::sequencer::{BatchEvents, EventConsumer, PublishedBatch, SequencerStats, Takes};
use crate::submission::{Completion, CompletionSink};

/// Why a write was refused for want of standbys (API.md §19): nothing changed.
pub const REPLICA_UNAVAILABLE: &str = "replica unavailable";

/// Why a write was not confirmed: it was journaled and applied on the primary, but fewer
/// than the required standbys stayed connected to hold it (API.md §19).
pub const REPLICA_LOST: &str = "replica lost: applied on the primary, not confirmed by a standby";

/// Whether a refusal's `reason` says the write was journaled and applied all the same
/// ([`REPLICA_LOST`], [`crate::LEADERSHIP_LOST`]): the node's own callers count it as done
/// (sending it again would apply it twice).
pub fn applied_anyway(reason: &str) -> bool {
    reason == REPLICA_LOST || reason == crate::LEADERSHIP_LOST
}

/// Why a write was refused when the journal cannot reserve the space it needs (API.md §18):
/// nothing was journaled, applied or acknowledged.
pub const JOURNAL_FULL: &str = "journal full: no space left on device";

/// Batches applied but not yet released before the sequencer waits for the committer.
pub const BATCHES_IN_FLIGHT_MAX: usize = 4;

/// The shortest release that counts as answers stalled (see [`AnswerStalls`]).
pub(crate) const ANSWER_STALL_MIN_NS: u64 = 100_000_000;

/// Releases long enough to have kept answers from their clients (a standby's
/// acknowledgement, the disk's flush, etcd's put): the heartbeat timers make up for them,
/// since a client waiting for its beat's answer cannot beat again (API.md §16). Times are
/// [`crate::seat::clock_ns`].
#[derive(Debug, Default)]
pub(crate) struct AnswerStalls {
    /// When the release under way began (0: none is).
    releasing_since_ns: AtomicU64,
    /// Releases of [`ANSWER_STALL_MIN_NS`] or more not yet taken: (start, end).
    ended: Mutex<Vec<(u64, u64)>>,
    /// Whether `ended` holds any: the sequencer looks after every batch without locking.
    any_ended: AtomicBool,
}

impl AnswerStalls {
    /// How long the release under way has taken so far (0: none is under way).
    pub(crate) fn under_way_ns(&self, now_ns: u64) -> u64 {
        match self.releasing_since_ns.load(Ordering::Acquire) {
            0 => 0,
            since => now_ns.saturating_sub(since),
        }
    }

    /// Takes the long releases that ended since the last call.
    pub(crate) fn take_ended(&self) -> Vec<(u64, u64)> {
        if !self.any_ended.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *self.ended.lock())
    }

    fn begin(&self) -> u64 {
        let start = crate::seat::clock_ns().max(1);
        self.releasing_since_ns.store(start, Ordering::Release);
        start
    }

    fn end(&self, start: u64) {
        let end = crate::seat::clock_ns();
        if end.saturating_sub(start) >= ANSWER_STALL_MIN_NS {
            self.ended.lock().push((start, end));
            self.any_ended.store(true, Ordering::Release);
        }
        self.releasing_since_ns.store(0, Ordering::Release);
    }
}

/// One applied batch, waiting to be released.
pub(crate) struct Release {
    /// What makes its records durable (`None`: nothing to flush).
    pub ticket: Option<FlushTicket>,
    /// Its completions, by sink.
    pub per_sink: Vec<Vec<Completion>>,
    /// Its events.
    pub published: BatchEvents,
    /// Snapshots of the books it changed.
    pub board: BoardUpdates,
    /// The last sequence it holds.
    pub last_seq: u64,
    /// Commands and queries it held.
    pub commands: u64,
    /// Queries it held.
    pub queries: u64,
    /// Whether it was applied as a follower (replicated records: never refused).
    pub follower: bool,
}

/// Everything a release touches.
pub(crate) struct Releaser {
    sinks: Vec<Box<dyn CompletionSink>>,
    events: Vec<EventConsumer>,
    replication: Option<Arc<ReplicationHub>>,
    board: Option<Arc<BookBoard>>,
    stats: Arc<SequencerStats>,
    fence: Arc<AckFence>,
    /// Events of batches the required standbys did not hold when they were released (too
    /// few stayed connected; their writes were answered as lost), with the last sequence of
    /// their release: consumers see them, in order, only once standbys hold them (API.md
    /// §19), before any later batch's.
    withheld: Vec<(u64, PublishedBatch)>,
    /// Releases that kept answers waiting, for the heartbeat timers.
    stalls: Arc<AnswerStalls>,
}

impl Releaser {
    pub(crate) fn new(
        sinks: Vec<Box<dyn CompletionSink>>,
        events: Vec<EventConsumer>,
        replication: Option<Arc<ReplicationHub>>,
        board: Option<Arc<BookBoard>>,
        stats: Arc<SequencerStats>,
        (fence, stalls): (Arc<AckFence>, Arc<AnswerStalls>),
    ) -> Releaser {
        Releaser {
            sinks,
            events,
            replication,
            board,
            stats,
            fence,
            withheld: Vec::new(),
            stalls,
        }
    }

    /// Hands the withheld events to their consumers if the required standbys now hold
    /// them (a standby came back and caught up); called while the sequencer is idle.
    pub(crate) fn publish_withheld_if_held(&mut self) {
        let Some(&(last_seq, _)) = self.withheld.last() else {
            return;
        };
        // A leader past its lease's deadline publishes nothing more: the next leader decides
        // whether those records stand (a node that follows it starts again without them).
        // With standbys to wait for, the witness (etcd) holds them too: through the term's
        // start, for records of an older term this node led before.
        if self.fence.may_acknowledge()
            && self.replication.as_ref().is_none_or(|hub| {
                let through = last_seq.max(hub.term_start());
                hub.holds(through) && (hub.required() == 0 || self.fence.witness_holds(through))
            })
        {
            self.publish_withheld();
        }
    }

    fn publish_withheld(&mut self) {
        for (_, batch) in std::mem::take(&mut self.withheld) {
            self.publish(batch);
        }
    }

    /// Number of sinks (completion lists are made per sink).
    pub(crate) fn sink_count(&self) -> usize {
        self.sinks.len()
    }

    /// Waits for the batches to be durable (and held by the required standbys), then hands
    /// out their completions and events, in order. The standbys are told of the last one at
    /// once and waited for once, so queued batches share one round trip. A failed flush stops
    /// the process: nothing of the batch may be acknowledged, and the page cache may have
    /// dropped it.
    pub(crate) fn release(&mut self, batches: Vec<Release>) {
        let start = self.stalls.begin();
        self.release_timed(batches);
        self.stalls.end(start);
    }

    /// [`Releaser::release`], timed by it.
    fn release_timed(&mut self, batches: Vec<Release>) {
        let Some(last) = batches.last() else {
            return;
        };
        let (last_seq, any_writes) = (
            last.last_seq,
            batches.iter().any(|b| b.commands > 0 && !b.follower),
        );
        let mut released = Vec::with_capacity(batches.len());
        let mut tickets = Vec::with_capacity(batches.len());
        let mut rest = Vec::with_capacity(batches.len());
        for mut batch in batches {
            tickets.extend(batch.ticket.take());
            rest.push(batch);
        }
        // The queued batches' ranges flushed together: one msync per segment.
        if let Some(ticket) = FlushTicket::merge(tickets) {
            let started = Instant::now();
            let flushed = ticket.complete();
            let took_ns = started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            self.stats.flushes.record(took_ns);
            if let Err(error) = flushed {
                tracing::error!(%error, "journal commit failed; stopping the service");
                crate::stderr_line(format_args!("ladder: journal commit failed: {error}"));
                std::process::exit(1);
            }
        }
        let mut committed_through = self.stats.last_seq.load(Ordering::Acquire);
        for batch in rest {
            self.stats
                .commands
                .fetch_add(batch.commands, Ordering::Relaxed);
            self.stats
                .queries
                .fetch_add(batch.queries, Ordering::Relaxed);
            // A group commit is a batch that wrote records: reads alone, and cancels that
            // changed nothing, are not one.
            if batch.last_seq > committed_through {
                committed_through = batch.last_seq;
                self.stats.batches.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .batched_commands
                    .fetch_add(batch.commands, Ordering::Relaxed);
            }
            released.push((batch.per_sink, batch.published, batch.board));
        }
        self.stats.last_seq.store(last_seq, Ordering::Release);
        // Answers, settlement and the feeds wait for the required standbys for as long as
        // they stay connected; a batch they did not all live to hold is answered as lost, and
        // its events wait until standbys hold it (`withheld`).
        let held = self
            .replication
            .as_ref()
            .is_none_or(|hub| hub.wait_held(last_seq));
        // Writes the required standbys hold are answered once the coordinator's witness
        // (etcd) holds how far they go: a node that missed them then never leads by itself.
        // A batch applied in an older term of this node's is not witnessed: its position
        // would name records before the term's start.
        let witnessed = match self.replication.as_ref() {
            Some(hub) if any_writes && held && hub.required() > 0 => {
                last_seq >= hub.term_start() && self.fence.witnessed(last_seq)
            }
            _ => true,
        };
        // Checked after the flush and the standbys: an answer leaves before the deadline.
        let leading = !any_writes || (witnessed && self.fence.may_acknowledge());
        for (mut per_sink, published, board) in released {
            // Past the deadline the next leader decides what stands: a write no standby held
            // is then as uncertain as any other, and the client is told why.
            if !leading {
                refuse_applied(&mut per_sink, LEADERSHIP_LOST);
            } else if !held && any_writes {
                refuse_applied(&mut per_sink, REPLICA_LOST);
            }
            // The read side first: a client answered below must find its order there.
            if let Some(read_side) = &self.board {
                read_side.install(board);
            }
            for (sink, completions) in self.sinks.iter_mut().zip(per_sink) {
                if !completions.is_empty() {
                    sink.deliver(completions);
                }
            }
            if published.is_empty() {
                continue;
            }
            // Past the deadline the events wait too (with `--replicas 0` as well): if the
            // next leader cuts these records, no feed or settlement saw them (the read side
            // may have shown them, and the history store rewinds to the journal when the
            // node starts again as a standby).
            if (!held && any_writes) || !leading {
                self.withheld.push((last_seq, Arc::new(published)));
            } else {
                // Standbys that hold this batch hold every one before it (a follower's
                // replicated batches wait for no standby).
                if held {
                    self.publish_withheld();
                }
                self.publish(Arc::new(published));
            }
        }
        for sink in &mut self.sinks {
            sink.wake();
        }
    }

    /// Hands one batch's events to each consumer that takes it.
    fn publish(&mut self, batch: PublishedBatch) {
        // Looked for once, and only if a consumer asks.
        let mut has_trades = None;
        for consumer in &mut self.events {
            match consumer {
                EventConsumer::Thread { tx, takes } => {
                    if *takes == Takes::Every
                        || *has_trades.get_or_insert_with(|| batch.has_trades())
                    {
                        let _ = tx.send(batch.clone());
                    }
                }
                EventConsumer::Inline(publisher) => publisher.publish(&batch),
            }
        }
    }
}

/// Where the sequencer sends applied batches: released at once, or by the committer thread.
pub(crate) enum Releases {
    /// Released by the sequencer itself.
    Inline(Releaser),
    /// Released by the committer thread, in order; or by the sequencer itself when the
    /// committer has nothing in hand (one batch at a time then costs no thread hand-off).
    Committer {
        tx: Option<BellSender<Release>>,
        thread: Option<JoinHandle<()>>,
        releaser: Arc<Mutex<Releaser>>,
        /// Batches sent to the committer and not yet released.
        in_flight: Arc<AtomicUsize>,
        sinks: usize,
    },
}

impl Releases {
    /// Releases inline, or starts the committer thread when `pipelined`.
    pub(crate) fn new(releaser: Releaser, pipelined: bool) -> std::io::Result<Releases> {
        if !pipelined {
            return Ok(Releases::Inline(releaser));
        }
        let sinks = releaser.sink_count();
        let (tx, rx) = crate::bell::channel::<Release>(BATCHES_IN_FLIGHT_MAX);
        let releaser = Arc::new(Mutex::new(releaser));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (releaser, in_flight) = (releaser.clone(), in_flight.clone());
            std::thread::Builder::new()
                .name("committer".into())
                .spawn(move || {
                    while let Ok(first) = rx.recv() {
                        let mut group = vec![first];
                        group.extend(rx.try_iter());
                        let count = group.len();
                        releaser.lock().release(group);
                        in_flight.fetch_sub(count, Ordering::Release);
                    }
                })?
        };
        Ok(Releases::Committer {
            tx: Some(tx),
            thread: Some(thread),
            releaser,
            in_flight,
            sinks,
        })
    }

    /// Number of sinks.
    pub(crate) fn sink_count(&self) -> usize {
        match self {
            Releases::Inline(releaser) => releaser.sink_count(),
            Releases::Committer { sinks, .. } => *sinks,
        }
    }

    /// Releases `batch` now or queues it (waiting while the committer is
    /// [`BATCHES_IN_FLIGHT_MAX`] batches behind). `nothing_waiting`: no submission is waiting
    /// for the sequencer, so waiting for the disk here delays nobody.
    pub(crate) fn send(&mut self, batch: Release, nothing_waiting: bool) {
        match self {
            Releases::Inline(releaser) => releaser.release(vec![batch]),
            Releases::Committer {
                tx,
                releaser,
                in_flight,
                ..
            } => {
                // Only the sequencer sends, so a committer with nothing in hand stays idle
                // while the sequencer releases this batch itself: the order is kept.
                if nothing_waiting && in_flight.load(Ordering::Acquire) == 0 {
                    releaser.lock().release(vec![batch]);
                    return;
                }
                if let Some(tx) = tx {
                    in_flight.fetch_add(1, Ordering::AcqRel);
                    if tx.send(batch).is_err() {
                        tracing::error!("the committer thread is gone; stopping the service");
                        std::process::exit(1);
                    }
                }
            }
        }
    }

    /// Hands withheld events to their consumers once the required standbys hold them (see
    /// [`Releaser::publish_withheld_if_held`]); never waits for the committer.
    pub(crate) fn publish_withheld_if_held(&mut self) {
        match self {
            Releases::Inline(releaser) => releaser.publish_withheld_if_held(),
            Releases::Committer { releaser, .. } => {
                if let Some(mut releaser) = releaser.try_lock() {
                    releaser.publish_withheld_if_held();
                }
            }
        }
    }

    /// Releases everything queued and stops the committer.
    pub(crate) fn finish(&mut self) {
        if let Releases::Committer { tx, thread, .. } = self {
            drop(tx.take());
            if let Some(thread) = thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// Turns the answers to writes into refusals (their effects are journaled, but not held by
/// enough standbys: the client is told, and may retry or check).
fn refuse_applied(per_sink: &mut [Vec<Completion>], reason: &'static str) {
    for list in per_sink.iter_mut() {
        for completion in list.iter_mut() {
            if matches!(
                completion,
                Completion::Applied { .. }
                    | Completion::AppliedAll { .. }
                    | Completion::Heartbeat {
                        journaled: true,
                        ..
                    }
            ) {
                *completion = Completion::Refused {
                    ticket: completion.ticket(),
                    reason,
                };
            }
        }
    }
}
