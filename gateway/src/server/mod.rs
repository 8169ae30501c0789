//! The event loops: a few threads, each with its own listening socket on the same address
//! (SO_REUSEPORT: the kernel spreads connections), its own connections, and its own ring
//! into the sequencer. Completions come back through a channel and a waker.
//!
//! Split by job: the event loop and the shared types here, HTTP connections in
//! [`http_conns`], WebSocket connections in [`ws_conns`], which sockets want which feed
//! frames in [`feed_routes`].

mod feed_routes;
mod http_conns;
mod ws_conns;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use ladder_sequencer::clock_ns;
use ladder_sequencer::{
    Completion, CompletionSink, Submission, SubmitError, Submitter, Ticket, Work,
};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::conn::{Connection, READ_BUFFER_MAX};
use crate::deferred::{DeferPool, Return, DEFER_WORKERS};
use crate::handler::Outcome;
use crate::http::{HttpError, Method, Request, Response, Status};
use crate::ws::conn::{Action, Interests, WsConn};
use crate::ws::feed::{FeedBatch, FeedTarget};
use crate::ws::WsKind;
use tungstenite::protocol::frame::coding::CloseCode;

use feed_routes::FeedRoutes;
use ws_conns::DeadManRecord;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONNECTION: usize = 2;
/// WebSocket connections' tokens start here.
const FIRST_WEBSOCKET: usize = 1 << 30;

/// Limits and timeouts of the HTTP server.
#[derive(Clone, Debug)]
pub struct ServerLimits {
    /// Open connections across all threads.
    pub connections_max: usize,
    /// Open connections from one client address (`0`: no cap).
    pub connections_per_ip_max: usize,
    /// A new connection must complete its TLS handshake and send its first request byte
    /// within this time.
    pub first_bytes_timeout: Duration,
    /// A request must arrive whole within this time of its first byte.
    pub request_timeout: Duration,
    /// An idle keep-alive connection is closed after this time.
    pub idle_timeout: Duration,
    /// A subscribed WebSocket silent this long gets a ping; silent as long again after it,
    /// it is closed.
    pub ws_ping_after: Duration,
    /// TLS (HTTPS and WSS) when a certificate is configured; plain otherwise.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Most answers of one release that a releasing thread writes in a sleeping loop's seat
    /// (a release with more wakes the loop; 0: no seat, the loop is always woken). See
    /// [`LoopWake`].
    pub seat_answers_max: usize,
    /// How long a loop must have been marked sleeping for a releasing thread to take its
    /// seat (a loop that has only just marked itself is usually on its way back).
    pub seat_after_asleep: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            connections_max: 10_000,
            connections_per_ip_max: 256,
            first_bytes_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            ws_ping_after: Duration::from_secs(30),
            tls: None,
            seat_answers_max: SEAT_ANSWERS_MAX,
            seat_after_asleep: SEAT_AFTER_ASLEEP,
        }
    }
}

/// Serves requests: the application behind the HTTP layer.
pub trait Service: Send + Sync + 'static {
    /// Handles one request from `peer`.
    fn handle(&self, request: &Request, peer: SocketAddr) -> Outcome;

    /// Checks the `auth` object of a `/ws/user` subscription; the account it speaks for and
    /// the key it authenticated with.
    fn ws_user_auth(&self, _auth: &serde_json::Value) -> Result<crate::auth::UserAuth, String> {
        Err("the user channel is not served here".into())
    }

    /// Whether the API key a `/ws/user` subscription authenticated with is still live: a
    /// deleted key fails at once, so its subscriptions end.
    fn api_key_live(&self, _key_id: &uuid::Uuid) -> bool {
        true
    }

    /// How many API keys were deleted so far: when it moves, each gateway loop looks at its
    /// `/ws/user` subscriptions' keys in its next turn (at most its 250 ms poll away).
    fn api_key_removals(&self) -> u64 {
        0
    }

    /// The response to a submission the sequencer refused for `reason`, when the service
    /// words that refusal itself (`None`: the plain 503 `{"error": reason}`). A standby's
    /// refusal names the leader, however late in a request's life it comes.
    fn refusal(&self, _reason: &'static str) -> Option<Response> {
        None
    }

    /// Counts an answer the HTTP layer gave itself, without `handle`: a request it could not
    /// read (`path` unknown) or did not receive in time, a refused WebSocket upgrade.
    fn count_answer(&self, _path: Option<&str>, _status: u16) {}

    /// Why a `/ws/user` subscription with `cancel_on_disconnect` is refused here (`None`: it
    /// is taken): a standby cannot journal its arming nor its cancel.
    fn dead_man_switch_refusal(&self) -> Option<&'static str> {
        None
    }

    /// Whether WebSocket upgrades are accepted now (a service still recovering says no).
    fn ws_ready(&self) -> bool {
        true
    }

    /// Counts an upgrade request from `peer` against its rate limit: `Err(seconds to wait)`
    /// when it has none left.
    fn admit_upgrade(&self, _peer: SocketAddr) -> Result<(), u64> {
        Ok(())
    }

    /// Counts a WebSocket message from `peer` that asks for `units` units of work (a book
    /// per token of a snapshot; one for any other message) against its rate limit:
    /// `Err(seconds to wait)` when it has not that many left.
    fn admit_ws_message(&self, _peer: std::net::IpAddr, _units: usize) -> Result<(), u64> {
        Ok(())
    }
}

