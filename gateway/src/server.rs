//! The event loops: a few threads, each with its own listening socket on the same address
//! (SO_REUSEPORT: the kernel spreads connections), its own connections, and its own ring
//! into the sequencer. Completions come back through a channel and a waker.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use ladder_sequencer::{
    Completion, CompletionSink, Submission, SubmitError, Submitter, Ticket, Work,
};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::conn::{Connection, Slot, IN_FLIGHT_MAX};
use crate::deferred::{DeferPool, Return, DEFER_WORKERS};
use crate::handler::Outcome;
use crate::http::{HttpError, Method, Request, Response, Status};
use crate::ws::conn::{Action, Interests, WsConn};
use crate::ws::feed::{FeedBatch, FeedTarget};
use crate::ws::WsKind;
use tungstenite::protocol::frame::coding::CloseCode;

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
        }
    }
}

/// Serves requests: the application behind the HTTP layer.
pub trait Service: Send + Sync + 'static {
    /// Handles one request from `peer`.
    fn handle(&self, request: &Request, peer: SocketAddr) -> Outcome;

    /// Checks the `auth` object of a `/ws/user` subscription; the account it speaks for.
    fn ws_user_auth(&self, _auth: &serde_json::Value) -> Result<ladder_engine::Address, String> {
        Err("the user channel is not served here".into())
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
    waker: Arc<Waker>,
}

impl CompletionSink for GatewaySink {
    fn deliver(&mut self, completions: Vec<Completion>) {
        if completions.is_empty() {
            return;
        }
        let _ = self.tx.send(completions);
        let _ = self.waker.wake();
    }
}

/// One event loop, made before the sequencer starts so its sink can be handed over.
pub struct Loop {
    poll: Poll,
    listener: TcpListener,
    waker: Arc<Waker>,
    completions: Receiver<Vec<Completion>>,
    deferred_tx: Sender<(u64, Outcome)>,
    deferred_rx: Receiver<(u64, Outcome)>,
    feed: Receiver<FeedBatch>,
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
    for index in 0..threads {
        let std_listener = reuseport_listener(bound)?;
        bound = std_listener.local_addr()?;
        let mut listener = TcpListener::from_std(std_listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = unbounded();
        let (feed_tx, feed_rx) = crossbeam_channel::bounded(FEED_BATCHES_QUEUED_MAX);
        targets.push(FeedTarget {
            tx: feed_tx,
            waker: waker.clone(),
        });
        sinks.push(GatewaySink {
            tx,
            waker: waker.clone(),
        });
        let (deferred_tx, deferred_rx) = unbounded();
        loops.push(Loop {
            poll,
            listener,
            waker,
            completions: rx,
            deferred_tx,
            deferred_rx,
            feed: feed_rx,
            sink_index: index as u16,
        });
    }
    Ok((loops, sinks, targets, bound))
}

/// The outcome of a request that asked to close the connection: its response closes it.
fn closing(outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Respond(response) => Outcome::Respond(response.closing()),
        Outcome::Submit(work, completer) => {
            Outcome::Submit(work, Box::new(move |c| completer(c).closing()))
        }
        Outcome::Defer(job) => Outcome::Defer(Box::new(move || closing(job()))),
        Outcome::Continue(work, continuation) => {
            Outcome::Continue(work, Box::new(move |c| closing(continuation(c))))
        }
    }
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

/// Feed batches queued for one event loop before the feed thread waits.
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
    for (lp, submitter) in loops.into_iter().zip(submitters) {
        let mut worker = Worker {
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
            disconnect_cancels: Vec::new(),
        };
        let name = format!("gateway-{}", worker.lp.sink_index);
        handles.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || worker.run())?,
        );
    }
    Ok(handles)
}

struct Worker {
    lp: Loop,
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
    ws_tickets: HashMap<u64, (usize, u32)>,
    /// Accounts whose cancel-on-disconnect is still to be submitted (the ring was full).
    disconnect_cancels: Vec<ladder_engine::Address>,
}

