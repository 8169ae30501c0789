//! The single writer. One thread drains every ring in batches, stamps each command with
//! a sequence number and the time, appends it to the journal, applies it to the engine,
//! commits the batch (group commit), and only then releases the batch's completions and
//! publishes its events.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{bounded, Receiver, TryRecvError};
use ladder_engine::{Command, Engine, Event};
use ladder_journal::{Durability, Journal, WriteClass};

use crate::bell::{Bell, BellSender};
use crate::board::{
    price_point, touched_markets, BoardUpdates, BookBoard, MarketBooks, TradePrice,
};
use crate::codec::{CommandEncoder, RECORD_COMMAND_V1};
use crate::heartbeats::{HeartbeatAnswer, HeartbeatOp, HeartbeatRequest, HeartbeatTimers};
use crate::pin::{pin_current_thread, CorePin};
use crate::release::{
    AnswerStalls, Release, Releaser, Releases, ANSWER_STALL_MIN_NS, JOURNAL_FULL,
    REPLICA_UNAVAILABLE,
};
use crate::replication::ReplicationHub;
use crate::seat::{Round, Rounds, Seat};
use crate::submission::{Completion, CompletionSink, Submission, Submitter, Ticket, Work};

/// Largest batch the sequencer releases itself when nothing else is waiting (larger ones go
/// to the committer, so that the next batch is applied while this one is flushed).
const INLINE_RELEASE_SUBMISSIONS_MAX: usize = 16;

/// Settings of the sequencer.
#[derive(Clone, Debug)]
pub struct SequencerConfig {
    /// Capacity of each producer's ring.
    pub ring_capacity: usize,
    /// Most submissions in one batch (one journal commit).
    pub batch_max: usize,
    /// `sync`: a completion leaves only once its batch is on disk.
    pub durability: Durability,
    /// Longest sleep when idle (timers are checked at least this often).
    pub idle_wait: Duration,
    /// Set on a standby: its only writes are replicated records, and it fires no timers
    /// of its own (the primary's `Tick`s arrive replicated). Cleared on promotion.
    pub follower: Arc<AtomicBool>,
    /// Which core the sequencer thread is pinned to.
    pub pin: CorePin,
    /// Sinks `0..client_sinks` answer clients. While fewer standbys are connected than the
    /// replication hub requires, their writes are refused before they are journaled (a 503
    /// `replica unavailable` then changed nothing); the other sinks' work (the runtime's,
    /// the settlement thread's) is applied regardless.
    pub client_sinks: usize,
    /// A key with heartbeats running that does not beat within this time has every open
    /// order of its address cancelled (`--heartbeat-timeout-ms`).
    pub heartbeat_timeout: Duration,
    /// With a coordinator: writes are acknowledged only while this fence allows, and
    /// answered [`crate::LEADERSHIP_LOST`] after (CONTRACT 22).
    pub ack_fence: Arc<crate::AckFence>,
}

impl Default for SequencerConfig {
    fn default() -> Self {
        SequencerConfig {
            ring_capacity: 16_384,
            batch_max: 4_096,
            durability: Durability::Sync,
            idle_wait: Duration::from_millis(50),
            follower: Arc::new(AtomicBool::new(false)),
            pin: CorePin::None,
            client_sinks: usize::MAX,
            heartbeat_timeout: Duration::from_secs(10),
            ack_fence: Arc::new(crate::AckFence::open()),
        }
    }
}

/// Events of one command, as published after its batch is durable.
#[derive(Clone, Copy, Debug)]
pub struct Published<'a> {
    /// The command's sequence number.
    pub seq: u64,
    /// Its timestamp.
    pub timestamp_ns: u64,
    /// What it changed.
    pub events: &'a [Event],
}

/// The events of one durable batch, command by command, in one list (a command's events
/// are copied once, into room the batch reuses, not into a list of their own).
#[derive(Clone, Debug, Default)]
pub struct BatchEvents {
    /// Each command that changed something: its sequence number, time, and where its events
    /// end in `events` (they start where the previous command's end).
    commands: Vec<(u64, u64, usize)>,
    events: Vec<Event>,
}

impl BatchEvents {
    /// An empty batch with room for `events` events.
    pub fn with_room(events: usize) -> BatchEvents {
        BatchEvents {
            commands: Vec::new(),
            events: Vec::with_capacity(events),
        }
    }

    /// Adds the events of the command `seq` stamped `timestamp_ns` (nothing if none).
    pub fn push(&mut self, seq: u64, timestamp_ns: u64, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        self.events.extend_from_slice(events);
        self.commands.push((seq, timestamp_ns, self.events.len()));
    }

    /// Whether no command of the batch changed anything.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Whether a command of the batch made or changed a trade.
    pub fn has_trades(&self) -> bool {
        self.events.iter().any(|e| matches!(e, Event::Trade(_)))
    }

    /// Events in the batch.
    pub fn event_count(&self) -> usize {
        self.events.len()
    }

    /// Each command's events, in sequence order.
    pub fn iter(&self) -> impl Iterator<Item = Published<'_>> + '_ {
        let mut start = 0;
        self.commands.iter().map(move |&(seq, timestamp_ns, end)| {
            let events = &self.events[start..end];
            start = end;
            Published {
                seq,
                timestamp_ns,
                events,
            }
        })
    }
}

/// The events of one durable batch, shared by every consumer.
pub type PublishedBatch = Arc<BatchEvents>;