/// A gateway thread's receiving end for completions: one message and one wake-up per
/// batch, however many of the batch's answers are this thread's.
pub struct GatewaySink {
    tx: Sender<Vec<Completion>>,
    wake: Arc<LoopWake>,
}

impl CompletionSink for GatewaySink {
    fn deliver(&mut self, completions: Vec<Completion>) {
        if completions.is_empty() {
            return;
        }
        self.wake.owe_answers(completions.len());
        let _ = self.tx.send(completions);
        self.wake.owe();
    }

    fn wake(&mut self) {
        self.wake.wake_if_owed();
    }
}

/// Wakes one event loop once per release however much was queued for it: whoever queues
/// (its completion sink, the feed's [`FeedTarget`]) marks the wake-up owed, and the sink's
/// [`CompletionSink::wake`] at the release's end makes it, and only when the loop may be
/// asleep: a loop that is running takes what was queued before it sleeps (see
/// [`LoopWake::may_sleep`]), so a busy loop costs its producers no system call.
///
/// A loop found asleep is not always woken: when its seat is free (the loop thread holds it
/// whenever it is not blocked in `poll`), the releasing thread takes the seat and writes the
/// answers and frames itself, and wakes the loop only for what must run there (requests to
/// parse, continuations, cancels on disconnect). An answer then costs one thread hand-off
/// fewer: the loop sleeps through it. A release with more than
/// [`ServerLimits::seat_answers_max`] answers for the loop wakes it instead: the loop writes
/// them, off the releasing thread.
pub struct LoopWake {
    waker: Arc<Waker>,
    owed: AtomicBool,
    /// Answers queued since the last wake-up was made or skipped.
    answers_owed: AtomicUsize,
    /// Most answers of one release written in the seat ([`ServerLimits::seat_answers_max`]).
    seat_answers_max: AtomicUsize,
    /// Set by the loop just before it may block in `poll`, cleared when `poll` returns.
    sleeping: AtomicBool,
    /// When the loop last marked itself sleeping (ns of [`clock_ns`]).
    slept_at_ns: AtomicU64,
    /// [`ServerLimits::seat_after_asleep`], in ns.
    seat_after_asleep_ns: AtomicU64,
    /// The loop's state, held by the loop thread except while it is blocked in `poll`.
    seat: Arc<Seat>,
}

impl std::fmt::Debug for LoopWake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopWake")
            .field("owed", &self.owed)
            .field("sleeping", &self.sleeping)
            .finish_non_exhaustive()
    }
}

/// The default of [`ServerLimits::seat_answers_max`]: a busy service, whose releases carry
/// more, keeps that work on the gateway threads.
pub const SEAT_ANSWERS_MAX: usize = 4;

/// Most frame deliveries (a frame to a socket) of one release that a releasing thread writes
/// in a sleeping loop's seat; a release with more wakes the loop to write them (a fan-out to
/// many sockets stays off the releasing thread).
pub const SEAT_FRAMES_MAX: usize = 8;

/// The default of [`ServerLimits::seat_after_asleep`]. Without it, saturated runs (`resting`,
/// 16 connections x 8 pipelined) lost ~9 % of their rate to loops waiting for their seats.
pub const SEAT_AFTER_ASLEEP: Duration = Duration::from_micros(20);

/// Set in the ticket of work whose completer may run in a sleeping loop's seat: journaled
/// commands, whose completers shape the reply from the engine's (queries' answers, which may
/// wait for or read `history.db`, run on the loop; see [`seat_may_answer`] for the rest).
const SEAT_TICKET: u64 = 1 << 63;

/// Whether a releasing thread may run the completer of `completion` in a sleeping loop's
/// seat: the work was commands (its ticket carries [`SEAT_TICKET`]) and no reply names an
/// order the engine forgot, whose reason the completer reads from `history.db`.
fn seat_may_answer(completion: &Completion) -> bool {
    use ladder_engine::{NotCanceled, Reply};
    fn light(reply: &Reply) -> bool {
        match reply {
            Reply::Canceled(report) => !report
                .not_canceled
                .iter()
                .any(|(_, reason)| *reason == NotCanceled::Forgotten),
            _ => true,
        }
    }
    completion.ticket().token & SEAT_TICKET != 0
        && match completion {
            Completion::Applied { reply, .. } => light(reply),
            Completion::AppliedAll { results, .. } => results.iter().all(|(_, r)| light(r)),
            _ => false,
        }
}

/// An event loop's state ([`Worker`]), shared between the loop thread and the threads that
/// release answers to it; empty until the loop starts and once it has ended.
type Seat = parking_lot::Mutex<Option<Worker>>;

impl LoopWake {
    /// A wake-up of the loop that `waker` wakes, owed by nobody yet.
    pub fn new(waker: Arc<Waker>) -> LoopWake {
        LoopWake {
            waker,
            owed: AtomicBool::new(false),
            answers_owed: AtomicUsize::new(0),
            seat_answers_max: AtomicUsize::new(SEAT_ANSWERS_MAX),
            sleeping: AtomicBool::new(false),
            slept_at_ns: AtomicU64::new(0),
            seat_after_asleep_ns: AtomicU64::new(SEAT_AFTER_ASLEEP.as_nanos() as u64),
            seat: Arc::new(parking_lot::Mutex::new(None)),
        }
    }