impl Worker {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_sweep = Instant::now();
        loop {
            if let Err(e) = self
                .lp
                .poll
                .poll(&mut events, Some(Duration::from_millis(250)))
            {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "poll failed");
                return;
            }
            let stopping = self.shared.stop.load(Ordering::Acquire);
            for event in events.iter() {
                match event.token() {
                    LISTENER if !stopping => self.accept(),
                    LISTENER => {}
                    WAKER => {
                        self.take_completions();
                        self.take_deferred();
                        self.take_feed();
                    }
                    Token(t) if t >= FIRST_WEBSOCKET => self.serve_socket(t - FIRST_WEBSOCKET),
                    Token(t) => self.serve(t - FIRST_CONNECTION),
                }
            }
            self.take_completions();
            if !self.disconnect_cancels.is_empty() {
                self.submit_disconnect_cancels();
            }
            if last_sweep.elapsed() >= Duration::from_millis(500) {
                self.sweep_timeouts();
                self.sweep_sockets();
                last_sweep = Instant::now();
            }
            if stopping && self.tickets.is_empty() && self.deferred.is_empty() {
                return;
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.lp.listener.accept() {
                Ok((mut stream, peer)) => {
                    if self.shared.connections.load(Ordering::Relaxed)
                        >= self.limits.connections_max
                    {
                        self.shared.refused_full.fetch_add(1, Ordering::Relaxed);
                        drop(stream);
                        continue;
                    }
                    if !self
                        .shared
                        .peers
                        .try_open(peer.ip(), self.limits.connections_per_ip_max)
                    {
                        self.shared.refused_per_ip.fetch_add(1, Ordering::Relaxed);
                        drop(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let index = self.free.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    let token = Token(index + FIRST_CONNECTION);
                    let registered = self.lp.poll.registry().register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    );
                    let stream = registered
                        .and_then(|_| crate::stream::Stream::new(stream, self.limits.tls.as_ref()));
                    let Ok(stream) = stream else {
                        self.free.push(index);
                        self.shared.peers.close(peer.ip());
                        continue;
                    };
                    self.generation = self.generation.wrapping_add(1);
                    self.conns[index] = Some(Connection::new(stream, peer, self.generation));
                    self.shared.connections.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    return;
                }
            }
        }
    }

