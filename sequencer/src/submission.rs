//! What gateway threads send the sequencer, and what comes back.

use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};
use ladder_engine::{Command, Engine, Reply};
use parking_lot::Mutex;

use crate::heartbeats::HeartbeatAnswer;

/// A read run on the sequencer thread against the engine, between commands. It leaves its
/// value in the [`Answer`] its producer holds (see [`query`]).
pub type Query = Box<dyn FnOnce(&Engine) + Send>;

/// Where a query's value waits for its producer: filled on the sequencer thread before the
/// query's completion is released, taken on the producer's thread once it has arrived.
pub struct Answer<T>(Arc<Mutex<Option<T>>>);

impl<T> Answer<T> {
    /// The value, once the query's completion has arrived (`None` before it, or once taken).
    pub fn take(&self) -> Option<T> {
        self.0.lock().take()
    }
}

/// A query that runs `read` against the engine, and the answer its value is left in.
pub fn query<T: Send + 'static>(
    read: impl FnOnce(&Engine) -> T + Send + 'static,
) -> (Query, Answer<T>) {
    let slot = Arc::new(Mutex::new(None));
    let fill = slot.clone();
    let query: Query = Box::new(move |engine: &Engine| {
        *fill.lock() = Some(read(engine));
    });
    (query, Answer(slot))
}

/// Who is waiting for an answer: the index of the sink that delivers it and a token
/// that sink understands (a connection and request slot, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// Index of the completion sink (the gateway thread).
    pub sink: u16,
    /// The sink's own token.
    pub token: u64,
}

/// One unit of work.
pub enum Work {
    /// A state change: journaled, then applied.
    Command(Command),
    /// Several state changes answered together (a batch request), in order.
    Commands(Vec<Command>),
    /// A record replicated from the primary: journaled and applied with the primary's
    /// sequence number and time (a standby's only writes).
    Replicated {
        /// The primary's sequence number: must be the next one.
        seq: u64,
        /// The primary's timestamp.
        timestamp_ns: u64,
        /// The command.
        command: Command,
    },
    /// A read: run against the engine, not journaled.
    Query(Query),
    /// A heartbeat start, beat or stop (starts and stops are journaled, beats are not);
    /// answered with a [`crate::HeartbeatAnswer`] as a query's output.
    Heartbeat(crate::HeartbeatRequest),
}

impl Work {
    /// The command this work applies first, if it applies any: what the engine is hinted
    /// with (see `Engine::prefetch_ahead`) before its turn.
    #[inline]
    pub fn first_command(&self) -> Option<&Command> {
        match self {
            Work::Command(command) | Work::Replicated { command, .. } => Some(command),
            Work::Commands(list) => list.first(),
            Work::Query(_) | Work::Heartbeat(_) => None,
        }
    }
}

/// Work with its ticket.
pub struct Submission {
    /// Where the answer goes.
    pub ticket: Ticket,
    /// What to do.
    pub work: Work,
}

/// The answer to a submission, released only once its batch is durable.
pub enum Completion {
    /// A command was journaled at `seq` and applied.
    Applied {
        /// The submission's ticket.
        ticket: Ticket,
        /// Its sequence number.
        seq: u64,
        /// The engine's reply.
        reply: Reply,
    },
    /// Several commands were journaled and applied, in order.
    AppliedAll {
        /// The submission's ticket.
        ticket: Ticket,
        /// Sequence number and reply of each command.
        results: Vec<(u64, Reply)>,
    },
    /// A query ran: its value is in the producer's [`Answer`].
    Answered {
        /// The submission's ticket.
        ticket: Ticket,
    },
    /// A heartbeat request was carried out.
    Heartbeat {
        /// The submission's ticket.
        ticket: Ticket,
        /// What it did.
        answer: HeartbeatAnswer,
        /// Whether it journaled a record (a start or a stop): answered as a write is.
        journaled: bool,
    },
    /// The service cannot take writes (a standby, or too few replicas); nothing was journaled.
    Refused {
        /// The submission's ticket.
        ticket: Ticket,
        /// Why, for the client.
        reason: &'static str,
    },
}

impl Completion {
    /// The ticket of the submission this answers.
    pub fn ticket(&self) -> Ticket {
        match self {
            Completion::Applied { ticket, .. }
            | Completion::AppliedAll { ticket, .. }
            | Completion::Answered { ticket }
            | Completion::Heartbeat { ticket, .. }
            | Completion::Refused { ticket, .. } => *ticket,
        }
    }
}