    /// Something was queued for the loop: wake it at the release's end.
    pub fn owe(&self) {
        self.owed.store(true, Ordering::Release);
    }

    /// `count` answers were queued for the loop.
    pub fn owe_answers(&self, count: usize) {
        self.answers_owed.fetch_add(count, Ordering::Relaxed);
    }

    /// Whether a wake-up is owed.
    pub fn is_owed(&self) -> bool {
        self.owed.load(Ordering::Acquire)
    }

    /// Wakes the loop if anything was queued for it since its last wake-up and it may be
    /// asleep, unless the caller could take the loop's seat and carry out all of it.
    pub fn wake_if_owed(&self) {
        if self.owed.swap(false, Ordering::AcqRel) {
            let answers = self.answers_owed.swap(0, Ordering::Relaxed);
            // Pairs with the fence in `may_sleep`: either the loop sees what was queued
            // before this, or this sees the loop's `sleeping`.
            fence(Ordering::SeqCst);
            let seat_max = self.seat_answers_max.load(Ordering::Relaxed);
            if self.sleeping.load(Ordering::SeqCst)
                && (seat_max == 0
                    || answers > seat_max
                    || !self.asleep_for_a_while()
                    || !self.answer_in_its_seat())
            {
                self.wake_now();
            }
        }
    }

    /// Whether the loop marked itself sleeping at least [`ServerLimits::seat_after_asleep`]
    /// ago. A loop that has just done so is usually on its way back (a busy loop's `poll`
    /// returns at once), and would then wait for its seat: it is woken instead.
    fn asleep_for_a_while(&self) -> bool {
        let slept_at = self.slept_at_ns.load(Ordering::Relaxed);
        clock_ns().saturating_sub(slept_at) >= self.seat_after_asleep_ns.load(Ordering::Relaxed)
    }