    fn serve(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index).and_then(|c| c.as_mut()) else {
            return;
        };
        let open = conn.fill().unwrap_or_default();
        self.parse_and_dispatch(index);
        if !open {
            if let Some(conn) = self.conns[index].as_mut() {
                conn.close_after_flush = true;
            }
        }
        self.flush(index);
    }

    fn parse_and_dispatch(&mut self, index: usize) {
        loop {
            let Some(conn) = self.conns[index].as_mut() else {
                return;
            };
            if conn.close_after_flush
                || conn.stop_reading
                || conn.pending() >= IN_FLIGHT_MAX
                || conn.read_buf.is_empty()
            {
                return;
            }
            match conn.progress.advance(&conn.read_buf) {
                Ok(None) => return,
                Ok(Some((mut request, used))) => {
                    request.peer = Some(conn.peer.ip());
                    conn.read_buf.drain(..used);
                    conn.request_started = if conn.read_buf.is_empty() {
                        None
                    } else {
                        Some(Instant::now())
                    };
                    let peer = conn.peer;
                    if let Some(kind) = crate::ws::upgrade_kind(&request) {
                        self.upgrade(index, &request, kind, peer);
                        return;
                    }
                    let outcome = self.dispatch(&request, peer);
                    self.queue(index, &request, outcome);
                }
                Err(error) => {
                    let response = http_error_response(error).closing();
                    conn.read_buf.clear();
                    conn.progress = Default::default();
                    conn.push_ready(&response, false);
                    return;
                }
            }
        }
    }

    fn dispatch(&self, request: &Request, peer: SocketAddr) -> Outcome {
        let service = self.service.clone();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            service.handle(request, peer)
        })) {
            Ok(outcome) => outcome,
            Err(_) => {
                tracing::error!(path = request.path(), "handler panicked");
                Outcome::error(Status::Internal, "internal error")
            }
        }
    }

    fn queue(&mut self, index: usize, request: &Request, outcome: Outcome) {
        let head_only = request.method == Method::Head;
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        match outcome {
            Outcome::Respond(mut response) => {
                if !request.keep_alive {
                    response.close = true;
                    conn.stop_reading = true;
                }
                conn.push_ready(&response, head_only);
            }
            Outcome::Submit(work, completer) => {
                let completer: crate::handler::Completer = if request.keep_alive {
                    completer
                } else {
                    conn.stop_reading = true;
                    Box::new(move |c| completer(c).closing())
                };
                let serial = conn.next_serial;
                conn.next_serial += 1;
                conn.slots.push_back(Slot::Pending {
                    serial,
                    completer,
                    head_only,
                });
                let generation = conn.generation;
                self.submit_for(index, generation, serial, *work);
            }
            Outcome::Continue(work, continuation) => {
                let continuation: crate::handler::Continuation = if request.keep_alive {
                    continuation
                } else {
                    conn.stop_reading = true;
                    Box::new(move |c| closing(continuation(c)))
                };
                let serial = conn.next_serial;
                conn.next_serial += 1;
                conn.slots.push_back(Slot::Pending {
                    serial,
                    completer: Box::new(crate::handler::unexpected),
                    head_only,
                });
                let generation = conn.generation;
                self.continue_for(index, generation, serial, *work, continuation);
            }
            Outcome::Defer(job) => {
                let keep_alive = request.keep_alive;
                if !keep_alive {
                    conn.stop_reading = true;
                }
                let serial = conn.next_serial;
                conn.next_serial += 1;
                conn.slots.push_back(Slot::Pending {
                    serial,
                    completer: Box::new(crate::handler::unexpected),
                    head_only,
                });
                let generation = conn.generation;
                let job: crate::deferred::Job = if keep_alive {
                    job
                } else {
                    Box::new(move || closing(job()))
                };
                self.defer_for(index, generation, serial, job);
            }
        }
    }

    /// Submits `work` for the pending slot `serial` of connection `index`; a full or
    /// stopped ring answers the slot at once.
    fn submit_for(
        &mut self,
        index: usize,
        generation: u32,
        serial: u64,
        work: Work,
    ) -> Option<u64> {
        let ticket_token = self.next_ticket;
        self.next_ticket += 1;
        let submission = Submission {
            ticket: Ticket {
                sink: self.lp.sink_index,
                token: ticket_token,
            },
            work,
        };
        let refusal = match self.submitter.try_submit(submission) {
            Ok(()) => {
                self.tickets
                    .insert(ticket_token, (index, generation, serial));
                return Some(ticket_token);
            }
            Err(SubmitError::Full(_)) => {
                Response::error(Status::Unavailable, "service busy, retry shortly").retry_after(1)
            }
            Err(SubmitError::Stopped(_)) => {
                Response::error(Status::Unavailable, "service not ready").retry_after(1)
            }
        };
        if let Some(conn) = self.conns[index].as_mut() {
            conn.complete(serial, |_| refusal);
        }
        None
    }

    /// Submits `work` for the pending slot `serial`; its completion goes to `continuation`.
    fn continue_for(
        &mut self,
        index: usize,
        generation: u32,
        serial: u64,
        work: Work,
        continuation: crate::handler::Continuation,
    ) {
        if let Some(token) = self.submit_for(index, generation, serial, work) {
            self.continuations.insert(token, continuation);
        }
    }

    /// Carries out `outcome` for the pending slot `serial` of a live connection.
    fn carry_out(&mut self, index: usize, generation: u32, serial: u64, outcome: Outcome) {
        let Some(conn) = self.live_conn(index, generation) else {
            return;
        };
        match outcome {
            Outcome::Respond(response) => conn.complete(serial, |_| response),
            Outcome::Submit(work, completer) => {
                conn.replace_completer(serial, completer);
                self.submit_for(index, generation, serial, *work);
            }
            Outcome::Continue(work, continuation) => {
                self.continue_for(index, generation, serial, *work, continuation)
            }
            Outcome::Defer(job) => self.defer_for(index, generation, serial, job),
        }
    }

    /// Hands `job` to the deferred-work pool for the pending slot `serial`.
    fn defer_for(&mut self, index: usize, generation: u32, serial: u64, job: crate::deferred::Job) {
        let token = self.next_ticket;
        self.next_ticket += 1;
        let back = Return {
            tx: self.lp.deferred_tx.clone(),
            waker: self.lp.waker.clone(),
            token,
        };
        if self.pool.run(job, back) {
            self.deferred.insert(token, (index, generation, serial));
        } else if let Some(conn) = self.conns[index].as_mut() {
            let busy =
                Response::error(Status::Unavailable, "service busy, retry shortly").retry_after(1);
            conn.complete(serial, |_| busy);
        }
    }

    /// Carries out the outcomes of finished deferred jobs.
    fn take_deferred(&mut self) {
        let mut touched = Vec::new();
        while let Ok((token, outcome)) = self.lp.deferred_rx.try_recv() {
            let Some((index, generation, serial)) = self.deferred.remove(&token) else {
                continue;
            };
            if self.live_conn(index, generation).is_none() {
                continue;
            }
            self.carry_out(index, generation, serial, outcome);
            touched.push(index);
        }
        for index in touched {
            self.parse_and_dispatch(index);
            self.flush(index);
        }
    }

    fn take_completions(&mut self) {
        let mut touched = Vec::new();
        while let Ok(batch) = self.lp.completions.try_recv() {
            for completion in batch {
                self.take_completion(completion, &mut touched);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for index in touched {
            self.parse_and_dispatch(index);
            self.flush(index);
        }
    }

    /// The connection at `index` if it is still the one of `generation` (not closed, its
    /// slot not reused).
    fn live_conn(&mut self, index: usize, generation: u32) -> Option<&mut Connection> {
        self.conns
            .get_mut(index)
            .and_then(|c| c.as_mut())
            .filter(|conn| conn.generation == generation)
    }

    /// Hands one completion to the request or subscription waiting for it; notes the
    /// connection in `touched` when a response was queued on it.
    fn take_completion(&mut self, completion: Completion, touched: &mut Vec<usize>) {
        let token = completion.ticket().token;
        if let Some((index, generation)) = self.ws_tickets.remove(&token) {
            self.socket_snapshot(index, generation, completion);
            return;
        }
        let Some((index, generation, serial)) = self.tickets.remove(&token) else {
            return;
        };
        if let Some(continuation) = self.continuations.remove(&token) {
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| continuation(completion)))
                    .unwrap_or_else(|_| Outcome::error(Status::Internal, "internal error"));
            self.carry_out(index, generation, serial, outcome);
            touched.push(index);
            return;
        }
        let Some(conn) = self.live_conn(index, generation) else {
            return;
        };
        conn.complete(serial, |completer| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| completer(completion))) {
                Ok(response) => response,
                Err(_) => Response::error(Status::Internal, "internal error"),
            }
        });
        touched.push(index);
    }

    fn flush(&mut self, index: usize) {
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        match conn.flush() {
            Ok(done) if done && conn.close_after_flush => self.close(index),
            Ok(_) => {}
            Err(_) => self.close(index),
        }
    }

    fn close(&mut self, index: usize) {
        if let Some(mut conn) = self.conns[index].take() {
            let _ = self.lp.poll.registry().deregister(conn.stream.socket());
            self.free.push(index);
            self.shared.connection_closed(conn.peer.ip());
        }
    }

    fn sweep_timeouts(&mut self) {
        let now = Instant::now();
        let mut expired = Vec::new();
        for (index, conn) in self.conns.iter_mut().enumerate() {
            let Some(conn) = conn else { continue };
            let slow = conn
                .request_started
                .is_some_and(|t| now.duration_since(t) > self.limits.request_timeout);
            let idle = conn.slots.is_empty()
                && conn.read_buf.is_empty()
                && now.duration_since(conn.last_active) > self.limits.idle_timeout;
            // Nothing of a request yet (a TLS handshake not finished counts as nothing).
            let silent = !conn.received_any
                && now.duration_since(conn.opened) > self.limits.first_bytes_timeout;
            if silent {
                self.shared
                    .first_bytes_timeouts
                    .fetch_add(1, Ordering::Relaxed);
                expired.push(index);
                conn.close_after_flush = true;
            } else if slow {
                conn.read_buf.clear();
                conn.progress = Default::default();
                conn.request_started = None;
                conn.push_ready(
                    &Response::error(Status::RequestTimeout, "request not received in time")
                        .closing(),
                    false,
                );
                expired.push(index);
            } else if idle {
                expired.push(index);
                conn.close_after_flush = true;
            }
        }
        for index in expired {
            self.flush(index);
            if let Some(conn) = self.conns[index].as_ref() {
                if conn.close_after_flush && conn.slots.is_empty() {
                    self.close(index);
                }
            }
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
        HttpError::BodyTooLarge => {
            Response::error(Status::PayloadTooLarge, "request body exceeds 64 KiB")
        }
        HttpError::OrderBodyTooLarge => Response::error(Status::BadRequest, "body: exceeds 64 KiB"),
        HttpError::UnknownMethod => Response::error(Status::NotImplemented, "method not supported"),
        HttpError::Version => {
            Response::error(Status::VersionNotSupported, "only HTTP/1.x is supported")
        }
    }
}