/// Counters the metrics endpoint reads.
#[derive(Debug, Default)]
pub struct SequencerStats {
    /// Commands applied.
    pub commands: AtomicU64,
    /// Commands applied in batches that wrote records (what `batches` group-committed).
    pub batched_commands: AtomicU64,
    /// Queries answered.
    pub queries: AtomicU64,
    /// Batches committed.
    pub batches: AtomicU64,
    /// Sequence of the last command applied.
    pub last_seq: AtomicU64,
    /// Cancels answered without a journal record: they would have changed nothing.
    pub unjournaled_cancels: AtomicU64,
    /// The journal cannot reserve its next segment and refuses ordinary writes (1) or not.
    pub journal_full: AtomicBool,
    /// Keys whose heartbeats ran out (each cancelled its address's open orders).
    pub heartbeat_expiries: AtomicU64,
    /// Keys with heartbeats running now.
    pub heartbeats_running: AtomicU64,
    /// Trades the engine holds now (not final, or final and not yet in the history store).
    pub trades_held: AtomicU64,
    /// Orders the engine holds now (open, or closed and not yet in the history store).
    pub orders_held: AtomicU64,
    /// Order hashes the engine holds to refuse duplicates (`ladder_engine_order_hashes_held`).
    pub order_hashes_held: AtomicU64,
    /// How long each synced commit's flush took.
    pub flushes: FlushTimes,
    /// Rounds a producer (a gateway loop, the settlement thread) did in the sleeping
    /// sequencer's seat (see `seat.rs`).
    pub rounds_in_seat: AtomicU64,
}

/// Upper bounds of the flush-time buckets, in nanoseconds (the last bucket is unbounded).
pub const FLUSH_BUCKETS_NS: [u64; 11] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
];

/// A histogram of journal flush times (msync of a commit's byte ranges), kept with atomics by
/// whichever thread flushes, read by `/metrics`: the cost of `sync` durability on this disk.
#[derive(Debug, Default)]
pub struct FlushTimes {
    /// Flushes per bucket of [`FLUSH_BUCKETS_NS`] (not cumulative); the last one counts the
    /// flushes longer than every bound.
    pub buckets: [AtomicU64; FLUSH_BUCKETS_NS.len() + 1],
    /// Sum of every flush time, in nanoseconds.
    pub sum_ns: AtomicU64,
}

impl FlushTimes {
    /// Records one flush of `ns` nanoseconds.
    pub fn record(&self, ns: u64) {
        let bucket = FLUSH_BUCKETS_NS
            .iter()
            .position(|&bound| ns <= bound)
            .unwrap_or(FLUSH_BUCKETS_NS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Flushes recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }
}

/// A running sequencer.
pub struct SequencerHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Engine>>,
    /// Its counters.
    pub stats: Arc<SequencerStats>,
}

impl SequencerHandle {
    /// Asks the sequencer to finish the work it holds and stop; returns the engine.
    pub fn stop(mut self) -> Option<Engine> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

/// What the sequencer is built from.
pub struct SequencerParts {
    /// The engine, recovered.
    pub engine: Engine,
    /// The journal, open for writing, its last record already applied to `engine`.
    pub journal: Journal,
    /// One sink per ticket `sink` index.
    pub sinks: Vec<Box<dyn CompletionSink>>,
    /// Where each batch's events go once it is durable: every consumer that takes a batch
    /// gets the same one.
    pub events: Vec<EventConsumer>,
    /// Standbys to replicate to (and, with a required count, to wait for).
    pub replication: Option<Arc<ReplicationHub>>,
    /// The read side of the books, kept up to date by each release (`None`: not kept). Fill
    /// it from the engine before starting (`BookBoard::fill`).
    pub board: Option<Arc<BookBoard>>,
}

/// Who takes published batches.
pub enum EventConsumer {
    /// A thread of its own, through a channel; woken only for the batches it takes.
    Thread {
        /// Its channel.
        tx: BellSender<PublishedBatch>,
        /// Which batches it takes.
        takes: Takes,
    },
    /// Work done by the releasing thread itself, before it wakes the sinks: the WebSocket
    /// feed's encoding, whose frames then reach each gateway thread with its answers in one
    /// wake-up (a feed thread cost a wake-up of its own per batch, and a second wake-up of
    /// each gateway thread).
    Inline(Box<dyn Publisher>),
}

/// Takes each batch with events on the releasing thread (see [`EventConsumer::Inline`]).
pub trait Publisher: Send {
    /// Handles one durable batch's events, in order; must not wait on a gateway thread.
    fn publish(&mut self, batch: &PublishedBatch);
}

/// Which published batches a consumer takes: a consumer is not woken for the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// Every batch with events.
    Every,
    /// Batches with a trade event (settlement follows trades only).
    WithTrades,
}

/// The sequencer's ends of the producers' rings, made before it starts so that producers
/// (the gateway) can be running, answering "not ready", while the engine recovers.
pub struct Rings(Vec<Receiver<Submission>>, Arc<Bell>, Arc<WriterSeat>);

/// The sequencer's seat (see `seat.rs`), shared with the producers that may take it.
pub(crate) type WriterSeat = Seat<Writer>;

/// Makes `producers` bounded rings of `capacity` submissions each.
pub fn rings(producers: usize, capacity: usize) -> (Vec<Submitter>, Rings) {
    let bell = Bell::new();
    let seat = Arc::new(Seat::new());
    let mut submitters = Vec::with_capacity(producers);
    let mut receivers = Vec::with_capacity(producers);
    for _ in 0..producers {
        let (tx, rx) = bounded(capacity);
        submitters.push(Submitter {
            ring: tx,
            bell: bell.clone(),
            seat: seat.clone(),
            seat_gate: None,
        });
        receivers.push(rx);
    }
    (submitters, Rings(receivers, bell, seat))
}