    /// Carries out what was queued for a sleeping loop on the calling thread, if the loop's
    /// seat is free: whether nothing is left that needs the loop itself.
    fn answer_in_its_seat(&self) -> bool {
        let Some(mut seat) = self.seat.try_lock() else {
            // The loop holds it: it may already have looked at its queues, so wake it.
            return false;
        };
        let Some(worker) = seat.as_mut() else {
            return false;
        };
        let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            worker.answer_while_asleep()
        }));
        answered.unwrap_or_else(|_| {
            // As a panic on the loop thread would: the loop's connections close and the
            // loop thread, woken, finds its seat empty and ends. The releasing thread goes on.
            tracing::error!("gateway loop failed while answered in its seat; closing it");
            seat.take();
            false
        })
    }

    /// Wakes the loop now. It counts as awake from here: a later release queues for it
    /// and leaves the seat alone (the loop takes what is queued once it runs).
    pub fn wake_now(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// Called by the loop before it blocks in `poll`: whether it may, that is whether
    /// `queued()` finds nothing waiting for it once producers can see it is about to sleep.
    /// When it may not, it polls without blocking and takes what is queued.
    pub fn may_sleep(&self, queued: impl FnOnce() -> bool) -> bool {
        self.slept_at_ns.store(clock_ns(), Ordering::Relaxed);
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if queued() {
            self.sleeping.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Called by the loop when `poll` returns.
    pub fn awake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }
}

/// One event loop, made before the sequencer starts so its sink can be handed over.
pub struct Loop {
    poll: Poll,
    /// The loop's parts that its [`Worker`] keeps.
    parts: LoopParts,
}

/// An event loop's channels and sockets, kept by its [`Worker`] (the `Poll` stays with the
/// loop thread, which blocks in it without holding the worker).
struct LoopParts {
    registry: mio::Registry,
    listener: TcpListener,
    waker: Arc<Waker>,
    completions: Receiver<Vec<Completion>>,
    deferred_tx: Sender<(u64, Outcome)>,
    deferred_rx: Receiver<(u64, Outcome)>,
    feed: Receiver<FeedBatch>,
    /// How producers wake this loop (shared with its sink and its [`FeedTarget`]).
    wake: Arc<LoopWake>,
    /// This loop's open WebSocket connections (shared with its [`FeedTarget`]).
    websockets: Arc<AtomicUsize>,
    sink_index: u16,
}

/// Binds `threads` listening sockets on `addr` and makes their loops and sinks.
pub fn prepare(
    addr: SocketAddr,
    threads: usize,
) -> io::Result<(Vec<Loop>, Vec<GatewaySink>, SocketAddr)> {
    let (loops, sinks, _, bound) = prepare_with_feed(addr, threads)?;
    Ok((loops, sinks, bound))
}

/// Event loops, their completion sinks, their feed ends, and the bound address.
pub type Prepared = (Vec<Loop>, Vec<GatewaySink>, Vec<FeedTarget>, SocketAddr);

/// As [`prepare`], also giving each loop's end of the WebSocket feed.
pub fn prepare_with_feed(addr: SocketAddr, threads: usize) -> io::Result<Prepared> {
    let mut loops = Vec::with_capacity(threads);
    let mut sinks = Vec::with_capacity(threads);
    let mut targets = Vec::with_capacity(threads);
    let mut bound = addr;
    refuse_a_port_in_use(addr)?;
    for index in 0..threads {
        let std_listener = reuseport_listener(bound)?;
        bound = std_listener.local_addr()?;
        let mut listener = TcpListener::from_std(std_listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        // Completions: never more than this loop has submitted and not yet taken back, at
        // most `IN_FLIGHT_MAX` per connection (and the ring's capacity): bounded by what the
        // loop admits, not by the channel, so that the sequencer never waits on a loop.
        let (tx, rx) = unbounded();
        let (feed_tx, feed_rx) = crossbeam_channel::bounded(FEED_BATCHES_QUEUED_MAX);
        let wake = Arc::new(LoopWake::new(waker.clone()));
        let websockets = Arc::new(AtomicUsize::new(0));
        targets.push(FeedTarget {
            tx: feed_tx,
            wake: wake.clone(),
            websockets: websockets.clone(),
        });
        sinks.push(GatewaySink {
            tx,
            wake: wake.clone(),
        });
        // Deferred outcomes: at most one per job the pool accepted (`DEFER_QUEUE_MAX` queued,
        // `DEFER_WORKERS` running); a job refused for a full queue is answered 503 at once.
        let (deferred_tx, deferred_rx) = unbounded();
        let registry = poll.registry().try_clone()?;
        loops.push(Loop {
            poll,
            parts: LoopParts {
                registry,
                listener,
                waker,
                completions: rx,
                deferred_tx,
                deferred_rx,
                feed: feed_rx,
                wake: wake.clone(),
                websockets,
                sink_index: index as u16,
            },
        });
    }
    Ok((loops, sinks, targets, bound))
}

/// The outcome of a request that asked to close the connection: its response closes it.
fn closing(outcome: Outcome) -> Outcome {
    finishing(outcome, Response::closing)
}

/// `outcome` with `finish` applied to its final response, whenever that comes.
pub(super) fn finishing(outcome: Outcome, finish: fn(Response) -> Response) -> Outcome {
    match outcome {
        Outcome::Respond(response) => Outcome::Respond(finish(response)),
        Outcome::Submit(work, completer) => {
            Outcome::Submit(work, Box::new(move |c| finish(completer(c))))
        }
        Outcome::Defer(job) => Outcome::Defer(Box::new(move || finishing(job(), finish))),
        Outcome::Continue(work, continuation) => {
            Outcome::Continue(work, Box::new(move |c| finishing(continuation(c), finish)))
        }
    }
}

/// Fails with `AddrInUse` when another socket listens on `addr` already (a fixed port only).
///
/// The loops' listeners share their port through `SO_REUSEPORT`, which the kernel grants to
/// any socket of the same user that sets it too: a second service started on the same port
/// would join the first one's group and take part of its connections. A socket without
/// `SO_REUSEPORT` cannot join, so binding one first (and letting it go) tells the two cases
/// apart; the loops' own group refuses such a probe in turn while it runs.
pub fn refuse_a_port_in_use(addr: SocketAddr) -> io::Result<()> {
    use socket2::{Domain, Protocol, Socket, Type};
    if addr.port() == 0 {
        return Ok(());
    }
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Connections of an earlier run still in TIME_WAIT do not hold the port.
    probe.set_reuse_address(true)?;
    probe.bind(&addr.into()).map_err(|error| {
        if error.kind() == io::ErrorKind::AddrInUse {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                "address in use: another process listens on it",
            )
        } else {
            error
        }
    })
}

fn reuseport_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// Feed batches queued for one event loop before the releasing thread waits for it.
pub const FEED_BATCHES_QUEUED_MAX: usize = 65_536;

/// Shared by the loops: the stop flag and the connection count.
#[derive(Default)]
pub struct ServerShared {
    /// Set to stop accepting, drain and exit.
    pub stop: AtomicBool,
    /// Open connections (HTTP and WebSocket).
    pub connections: AtomicUsize,
    /// Open WebSocket connections.
    pub websockets: AtomicUsize,
    /// Open `/ws/user` connections (the feed encodes no user frames while there are none).
    pub ws_user: AtomicUsize,
    /// Open `/ws/market` connections (the feed encodes no market frames while there are
    /// none; a subscriber's snapshot is taken after its connection is counted).
    pub ws_market: AtomicUsize,
    /// WebSocket connections closed (1013) for falling behind, since start.
    pub ws_slow_consumer_closes: AtomicU64,
    /// Bytes `/ws/user` connections hold past their outbound bound while their clients catch
    /// up (bounded service-wide: `USER_OVERFLOW_POOL_BYTES_MAX`).
    pub ws_user_overflow_bytes: Arc<AtomicUsize>,
    /// Open connections by client address.
    pub peers: crate::peer_limit::PeerConnections,
    /// Connections closed at once because their address had its cap open, since start.
    pub refused_per_ip: AtomicU64,
    /// Connections closed at once because the service had every slot open, since start.
    pub refused_full: AtomicU64,
    /// Connections closed for sending no request (or finishing no TLS handshake) in time.
    pub first_bytes_timeouts: AtomicU64,
    /// `/ws/user` connections with `cancel_on_disconnect` that ended (each cancelled its
    /// account's open orders).
    pub cancels_on_disconnect: AtomicU64,
    /// Completions a releasing thread carried out in a sleeping loop's seat (the loop was
    /// not woken for them), since start.
    pub answered_while_asleep: AtomicU64,
    /// This run's id in the dead-man switches it journals (`ArmDeadManSwitch`): set once at
    /// start (its start time), so that the next run tells its own connections from those
    /// that ended with this one.
    pub process: u64,
    /// The number of the next `/ws/user` connection armed with `cancel_on_disconnect`.
    pub next_dead_man_connection: AtomicU64,
    /// Connections (address, number) that ended before a stop and whose cancel a stopping
    /// loop could not see journaled: the runtime journals them, or keeps them armed.
    pub dead_man_unfinished: parking_lot::Mutex<Vec<(ladder_engine::Address, u64)>>,
    /// Set before a stop that is a change of role (a leader that lost its lease, a standby
    /// that cuts or bootstraps), not the service stopping: WebSocket clients are told so.
    pub changing_role: AtomicBool,
    /// Requests every loop submitted to the sequencer (clients' reads and writes, dead-man
    /// switch records) and has not had answered yet: a stopping loop closes its WebSocket
    /// connections only once none is left, since the events of another loop's write (a
    /// maker's fill) reach this loop's subscribers.
    pub requests_in_flight: AtomicUsize,
    /// Requests answered across the loops since start: a stopping loop that sees it move
    /// waits [`FEED_SETTLE`] again, since a release hands out its answers just before it
    /// queues its events.
    pub requests_answered: AtomicU64,
}

impl ServerShared {
    /// A connection from `ip` closed.
    pub fn connection_closed(&self, ip: std::net::IpAddr) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
        self.peers.close(ip);
    }

    /// The count of open WebSocket connections of `kind`.
    pub fn websockets_of(&self, kind: WsKind) -> &AtomicUsize {
        match kind {
            WsKind::User => &self.ws_user,
            WsKind::Market => &self.ws_market,
        }
    }
}