/// The books of `tokens`, read on the sequencer thread for a `/ws/market` subscription.
type BookAnswer = Vec<(ladder_engine::Bytes32, Option<ladder_engine::BookView>)>;

impl Worker {
    /// Turns the HTTP connection at `index` into a WebSocket connection.
    fn upgrade(&mut self, index: usize, request: &Request, kind: WsKind, peer: SocketAddr) {
        let handshake = match crate::ws::handshake_response(request) {
            _ if !self.service.ws_ready() => {
                Err(Response::error(Status::Unavailable, "service not ready").retry_after(1))
            }
            _ if let Err(wait_s) = self.service.admit_upgrade(peer) => {
                Err(Response::rate_limited(wait_s))
            }
            Err(why) => Err(Response::error(Status::BadRequest, why)),
            Ok(_)
                if self.conns[index]
                    .as_ref()
                    .is_some_and(|c| !c.slots.is_empty()) =>
            {
                Err(Response::error(
                    Status::BadRequest,
                    "websocket upgrade behind pipelined requests",
                ))
            }
            Ok(bytes) => Ok(bytes),
        };
        let handshake = match handshake {
            Ok(bytes) => bytes,
            Err(response) => {
                if let Some(conn) = self.conns[index].as_mut() {
                    conn.push_ready(&response.closing(), false);
                }
                return;
            }
        };
        let Some(mut conn) = self.conns[index].take() else {
            return;
        };
        self.free.push(index);
        let _ = self.lp.poll.registry().deregister(conn.stream.socket());
        // Counted before the client learns of the upgrade (and before it can subscribe), so
        // the feed encodes every frame after its snapshot and /metrics already shows it.
        let channel = self.shared.websockets_of(kind);
        channel.fetch_add(1, Ordering::SeqCst);
        if write_all_now(&mut conn.stream, &handshake).is_err() {
            channel.fetch_sub(1, Ordering::SeqCst);
            self.shared.connection_closed(peer.ip());
            return;
        }
        let slot = self.sockets_free.pop().unwrap_or_else(|| {
            self.sockets.push(None);
            self.sockets.len() - 1
        });
        self.generation = self.generation.wrapping_add(1);
        let leftover = std::mem::take(&mut conn.read_buf);
        let mut socket = WsConn::new(conn.stream, leftover, kind, self.generation, peer.ip());
        let token = Token(FIRST_WEBSOCKET + slot);
        let registered = self.lp.poll.registry().register(
            socket.stream_mut(),
            token,
            Interest::READABLE | Interest::WRITABLE,
        );
        if registered.is_err() {
            self.sockets_free.push(slot);
            self.shared
                .websockets_of(kind)
                .fetch_sub(1, Ordering::SeqCst);
            self.shared.connection_closed(peer.ip());
            return;
        }
        self.sockets[slot] = Some(socket);
        self.shared.websockets.fetch_add(1, Ordering::Relaxed);
        self.serve_socket(slot);
    }