impl Rings {
    /// Takes every submission waiting in the rings, ring by ring, without a sequencer: what a
    /// producer sent, for its own tests.
    pub fn take_waiting(&self) -> Vec<Submission> {
        self.0.iter().flat_map(|ring| ring.try_iter()).collect()
    }
}

/// Starts the sequencer thread with `producers` new rings; returns their submitters.
pub fn start(
    config: SequencerConfig,
    parts: SequencerParts,
    producers: usize,
) -> std::io::Result<(SequencerHandle, Vec<Submitter>)> {
    let (submitters, rings) = rings(producers, config.ring_capacity);
    let handle = start_with(config, parts, rings)?;
    Ok((handle, submitters))
}

/// Starts the sequencer thread on rings made by [`rings`].
pub fn start_with(
    config: SequencerConfig,
    parts: SequencerParts,
    rings: Rings,
) -> std::io::Result<SequencerHandle> {
    let Rings(rings, bell, seat) = rings;
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(SequencerStats::default());
    stats
        .last_seq
        .store(parts.journal.last_seq(), Ordering::Relaxed);
    // With standbys to wait for, the sequencer itself waits (measured: the committer's
    // round trips to the standby cost more than the overlap gained; BENCHMARKS.md).
    let waits_for_standbys = parts
        .replication
        .as_ref()
        .is_some_and(|hub| hub.required() > 0);
    let pipelined = config.durability == Durability::Sync && !waits_for_standbys;
    // Where a round never waits for the disk or a standby, a producer may do it (seat.rs).
    let seat_may_open = config.durability == Durability::Async && !waits_for_standbys;
    let publishes = !parts.events.is_empty();
    let keeps_board = parts.board.is_some();
    let shipping = parts.replication.clone();
    let stalls = Arc::new(AnswerStalls::default());
    let releases = Releases::new(
        Releaser::new(
            parts.sinks,
            parts.events,
            parts.replication,
            parts.board,
            stats.clone(),
            (config.ack_fence.clone(), stalls.clone()),
        ),
        pipelined,
    )?;
    let config_heartbeat_timeout = config.heartbeat_timeout;
    let mut writer = Writer {
        config,
        engine: parts.engine,
        journal: parts.journal,
        releases,
        shipping,
        publishes,
        events_room: 0,
        rings,
        batch: Vec::new(),
        stop: stop.clone(),
        encoder: CommandEncoder::default(),
        last_now_ns: 0,
        keeps_board,
        touched: Vec::new(),
        fresh_trades: Vec::new(),
        trades_seen: 0,
        stats: stats.clone(),
        heartbeats: HeartbeatTimers::new(
            u64::try_from(config_heartbeat_timeout.as_nanos()).unwrap_or(u64::MAX),
            wall_clock_ns(),
        ),
        heartbeats_armed: false,
        timers_blocked_until: None,
        stalls,
    };
    writer.trades_seen = writer.engine.trade_count();
    writer.batch = Vec::with_capacity(writer.config.batch_max);
    let pin = writer.config.pin;
    seat.fill(writer, false);
    let thread = std::thread::Builder::new()
        .name("sequencer".into())
        .spawn(move || {
            let pinned = match pin_current_thread(pin) {
                Ok(Some(core)) => {
                    tracing::info!(core, "sequencer thread pinned");
                    true
                }
                Ok(None) => false,
                Err(why) => {
                    tracing::warn!(%why, "sequencer thread not pinned");
                    false
                }
            };
            // A pinned sequencer keeps its work on its core.
            seat.set_open(seat_may_open && !pinned);
            // A panic here could leave the engine half-applied, and the service would go on
            // looking ready while answering nothing: the process stops instead, with one
            // clear line (the journal holds everything acknowledged).
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| seat.run(&bell)));
            if let Err(panic) = ran {
                let held = seat.lock();
                match held.as_ref() {
                    Some(writer) => writer.stop_after_panic(&*panic),
                    None => stop_after_panic(&*panic, 0),
                }
            }
            let mut writer = seat
                .empty()
                .expect("the sequencer's state stays in its seat");
            writer.releases.finish();
            writer.engine
        })?;
    Ok(SequencerHandle {
        stop,
        thread: Some(thread),
        stats,
    })
}

pub(crate) struct Writer {
    config: SequencerConfig,
    engine: Engine,
    journal: Journal,
    releases: Releases,
    /// Where standbys learn that records were written (shipped before the local flush).
    shipping: Option<Arc<ReplicationHub>>,
    /// Whether any consumer takes events (else they are not copied out).
    publishes: bool,
    /// Events of the last batch: the room the next batch's list starts with.
    events_room: usize,
    rings: Vec<Receiver<Submission>>,
    /// The batch being gathered (its room is kept from round to round).
    batch: Vec<Submission>,
    stop: Arc<AtomicBool>,
    encoder: CommandEncoder,
    last_now_ns: u64,
    /// Whether released batches carry new book snapshots for the read side.
    keeps_board: bool,
    /// Markets the batch being applied changed (with repeats).
    touched: Vec<u32>,
    /// Trades the batch being applied made, for the read side's price history.
    fresh_trades: Vec<TradePrice>,
    /// Trades made so far (a trade event of an older one is a settlement change).
    trades_seen: u64,
    stats: Arc<SequencerStats>,
    /// Deadlines of the running heartbeats (kept while this is the primary).
    heartbeats: HeartbeatTimers,
    /// Whether the running heartbeats have their deadlines (armed when this first runs as
    /// the primary: at start, or at a promotion).
    heartbeats_armed: bool,
    /// Timers are not fired before this (the journal had no room for them).
    timers_blocked_until: Option<Instant>,
    /// Releases that kept answers waiting, which the heartbeat timers make up for.
    stalls: Arc<AnswerStalls>,
}