/// Starts one thread per loop.
pub fn spawn(
    loops: Vec<Loop>,
    submitters: Vec<Submitter>,
    service: Arc<dyn Service>,
    limits: ServerLimits,
    shared: Arc<ServerShared>,
) -> io::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::new();
    let pool = Arc::new(DeferPool::start(DEFER_WORKERS)?);
    for (Loop { poll, parts: lp }, submitter) in loops.into_iter().zip(submitters) {
        let wake = lp.wake.clone();
        wake.seat_answers_max
            .store(limits.seat_answers_max, Ordering::Relaxed);
        wake.seat_after_asleep_ns.store(
            limits.seat_after_asleep.as_nanos() as u64,
            Ordering::Relaxed,
        );
        let name = format!("gateway-{}", lp.sink_index);
        let worker = Worker {
            lp,
            submitter,
            pool: pool.clone(),
            deferred: HashMap::new(),
            service: service.clone(),
            limits: limits.clone(),
            shared: shared.clone(),
            conns: Vec::new(),
            free: Vec::new(),
            generation: 0,
            tickets: HashMap::new(),
            continuations: HashMap::new(),
            next_ticket: 0,
            sockets: Vec::new(),
            sockets_free: Vec::new(),
            routes: FeedRoutes::default(),
            ws_tickets: HashMap::new(),
            dead_man_records: Vec::new(),
            dead_man_in_flight: HashMap::new(),
            dead_man_later: Vec::new(),
            held: Vec::new(),
            parse_later: Vec::new(),
            sockets_unread: Vec::new(),
            held_feed: Vec::new(),
            in_seat: false,
            last_sweep: Instant::now(),
            key_removals_seen: 0,
            stop_seen: None,
            idle_since: None,
            answers_seen: 0,
            sockets_closed_at: None,
            dead_man_unarmed: std::collections::HashSet::new(),
        };
        *wake.seat.lock() = Some(worker);
        handles.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || run(poll, &wake))?,
        );
    }
    Ok(handles)
}