    fn serve_socket(&mut self, slot: usize) {
        let Some(socket) = self.sockets.get_mut(slot).and_then(|s| s.as_mut()) else {
            return;
        };
        let (service, peer) = (&self.service, socket.peer_ip);
        let actions = socket.read(&|units| service.admit_ws_message(peer, units));
        for action in actions {
            self.act(slot, action);
        }
        self.flush_socket(slot);
    }

    fn act(&mut self, slot: usize, action: Action) {
        match action {
            Action::AuthenticateUser {
                auth,
                markets,
                cancel_on_disconnect,
            } => {
                let result = self.service.ws_user_auth(&auth);
                if let Some(socket) = self.sockets[slot].as_mut() {
                    socket.authenticated(result, markets, cancel_on_disconnect);
                }
            }
            Action::Snapshot(tokens) => {
                let Some(generation) = self.sockets[slot].as_ref().map(|s| s.generation) else {
                    return;
                };
                let query: ladder_sequencer::Query = Box::new(move |e: &ladder_engine::Engine| {
                    let books: BookAnswer =
                        tokens.iter().map(|t| (*t, e.book(t, usize::MAX))).collect();
                    Box::new(books) as ladder_sequencer::QueryOutput
                });
                let token = self.next_ticket;
                self.next_ticket += 1;
                let ticket = Ticket {
                    sink: self.lp.sink_index,
                    token,
                };
                let submission = Submission {
                    ticket,
                    work: ladder_sequencer::Work::Query(query),
                };
                match self.submitter.try_submit(submission) {
                    Ok(()) => {
                        self.ws_tickets.insert(token, (slot, generation));
                    }
                    Err(_) => {
                        if let Some(socket) = self.sockets[slot].as_mut() {
                            socket.fail(CloseCode::Again, "service busy, subscribe again shortly");
                        }
                    }
                }
            }
        }
    }