impl Rounds for Writer {
    fn round(&mut self) -> Round {
        // While the next segment cannot be reserved (ordinary writes refused, or a standby's
        // copies short of room), try again: writes resume by themselves. A journal reopened
        // past half of its segment starts making the next one now, so that a restart on a
        // full disk shows it at once (`ladder_journal_full`).
        self.journal.make_next_segment_if_due();
        if self.journal.is_short() {
            self.journal.retry_space();
        }
        // Space found again (or found missing) between batches shows at once, not at the
        // next write.
        if self.journal.is_full() != self.stats.journal_full.load(Ordering::Relaxed) {
            self.publish_gauges();
        }
        let mut batch = std::mem::take(&mut self.batch);
        self.drain(&mut batch);
        // Read once a round, after the drain: what the batch may write, and whether timers
        // may fire.
        let fenced = !self.config.ack_fence.may_acknowledge();
        if fenced {
            // A lease lapsing (or none held): no timer fires, whose records would be cut, and
            // the loop does not spin on them; the heartbeats, whose beats are refused
            // meanwhile, get a full timeout again once the lease is renewed, as at a takeover.
            self.heartbeats_armed = false;
            self.block_timers();
        } else if !self.heartbeats_armed && !self.config.follower.load(Ordering::Acquire) {
            let now_ns = self.now_ns();
            self.arm_heartbeats(now_ns);
        }
        let timer_due = !self.config.follower.load(Ordering::Acquire)
            && self
                .timers_blocked_until
                .is_none_or(|until| Instant::now() >= until)
            && self.next_deadline_ns().is_some_and(|d| d <= self.now_ns());
        let round = if batch.is_empty() && !timer_due {
            if self.stop.load(Ordering::Acquire) {
                Round::Stop
            } else {
                // Events withheld for want of standbys go out once they are back.
                self.releases.publish_withheld_if_held();
                Round::Idle(self.idle_wait())
            }
        } else {
            self.process(&mut batch, fenced);
            Round::Worked
        };
        self.batch = batch;
        round
    }

    /// How long an idle sequencer sleeps: until its next timer, or until blocked timers may
    /// be looked at again (a due timer that is blocked would otherwise wake it at once, again
    /// and again), at most `idle_wait`.
    fn idle_wait(&self) -> Duration {
        let blocked = self.timers_blocked_until.map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(Instant::now())
        });
        match self.next_deadline_ns() {
            Some(deadline) => Duration::from_nanos(deadline.saturating_sub(self.now_ns()))
                .max(blocked)
                .min(self.config.idle_wait),
            None => self.config.idle_wait,
        }
    }

    fn stop_after_panic(&self, panic: &(dyn std::any::Any + Send)) -> ! {
        stop_after_panic(panic, self.engine.last_seq())
    }

    fn count_round_in_seat(&mut self) {
        self.stats.rounds_in_seat.fetch_add(1, Ordering::Relaxed);
    }
}

/// Stops the process after a panic of the sequencer's work, which may have left the engine
/// half-applied after sequence `seq`: one clear line, and exit code 70.
fn stop_after_panic(panic: &(dyn std::any::Any + Send), seq: u64) -> ! {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic");
    tracing::error!(
        seq,
        reason = what,
        "the sequencer panicked; stopping the service"
    );
    crate::stderr_line(format_args!(
        "ladder: the sequencer panicked after sequence {seq}: {what}; stopping"
    ));
    std::process::exit(70);
}

impl Writer {
    fn drain(&mut self, batch: &mut Vec<Submission>) {
        let max = self.config.batch_max;
        let mut progress = true;
        let mut gone: Vec<usize> = Vec::new();
        while progress && batch.len() < max {
            progress = false;
            for (index, ring) in self.rings.iter().enumerate() {
                match ring.try_recv() {
                    Ok(s) => {
                        batch.push(s);
                        progress = true;
                        if batch.len() >= max {
                            return;
                        }
                    }
                    Err(TryRecvError::Disconnected) if !gone.contains(&index) => gone.push(index),
                    Err(_) => {}
                }
            }
        }
        // A ring whose producers are all gone (and that is empty) stays "ready" for a select
        // forever, and the loop would spin on it (reading the clock) instead of waiting: it
        // is let go.
        if !gone.is_empty() {
            let mut index = 0;
            self.rings.retain(|_| {
                index += 1;
                !gone.contains(&(index - 1))
            });
        }
    }

