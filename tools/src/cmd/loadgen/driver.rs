//! The measured loop: N keep-alive connections, each a sending thread and a reading thread
//! over one raw `TcpStream`.
//!
//! Open loop (`--rate R`): request `i` of the run is planned at `start + i / R` and goes to
//! connection `i % N`. A connection sends each request at its planned time or, if it is
//! behind (the previous answer is late and no pipelining slot is free), as soon as it can;
//! latency always runs from the planned time, so queueing anywhere (client, network, server)
//! is in the numbers and never hidden (no coordinated omission). Closed loop (no `--rate`):
//! each connection sends the next request when a slot frees, for `--duration`; latency runs
//! from the send. Requests in flight per connection: `--pipeline` (default 1).

use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use ladder_client::unix_now_s;
use ladder_engine::Reject;
use ladder_gateway::app::refusals::Worded;
use serde_json::Value;

use super::feed::{since, CancelQueue, SendTimes};
use super::presign::{ConnWork, Prepared};
use super::stats::{histogram, lock, ConnStats};
use super::wire::{self, Auth, Response};

/// How far behind its plan an open-loop connection may fall before it stops sending; what it
/// did not send counts as errors.
pub const LATE_GIVE_UP: Duration = Duration::from_secs(10);
/// A response must start within this long.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);
/// Most requests in flight per connection.
pub const PIPELINE_MAX: usize = 64;
/// The last stretch before a planned send that is waited out by yielding, not sleeping.
pub const SPIN_WINDOW: Duration = Duration::from_micros(80);
/// Bytes buffered per response reader.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// How to drive.
#[derive(Clone, Debug)]
pub struct DriveConfig {
    /// `host:port`.
    pub host: String,
    /// Requests per second (open loop), or none (closed loop).
    pub rate: Option<u64>,
    /// Connections.
    pub connections: usize,
    /// How long to send.
    pub duration: Duration,
    /// Requests in flight per connection.
    pub pipeline: usize,
}

/// One connection's part of the run.
pub struct Conn {
    /// Its index (`i % N` of the requests it sends).
    pub index: usize,
    /// What it sends.
    pub work: ConnWork,
    /// Its maker account's L2 material.
    pub maker: Auth,
    /// Its taker account's, if it has one.
    pub taker: Option<Auth>,
    /// Cancels signed by the maker's feed (`mm`).
    pub cancels: Option<Arc<CancelQueue>>,
    /// When each slot left (for fill-notification timing).
    pub sent: Arc<SendTimes>,
    /// What it measured.
    pub stats: Arc<ConnStats>,
}

/// What a request was, for judging its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Quote,
    Taker,
    Cancel,
}

/// A request on the wire, waiting for its answer.
struct InFlight {
    kind: Kind,
    planned_ns: u64,
    sent_ns: u64,
}

/// Connects every connection, then runs them all from `start`, printing a progress line on
/// stderr once a second.
pub fn drive(config: &DriveConfig, conns: Vec<Conn>, start: Instant) -> Result<(), String> {
    let mut streams = Vec::with_capacity(conns.len());
    for _ in &conns {
        streams.push(connect(&config.host).map_err(|e| format!("connect {}: {e}", config.host))?);
    }
    let stats: Vec<Arc<ConnStats>> = conns.iter().map(|c| c.stats.clone()).collect();
    let finished = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::with_capacity(conns.len());
    for (conn, stream) in conns.into_iter().zip(streams) {
        let (config, finished) = (config.clone(), finished.clone());
        let thread = std::thread::Builder::new()
            .name(format!("loadgen-conn-{}", conn.index))
            .spawn(move || {
                run_conn(&config, conn, stream, start);
                finished.fetch_add(1, Ordering::Release);
            })
            .map_err(|e| format!("connection thread: {e}"))?;
        threads.push(thread);
    }
    progress(&stats, &finished, threads.len(), start);
    for thread in threads {
        thread
            .join()
            .map_err(|_| "a connection thread panicked".to_string())?;
    }
    Ok(())
}

