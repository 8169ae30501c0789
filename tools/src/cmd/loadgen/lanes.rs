//! The measured loop, on one thread. Each connection is a *lane*: a non-blocking socket, the
//! requests it has in flight (their answers come back in order) and the bytes it has received
//! but not yet parsed. The thread sends each lane's requests when they are due and the lane
//! has a pipelining slot free, reads whatever answers have arrived, and in between waits (a
//! [`Waiter`]) for a socket or for the next planned send. That wait has a nanosecond timeout
//! (and 1 ns timer slack), but a timer still wakes this VM's threads tens of µs late, so the
//! last [`SPIN_WINDOW`] before a send is waited out by looking at the sockets and yielding.
//!
//! One thread rather than a sending and a reading thread per connection: the load generator
//! shares the service's two cores, and every hand-off between its own threads was a
//! context switch the service paid for in its tail.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::arrival::{self, ArrivalClock};
use super::driver::{
    settle, Conn, DriveConfig, InFlight, Writer, LATE_GIVE_UP, PIPELINE_MAX, READ_TIMEOUT,
};
use super::feed::{since, Feed, FeedShared, Signer};
use super::waiter::Waiter;
use super::wire;

/// The last stretch before a planned send that is waited out by polling and yielding, not
/// sleeping.
pub const SPIN_WINDOW: Duration = Duration::from_micros(80);
/// The longest single wait: timeouts and the end of the run are looked at this often.
const LONGEST_WAIT: Duration = Duration::from_millis(100);
/// How long a lane whose reconnection failed waits before it tries again.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);
/// Bytes read from a socket at a time.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// A connection to `host`, with Nagle off, ready for the loop (non-blocking).
/// Answers are timestamped by the kernel where it can ([`arrival`]).
pub fn connect(host: &str) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(host)?;
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    arrival::enable(&stream);
    Ok(stream)
}

/// When the requests of the run are due.
struct Plan {
    /// Open loop: ns between two requests of the run (all connections together).
    interval_ns: Option<f64>,
    connections: usize,
    /// Requests in flight per connection.
    depth: usize,
    /// No request leaves after this, ns since the start.
    stop_ns: u64,
}

impl Plan {
    fn new(config: &DriveConfig) -> Plan {
        let stop = match config.rate {
            Some(_) => config.duration + LATE_GIVE_UP,
            None => config.duration,
        };
        Plan {
            interval_ns: config.rate.map(|r| 1e9 / r.max(1) as f64),
            connections: config.connections,
            depth: config.pipeline.clamp(1, PIPELINE_MAX),
            stop_ns: stop.as_nanos() as u64,
        }
    }

    /// When connection `index`'s `k`-th request is planned (open loop only).
    fn planned_ns(&self, index: usize, k: usize) -> Option<u64> {
        self.interval_ns
            .map(|i| ((k * self.connections + index) as f64 * i) as u64)
    }
}

/// An open connection.
struct Link {
    stream: TcpStream,
    /// Bytes of requests the socket has not taken yet.
    unsent: Vec<u8>,
    /// Bytes received and not yet parsed.
    received: Vec<u8>,
    /// Requests sent, oldest first.
    in_flight: VecDeque<InFlight>,
    /// Since when (ns since the start) the oldest request in flight has had no byte.
    waiting_since_ns: u64,
    /// When the bytes of the last read reached the socket (ns since the start), by the
    /// kernel's timestamp, if it gave one.
    arrived_ns: Option<u64>,
}

impl Link {
    fn new(stream: TcpStream) -> Link {
        Link {
            stream,
            unsent: Vec::new(),
            received: Vec::with_capacity(READ_CHUNK_BYTES),
            in_flight: VecDeque::new(),
            waiting_since_ns: 0,
            arrived_ns: None,
        }
    }

    /// Sends `bytes` (what the socket does not take now waits in `unsent`).
    fn send(&mut self, request: InFlight, bytes: &[u8]) -> io::Result<()> {
        if self.in_flight.is_empty() {
            self.waiting_since_ns = request.sent_ns;
        }
        self.in_flight.push_back(request);
        if !self.unsent.is_empty() {
            self.unsent.extend_from_slice(bytes);
            return self.flush();
        }
        let written = write_some(&mut self.stream, bytes)?;
        self.unsent.extend_from_slice(&bytes[written..]);
        Ok(())
    }

