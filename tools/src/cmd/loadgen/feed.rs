//! `/ws/user` listeners, one per account that needs one, read by the driver's thread between
//! its sends (a frame usually arrives with the answer that woke it):
//! - a maker's feed learns the decimal ids of its quotes from `order` PLACEMENT events (the
//!   placement result carries only the hash) and has cancels for the oldest live ones signed
//!   ahead of time by the [`Signer`]'s thread, in batches, so that a cancel slot finds a
//!   finished body and the driver never spends a signature's time between two sends;
//! - a taker's feed times fill notifications: from sending a taker order to its first `trade`
//!   event (status MATCHED, trader side TAKER).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Sender};

use ladder_client::{cancel_order_request, unix_now_s, ws_user_subscribe, Wallet};
use ladder_protocol::{ExchangeDomain, SignatureType, B256};
use serde::Deserialize;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use super::setup::Account;
use super::stats::{lock, record, FeedStats};

/// Cancels a maker's feed keeps signed ahead.
pub const READY_CANCELS_MAX: usize = 32;
/// The fewest cancels a feed has signed at once: the signer's thread wakes once per batch.
pub const SIGN_BATCH_MIN: usize = READY_CANCELS_MAX / 2;
/// How long a subscription may take to be confirmed.
pub const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a feed blocks on a read while it waits for its subscription's `PONG`.
pub const POLL: Duration = Duration::from_millis(200);

/// The fields of a `/ws/user` event the feeds look at, borrowed from the frame where they
/// need no unescaping (the rest of the event is skipped, not built).
#[derive(Debug, Default, Deserialize)]
struct FeedEvent<'a> {
    #[serde(borrow)]
    event_type: Option<Cow<'a, str>>,
    /// An order's decimal id.
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    /// An order event's `PLACEMENT`, `UPDATE` or `CANCELLATION`.
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow)]
    trader_side: Option<Cow<'a, str>>,
    #[serde(borrow)]
    taker_order_id: Option<Cow<'a, str>>,
    /// A refusal from the service.
    error: Option<serde_json::Value>,
}

impl FeedEvent<'_> {
    fn is(field: &Option<Cow<'_, str>>, value: &str) -> bool {
        field.as_deref() == Some(value)
    }
}

/// The events of one frame: an array of them, or one alone (an error, a `PONG` is no JSON).
fn parse_frame(text: &str) -> Option<Vec<FeedEvent<'_>>> {
    if text.trim_start().starts_with('[') {
        serde_json::from_str(text).ok()
    } else {
        serde_json::from_str(text).ok().map(|one| vec![one])
    }
}

/// Cancel bodies ready to send, oldest quote first, and how many are being signed.
#[derive(Default)]
pub struct CancelQueue {
    ready: Mutex<VecDeque<String>>,
    signing: AtomicUsize,
}

impl CancelQueue {
    /// The next DELETE /order body, if one is ready.
    pub fn pop(&self) -> Option<String> {
        lock(&self.ready).pop_front()
    }

    /// Cancels that may be asked for: room left beside those ready and those being signed.
    fn room(&self) -> usize {
        let taken = lock(&self.ready).len() + self.signing.load(Ordering::Acquire);
        READY_CANCELS_MAX.saturating_sub(taken)
    }

    /// `bodies` are signed (they were counted as being signed).
    fn push(&self, bodies: Vec<String>) {
        let signed = bodies.len();
        lock(&self.ready).extend(bodies);
        self.signing.fetch_sub(signed, Ordering::AcqRel);
    }
}

/// Cancels to sign for one maker.
struct SignJob {
    ids: Vec<u64>,
    wallet: Wallet,
    market: B256,
    domain: ExchangeDomain,
    queue: Arc<CancelQueue>,
}

/// The thread that signs the makers' cancels.
pub struct Signer {
    jobs: Option<Sender<SignJob>>,
    thread: Option<JoinHandle<()>>,
}