    fn socket_snapshot(&mut self, slot: usize, generation: u32, completion: Completion) {
        let Some(socket) = self.sockets.get_mut(slot).and_then(|s| s.as_mut()) else {
            return;
        };
        if socket.generation != generation {
            return;
        }
        if let Completion::Answered { output, .. } = completion {
            if let Ok(books) = output.downcast::<BookAnswer>() {
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0);
                socket.snapshot(*books, now_ms);
            }
        }
        self.flush_socket(slot);
    }

    fn take_feed(&mut self) {
        let mut touched = std::collections::BTreeSet::new();
        while let Ok(batch) = self.lp.feed.try_recv() {
            for item in batch.iter() {
                for slot in self.routes.slots_for(item) {
                    if let Some(socket) = self.sockets[slot].as_mut() {
                        socket.deliver(item);
                        touched.insert(slot);
                    }
                }
            }
        }
        for slot in touched {
            self.flush_socket(slot);
        }
    }

    fn flush_socket(&mut self, slot: usize) {
        let Some(socket) = self.sockets.get_mut(slot).and_then(|s| s.as_mut()) else {
            return;
        };
        socket.flush();
        if socket.take_slow_close() {
            self.shared
                .ws_slow_consumer_closes
                .fetch_add(1, Ordering::Relaxed);
        }
        self.routes.update(slot, socket.interests());
        if socket.is_closed() {
            self.routes.update(slot, Interests::default());
            if let Some(mut socket) = self.sockets[slot].take() {
                let _ = self.lp.poll.registry().deregister(socket.stream_mut());
                self.shared
                    .websockets_of(socket.kind)
                    .fetch_sub(1, Ordering::SeqCst);
                self.shared.connection_closed(socket.peer_ip);
                // Every way a connection ends counts but a service shutdown (API.md §16).
                if let Some(address) = socket.cancel_on_disconnect() {
                    if !self.shared.stop.load(Ordering::Acquire) {
                        self.shared
                            .cancels_on_disconnect
                            .fetch_add(1, Ordering::Relaxed);
                        self.disconnect_cancels.push(address);
                        self.submit_disconnect_cancels();
                    }
                }
            }
            self.sockets_free.push(slot);
            self.shared.websockets.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Submits the cancels of accounts whose cancel-on-disconnect connection ended: one
    /// journaled cancel-all each, answered to no one; kept for the next turn of the loop
    /// while the ring is full.
    fn submit_disconnect_cancels(&mut self) {
        while let Some(&requester) = self.disconnect_cancels.first() {
            let token = self.next_ticket;
            let submission = Submission {
                ticket: Ticket {
                    sink: self.lp.sink_index,
                    token,
                },
                work: ladder_sequencer::Work::Command(ladder_engine::Command::CancelAll {
                    requester,
                }),
            };
            match self.submitter.try_submit(submission) {
                Ok(()) => {
                    self.next_ticket += 1;
                    self.disconnect_cancels.remove(0);
                }
                Err(ladder_sequencer::SubmitError::Full(_)) => return,
                Err(ladder_sequencer::SubmitError::Stopped(_)) => {
                    self.disconnect_cancels.clear();
                    return;
                }
            }
        }
    }

    fn sweep_sockets(&mut self) {
        let limit = Duration::from_secs(crate::ws::SUBSCRIBE_TIMEOUT_S);
        let ping_after = self.limits.ws_ping_after;
        for slot in 0..self.sockets.len() {
            if let Some(socket) = self.sockets[slot].as_mut() {
                if !socket.subscribed() && socket.opened.elapsed() > limit {
                    socket.fail(CloseCode::Policy, "no subscribe message within 10 s");
                } else if socket.subscribed() {
                    socket.keep_alive(ping_after);
                }
            }
            self.flush_socket(slot);
        }
    }
}

/// Writes a few bytes to a fresh non-blocking socket, waiting briefly if it is full.
fn write_all_now(stream: &mut crate::stream::Stream, mut bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let deadline = Instant::now() + Duration::from_secs(1);
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::yield_now()
            }
            Err(e) => return Err(e),
        }
    }
    loop {
        match stream.flush() {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::yield_now()
            }
            Err(e) => return Err(e),
        }
    }
}