struct Worker {
    lp: LoopParts,
    submitter: Submitter,
    pool: Arc<DeferPool>,
    /// Deferred jobs by token: connection index, generation, request serial.
    deferred: HashMap<u64, (usize, u32, u64)>,
    service: Arc<dyn Service>,
    limits: ServerLimits,
    shared: Arc<ServerShared>,
    conns: Vec<Option<Connection>>,
    free: Vec<usize>,
    generation: u32,
    tickets: HashMap<u64, (usize, u32, u64)>,
    /// What happens once the work of a ticket completes, for requests that go on after it.
    continuations: HashMap<u64, crate::handler::Continuation>,
    next_ticket: u64,
    sockets: Vec<Option<WsConn>>,
    sockets_free: Vec<usize>,
    routes: FeedRoutes,
    /// Book snapshots asked for WebSocket subscriptions: the socket's slot and generation,
    /// and where the sequencer leaves the books.
    ws_tickets: HashMap<u64, (usize, u32, ladder_sequencer::Answer<ws_conns::BookAnswer>)>,
    /// Dead-man switch records (armings, and the cancels of connections that ended) still to
    /// be submitted, in order (the ring was full).
    dead_man_records: Vec<DeadManRecord>,
    /// Those submitted and not yet answered, by ticket token.
    dead_man_in_flight: HashMap<u64, DeadManRecord>,
    /// Cancels the sequencer refused for a while (too few standbys, a full journal):
    /// submitted again at the next sweep.
    dead_man_later: Vec<DeadManRecord>,
    /// Completions another thread took while the loop slept that must be carried out here
    /// (continuations, book snapshots).
    held: Vec<Completion>,
    /// Feed batches a releasing thread left in the seat for the loop to write.
    held_feed: Vec<FeedBatch>,
    /// Connections (slot, generation) answered while the loop slept that hold input to parse.
    parse_later: Vec<(usize, u32)>,
    /// WebSocket connections (slot, generation) whose last read stopped at its frame budget.
    sockets_unread: Vec<(usize, u32)>,
    /// Whether a releasing thread is running this worker in its seat.
    in_seat: bool,
    /// When the timeouts were last swept.
    last_sweep: Instant,
    /// The service's count of deleted API keys when this loop last looked at its user
    /// subscriptions' keys.
    key_removals_seen: u64,
    /// When this loop saw the stop.
    stop_seen: Option<Instant>,
    /// Since when a stopping loop has had nothing in flight (tickets, deferred work) and
    /// seen no loop's request answered.
    idle_since: Option<Instant>,
    /// The service's count of answered requests when this stopping loop last looked.
    answers_seen: u64,
    /// When a stopping loop sent its WebSocket clients their close frames (1001, or 1012 at
    /// a change of role), once the events of its last writes had reached them.
    sockets_closed_at: Option<Instant>,
    /// Dead-man switch connections whose arming the sequencer refused (a standby, a full
    /// disk): a refused cancel of theirs is not tried again once this node writes.
    dead_man_unarmed: std::collections::HashSet<u64>,
}

/// A loop thread: blocks in `poll` without its worker's seat, and holds the seat while it
/// serves what `poll` reported and what was queued. Ends when the worker says so (a stop
/// with nothing in flight) or `poll` fails, and empties the seat.
fn run(mut poll: Poll, wake: &LoopWake) {
    let _leave = LeaveSeat(wake);
    let mut events = Events::with_capacity(1024);
    let mut may_sleep = false;
    loop {
        {
            let mut seat = wake.seat.lock();
            let Some(worker) = seat.as_mut() else {
                return;
            };
            if !worker.turn(&events, !may_sleep) {
                return;
            }
            may_sleep = worker.lp.wake.may_sleep(|| worker.has_queued());
        }
        let timeout = if may_sleep {
            Duration::from_millis(250)
        } else {
            Duration::ZERO
        };
        let polled = poll.poll(&mut events, Some(timeout));
        wake.awake();
        if let Err(e) = polled {
            if e.kind() == io::ErrorKind::Interrupted {
                events.clear();
                continue;
            }
            tracing::error!(error = %e, "poll failed");
            return;
        }
    }
}

/// How long a stopping loop waits, at most, for its clients to read what was queued for
/// them.
const STOP_WRITE_WAIT: Duration = Duration::from_secs(2);

/// The same wait for a node that changes role (it serves again as soon as it stops).
const ROLE_CHANGE_WRITE_WAIT: Duration = Duration::from_millis(500);

/// How long a stopping loop lets the events of its last writes come after their answers
/// before it closes its WebSocket connections.
const FEED_SETTLE: Duration = Duration::from_millis(20);

/// How long after it saw the stop a loop closes its WebSocket connections at the latest
/// (a write in flight that long, waiting for a slow standby or etcd, has its events dropped).
const CLOSE_AFTER_MAX: Duration = Duration::from_secs(2);

/// Empties a loop's seat when its thread ends, by returning or by a panic: the worker (its
/// listener, connections and queues) is dropped with the thread, as before there was a seat,
/// and nothing else holds it (its seat is reachable from its sinks).
struct LeaveSeat<'a>(&'a LoopWake);

impl Drop for LeaveSeat<'_> {
    fn drop(&mut self) {
        self.0.seat.lock().take();
    }
}

impl Drop for Worker {
    /// A loop that ends with requests unanswered (a panic) does not hold the other loops'
    /// stop at [`CLOSE_AFTER_MAX`].
    fn drop(&mut self) {
        let unanswered = self.tickets.len() + self.dead_man_in_flight.len();
        self.shared
            .requests_in_flight
            .fetch_sub(unanswered, Ordering::AcqRel);
    }
}

impl Worker {
    /// Counts a request this loop submitted to the sequencer (see
    /// [`ServerShared::requests_in_flight`]).
    fn request_submitted(&self) {
        self.shared
            .requests_in_flight
            .fetch_add(1, Ordering::AcqRel);
    }

    /// Counts the answer to a request [`Worker::request_submitted`] counted.
    fn request_answered(&self) {
        self.shared.requests_answered.fetch_add(1, Ordering::AcqRel);
        self.shared
            .requests_in_flight
            .fetch_sub(1, Ordering::AcqRel);
    }