impl Signer {
    /// Starts the thread; it counts what it signs in `shared`.
    pub fn start(shared: Arc<FeedShared>) -> Result<Signer, String> {
        let (jobs, inbox) = unbounded::<SignJob>();
        let thread = std::thread::Builder::new()
            .name("loadgen-signer".into())
            .spawn(move || {
                for job in inbox {
                    let bodies: Vec<String> = job
                        .ids
                        .iter()
                        .map(|&id| {
                            cancel_order_request(
                                &job.wallet,
                                &job.domain,
                                id,
                                job.market,
                                SignatureType::SmartAccount,
                            )
                            .to_json()
                        })
                        .collect();
                    shared
                        .stats
                        .cancels_signed
                        .fetch_add(bodies.len() as u64, Ordering::Relaxed);
                    job.queue.push(bodies);
                }
            })
            .map_err(|e| format!("signer thread: {e}"))?;
        Ok(Signer {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    fn sign(&self, job: SignJob) {
        job.queue.signing.fetch_add(job.ids.len(), Ordering::AcqRel);
        if let Some(jobs) = &self.jobs {
            // The thread holds the receiver until this signer is dropped.
            let _ = jobs.send(job);
        }
    }
}

impl Drop for Signer {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// When each request of a connection left, in ns since the start plus one (0: not yet).
pub struct SendTimes(Vec<AtomicU64>);

impl SendTimes {
    /// Room for `slots` requests.
    pub fn new(slots: usize) -> SendTimes {
        SendTimes((0..slots).map(|_| AtomicU64::new(0)).collect())
    }

    /// Slot `i` left at `ns`.
    pub fn set(&self, i: usize, ns: u64) {
        if let Some(t) = self.0.get(i) {
            t.store(ns + 1, Ordering::Release);
        }
    }

    /// When slot `i` left, if it did.
    pub fn get(&self, i: usize) -> Option<u64> {
        let t = self.0.get(i)?.load(Ordering::Acquire);
        t.checked_sub(1)
    }
}

/// What all feeds share.
pub struct FeedShared {
    /// Taker order hash → (connection, slot).
    pub takers: HashMap<[u8; 32], (u32, u32)>,
    /// Per connection.
    pub sent: Vec<Arc<SendTimes>>,
    /// Measurements.
    pub stats: FeedStats,
}

/// What a feed does with its events.
pub enum FeedRole {
    /// Learns quote ids and signs cancels for them.
    Maker {
        /// Signs the cancels.
        wallet: Wallet,
        /// Where the signed cancels go.
        cancels: Arc<CancelQueue>,
    },
    /// Times fill notifications.
    Taker,
}

type Socket = WebSocket<MaybeTlsStream<TcpStream>>;

/// A subscribed `/ws/user` connection.
pub struct Feed {
    ws: Socket,
    role: FeedRole,
    market: B256,
    domain: ExchangeDomain,
    /// A maker's live quotes.
    quotes: Quotes,
    /// A taker's orders whose fill was timed.
    timed: HashSet<[u8; 32]>,
    /// Closed or failed: read no more.
    ended: bool,
}

/// Connects to `ws://host/ws/user` as `account`, subscribed to `market`.
pub fn connect(
    host: &str,
    account: &Account,
    market: B256,
    role: FeedRole,
    domain: ExchangeDomain,
) -> Result<Feed, String> {
    let url = format!("ws://{host}/ws/user");
    let mut ws = crate::cmd::ws_client::connect(&url).map_err(|e| format!("{url}: {e}"))?;
    if let MaybeTlsStream::Plain(stream) = ws.get_ref() {
        stream
            .set_read_timeout(Some(POLL))
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).ok();
    }
    let subscribe = ws_user_subscribe(&account.credentials, unix_now_s(), &[market]);
    ws.send(Message::text(subscribe))
        .map_err(|e| format!("{url}: subscribe: {e}"))?;
    await_pong(&mut ws).map_err(|e| format!("{url}: {e}"))?;
    if let MaybeTlsStream::Plain(stream) = ws.get_ref() {
        stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    Ok(Feed {
        ws,
        role,
        market,
        domain,
        quotes: Quotes::default(),
        timed: HashSet::new(),
        ended: false,
    })
}

/// Sends `PING` and waits for `PONG`: the subscription before it has then been taken (the
/// service answers a connection's messages in order), so no event of the run is missed.
fn await_pong(ws: &mut Socket) -> Result<(), String> {
    ws.send(Message::text("PING"))
        .map_err(|e| format!("PING: {e}"))?;
    let deadline = Instant::now() + SUBSCRIBE_TIMEOUT;
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(text)) if text.as_str() == "PONG" => return Ok(()),
            Ok(Message::Text(text)) if text.as_str().contains("\"error\"") => {
                return Err(format!("subscription refused: {}", text.as_str()))
            }
            Ok(Message::Close(frame)) => return Err(format!("closed: {frame:?}")),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("no PONG to the subscription's PING".into())
}

/// A maker feed's view of its live quotes.
#[derive(Default)]
struct Quotes {
    live: HashSet<u64>,
    oldest_first: VecDeque<u64>,
}

impl Feed {
    /// The socket to wait on, while the feed reads.
    pub fn raw_fd(&self) -> Option<RawFd> {
        match self.ws.get_ref() {
            MaybeTlsStream::Plain(stream) if !self.ended => Some(stream.as_raw_fd()),
            _ => None,
        }
    }

    /// Handles every whole frame that has arrived, without waiting; `start` is the run's time
    /// origin. A maker's feed then asks `signer` for cancels if its queue has room for a batch.
    pub fn pump(&mut self, start: Instant, shared: &FeedShared, signer: &Signer) {
        while !self.ended {
            let text = match self.ws.read() {
                Ok(Message::Text(text)) => text,
                Ok(Message::Close(frame)) => {
                    shared.stats.error(&format!("feed closed: {frame:?}"));
                    self.ended = true;
                    break;
                }
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break
                }
                Err(e) => {
                    shared.stats.error(&format!("feed: {e}"));
                    self.ended = true;
                    break;
                }
            };
            let arrived_ns = since(start);
            let Some(events) = parse_frame(text.as_str()) else {
                continue;
            };
            for event in &events {
                shared.stats.events.fetch_add(1, Ordering::Relaxed);
                if let Some(error) = &event.error {
                    shared.stats.error(&format!("feed refused: {error}"));
                }
                match &self.role {
                    FeedRole::Maker { .. } => self.quotes.apply(event),
                    FeedRole::Taker => time_fill(event, arrived_ns, shared, &mut self.timed),
                }
            }
        }
        if let FeedRole::Maker { wallet, cancels } = &self.role {
            if let Some(job) = self.quotes.take_batch(cancels.room()) {
                signer.sign(SignJob {
                    ids: job,
                    wallet: wallet.clone(),
                    market: self.market,
                    domain: self.domain,
                    queue: cancels.clone(),
                });
            }
        }
    }

    /// Closes the connection.
    pub fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }
}

impl Quotes {
    fn apply(&mut self, event: &FeedEvent) {
        if !FeedEvent::is(&event.event_type, "order") {
            return;
        }
        let Some(id) = event.id.as_deref().and_then(|s| s.parse::<u64>().ok()) else {
            return;
        };
        match (event.kind.as_deref(), event.status.as_deref()) {
            // A repeated PLACEMENT of a known id changes nothing.
            (Some("PLACEMENT"), Some("live")) if self.live.insert(id) => {
                self.oldest_first.push_back(id);
            }
            (Some("UPDATE"), Some("matched")) | (Some("CANCELLATION"), _) => {
                self.live.remove(&id);
            }
            _ => {}
        }
    }