    /// Writes what waits in `unsent`, as far as the socket takes it.
    fn flush(&mut self) -> io::Result<()> {
        let written = write_some(&mut self.stream, &self.unsent)?;
        self.unsent.drain(..written);
        Ok(())
    }

    /// Reads what has arrived, through `chunk`; `Ok(false)` when the service closed the
    /// connection.
    fn receive(&mut self, chunk: &mut [u8], now_ns: u64, clock: &ArrivalClock) -> io::Result<bool> {
        loop {
            match arrival::read_stamped(&self.stream, chunk) {
                Ok((0, _)) => return Ok(false),
                Ok((n, stamp)) => {
                    self.received.extend_from_slice(&chunk[..n]);
                    self.waiting_since_ns = now_ns;
                    self.arrived_ns = stamp.map(|wall_ns| clock.since_start(wall_ns));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Writes as much of `bytes` as the socket takes now.
fn write_some(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match stream.write(&bytes[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// One connection's part of the run.
struct Lane<'a> {
    conn: &'a Conn,
    host: &'a str,
    writer: Writer<'a>,
    link: Option<Link>,
    /// Counts the lane's connections (tells a new one from a closed one with its number).
    serial: u64,
    /// The next slot to send.
    next: usize,
    /// Sends nothing more.
    stopped: bool,
    /// After a failed reconnection: no new attempt before this (ns since the start).
    reconnect_at_ns: u64,
    /// Maps the kernel's receive timestamps onto the run's clock.
    arrivals: ArrivalClock,
}

impl<'a> Lane<'a> {
    fn in_flight(&self) -> usize {
        self.link.as_ref().map_or(0, |l| l.in_flight.len())
    }

    /// Done: sends nothing more and waits for no answer.
    fn finished(&self) -> bool {
        self.stopped && self.in_flight() == 0
    }

    /// When the next request may leave (ns since the start): none while the lane is stopped
    /// or every pipelining slot is taken.
    fn next_due_ns(&self, plan: &Plan) -> Option<u64> {
        if self.stopped || self.in_flight() >= plan.depth {
            return None;
        }
        let planned = plan.planned_ns(self.conn.index, self.next).unwrap_or(0);
        let reconnect = if self.link.is_none() {
            self.reconnect_at_ns
        } else {
            0
        };
        Some(planned.max(reconnect))
    }

    /// Sends every request that is due and has a slot.
    fn send_due(&mut self, plan: &Plan, start: Instant) {
        let total = self.conn.work.slots.len();
        while let Some(due_ns) = self.next_due_ns(plan) {
            if self.next >= total {
                self.stop(plan, total);
                break;
            }
            let now_ns = since(start);
            if due_ns > now_ns {
                break;
            }
            if now_ns > plan.stop_ns {
                self.stop(plan, total);
                break;
            }
            if self.link.is_none() && !self.reconnect(now_ns) {
                self.next += 1;
                continue;
            }
            let planned_ns = plan.planned_ns(self.conn.index, self.next);
            let request = self.writer.write_slot(self.next, planned_ns);
            self.next += 1;
            if let Some(link) = self.link.as_mut() {
                if let Err(e) = link.send(request, &self.writer.buffer) {
                    self.break_link(Some(format!("io: {e}")));
                }
            }
        }
    }

    /// Stops sending: in an open loop, what is left unsent counts as errors; in a closed loop,
    /// running out of slots before the end is reported.
    fn stop(&mut self, plan: &Plan, total: usize) {
        self.stopped = true;
        let stats = &self.conn.stats;
        match plan.interval_ns {
            Some(_) if self.next < total => {
                let unsent = (total - self.next) as u64;
                stats.unsent.fetch_add(unsent, Ordering::Relaxed);
                stats.errors_n("unsent: more than 10 s behind the plan", unsent);
            }
            None if self.next >= total => stats.pool_exhausted.store(true, Ordering::Relaxed),
            _ => {}
        }
    }

    /// Opens a new connection; on failure counts the slot as an error and pauses.
    fn reconnect(&mut self, now_ns: u64) -> bool {
        match connect(self.host) {
            Ok(stream) => {
                self.link = Some(Link::new(stream));
                self.serial += 1;
                true
            }
            Err(_) => {
                self.conn.stats.error("io: cannot reconnect");
                self.reconnect_at_ns = now_ns + RECONNECT_PAUSE.as_nanos() as u64;
                false
            }
        }
    }

    /// Closes the connection: the oldest request in flight fails with `first` (or like the
    /// others), the others as lost with it.
    fn break_link(&mut self, first: Option<String>) {
        let Some(link) = self.link.take() else { return };
        let _ = link.stream.shutdown(Shutdown::Both);
        let mut first = first;
        for _ in &link.in_flight {
            match first.take() {
                Some(error) => self.conn.stats.error(&error),
                None => self
                    .conn
                    .stats
                    .error("io: connection lost with the request in flight"),
            }
        }
    }

    /// The socket is ready: writes what waits, reads what came and judges every whole answer.
    fn on_ready(&mut self, start: Instant, chunk: &mut [u8]) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if !link.unsent.is_empty() {
            if let Err(e) = link.flush() {
                return self.break_link(Some(format!("io: {e}")));
            }
        }
        let open = match link.receive(chunk, since(start), &self.arrivals) {
            Ok(open) => open,
            Err(e) => return self.break_link(Some(format!("io: {e}"))),
        };
        // Answers that came before the service hung up are whole answers still.
        let mut used = 0;
        let mut close = false;
        let mut failure = None;
        while !close {
            match wire::parse_response(&link.received[used..]) {
                Ok(Some((response, len))) => {
                    used += len;
                    let Some(request) = link.in_flight.pop_front() else {
                        failure = Some("io: an answer to no request".to_string());
                        break;
                    };
                    let done = (since(start), link.arrived_ns);
                    settle(&response, &request, &self.conn.stats, done);
                    close = response.close;
                }
                Ok(None) => break,
                Err(e) => {
                    failure = Some(format!("io: {e}"));
                    break;
                }
            }
        }
        link.received.drain(..used);
        if failure.is_some() || close || !open {
            let unanswered = failure.is_none() && !open && !link.in_flight.is_empty();
            let first = failure.or_else(|| unanswered.then(|| "io: connection closed".into()));
            self.break_link(first);
        }
    }

    /// Fails the connection when its oldest request has waited too long for a byte.
    fn check_timeout(&mut self, now_ns: u64) {
        let late = self.link.as_ref().is_some_and(|l| {
            !l.in_flight.is_empty()
                && now_ns.saturating_sub(l.waiting_since_ns) > READ_TIMEOUT.as_nanos() as u64
        });
        if late {
            let seconds = READ_TIMEOUT.as_secs();
            self.break_link(Some(format!("io: no answer within {seconds} s")));
        }
    }
}

/// The user feeds the driver reads, and what they share.
pub struct Feeds<'a> {
    /// The feeds.
    pub feeds: Vec<Feed>,
    /// Their measurements and the taker orders' send times.
    pub shared: &'a FeedShared,
    /// Signs the makers' cancels.
    pub signer: &'a Signer,
    /// How long the feeds are read after the last answer.
    pub drain: Duration,
}

/// Runs every connection from `start` until each has sent its part and had its answers,
/// reading the feeds all along and for `feeds.drain` after.
pub fn run(
    config: &DriveConfig,
    conns: &[Conn],
    streams: Vec<TcpStream>,
    feeds: &mut Feeds,
    start: Instant,
) -> io::Result<()> {
    precise_timers();
    let plan = Plan::new(config);
    let mut lanes: Vec<Lane> = conns
        .iter()
        .zip(streams)
        .map(|(conn, stream)| Lane {
            conn,
            host: &config.host,
            writer: Writer::new(&config.host, conn, start),
            link: Some(Link::new(stream)),
            serial: 0,
            next: 0,
            stopped: false,
            reconnect_at_ns: 0,
            arrivals: ArrivalClock::new(start),
        })
        .collect();
    let first_feed = lanes.len();
    let mut waiter = Waiter::new(first_feed + feeds.feeds.len())?;
    let mut ready = Vec::with_capacity(first_feed + feeds.feeds.len());
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut drain_end: Option<Instant> = None;
    wait_until(start);
    loop {
        let mut next_due: Option<u64> = None;
        let mut running = false;
        for lane in &mut lanes {
            lane.send_due(&plan, start);
            lane.check_timeout(since(start));
            if let Some(due) = lane.next_due_ns(&plan) {
                next_due = Some(next_due.map_or(due, |d| d.min(due)));
            }
            running |= !lane.finished();
        }
        let mut until_due = next_due.map_or(LONGEST_WAIT, |due| {
            Duration::from_nanos(due.saturating_sub(since(start)))
        });
        if !running {
            let end = *drain_end.get_or_insert_with(|| Instant::now() + feeds.drain);
            let now = Instant::now();
            if now >= end {
                break;
            }
            until_due = end - now;
        }
        for (token, lane) in lanes.iter_mut().enumerate() {
            let Some(link) = &lane.link else {
                waiter.closed(token);
                continue;
            };
            let (fd, writable) = (link.stream.as_raw_fd(), !link.unsent.is_empty());
            if let Err(e) = waiter.watch(token, fd, lane.serial, writable) {
                lane.break_link(Some(format!("io: {e}")));
            }
        }
        for (i, feed) in feeds.feeds.iter().enumerate() {
            match feed.raw_fd() {
                Some(fd) => waiter.watch(first_feed + i, fd, 0, false)?,
                None => waiter.unwatch(first_feed + i),
            }
        }
        let spinning = running && until_due <= SPIN_WINDOW;
        let sleep = if spinning {
            Duration::ZERO
        } else {
            until_due.saturating_sub(SPIN_WINDOW).min(LONGEST_WAIT)
        };
        waiter.wait(sleep, &mut ready);
        if ready.is_empty() && spinning {
            std::thread::yield_now();
        }
        for &token in &ready {
            match lanes.get_mut(token) {
                Some(lane) => lane.on_ready(start, &mut chunk),
                None => {
                    if let Some(feed) = feeds.feeds.get_mut(token - first_feed) {
                        feed.pump(start, feeds.shared, feeds.signer);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Waits until `deadline`: sleeps to [`SPIN_WINDOW`] before it, then yields.
fn wait_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now + SPIN_WINDOW {
        std::thread::sleep(deadline - now - SPIN_WINDOW);
    }
    while Instant::now() < deadline {
        std::thread::yield_now();
    }
}

/// Asks for this thread's timers to fire as close to their time as the kernel can (1 ns of
/// slack instead of the default 50 µs).
#[cfg(target_os = "linux")]
fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's
    // timer slack; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

#[cfg(not(target_os = "linux"))]
fn precise_timers() {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::loadgen::feed::SendTimes;
    use crate::cmd::loadgen::presign::{ConnWork, Prepared};
    use crate::cmd::loadgen::stats::ConnStats;
    use crate::cmd::loadgen::wire::Auth;
    use std::io::{BufRead, Read};
    use std::net::TcpListener;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// How a made-up service treats each connection: answers `answered` requests, then
    /// either says `Connection: close` on the last answer (`polite`) or reads one more
    /// request and hangs up without answering it.
    #[derive(Clone, Copy)]
    struct Service {
        answered: usize,
        polite: bool,
    }

    /// Reads one request's head and body; false when the client has gone.
    fn read_request(reader: &mut std::io::BufReader<TcpStream>) -> bool {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return false;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).is_ok()
    }

    /// Serves connections in the way `service` says; returns its address and a count of the
    /// connections it took.
    fn serve(service: Service) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                for i in 0..service.answered {
                    if !read_request(&mut reader) {
                        break;
                    }
                    let close = if service.polite && i + 1 == service.answered {
                        "Connection: close\r\n"
                    } else {
                        ""
                    };
                    let body = "{\"success\":true}";
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\n{close}Content-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    stream.write_all(answer.as_bytes()).unwrap();
                }
                if !service.polite {
                    read_request(&mut reader);
                }
            }
        });
        (host, accepted)
    }

    /// Runs `slots` quotes on one connection in a closed loop against `service`; returns the
    /// connection's stats and how many connections the service took.
    fn drive_against(service: Service, slots: usize) -> (Arc<ConnStats>, usize) {
        let (host, accepted) = serve(service);
        let conn = Conn {
            index: 0,
            work: ConnWork {
                slots: vec![
                    Prepared::Order {
                        taker: false,
                        body: "{}".into()
                    };
                    slots
                ],
                spares: Vec::new(),
            },
            maker: Auth::made_up(),
            taker: None,
            cancels: None,
            sent: Arc::new(SendTimes::new(slots)),
            stats: Arc::new(ConnStats::default()),
        };
        let config = DriveConfig {
            host: host.clone(),
            rate: None,
            connections: 1,
            duration: Duration::from_secs(30),
            pipeline: 1,
        };
        let stream = connect(&host).unwrap();
        let shared = Arc::new(FeedShared {
            takers: Default::default(),
            sent: Vec::new(),
            stats: Default::default(),
        });
        let signer = Signer::start(shared.clone()).unwrap();
        let mut feeds = Feeds {
            feeds: Vec::new(),
            shared: &shared,
            signer: &signer,
            drain: Duration::ZERO,
        };
        run(
            &config,
            std::slice::from_ref(&conn),
            vec![stream],
            &mut feeds,
            Instant::now(),
        )
        .unwrap();
        (conn.stats.clone(), accepted.load(Ordering::SeqCst))
    }

    #[test]
    fn a_connection_the_service_closes_politely_is_opened_again_and_nothing_is_lost() {
        let (stats, connections) = drive_against(
            Service {
                answered: 2,
                polite: true,
            },
            5,
        );
        let errors = crate::cmd::loadgen::stats::lock(&stats.kinds)
            .errors
            .clone();
        assert_eq!(stats.sent.load(Ordering::SeqCst), 5, "{errors:?}");
        assert_eq!(stats.ok.load(Ordering::SeqCst), 5, "{errors:?}");
        assert_eq!(stats.errors.load(Ordering::SeqCst), 0);
        assert!(stats.pool_exhausted.load(Ordering::SeqCst));
        assert_eq!(connections, 3);
        // Answers with an arrival time at the socket (Linux, once the kernel has turned its
        // timestamps on) arrived no later than they were read.
        let histograms = crate::cmd::loadgen::stats::lock(&stats.histograms);
        assert!(histograms.arrival.len() <= 5);
        assert!(histograms.arrival.max() <= histograms.latency.max());
    }

    #[test]
    fn a_request_the_service_hangs_up_on_counts_as_an_error() {
        let (stats, connections) = drive_against(
            Service {
                answered: 1,
                polite: false,
            },
            4,
        );
        assert_eq!(stats.sent.load(Ordering::SeqCst), 4);
        assert_eq!(stats.ok.load(Ordering::SeqCst), 2);
        assert_eq!(stats.errors.load(Ordering::SeqCst), 2);
        let kinds = crate::cmd::loadgen::stats::lock(&stats.kinds);
        assert_eq!(
            kinds.errors.get("io: connection closed"),
            Some(&2),
            "{:?}",
            kinds.errors
        );
        drop(kinds);
        assert_eq!(connections, 2);
    }

    fn plan(rate: Option<u64>, connections: usize) -> Plan {
        Plan::new(&DriveConfig {
            host: String::new(),
            rate,
            connections,
            duration: Duration::from_secs(2),
            pipeline: 200,
        })
    }

    #[test]
    fn open_loop_requests_are_planned_round_the_connections() {
        let p = plan(Some(1_000), 4);
        // Request i of the run is connection i % 4's (i / 4)-th, planned at i ms.
        assert_eq!(p.planned_ns(0, 0), Some(0));
        assert_eq!(p.planned_ns(3, 0), Some(3_000_000));
        assert_eq!(p.planned_ns(1, 2), Some(9_000_000));
        assert_eq!(p.depth, PIPELINE_MAX);
        assert_eq!(
            p.stop_ns,
            (Duration::from_secs(2) + LATE_GIVE_UP).as_nanos() as u64
        );
    }

    #[test]
    fn closed_loop_requests_are_never_planned() {
        let p = plan(None, 4);
        assert_eq!(p.planned_ns(2, 7), None);
        assert_eq!(p.stop_ns, 2_000_000_000);
    }
}