    /// Serves one round: what was queued (when the loop did not sleep), the `events` of the
    /// last `poll`, completions, cancels to submit, timeouts. Whether the loop goes on.
    fn turn(&mut self, events: &Events, polled_without_sleep: bool) -> bool {
        if polled_without_sleep {
            self.take_queued();
        }
        let stopping = self.shared.stop.load(Ordering::Acquire);
        if stopping && self.stop_seen.is_none() {
            self.stop_seen = Some(Instant::now());
        }
        for event in events.iter() {
            match event.token() {
                LISTENER if !stopping => self.accept(),
                LISTENER => {}
                WAKER => self.take_queued(),
                Token(t) if t >= FIRST_WEBSOCKET => self.serve_socket(t - FIRST_WEBSOCKET),
                Token(t) => self.serve(t - FIRST_CONNECTION, Readiness::of(event)),
            }
        }
        if !self.sockets_unread.is_empty() {
            self.serve_unread_sockets();
        }
        self.take_completions();
        if !self.dead_man_records.is_empty() {
            self.submit_dead_man_records();
        }
        let key_removals = self.service.api_key_removals();
        if key_removals != self.key_removals_seen {
            self.key_removals_seen = key_removals;
            self.end_deleted_keys_subscriptions();
        }
        if self.last_sweep.elapsed() >= Duration::from_millis(500) {
            self.sweep_timeouts();
            self.sweep_sockets();
            self.last_sweep = Instant::now();
        }
        if stopping {
            self.close_sockets_when_settled();
        }
        let done = stopping
            && self.tickets.is_empty()
            && self.deferred.is_empty()
            && self.dead_man_records_settled()
            && self.written_out();
        if done {
            self.hand_over_dead_man_records();
        }
        !done
    }

    /// Sends a stopping loop's WebSocket clients their close frames once no loop has had a
    /// request in flight or answered one for [`FEED_SETTLE`] (a release queues a batch's
    /// events for every loop just after it hands out the batch's answers) and its feed
    /// queue is empty, or [`CLOSE_AFTER_MAX`] after it saw the stop (a write that long in
    /// flight, waiting for a standby or etcd, has its events go with the connection).
    fn close_sockets_when_settled(&mut self) {
        if self.sockets_closed_at.is_some() {
            return;
        }
        let answered = self.shared.requests_answered.load(Ordering::Acquire);
        if answered != self.answers_seen {
            self.answers_seen = answered;
            self.idle_since = None;
        }
        let settled = if self.tickets.is_empty() && self.deferred.is_empty() {
            let idle_since = *self.idle_since.get_or_insert_with(Instant::now);
            idle_since.elapsed() >= FEED_SETTLE
                && self.shared.requests_in_flight.load(Ordering::Acquire) == 0
                && self.lp.feed.is_empty()
                && self.held_feed.is_empty()
        } else {
            self.idle_since = None;
            false
        };
        let overdue = self
            .stop_seen
            .is_some_and(|seen| seen.elapsed() >= CLOSE_AFTER_MAX);
        if settled || overdue {
            self.sockets_closed_at = Some(Instant::now());
            self.close_sockets_going_away();
        }
    }

    /// Whether a stopping loop's clients were handed everything queued for them (answers,
    /// feed frames, close frames), or the wait for them passed since the close frames were
    /// queued: [`STOP_WRITE_WAIT`], or [`ROLE_CHANGE_WRITE_WAIT`] when the node changes role.
    fn written_out(&self) -> bool {
        let Some(closed_at) = self.sockets_closed_at else {
            return false;
        };
        let wait = match self.shared.changing_role.load(Ordering::Acquire) {
            true => ROLE_CHANGE_WRITE_WAIT,
            false => STOP_WRITE_WAIT,
        };
        closed_at.elapsed() >= wait
            || (self.conns.iter().flatten().all(|c| !c.has_unsent())
                && self.sockets.iter().flatten().all(WsConn::has_written_all))
    }

    /// Whether anything waits for this loop in its queues.
    fn has_queued(&self) -> bool {
        let lp = &self.lp;
        !(lp.completions.is_empty()
            && lp.feed.is_empty()
            && lp.deferred_rx.is_empty()
            && self.held.is_empty()
            && self.parse_later.is_empty()
            && self.held_feed.is_empty()
            && self.sockets_unread.is_empty())
    }
}

impl Worker {
    /// Takes what producers queued for this loop: completions, deferred outcomes, frames.
    fn take_queued(&mut self) {
        self.take_completions();
        self.take_deferred();
        self.take_feed();
    }