    /// The oldest live quotes, `room` at most, to cancel: none unless there is room for a
    /// batch of [`SIGN_BATCH_MIN`] and a quote to cancel. They leave
    /// the live set: each quote is cancelled once.
    fn take_batch(&mut self, room: usize) -> Option<Vec<u64>> {
        if room < SIGN_BATCH_MIN {
            return None;
        }
        let mut ids = Vec::new();
        while ids.len() < room {
            let Some(id) = self.oldest_first.pop_front() else {
                break;
            };
            if self.live.remove(&id) {
                ids.push(id);
            }
        }
        (!ids.is_empty()).then_some(ids)
    }
}

/// Records the time from sending a taker order to its first MATCHED trade event.
fn time_fill(
    event: &FeedEvent,
    arrived_ns: u64,
    shared: &FeedShared,
    timed: &mut HashSet<[u8; 32]>,
) {
    if !FeedEvent::is(&event.event_type, "trade")
        || !FeedEvent::is(&event.trader_side, "TAKER")
        || !FeedEvent::is(&event.status, "MATCHED")
    {
        return;
    }
    let Some(hash) = event
        .taker_order_id
        .as_deref()
        .and_then(|h| h.parse::<B256>().ok())
    else {
        return;
    };
    let Some(&(conn, slot)) = shared.takers.get(&hash.0) else {
        return;
    };
    let sent = shared
        .sent
        .get(conn as usize)
        .and_then(|s| s.get(slot as usize));
    if let Some(sent_ns) = sent {
        if timed.insert(hash.0) {
            record(
                &mut lock(&shared.stats.fill_notify),
                arrived_ns.saturating_sub(sent_ns),
            );
        }
    }
}

/// Nanoseconds from `start` to now (0 before it).
pub fn since(start: Instant) -> u64 {
    Instant::now().saturating_duration_since(start).as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_all(q: &mut Quotes, frame: &str) {
        for event in parse_frame(frame).expect("a frame of events") {
            q.apply(&event);
        }
    }

    #[test]
    fn quotes_leave_the_live_set_when_filled_or_cancelled() {
        let mut q = Quotes::default();
        apply_all(
            &mut q,
            r#"[{"event_type":"order","type":"PLACEMENT","status":"live","id":"1","size_matched":"0"},
                {"event_type":"order","type":"PLACEMENT","status":"live","id":"2","associate_trades":[]},
                {"event_type":"order","type":"PLACEMENT","status":"live","id":"3"}]"#,
        );
        apply_all(
            &mut q,
            r#"{"event_type":"order","type":"UPDATE","status":"matched","id":"2"}"#,
        );
        apply_all(
            &mut q,
            r#"[{"event_type":"order","type":"CANCELLATION","status":"canceled","id":"3"}]"#,
        );
        apply_all(
            &mut q,
            r#"{"event_type":"order","type":"UPDATE","status":"live","id":"1"}"#,
        );
        // A trade event names no order id of its own.
        apply_all(
            &mut q,
            r#"{"event_type":"trade","status":"MATCHED","id":"0xab","trader_side":"MAKER"}"#,
        );
        assert_eq!(q.live, HashSet::from([1]));
        assert_eq!(q.oldest_first, VecDeque::from([1, 2, 3]));
    }