fn connect(host: &str) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(host)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    Ok(stream)
}

/// One TCP connection: the sending half here, the reading half on its own thread.
struct Link {
    stream: TcpStream,
    in_flight: Option<Sender<InFlight>>,
    reader: Option<JoinHandle<()>>,
    broken: Arc<AtomicBool>,
}

impl Link {
    fn open(
        stream: TcpStream,
        permits: &Sender<()>,
        stats: &Arc<ConnStats>,
        start: Instant,
    ) -> std::io::Result<Link> {
        let read_half = stream.try_clone()?;
        let (tx, rx) = unbounded();
        let broken = Arc::new(AtomicBool::new(false));
        let (permits, stats, flag) = (permits.clone(), stats.clone(), broken.clone());
        let reader = std::thread::Builder::new()
            .name("loadgen-reader".into())
            .spawn(move || read_loop(read_half, &rx, &permits, &stats, start, &flag))?;
        Ok(Link {
            stream,
            in_flight: Some(tx),
            reader: Some(reader),
            broken,
        })
    }

    fn send(&mut self, request: InFlight, bytes: &[u8]) {
        let Some(tx) = &self.in_flight else { return };
        // The reader owns the receiver until this link is closed, so this cannot fail.
        let _ = tx.send(request);
        if self.stream.write_all(bytes).is_err() {
            // The reader then fails on this request (and any others in flight) and counts it.
            self.broken.store(true, Ordering::Release);
            let _ = self.stream.shutdown(Shutdown::Both);
        }
    }

    /// Waits for the answers in flight and ends the reader.
    fn close(&mut self) {
        self.in_flight = None;
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The reading half: one answer per request, in order.
fn read_loop(
    stream: TcpStream,
    in_flight: &Receiver<InFlight>,
    permits: &Sender<()>,
    stats: &ConnStats,
    start: Instant,
    broken: &AtomicBool,
) {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    for request in in_flight.iter() {
        if broken.load(Ordering::Acquire) {
            stats.error("io: connection lost with the request in flight");
        } else {
            match wire::read_response(&mut reader) {
                Ok(response) => {
                    settle(&response, &request, stats, since(start));
                    if response.close {
                        broken.store(true, Ordering::Release);
                    }
                }
                Err(e) => {
                    stats.error(&format!("io: {e}"));
                    broken.store(true, Ordering::Release);
                    let _ = reader.get_ref().shutdown(Shutdown::Both);
                }
            }
        }
        let _ = permits.send(());
    }
}

/// The sending half of a connection, for the whole run.
fn run_conn(config: &DriveConfig, conn: Conn, stream: TcpStream, start: Instant) {
    let depth = config.pipeline.clamp(1, PIPELINE_MAX);
    let (permit_tx, permit_rx) = bounded(depth);
    for _ in 0..depth {
        let _ = permit_tx.send(());
    }
    let stats = conn.stats.clone();
    let mut link = match Link::open(stream, &permit_tx, &stats, start) {
        Ok(link) => Some(link),
        Err(e) => {
            stats.error(&format!("io: {e}"));
            None
        }
    };
    let mut writer = Writer {
        config,
        conn: &conn,
        start,
        buffer: Vec::with_capacity(4096),
        timestamp: (0, String::new()),
        spares: conn.work.spares.iter(),
    };
    let total = conn.work.slots.len();
    let interval_ns = config.rate.map(|r| 1e9 / r.max(1) as f64);
    let stop_ns = match config.rate {
        Some(_) => (config.duration + LATE_GIVE_UP).as_nanos() as u64,
        None => config.duration.as_nanos() as u64,
    };
    let mut k = 0;
    while k < total {
        let planned_ns = interval_ns.map_or(0, |i| {
            ((k * config.connections + conn.index) as f64 * i) as u64
        });
        if interval_ns.is_some() {
            sleep_until(start + Duration::from_nanos(planned_ns));
        }
        if permit_rx.recv().is_err() || since(start) > stop_ns {
            break;
        }
        if link
            .as_ref()
            .is_none_or(|l| l.broken.load(Ordering::Acquire))
        {
            link = reconnect(link, config, &permit_tx, &stats, start);
            if link.is_none() {
                stats.error("io: cannot reconnect");
                let _ = permit_tx.send(());
                std::thread::sleep(Duration::from_millis(10));
                k += 1;
                continue;
            }
        }
        let Some(l) = link.as_mut() else { break };
        writer.send(l, k, interval_ns.map(|_| planned_ns));
        k += 1;
    }
    if k < total && config.rate.is_some() {
        let unsent = (total - k) as u64;
        stats.unsent.fetch_add(unsent, Ordering::Relaxed);
        stats.errors_n("unsent: more than 10 s behind the plan", unsent);
    } else if k == total && config.rate.is_none() {
        stats.pool_exhausted.store(true, Ordering::Relaxed);
    }
    if let Some(mut l) = link {
        l.close();
    }
}

fn reconnect(
    old: Option<Link>,
    config: &DriveConfig,
    permits: &Sender<()>,
    stats: &Arc<ConnStats>,
    start: Instant,
) -> Option<Link> {
    if let Some(mut old) = old {
        old.close();
    }
    let stream = connect(&config.host).ok()?;
    Link::open(stream, permits, stats, start).ok()
}

/// Sleeps to just before `deadline`, then yields until it: a plain sleep overshoots by the
/// timer slack (about 50 µs on Linux), which would land in every open-loop latency. The
/// yielding costs at most [`SPIN_WINDOW`] of CPU per request and gives way to any other thread.
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now + SPIN_WINDOW {
        std::thread::sleep(deadline - now - SPIN_WINDOW);
    }
    while Instant::now() < deadline {
        std::thread::yield_now();
    }
}

/// Turns slots into bytes on the wire.
struct Writer<'a> {
    config: &'a DriveConfig,
    conn: &'a Conn,
    start: Instant,
    buffer: Vec<u8>,
    timestamp: (u64, String),
    spares: std::slice::Iter<'a, String>,
}