    /// Run by a releasing thread in the seat of this sleeping loop: writes the answers and
    /// frames queued for it, and leaves what must run on the loop (parsing the next
    /// requests, continuations, book snapshots, cancels on disconnect). Whether nothing was
    /// left.
    fn answer_while_asleep(&mut self) -> bool {
        let mut touched = Vec::new();
        while let Ok(batch) = self.lp.completions.try_recv() {
            for completion in batch {
                let token = completion.ticket().token;
                if !seat_may_answer(&completion) || self.continuations.contains_key(&token) {
                    self.held.push(completion);
                } else {
                    self.take_completion(completion, &mut touched);
                    self.shared
                        .answered_while_asleep
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for index in touched {
            if let Some(conn) = self.conns[index].as_ref() {
                if conn.has_input_waiting() {
                    self.parse_later.push((index, conn.generation));
                }
            }
            self.flush(index);
        }
        if !self.take_feed_in_seat() {
            return false;
        }
        let stopped = self.shared.stop.load(Ordering::Acquire) && self.tickets.is_empty();
        self.held.is_empty()
            && self.parse_later.is_empty()
            && self.dead_man_records.is_empty()
            && !stopped
    }
}

/// What a readiness event says of a connection's reading side.
#[derive(Clone, Copy, Debug)]
pub(super) struct Readiness {
    /// Bytes (or an error, or the end) may wait to be read.
    readable: bool,
    /// The peer closed its side: read to the end.
    read_closed: bool,
}

impl Readiness {
    fn of(event: &mio::event::Event) -> Readiness {
        Readiness {
            readable: event.is_readable() || event.is_read_closed() || event.is_error(),
            read_closed: event.is_read_closed() || event.is_error(),
        }
    }
}

/// The response to a request that could not be parsed.
pub fn http_error_response(error: HttpError) -> Response {
    match error {
        HttpError::Malformed(why) => Response::error(Status::BadRequest, why),
        HttpError::HeadersTooLarge => Response::error(
            Status::HeadersTooLarge,
            "request header section exceeds 16 KiB",
        ),
        HttpError::BodyTooLarge { limit_kib } => Response::error(
            Status::PayloadTooLarge,
            &format!("request body exceeds {limit_kib} KiB"),
        ),
        HttpError::OrderBodyTooLarge => Response::error(Status::BadRequest, "body: exceeds 64 KiB"),
        HttpError::UnknownMethod => Response::error(Status::NotImplemented, "method not supported"),
        HttpError::Version => {
            Response::error(Status::VersionNotSupported, "only HTTP/1.x is supported")
        }
        HttpError::UnsupportedCoding => Response::error(
            Status::NotImplemented,
            "Transfer-Encoding: only chunked is supported",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `poll` has a wake-up waiting, without blocking.
    fn woken(poll: &mut Poll) -> bool {
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        events.iter().any(|e| e.token() == WAKER)
    }

    #[test]
    fn a_second_gateway_on_a_port_in_use_is_refused_instead_of_sharing_it() {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let (_loops, _sinks, bound) = prepare(any, 2).expect("first gateway binds");
        let second = prepare(bound, 2)
            .map(|_| ())
            .expect_err("the port is taken");
        assert_eq!(second.kind(), io::ErrorKind::AddrInUse, "{second}");
        assert!(
            second.to_string().contains("another process listens"),
            "{second}"
        );
        // A plain listener holding a port refuses the gateway too.
        let plain = std::net::TcpListener::bind(any).expect("plain listener");
        let taken = plain.local_addr().expect("its address");
        let refused = prepare(taken, 1)
            .map(|_| ())
            .expect_err("the port is taken");
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse, "{refused}");
    }

    #[test]
    fn only_commands_whose_replies_need_no_history_are_answered_in_the_seat() {
        use ladder_engine::{CancelReport, NotCanceled, Reply};
        let ticket = |token| Ticket { sink: 0, token };
        let applied = |token, reply| Completion::Applied {
            ticket: ticket(token),
            seq: 1,
            reply,
        };
        let cancel = |reason| Reply::Canceled(CancelReport::none_canceled(vec![7], reason));
        assert!(seat_may_answer(&applied(SEAT_TICKET | 3, Reply::Ok)));
        assert!(seat_may_answer(&applied(
            SEAT_TICKET,
            cancel(NotCanceled::AlreadyCanceled)
        )));
        // Its reason is read from history.db by the completer.
        assert!(!seat_may_answer(&applied(
            SEAT_TICKET,
            cancel(NotCanceled::Forgotten)
        )));
        let batch = |second| Completion::AppliedAll {
            ticket: ticket(SEAT_TICKET),
            results: vec![(1, Reply::Ok), (2, second)],
        };
        assert!(seat_may_answer(&batch(Reply::Ok)));
        assert!(!seat_may_answer(&batch(cancel(NotCanceled::Forgotten))));
        // Work submitted without the mark (queries, heartbeats), or a query's answer.
        assert!(!seat_may_answer(&applied(3, Reply::Ok)));
        assert!(!seat_may_answer(&Completion::Answered {
            ticket: ticket(SEAT_TICKET)
        }));
    }

    #[test]
    fn a_loop_is_woken_only_when_it_may_be_asleep_and_never_sleeps_on_queued_work() {
        let mut poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).unwrap());
        let wake = LoopWake::new(waker);

        // Running: the wake-up owed is not made (the loop looks before it sleeps).
        wake.owe();
        wake.wake_if_owed();
        assert!(!woken(&mut poll));
        assert!(!wake.is_owed());
        // Before sleeping, the loop finds the queued work and does not sleep.
        assert!(!wake.may_sleep(|| true));
        // Nothing queued: it may sleep, and then a producer's wake-up is made.
        assert!(wake.may_sleep(|| false));
        wake.owe();
        wake.wake_if_owed();
        assert!(woken(&mut poll));
        // Awake again: no more wake-ups.
        wake.awake();
        wake.owe();
        wake.wake_if_owed();
        assert!(!woken(&mut poll));
    }
}
