//! `/ws/user` listeners, one per account that needs one:
//! - a maker's feed learns the decimal ids of its quotes from `order` PLACEMENT events (the
//!   placement result carries only the hash) and signs cancels for the oldest live ones ahead
//!   of time, off the sending thread, so that a cancel slot finds a finished body;
//! - a taker's feed times fill notifications: from sending a taker order to its first `trade`
//!   event (status MATCHED, trader side TAKER).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ladder_client::{cancel_order_request, unix_now_s, ws_user_subscribe, Wallet};
use ladder_protocol::{ExchangeDomain, SignatureType, B256};
use serde::Deserialize;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use super::setup::Account;
use super::stats::{lock, record, FeedStats};

/// Cancels a maker's feed keeps signed ahead.
pub const READY_CANCELS_MAX: usize = 32;
/// How long a subscription may take to be confirmed.
pub const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a feed blocks on a read before it looks at the stop flag.
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

/// Cancel bodies ready to send, oldest quote first.
#[derive(Default)]
pub struct CancelQueue {
    ready: Mutex<VecDeque<String>>,
}

impl CancelQueue {
    /// The next DELETE /order body, if one is ready.
    pub fn pop(&self) -> Option<String> {
        lock(&self.ready).pop_front()
    }

    fn room(&self) -> usize {
        READY_CANCELS_MAX.saturating_sub(lock(&self.ready).len())
    }

    fn push(&self, bodies: Vec<String>) {
        lock(&self.ready).extend(bodies);
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
    /// Set at the end of the run.
    pub stop: AtomicBool,
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
    Ok(Feed {
        ws,
        role,
        market,
        domain,
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
    /// Reads events until the stop flag; `start` is the run's time origin.
    pub fn run(mut self, start: Instant, shared: &FeedShared) {
        let mut quotes = Quotes::default();
        let mut timed: HashSet<[u8; 32]> = HashSet::new();
        while !shared.stop.load(Ordering::Acquire) {
            let text = match self.ws.read() {
                Ok(Message::Text(text)) => text,
                Ok(Message::Close(frame)) => {
                    shared.stats.error(&format!("feed closed: {frame:?}"));
                    return;
                }
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(e) => {
                    shared.stats.error(&format!("feed: {e}"));
                    return;
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
                    FeedRole::Maker { .. } => quotes.apply(event),
                    FeedRole::Taker => time_fill(event, arrived_ns, shared, &mut timed),
                }
            }
            if let FeedRole::Maker { wallet, cancels } = &self.role {
                refill(
                    &mut quotes,
                    wallet,
                    cancels,
                    &self.market,
                    &self.domain,
                    shared,
                );
            }
        }
        let _ = self.ws.close(None);
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
}

/// Signs cancels for the oldest live quotes until the queue is full again.
fn refill(
    quotes: &mut Quotes,
    wallet: &Wallet,
    cancels: &CancelQueue,
    market: &B256,
    domain: &ExchangeDomain,
    shared: &FeedShared,
) {
    let mut bodies = Vec::new();
    let room = cancels.room();
    while bodies.len() < room {
        let Some(id) = quotes.oldest_first.pop_front() else {
            break;
        };
        if quotes.live.remove(&id) {
            let request =
                cancel_order_request(wallet, domain, id, *market, SignatureType::SmartAccount);
            bodies.push(request.to_json());
        }
    }
    if !bodies.is_empty() {
        shared
            .stats
            .cancels_signed
            .fetch_add(bodies.len() as u64, Ordering::Relaxed);
        cancels.push(bodies);
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