impl Writer<'_> {
    /// Sends slot `k`; `planned_ns` is its plan in open loop.
    fn send(&mut self, link: &mut Link, k: usize, planned_ns: Option<u64>) {
        let conn = self.conn;
        let (kind, method, body) = match &conn.work.slots[k] {
            Prepared::Order { taker: true, body } => (Kind::Taker, "POST", body.as_str()),
            Prepared::Order { taker: false, body } => (Kind::Quote, "POST", body.as_str()),
            Prepared::Cancel => match conn.cancels.as_ref().and_then(|c| c.pop()) {
                Some(cancel) => {
                    conn.stats.cancels_sent.fetch_add(1, Ordering::Relaxed);
                    self.write(kind_auth(conn, Kind::Cancel), "DELETE", cancel.as_bytes());
                    return self.finish(link, k, Kind::Cancel, planned_ns);
                }
                None => {
                    conn.stats
                        .cancels_substituted
                        .fetch_add(1, Ordering::Relaxed);
                    let spare = self.spares.next().map_or("", String::as_str);
                    (Kind::Quote, "POST", spare)
                }
            },
        };
        self.write(kind_auth(conn, kind), method, body.as_bytes());
        self.finish(link, k, kind, planned_ns);
    }

    fn write(&mut self, auth: &Auth, method: &str, body: &[u8]) {
        let now_s = unix_now_s();
        if self.timestamp.0 != now_s {
            self.timestamp = (now_s, now_s.to_string());
        }
        self.buffer.clear();
        wire::write_request(
            &mut self.buffer,
            &self.config.host,
            method,
            "/order",
            auth,
            &self.timestamp.1,
            body,
        );
    }

    fn finish(&mut self, link: &mut Link, k: usize, kind: Kind, planned_ns: Option<u64>) {
        let sent_ns = since(self.start);
        if kind == Kind::Taker {
            self.conn.sent.set(k, sent_ns);
        }
        let request = InFlight {
            kind,
            planned_ns: planned_ns.unwrap_or(sent_ns),
            sent_ns,
        };
        self.conn.stats.sent.fetch_add(1, Ordering::Relaxed);
        link.send(request, &self.buffer);
    }
}

