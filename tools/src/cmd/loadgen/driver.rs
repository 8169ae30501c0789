//! The measured loop: N keep-alive connections driven by one thread (see [`super::lanes`]),
//! and what it sends and how it judges the answers.
//!
//! Open loop (`--rate R`): request `i` of the run is planned at `start + i / R` and goes to
//! connection `i % N`. A connection sends each request at its planned time or, if it is
//! behind (the previous answer is late and no pipelining slot is free), as soon as it can;
//! latency always runs from the planned time, so queueing anywhere (client, network, server)
//! is in the numbers and never hidden (no coordinated omission). Closed loop (no `--rate`):
//! each connection sends the next request when a slot frees, for `--duration`; latency runs
//! from the send. Requests in flight per connection: `--pipeline` (default 1).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladder_client::unix_now_s;
use ladder_engine::Reject;
use ladder_gateway::app::refusals::Worded;
use serde_json::Value;

use super::feed::{since, CancelQueue, Feed, FeedShared, SendTimes, Signer};
use super::lanes;
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
pub(super) enum Kind {
    /// A maker's quote.
    Quote,
    /// A taker's order.
    Taker,
    /// A cancel.
    Cancel,
}

/// A request on the wire, waiting for its answer.
pub(super) struct InFlight {
    /// What it was.
    pub kind: Kind,
    /// When it was planned (its send time in a closed loop), ns since the start.
    pub planned_ns: u64,
    /// When it left, ns since the start.
    pub sent_ns: u64,
}

/// Connects every connection, then runs them all from `start` on one thread, which also
/// reads `feeds` (for `drain` after the last answer), printing a progress line on stderr
/// once a second.
pub fn drive(
    config: &DriveConfig,
    conns: Vec<Conn>,
    feeds: Vec<Feed>,
    shared: &Arc<FeedShared>,
    drain: Duration,
    start: Instant,
) -> Result<(), String> {
    let mut streams = Vec::with_capacity(conns.len());
    for _ in &conns {
        let stream = lanes::connect(&config.host);
        streams.push(stream.map_err(|e| format!("connect {}: {e}", config.host))?);
    }
    let stats: Vec<Arc<ConnStats>> = conns.iter().map(|c| c.stats.clone()).collect();
    let finished = Arc::new(AtomicBool::new(false));
    let signer = Signer::start(shared.clone())?;
    let thread = {
        let (config, finished, shared) = (config.clone(), finished.clone(), shared.clone());
        std::thread::Builder::new()
            .name("loadgen-driver".into())
            .spawn(move || {
                let mut feeds = lanes::Feeds {
                    feeds,
                    shared: &shared,
                    signer: &signer,
                    drain,
                };
                let ran = lanes::run(&config, &conns, streams, &mut feeds, start);
                for feed in feeds.feeds {
                    feed.close();
                }
                finished.store(true, Ordering::Release);
                ran.map_err(|e| format!("driver: {e}"))
            })
            .map_err(|e| format!("driver thread: {e}"))?
    };
    progress(&stats, &finished, start);
    thread
        .join()
        .map_err(|_| "the driver thread panicked".to_string())?
}

/// Turns a connection's slots into bytes for the wire.
pub(super) struct Writer<'a> {
    host: &'a str,
    conn: &'a Conn,
    start: Instant,
    /// The last request's bytes.
    pub buffer: Vec<u8>,
    timestamp: (u64, String),
    spares: std::slice::Iter<'a, String>,
}

impl<'a> Writer<'a> {
    /// A writer for `conn`'s requests to `host`, timed from `start`.
    pub fn new(host: &'a str, conn: &'a Conn, start: Instant) -> Writer<'a> {
        Writer {
            host,
            conn,
            start,
            buffer: Vec::with_capacity(4096),
            timestamp: (0, String::new()),
            spares: conn.work.spares.iter(),
        }
    }

    /// Writes slot `k` into [`Writer::buffer`] and counts it sent; `planned_ns` is its plan
    /// in an open loop. Returns what to expect of its answer.
    pub fn write_slot(&mut self, k: usize, planned_ns: Option<u64>) -> InFlight {
        let conn = self.conn;
        let (kind, method, body) = match &conn.work.slots[k] {
            Prepared::Order { taker: true, body } => (Kind::Taker, "POST", body.as_str()),
            Prepared::Order { taker: false, body } => (Kind::Quote, "POST", body.as_str()),
            Prepared::Cancel => match conn.cancels.as_ref().and_then(|c| c.pop()) {
                Some(cancel) => {
                    conn.stats.cancels_sent.fetch_add(1, Ordering::Relaxed);
                    self.write(kind_auth(conn, Kind::Cancel), "DELETE", cancel.as_bytes());
                    return self.sent(k, Kind::Cancel, planned_ns);
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
        self.sent(k, kind, planned_ns)
    }

    fn write(&mut self, auth: &Auth, method: &str, body: &[u8]) {
        let now_s = unix_now_s();
        if self.timestamp.0 != now_s {
            self.timestamp = (now_s, now_s.to_string());
        }
        self.buffer.clear();
        wire::write_request(
            &mut self.buffer,
            self.host,
            method,
            "/order",
            auth,
            &self.timestamp.1,
            body,
        );
    }

    fn sent(&mut self, k: usize, kind: Kind, planned_ns: Option<u64>) -> InFlight {
        let sent_ns = since(self.start);
        if kind == Kind::Taker {
            self.conn.sent.set(k, sent_ns);
        }
        self.conn.stats.sent.fetch_add(1, Ordering::Relaxed);
        InFlight {
            kind,
            planned_ns: planned_ns.unwrap_or(sent_ns),
            sent_ns,
        }
    }
}

fn kind_auth(conn: &Conn, kind: Kind) -> &Auth {
    match (kind, &conn.taker) {
        (Kind::Taker, Some(taker)) => taker,
        _ => &conn.maker,
    }
}

/// Judges `response` to `request`, answered at `done_ns` (ns since the start) after reaching
/// the socket at `arrived_ns` (the kernel's timestamp, where there is one).
pub(super) fn settle(
    response: &Response,
    request: &InFlight,
    stats: &ConnStats,
    (done_ns, arrived_ns): (u64, Option<u64>),
) {
    // The run lasts until its last answer, whatever that answer says.
    stats.last_done_ns.fetch_max(done_ns, Ordering::Relaxed);
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
    let arrival_ns = arrived_ns.map(|at| at.saturating_sub(request.planned_ns));
    stats.ok(
        done_ns.saturating_sub(request.planned_ns),
        lag_ns,
        arrival_ns,
    );
}

fn short(text: &str) -> String {
    text.chars().take(100).collect()
}

/// Prints `sent, ok, errors, rate, p99, max` of the last second until every connection is done
/// (the max shows which second a stall fell in).
fn progress(stats: &[Arc<ConnStats>], finished: &AtomicBool, start: Instant) {
    let mut last = (Instant::now(), 0u64);
    let mut next = start + Duration::from_secs(1);
    while !finished.load(Ordering::Acquire) {
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
        crate::cmd::stdout::print_error(format_args!(
            "loadgen {:>4}s  sent {sent}  ok {ok}  errors {errors}  rate {rate:.0}/s  p99 {p99_ms:.3} ms  max {max_ms:.3} ms",
            now.saturating_duration_since(start).as_secs()
        ));
    }
}