/// Receives completions for one sink (a gateway thread wakes its event loop).
pub trait CompletionSink: Send {
    /// Takes the completions of one batch, in submission order.
    fn deliver(&mut self, completions: Vec<Completion>);

    /// Called once after each release, when everything of it for this sink (completions,
    /// and frames an inline [`crate::Publisher`] queued) has been handed over: a sink that
    /// wakes its consumer once per release rather than once per delivery does it here.
    fn wake(&mut self) {}
}

/// Why a submission was not taken.
#[derive(Debug)]
pub enum SubmitError {
    /// The ring is full: answer 503 with `Retry-After`.
    Full(Box<Submission>),
    /// The sequencer has stopped.
    Stopped(Box<Submission>),
}

/// One producer's end of its ring into the sequencer.
#[derive(Clone)]
pub struct Submitter {
    pub(crate) ring: Sender<Submission>,
    /// The sequencer's bell, rung after each submission.
    pub(crate) bell: std::sync::Arc<crate::bell::Bell>,
    /// The sequencer's seat (see `seat.rs`).
    pub(crate) seat: std::sync::Arc<crate::sequencer::WriterSeat>,
    /// Set when this producer may do the sleeping sequencer's round itself instead of
    /// ringing: asked with the seat held, whether a round can run on this thread now.
    pub(crate) seat_gate: Option<SeatGate>,
}

/// Asked by a producer holding the sequencer's seat, before it does the round: whether the
/// round can run on this thread without waiting for this thread (see
/// [`Submitter::taking_seat`]).
pub type SeatGate = Arc<dyn Fn() -> bool + Send + Sync>;

impl Submitter {
    /// This producer, allowed to do the sequencer's round on its own thread when it finds
    /// the sequencer asleep (where the seat is open: `async` durability, no standby waited
    /// for, sequencer not pinned), instead of waking it: one thread hand-off fewer per
    /// request. Only for a producer whose thread holds no lock while it submits and never
    /// waits on a round's output itself. `gate` is asked with the seat held, just before the
    /// round: it says no when the round could wait for this very thread (a gateway loop whose
    /// own feed queue is full: the round's frames would wait for the loop to drain it). While
    /// the seat is held nobody else releases, so what the gate saw holds for the round.
    pub fn taking_seat(mut self, gate: SeatGate) -> Submitter {
        self.seat_gate = Some(gate);
        self
    }

    /// Queues a submission without blocking.
    pub fn try_submit(&self, submission: Submission) -> Result<(), SubmitError> {
        match self.ring.try_send(submission) {
            Ok(()) => {
                let in_seat = self
                    .seat_gate
                    .as_ref()
                    .is_some_and(|gate| self.seat.round_here(&self.bell, &**gate));
                if !in_seat {
                    self.bell.ring();
                }
                Ok(())
            }
            Err(TrySendError::Full(s)) => Err(SubmitError::Full(Box::new(s))),
            Err(TrySendError::Disconnected(s)) => Err(SubmitError::Stopped(Box::new(s))),
        }
    }

    /// Submissions waiting in the ring.
    pub fn depth(&self) -> usize {
        self.ring.len()
    }
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.work {
            Work::Command(c) => c.type_name(),
            Work::Commands(_) => "commands",
            Work::Replicated { .. } => "replicated",
            Work::Query(_) => "query",
            Work::Heartbeat(_) => "heartbeat",
        };
        write!(f, "Submission({:?}, {kind})", self.ticket)
    }
}

/// A sink that forwards completions to a channel (internal producers and tests).
pub struct ChannelSink(pub crossbeam_channel::Sender<Completion>);

impl CompletionSink for ChannelSink {
    fn deliver(&mut self, completions: Vec<Completion>) {
        for completion in completions {
            let _ = self.0.send(completion);
        }
    }
}

/// A sink that forwards each batch's completions as one message (what a gateway thread
/// does: one channel operation per batch, not per answer).
pub struct BatchChannelSink(pub crossbeam_channel::Sender<Vec<Completion>>);

impl CompletionSink for BatchChannelSink {
    fn deliver(&mut self, completions: Vec<Completion>) {
        if !completions.is_empty() {
            let _ = self.0.send(completions);
        }
    }
}

/// A sink that drops completions (producers that do not wait for answers).
pub struct DiscardSink;

impl CompletionSink for DiscardSink {
    fn deliver(&mut self, _completions: Vec<Completion>) {}
}
