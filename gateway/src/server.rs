//! The event loops: a few threads, each with its own listening socket on the same address
//! (SO_REUSEPORT: the kernel spreads connections), its own connections, and its own ring
//! into the sequencer. Completions come back through a channel and a waker.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use ladder_sequencer::{Completion, CompletionSink, Submission, SubmitError, Submitter, Ticket};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::conn::{Connection, Slot, IN_FLIGHT_MAX};
use crate::handler::Outcome;
use crate::http::{parse_request, HttpError, Method, Request, Response, Status};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONNECTION: usize = 2;

/// Limits and timeouts of the HTTP server.
#[derive(Clone, Debug)]
pub struct ServerLimits {
    /// Open connections across all threads.
    pub connections_max: usize,
    /// A request must arrive whole within this time of its first byte.
    pub request_timeout: Duration,
    /// An idle keep-alive connection is closed after this time.
    pub idle_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            connections_max: 10_000,
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves requests: the application behind the HTTP layer.
pub trait Service: Send + Sync + 'static {
    /// Handles one request from `peer`.
    fn handle(&self, request: &Request, peer: SocketAddr) -> Outcome;
}

/// A gateway thread's receiving end for completions.
pub struct GatewaySink {
    tx: Sender<Completion>,
    waker: Arc<Waker>,
}

impl CompletionSink for GatewaySink {
    fn deliver(&mut self, completions: Vec<Completion>) {
        for completion in completions {
            let _ = self.tx.send(completion);
        }
        let _ = self.waker.wake();
    }
}

/// One event loop, made before the sequencer starts so its sink can be handed over.
pub struct Loop {
    poll: Poll,
    listener: TcpListener,
    completions: Receiver<Completion>,
    sink_index: u16,
}

/// Binds `threads` listening sockets on `addr` and makes their loops and sinks.
pub fn prepare(
    addr: SocketAddr,
    threads: usize,
) -> io::Result<(Vec<Loop>, Vec<GatewaySink>, SocketAddr)> {
    let mut loops = Vec::with_capacity(threads);
    let mut sinks = Vec::with_capacity(threads);
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
        sinks.push(GatewaySink { tx, waker });
        loops.push(Loop {
            poll,
            listener,
            completions: rx,
            sink_index: index as u16,
        });
    }
    Ok((loops, sinks, bound))
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

/// Shared by the loops: the stop flag and the connection count.
#[derive(Default)]
pub struct ServerShared {
    /// Set to stop accepting, drain and exit.
    pub stop: AtomicBool,
    /// Open connections.
    pub connections: AtomicUsize,
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
    for (lp, submitter) in loops.into_iter().zip(submitters) {
        let mut worker = Worker {
            lp,
            submitter,
            service: service.clone(),
            limits: limits.clone(),
            shared: shared.clone(),
            conns: Vec::new(),
            free: Vec::new(),
            generation: 0,
            tickets: HashMap::new(),
            next_ticket: 0,
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
    service: Arc<dyn Service>,
    limits: ServerLimits,
    shared: Arc<ServerShared>,
    conns: Vec<Option<Connection>>,
    free: Vec<usize>,
    generation: u32,
    tickets: HashMap<u64, (usize, u32, u64)>,
    next_ticket: u64,
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
                    WAKER => self.take_completions(),
                    Token(t) => self.serve(t - FIRST_CONNECTION),
                }
            }
            self.take_completions();
            if last_sweep.elapsed() >= Duration::from_millis(500) {
                self.sweep_timeouts();
                last_sweep = Instant::now();
            }
            if stopping && self.tickets.is_empty() {
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
                        drop(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let index = self.free.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    let token = Token(index + FIRST_CONNECTION);
                    if self
                        .lp
                        .poll
                        .registry()
                        .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                        .is_err()
                    {
                        self.free.push(index);
                        continue;
                    }
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
            match parse_request(&conn.read_buf) {
                Ok(None) => return,
                Ok(Some((request, used))) => {
                    conn.read_buf.drain(..used);
                    conn.request_started = if conn.read_buf.is_empty() {
                        None
                    } else {
                        Some(Instant::now())
                    };
                    let peer = conn.peer;
                    let outcome = self.dispatch(&request, peer);
                    self.queue(index, &request, outcome);
                }
                Err(error) => {
                    let response = http_error_response(error).closing();
                    conn.read_buf.clear();
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
                let ticket_token = self.next_ticket;
                self.next_ticket += 1;
                let submission = Submission {
                    ticket: Ticket {
                        sink: self.lp.sink_index,
                        token: ticket_token,
                    },
                    work: *work,
                };
                match self.submitter.try_submit(submission) {
                    Ok(()) => {
                        conn.slots.push_back(Slot::Pending {
                            serial,
                            completer,
                            head_only,
                        });
                        self.tickets
                            .insert(ticket_token, (index, conn.generation, serial));
                    }
                    Err(SubmitError::Full(_)) => {
                        let busy =
                            Response::error(Status::Unavailable, "service busy, retry shortly")
                                .retry_after(1);
                        conn.push_ready(&busy, head_only);
                    }
                    Err(SubmitError::Stopped(_)) => {
                        let down = Response::error(Status::Unavailable, "service not ready")
                            .retry_after(1);
                        conn.push_ready(&down, head_only);
                    }
                }
            }
        }
    }

    fn take_completions(&mut self) {
        let mut touched = Vec::new();
        while let Ok(completion) = self.lp.completions.try_recv() {
            let token = completion.ticket().token;
            let Some((index, generation, serial)) = self.tickets.remove(&token) else {
                continue;
            };
            let Some(conn) = self.conns.get_mut(index).and_then(|c| c.as_mut()) else {
                continue;
            };
            if conn.generation != generation {
                continue;
            }
            conn.complete(serial, |completer| {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    completer(completion)
                })) {
                    Ok(response) => response,
                    Err(_) => Response::error(Status::Internal, "internal error"),
                }
            });
            touched.push(index);
        }
        for index in touched {
            self.parse_and_dispatch(index);
            self.flush(index);
        }
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
            let _ = self.lp.poll.registry().deregister(&mut conn.stream);
            self.free.push(index);
            self.shared.connections.fetch_sub(1, Ordering::Relaxed);
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
            if slow {
                conn.read_buf.clear();
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
        HttpError::UnknownMethod => Response::error(Status::NotImplemented, "method not supported"),
        HttpError::Version => {
            Response::error(Status::VersionNotSupported, "only HTTP/1.x is supported")
        }
    }
}