/// Which sockets of this event loop want which feed frames: an index by market and by
/// account, so a frame is offered only to its subscribers.
#[derive(Default)]
struct FeedRoutes {
    by_market: HashMap<ladder_engine::Bytes32, Vec<usize>>,
    by_user: HashMap<ladder_engine::Address, Vec<usize>>,
    all_markets: Vec<usize>,
    current: HashMap<usize, Interests>,
}

impl FeedRoutes {
    /// Records what socket `slot` wants now.
    fn update(&mut self, slot: usize, interests: Interests) {
        if self.current.get(&slot) == Some(&interests) {
            return;
        }
        if let Some(old) = self.current.remove(&slot) {
            for market in old.markets {
                remove_slot(self.by_market.get_mut(&market), slot);
            }
            if let Some(user) = old.user {
                remove_slot(self.by_user.get_mut(&user), slot);
            }
            self.all_markets.retain(|s| *s != slot);
        }
        self.by_market.retain(|_, v| !v.is_empty());
        self.by_user.retain(|_, v| !v.is_empty());
        if interests == Interests::default() {
            return;
        }
        for market in &interests.markets {
            self.by_market.entry(*market).or_default().push(slot);
        }
        if let Some(user) = interests.user {
            self.by_user.entry(user).or_default().push(slot);
        }
        if interests.all_markets {
            self.all_markets.push(slot);
        }
        self.current.insert(slot, interests);
    }

    /// The sockets that want `item`.
    fn slots_for(&self, item: &crate::ws::feed::FeedItem) -> Vec<usize> {
        use crate::ws::feed::FeedItem;
        match item {
            FeedItem::User { address, .. } => {
                self.by_user.get(address).cloned().unwrap_or_default()
            }
            FeedItem::Market { market, .. } => {
                let mut slots = self.by_market.get(market).cloned().unwrap_or_default();
                for slot in &self.all_markets {
                    if !slots.contains(slot) {
                        slots.push(*slot);
                    }
                }
                slots
            }
        }
    }
}

fn remove_slot(list: Option<&mut Vec<usize>>, slot: usize) {
    if let Some(list) = list {
        list.retain(|s| *s != slot);
    }
}