fn kind_auth(conn: &Conn, kind: Kind) -> &Auth {
    match (kind, &conn.taker) {
        (Kind::Taker, Some(taker)) => taker,
        _ => &conn.maker,
    }
}

/// Judges one answer and records it.
fn settle(response: &Response, request: &InFlight, stats: &ConnStats, done_ns: u64) {
    if response.status != 200 {
        let error = serde_json::from_slice::<Value>(&response.body)
            .ok()
            .and_then(|v| v["error"].as_str().map(short))
            .unwrap_or_default();
        return stats.error(&format!("http {}: {error}", response.status));
    }
    match request.kind {
        Kind::Quote | Kind::Taker => {
            if !wire::contains(&response.body, b"\"success\":true") {
                let value: Value = serde_json::from_slice(&response.body).unwrap_or_default();
                let message = value["errorMsg"].as_str().unwrap_or("unparsable answer");
                if request.kind == Kind::Taker && message == Reject::FakNoMatch.words().to_string()
                {
                    stats.rejection(message);
                } else {
                    return stats.error(&format!("rejected: {}", short(message)));
                }
            }
        }
        Kind::Cancel => {
            let value: Value = serde_json::from_slice(&response.body).unwrap_or_default();
            let canceled = value["canceled"].as_array().map_or(0, Vec::len);
            stats.canceled.fetch_add(canceled as u64, Ordering::Relaxed);
            if let Some(reasons) = value["notCanceled"].as_object() {
                for reason in reasons.values() {
                    stats.not_canceled(reason.as_str().unwrap_or("?"));
                }
            }
        }
    }
    let lag_ns = (request.planned_ns != request.sent_ns)
        .then(|| request.sent_ns.saturating_sub(request.planned_ns));
    stats.ok(done_ns.saturating_sub(request.planned_ns), lag_ns, done_ns);
}

fn short(text: &str) -> String {
    text.chars().take(100).collect()
}

/// Prints `sent, ok, errors, rate, p99, max` of the last second until every connection is done
/// (the max shows which second a stall fell in).
fn progress(stats: &[Arc<ConnStats>], finished: &AtomicUsize, total: usize, start: Instant) {
    let mut last = (Instant::now(), 0u64);
    let mut next = start + Duration::from_secs(1);
    while finished.load(Ordering::Acquire) < total {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        if now < next {
            continue;
        }
        next += Duration::from_secs(1);
        let mut interval = histogram();
        let (mut sent, mut ok, mut errors) = (0, 0, 0);
        for s in stats {
            sent += s.sent.load(Ordering::Relaxed);
            ok += s.ok.load(Ordering::Relaxed);
            errors += s.errors.load(Ordering::Relaxed);
            let mut h = lock(&s.histograms);
            let _ = interval.add(&h.interval);
            h.interval.reset();
        }
        let rate = (ok - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-9);
        last = (now, ok);
        let (p99_ms, max_ms) = if interval.is_empty() {
            (0.0, 0.0)
        } else {
            (
                interval.value_at_quantile(0.99) as f64 / 1e6,
                interval.max() as f64 / 1e6,
            )
        };
        eprintln!(
            "loadgen {:>4}s  sent {sent}  ok {ok}  errors {errors}  rate {rate:.0}/s  p99 {p99_ms:.3} ms  max {max_ms:.3} ms",
            now.saturating_duration_since(start).as_secs()
        );
    }
}