    #[test]
    fn cancels_are_asked_for_in_batches_of_the_oldest_live_quotes_once_each() {
        let mut q = Quotes::default();
        for id in 1..=20 {
            apply_all(
                &mut q,
                &format!(
                    r#"{{"event_type":"order","type":"PLACEMENT","status":"live","id":"{id}"}}"#
                ),
            );
        }
        apply_all(
            &mut q,
            r#"{"event_type":"order","type":"CANCELLATION","status":"canceled","id":"2"}"#,
        );
        assert_eq!(q.take_batch(SIGN_BATCH_MIN - 1), None);
        assert_eq!(
            q.take_batch(SIGN_BATCH_MIN),
            Some(vec![1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17])
        );
        assert_eq!(q.take_batch(READY_CANCELS_MAX), Some(vec![18, 19, 20]));
        assert_eq!(q.take_batch(READY_CANCELS_MAX), None);
        assert!(q.live.is_empty());
    }

    #[test]
    fn frames_with_escapes_errors_or_no_json_are_read_or_skipped() {
        let events = parse_frame(r#"{"event_type":"ord\u0065r","error":{"code":1}}"#).unwrap();
        assert!(FeedEvent::is(&events[0].event_type, "order"));
        assert!(events[0].error.is_some());
        assert!(parse_frame("PONG").is_none());
    }

    #[test]
    fn send_times_start_unset() {
        let t = SendTimes::new(2);
        assert_eq!(t.get(0), None);
        t.set(0, 0);
        assert_eq!(t.get(0), Some(0));
        assert_eq!(t.get(5), None);
    }
}