    /// The earliest timer: a GTD expiry or taker delay of the engine, or a heartbeat deadline.
    fn next_deadline_ns(&self) -> Option<u64> {
        match (
            self.engine.next_deadline_ns(),
            self.heartbeats.next_deadline_ns(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn now_ns(&self) -> u64 {
        wall_clock_ns().max(self.last_now_ns)
    }

    /// Applies one batch of submissions in ring order (`fenced`: this node's acknowledgement
    /// fence is closed), then commits the journal and hands the batch's answers and events to
    /// the releaser.
    fn process(&mut self, batch: &mut Vec<Submission>, fenced: bool) {
        let now_ns = self.now_ns();
        self.last_now_ns = now_ns;
        let mut per_sink = completion_lists(batch, self.releases.sink_count());
        let mut published = BatchEvents::with_room(self.events_room);
        let mut counts = BatchCounts::default();
        let follower = self.config.follower.load(Ordering::Acquire);
        let gate = WriteGate {
            follower,
            fenced,
            replicas_missing: self
                .shipping
                .as_ref()
                .is_some_and(|hub| hub.connected() < hub.required()),
            witness_failing: self.shipping.as_ref().is_some_and(|hub| hub.required() > 0)
                && self.config.ack_fence.witness_failing(),
        };
        if !follower && !gate.fenced {
            counts.commands += self.fire_timers(now_ns, &mut published);
        }
        let submissions = batch.len();
        // The submissions are read where they lie (moving each out of the batch copied it
        // once more); only a query is taken, to be called.
        for index in 0..batch.len() {
            self.engine
                .prefetch_ahead(index, |i| batch.get(i).and_then(|s| s.work.first_command()));
            let submission = &mut batch[index];
            let ticket = submission.ticket;
            let completion = self.complete(
                ticket,
                &mut submission.work,
                (now_ns, gate),
                &mut counts,
                &mut published,
            );
            if let Some(list) = per_sink.get_mut(ticket.sink as usize) {
                list.push(completion);
            }
        }
        batch.clear();
        self.publish_gauges();
        self.commit_and_release(per_sink, published, (counts, follower), submissions);
    }

    /// Fires what is due by `now_ns`: order timers (a journaled tick, so that the batch's
    /// queries, like its commands, see orders expired and delays ended by then) and heartbeat
    /// timeouts. Returns the commands applied.
    fn fire_timers(&mut self, now_ns: u64, published: &mut BatchEvents) -> u64 {
        let mut commands = 0;
        if self.engine.next_deadline_ns().is_some_and(|d| d <= now_ns) {
            if self
                .journal
                .admits(RECORD_BYTES_ESTIMATE, WriteClass::Reserved)
            {
                commands += 1;
                self.apply(now_ns, &Command::Tick, published);
            } else {
                self.block_timers();
            }
        }
        commands + self.expire_heartbeats(now_ns, published)
    }

    /// Carries out one submission's work at `now_ns` and says what its producer is answered.
    fn complete(
        &mut self,
        ticket: Ticket,
        work: &mut Work,
        (now_ns, gate): (u64, WriteGate),
        counts: &mut BatchCounts,
        published: &mut BatchEvents,
    ) -> Completion {
        let from_client = usize::from(ticket.sink) < self.config.client_sinks;
        let refused = |reason| Completion::Refused { ticket, reason };
        match work {
            // A standby's only writes are the primary's records: a client's write journaled
            // here would take a sequence the primary's next record needs.
            Work::Command(_) | Work::Commands(_) | Work::Heartbeat(_)
                if gate.follower && from_client =>
            {
                refused(STANDBY_REFUSAL)
            }
            // A leader past its lease's deadline is a standby already (the next leader may be
            // taking writes): what it journaled now would be cut when it follows, and its
            // events would reach the feeds first. Nothing is written, whoever asks (the
            // runtime's and settlement's work is sent again; timers wait too).
            Work::Command(_) | Work::Commands(_) | Work::Heartbeat(_) if gate.fenced => {
                refused(STANDBY_REFUSAL)
            }
            Work::Command(_) | Work::Commands(_) if gate.replicas_missing && from_client => {
                refused(REPLICA_UNAVAILABLE)
            }
            // A beat journals nothing, so it is taken while standbys or the witness are
            // missing: refusing it would let the key's deadline pass and cancel a live market
            // maker's orders for the outage. Starts and stops are clients' writes.
            Work::Heartbeat(request)
                if (gate.replicas_missing || gate.witness_failing)
                    && from_client
                    && request.op.journals() =>
            {
                refused(REPLICA_UNAVAILABLE)
            }
            // The witness (etcd) takes no position now: a client's write would be applied
            // and then not acknowledged. The runtime's and settlement's records go on (a stop
            // must journal its disarming of the dead-man switches), answered as lost if the
            // witness still does not take them, and so do the gateways' dead-man switch
            // records (a market maker that disconnected loses its quotes at once).
            Work::Command(command)
                if gate.witness_failing && from_client && !is_dead_man_record(command) =>
            {
                refused(REPLICA_UNAVAILABLE)
            }
            Work::Commands(_) if gate.witness_failing && from_client => {
                refused(REPLICA_UNAVAILABLE)
            }
            work if !journal_admits(&mut self.journal, work) => refused(JOURNAL_FULL),
            Work::Command(command) => {
                counts.commands += 1;
                let (seq, reply) = self.apply_if_it_changes(now_ns, command, published);
                Completion::Applied { ticket, seq, reply }
            }
            Work::Commands(list) => {
                counts.commands += list.len() as u64;
                let results = list
                    .iter()
                    .map(|command| self.apply_if_it_changes(now_ns, command, published))
                    .collect();
                Completion::AppliedAll { ticket, results }
            }
            &mut Work::Replicated {
                seq,
                timestamp_ns,
                ref command,
            } => {
                counts.commands += 1;
                if seq != self.journal.last_seq() + 1 {
                    return refused("replication gap: not the next sequence");
                }
                self.last_now_ns = self.last_now_ns.max(timestamp_ns);
                let (seq, reply) = self.apply(timestamp_ns, command, published);
                Completion::Applied { ticket, seq, reply }
            }
            Work::Heartbeat(request) => {
                let before = self.journal.last_seq();
                let answer = self.heartbeat(now_ns, request, published);
                // A start or a stop is journaled: a write, answered only as the batch's writes
                // are (held by the standbys and the witness, before the deadline).
                let journaled = self.journal.last_seq() != before;
                counts.commands += u64::from(journaled);
                Completion::Heartbeat {
                    ticket,
                    answer,
                    journaled,
                }
            }
            Work::Query(query) => {
                counts.queries += 1;
                let query = std::mem::replace(query, Box::new(|_| {}));
                query(&self.engine);
                Completion::Answered { ticket }
            }
        }
    }

    /// Begins the journal's commit of the batch (with `sync` durability), lets the standbys
    /// take its records, and hands the batch's answers and events to the releaser. A small
    /// batch (`submissions`) with nobody behind it is released on this thread: waiting for
    /// the disk delays no one, and the hand-off to the committer would only add latency.
    fn commit_and_release(
        &mut self,
        per_sink: Vec<Vec<Completion>>,
        published: BatchEvents,
        (counts, follower): (BatchCounts, bool),
        submissions: usize,
    ) {
        let ticket = match self.config.durability {
            Durability::Sync => self.journal.begin_commit(),
            Durability::Async => Ok(None),
        };
        let ticket = ticket.unwrap_or_else(|error| {
            tracing::error!(%error, "journal commit failed; stopping the service");
            crate::stderr_line(format_args!("ladder: journal commit failed: {error}"));
            std::process::exit(1);
        });
        // The batch's records are in the journal's pages: the standbys may take them while
        // the disk flushes them here (nothing is answered before both hold them).
        if let Some(hub) = &self.shipping {
            hub.written(self.journal.last_seq());
        }
        let nothing_waiting = submissions <= INLINE_RELEASE_SUBMISSIONS_MAX
            && self.rings.iter().all(|ring| ring.is_empty());
        let board = self.board_updates();
        self.events_room = published.event_count();
        self.releases.send(
            Release {
                ticket,
                per_sink,
                published,
                board,
                last_seq: self.engine.last_seq(),
                commands: counts.commands,
                queries: counts.queries,
                follower,
            },
            nothing_waiting,
        );
        // A release that kept answers waiting (here, or on the committer) is made up for
        // before a timer looks at the deadlines.
        let now_ns = self.now_ns();
        self.make_up_for_stalls(now_ns);
    }

    /// Snapshots of the books the batch changed, for the read side.
    fn board_updates(&mut self) -> BoardUpdates {
        self.touched.sort_unstable();
        self.touched.dedup();
        let engine = &self.engine;
        BoardUpdates {
            books: self
                .touched
                .drain(..)
                .filter_map(|index| Some((index, Arc::new(MarketBooks::read(engine, index)?))))
                .collect(),
            trades: std::mem::take(&mut self.fresh_trades),
        }
    }

    /// Gives the heartbeats the engine says run a full timeout from `now_ns`, once, when this
    /// first runs as the primary (at start, or at a promotion): beats are not journaled, so
    /// no deadline survives a restart.
    fn arm_heartbeats(&mut self, now_ns: u64) {
        if !self.heartbeats_armed {
            self.heartbeats_armed = true;
            self.heartbeats
                .arm_all(self.engine.running_heartbeats(), now_ns);
        }
    }

    /// How long a release must keep answers waiting for the heartbeat timers to make up for
    /// it: a quarter of the heartbeat timeout (at least 100 ms). A shorter wait leaves a
    /// client that beats well within its timeout the time for its next beat.
    fn answers_stall_ns(&self) -> u64 {
        (self.config.heartbeat_timeout.as_nanos() as u64 / 4).max(ANSWER_STALL_MIN_NS)
    }

    /// Pushes back the heartbeat deadlines by each long release that ended (see
    /// [`HeartbeatTimers::postpone`]).
    fn make_up_for_stalls(&mut self, now_ns: u64) {
        let stall_ns = self.answers_stall_ns();
        let clock_ns = crate::seat::clock_ns();
        for (start, end) in self.stalls.take_ended() {
            if end.saturating_sub(start) >= stall_ns {
                // The stall began `clock_ns - start` ago, on the sequencer's clock.
                let began_ns = now_ns.saturating_sub(clock_ns.saturating_sub(start));
                self.heartbeats
                    .postpone(began_ns, end.saturating_sub(start), now_ns);
            }
        }
    }

    /// Journals the expiry of every heartbeat whose deadline has passed (each cancels its
    /// address's open orders); arms the running heartbeats first when this has just become
    /// the primary (start or promotion). The number of commands applied.
    fn expire_heartbeats(&mut self, now_ns: u64, published: &mut BatchEvents) -> u64 {
        self.arm_heartbeats(now_ns);
        self.make_up_for_stalls(now_ns);
        if self
            .heartbeats
            .next_deadline_ns()
            .is_none_or(|d| d > now_ns)
        {
            return 0;
        }
        // A release under way for long (the committer waiting for a frozen standby or the
        // disk) holds answers: no key expires before it ends and is made up for.
        if self.stalls.under_way_ns(crate::seat::clock_ns()) >= self.answers_stall_ns() {
            self.block_timers();
            return 0;
        }
        let mut applied = 0;
        for (key_id, address) in self.heartbeats.due(now_ns) {
            if !self.engine.heartbeats_running(&key_id) {
                self.heartbeats.remove(&key_id);
                continue;
            }
            // Kept due until its expiry is journaled (the journal has room again).
            if !self
                .journal
                .admits(RECORD_BYTES_ESTIMATE, WriteClass::Reserved)
            {
                self.block_timers();
                break;
            }
            self.heartbeats.remove(&key_id);
            self.apply(
                now_ns,
                &Command::HeartbeatsExpired { key_id, address },
                published,
            );
            self.stats
                .heartbeat_expiries
                .fetch_add(1, Ordering::Relaxed);
            applied += 1;
        }
        applied
    }

    /// Carries out a heartbeat request: a start or a stop is journaled and applied, a beat
    /// only moves the deadline.
    fn heartbeat(
        &mut self,
        now_ns: u64,
        request: &HeartbeatRequest,
        published: &mut BatchEvents,
    ) -> HeartbeatAnswer {
        let HeartbeatRequest {
            key_id,
            address,
            op,
        } = request;
        match op {
            HeartbeatOp::Start => {
                let start = Command::StartHeartbeats {
                    key_id: *key_id,
                    address: *address,
                };
                match self.apply(now_ns, &start, published).1 {
                    ladder_engine::Reply::Ok => HeartbeatAnswer::Beating {
                        heartbeat_id: self.heartbeats.start(*key_id, *address, now_ns),
                    },
                    _ => HeartbeatAnswer::WrongId { current: None },
                }
            }
            HeartbeatOp::Beat(id) => match self.heartbeats.beat(key_id, id, now_ns) {
                Ok(heartbeat_id) => HeartbeatAnswer::Beating { heartbeat_id },
                Err(current) => HeartbeatAnswer::WrongId { current },
            },
            HeartbeatOp::Stop => {
                self.heartbeats.remove(key_id);
                let stop = Command::StopHeartbeats { key_id: *key_id };
                self.apply_if_it_changes(now_ns, &stop, published);
                HeartbeatAnswer::Stopped
            }
        }
    }

    /// Timers found the journal without room (or the lease lapsing): they are not looked at
    /// again for a while, so that the loop waits instead of spinning on them.
    fn block_timers(&mut self) {
        self.timers_blocked_until = Some(Instant::now() + TIMERS_BLOCKED_WAIT);
    }

    /// Publishes the gauges of a batch's end: whether the journal refuses ordinary writes
    /// (`ladder_journal_full`), heartbeats running, trades and orders held.
    fn publish_gauges(&self) {
        let full = self.journal.is_full();
        self.stats.journal_full.store(full, Ordering::Relaxed);
        self.stats
            .heartbeats_running
            .store(self.engine.heartbeat_count() as u64, Ordering::Relaxed);
        self.stats
            .trades_held
            .store(self.engine.held_trade_count(), Ordering::Relaxed);
        self.stats
            .orders_held
            .store(self.engine.held_order_count(), Ordering::Relaxed);
        self.stats
            .order_hashes_held
            .store(self.engine.held_order_hash_count(), Ordering::Relaxed);
    }

    /// Applies a client's or the service's own command, except a cancel that would change
    /// nothing: that one is answered as of the last sequence, with no journal record (a
    /// replay without it reaches the same state; nothing the engine does depends on it).
    fn apply_if_it_changes(
        &mut self,
        now_ns: u64,
        command: &Command,
        published: &mut BatchEvents,
    ) -> (u64, ladder_engine::Reply) {
        match self.engine.unchanged_by(command) {
            Some(reply) => {
                if matches!(
                    command,
                    Command::CancelOrder { .. }
                        | Command::CancelMarket { .. }
                        | Command::CancelAll { .. }
                ) {
                    self.stats
                        .unjournaled_cancels
                        .fetch_add(1, Ordering::Relaxed);
                }
                (self.journal.last_seq(), reply)
            }
            None => self.apply(now_ns, command, published),
        }
    }

    /// Journals and applies `command` (a replicated record always: its sequence is given).
    fn apply(
        &mut self,
        now_ns: u64,
        command: &Command,
        published: &mut BatchEvents,
    ) -> (u64, ladder_engine::Reply) {
        let seq = self.journal.last_seq() + 1;
        let payload = self.encoder.encode(command);
        if let Err(error) = self.journal.append(seq, now_ns, RECORD_COMMAND_V1, payload) {
            tracing::error!(%error, seq, "journal append failed; stopping the service");
            crate::stderr_line(format_args!("ladder: journal append failed: {error}"));
            std::process::exit(1);
        }
        let reply = self.engine.apply(seq, now_ns, command);
        // A new term starts here before anything after it is released or witnessed (the
        // node's runtime learns of it only from the answer, later).
        if let (Command::BeginTerm { .. }, Some(hub)) = (command, &self.shipping) {
            hub.set_term_start(self.engine.term_start_seq());
        }
        let events = self.engine.events();
        if self.keeps_board {
            touched_markets(events, &mut self.touched);
            for event in events {
                if let Event::Trade(trade) = event {
                    if trade.index >= self.trades_seen {
                        self.trades_seen = trade.index + 1;
                        self.fresh_trades.extend(price_point(&self.engine, trade));
                    }
                }
            }
        }
        if self.publishes {
            published.push(seq, now_ns, events);
        }
        (seq, reply)
    }
}

/// The wall clock in ns since the Unix epoch (0 before it).
pub fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// How long timers wait after the journal had no room for them.
const TIMERS_BLOCKED_WAIT: Duration = Duration::from_millis(100);

/// Why a client's write reaches a standby's sequencer refused (the gateway refuses writes on
/// a standby before they get here; this guards what it does not see, such as a
/// cancel-on-disconnect, and a write that passed the gateway just before a demotion). The
/// text of API.md §19, shared with the gateway.
pub const STANDBY_REFUSAL: &str = "standby: not primary";

/// Room a journal record of an ordinary command takes at most (frame included); an order
/// adds its signature's bytes.
const RECORD_BYTES_ESTIMATE: usize = 512;

/// The journal room `command`'s record takes at most, and the class of write it is.
fn record_room(command: &Command) -> (usize, WriteClass) {
    match command {
        Command::PlaceOrder(order) => {
            let signature = order.signed.as_ref().map_or(0, |s| s.signature.len());
            (RECORD_BYTES_ESTIMATE + signature, WriteClass::Ordinary)
        }
        // Cancels of every kind (a dead-man switch's too, and a clean stop's disarming, which
        // keeps the next start from cancelling), timers and settlement use the reserve.
        Command::CancelOrder { .. }
        | Command::CancelMarket { .. }
        | Command::CancelAll { .. }
        | Command::HeartbeatsExpired { .. }
        | Command::DeadManSwitchTripped { .. }
        | Command::DeadManSwitchesLost { .. }
        | Command::DisarmDeadManSwitches { .. }
        | Command::Tick
        | Command::SettlementUpdate { .. } => (RECORD_BYTES_ESTIMATE, WriteClass::Reserved),
        _ => (RECORD_BYTES_ESTIMATE, WriteClass::Ordinary),
    }
}

/// Whether the journal has room for `work`'s records (see `Journal::admits`): on a full
/// disk placements, key creations, admin writes and heartbeat starts and stops are refused
/// before anything is journaled, while cancels, timers, settlement and a standby's copies
/// use the reserve (bounded by the state there is: no client can spend it on writes that
/// change nothing lasting). A beat journals nothing and always goes through.
fn journal_admits(journal: &mut Journal, work: &Work) -> bool {
    let (bytes, class) = match work {
        Work::Command(command) => record_room(command),
        Work::Commands(list) => list.iter().map(record_room).fold(
            (0, WriteClass::Reserved),
            |(bytes, class), (more, this)| {
                let class = if this == WriteClass::Ordinary {
                    this
                } else {
                    class
                };
                (bytes + more, class)
            },
        ),
        Work::Replicated { .. } => (RECORD_BYTES_ESTIMATE, WriteClass::Reserved),
        Work::Heartbeat(request) if !request.op.journals() => return true,
        Work::Heartbeat(_) => (RECORD_BYTES_ESTIMATE, WriteClass::Ordinary),
        Work::Query(_) => return true,
    };
    journal.admits(bytes, class)
}

/// What a batch held, for the sequencer's counters.
#[derive(Clone, Copy, Debug, Default)]
struct BatchCounts {
    /// Commands applied (journaled or not).
    commands: u64,
    /// Queries answered.
    queries: u64,
}

/// Whether clients' writes are refused in this batch, and why.
#[derive(Clone, Copy, Debug)]
struct WriteGate {
    /// A standby: only the primary's records are written.
    follower: bool,
    /// A coordinated node whose acknowledgement fence is closed: a leader past its lease's
    /// deadline, or a node demoted or not leading (the primary's records still come in).
    fenced: bool,
    /// Fewer standbys connected than `--replicas` requires.
    replicas_missing: bool,
    /// With standbys to wait for, the witness takes no position now (etcd does not answer).
    witness_failing: bool,
}

/// Whether `command` is a gateway's record of a dead-man switch (armed, or tripped by a
/// disconnect), which a client's connection causes but no client sends.
fn is_dead_man_record(command: &Command) -> bool {
    matches!(
        command,
        Command::ArmDeadManSwitch { .. } | Command::DeadManSwitchTripped { .. }
    )
}

/// One completion list per sink, each made with room for all of that sink's submissions in
/// `batch`: growing one a push at a time copied a 4,096-submission batch's completions about
/// twice over.
fn completion_lists(batch: &[Submission], sinks: usize) -> Vec<Vec<Completion>> {
    let mut counts = vec![0usize; sinks];
    for submission in batch {
        if let Some(count) = counts.get_mut(usize::from(submission.ticket.sink)) {
            *count += 1;
        }
    }
    counts.into_iter().map(Vec::with_capacity).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_times_fall_into_the_first_bucket_whose_bound_holds_them() {
        let times = FlushTimes::default();
        for ns in [
            1,
            50_000,
            50_001,
            999_999,
            100_000_000,
            100_000_001,
            u64::MAX / 2,
        ] {
            times.record(ns);
        }
        let counts: Vec<u64> = times
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts, [2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(times.count(), 7);
    }

    #[test]
    fn a_batch_hands_each_command_exactly_its_own_events() {
        let event = |market: u32| Event::Market {
            market,
            change: ladder_engine::MarketChange::Paused,
            market_seq: 0,
        };
        let mut batch = BatchEvents::with_room(0);
        assert!(batch.is_empty());
        batch.push(7, 70, &[event(1), event(2)]);
        batch.push(8, 80, &[]);
        batch.push(9, 90, &[event(3)]);
        let seen: Vec<(u64, u64, Vec<Event>)> = batch
            .iter()
            .map(|p| (p.seq, p.timestamp_ns, p.events.to_vec()))
            .collect();
        assert_eq!(
            seen,
            [(7, 70, vec![event(1), event(2)]), (9, 90, vec![event(3)])]
        );
        assert_eq!(batch.event_count(), 3);
        assert!(!batch.is_empty());
    }
}
