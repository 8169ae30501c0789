//! One WebSocket connection: its subscription, the frames it is owed, and the bound on what
//! it may leave unread (past it, the connection is closed; nothing else waits for it).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::stream::Stream;
use ladder_engine::{BookView, Bytes32};
use serde_json::Value;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::{Error as WsError, Message, Utf8Bytes, WebSocket};

use super::feed::FeedItem;
use super::{
    book_frame, error_frame, parse_market_message, MarketOperation, WsKind, FRAME_HEADER_BYTES_MAX,
    INBOUND_MESSAGE_BYTES_MAX, INBOUND_READ_BUFFER_BYTES, OUTBOUND_BYTES_MAX, USER_CATCH_UP,
    USER_OUTBOUND_BYTES_MAX, USER_OVERFLOW_POOL_BYTES_MAX,
};

/// Frames held for a connection while its book snapshot is being read.
pub const BUFFERED_FRAMES_MAX: usize = 65_536;

/// How long a connection being closed may take to read what it was sent before its close
/// frame (its backlog, then the error and the close); past it, the socket is dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// How long a book asked for on a followed market waits for the events it is current as of
/// (looked at by the loop's half-second sweep, so up to half a second more).
pub const HELD_BOOK_WAIT_MAX: Duration = Duration::from_secs(1);

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Reading messages and taking frames.
    Open,
    /// Its close frame is queued behind what it was already sent; nothing new is queued.
    /// `sent` once all of it is written (the socket's write half is then shut).
    Closing { deadline: Instant, sent: bool },
    /// Done: the event loop drops it.
    Closed,
}

/// What the event loop must do for a connection after reading from it.
#[derive(Debug)]
pub enum Action {
    /// Check a `/ws/user` subscription's credentials, then follow these markets (empty: all).
    AuthenticateUser {
        /// The `auth` object.
        auth: Value,
        /// Markets to follow.
        markets: Vec<Bytes32>,
        /// Cancel the account's open orders when the connection ends.
        cancel_on_disconnect: bool,
    },
    /// Read the books of these tokens (subscribe or snapshot request).
    Snapshot(Vec<Bytes32>),
}

/// What a connection wants from the feed (see [`WsConn::interests`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interests {
    /// The account whose events it follows.
    pub user: Option<ladder_engine::Address>,
    /// The markets it follows.
    pub markets: Vec<Bytes32>,
    /// It takes every market frame for now (a snapshot is being read).
    pub all_markets: bool,
}

/// A `/ws/user` subscription.
#[derive(Clone, Debug)]
struct UserSub {
    address: ladder_engine::Address,
    /// The API key it authenticated with.
    key_id: uuid::Uuid,
    markets: Vec<Bytes32>,
    next_seq: u64,
    /// With `cancel_on_disconnect`: the connection's number in its dead-man switch records,
    /// until its end is taken.
    dead_man_connection: Option<u64>,
}

/// A WebSocket connection.
pub struct WsConn {
    ws: WebSocket<Stream>,
    /// Its channel.
    pub kind: WsKind,
    /// When it was upgraded.
    pub opened: Instant,
    /// Token generation, to tell a reused slot from this connection.
    pub generation: u32,
    /// The client's address (its connection counts under it).
    pub peer_ip: std::net::IpAddr,
    first_message_seen: bool,
    user: Option<UserSub>,
    /// Followed markets and the sequence their snapshot was current as of.
    markets: HashMap<Bytes32, u64>,
    /// Both tokens of every followed market, to the market.
    tokens: HashMap<Bytes32, Bytes32>,
    /// The tokens the client named (an empty snapshot request sends their books).
    named: BTreeSet<Bytes32>,
    snapshots_pending: u32,
    buffered: Vec<(Bytes32, u64, Utf8Bytes)>,
    /// Books asked for on a market followed already, read at a `seq` whose events have not
    /// all reached this connection yet: each goes once they have (market, seq, frame, since
    /// when), or after [`HELD_BOOK_WAIT_MAX`].
    held_books: Vec<(Bytes32, u64, std::sync::Arc<str>, Instant)>,
    phase: Phase,
    /// Closed for falling behind, not yet counted by the event loop.
    slow_close_uncounted: bool,
    /// When the client last sent a frame (any: a message, a pong, a ping).
    last_heard: Instant,
    /// When the server's ping went out, while its pong is awaited.
    ping_sent: Option<Instant>,
    /// The last read stopped at its frame budget with frames perhaps left.
    unread: bool,
    /// A user connection's frames waiting behind its full outbound queue while the client
    /// catches up (see [`WsConn::send_user`]), each with its bytes; they move into the queue
    /// as it drains.
    overflow: VecDeque<(Message, usize)>,
    /// Bytes in `overflow`.
    overflow_bytes: usize,
    /// Bytes in every user connection's overflow, service-wide.
    overflow_pool: Arc<AtomicUsize>,
    /// Since when `overflow` has held frames (the client has [`USER_CATCH_UP`] to empty it).
    over_bound_since: Option<Instant>,
}

impl Drop for WsConn {
    /// Gives the overflow's bytes back to the service-wide pool.
    fn drop(&mut self) {
        self.clear_overflow();
    }
}

/// Frames one connection's read handles before the event loop turns to its other connections.
pub const READ_FRAMES_PER_TURN: usize = 64;

/// The close code and reason for a read that broke the protocol, if it is one to tell the
/// client: 1009 for a message over the inbound limit, 1007 for text that is not UTF-8, 1002
/// for any other protocol violation (a frame length with its top bit set included).
fn violation_close_code(error: &WsError) -> Option<(CloseCode, &'static str)> {
    match error {
        // RFC 6455 5.2: a 64-bit payload length has its most significant bit clear. One with
        // it set is not a large message but a broken frame.
        WsError::Capacity(tungstenite::error::CapacityError::MessageTooLong { size, .. })
            if *size as u64 >= 1 << 63 =>
        {
            Some((
                CloseCode::Protocol,
                "protocol violation: frame length has its top bit set",
            ))
        }
        WsError::Capacity(_) => Some((
            CloseCode::Size,
            "message too big: inbound messages are limited to 64 KiB",
        )),
        WsError::Utf8 => Some((CloseCode::Invalid, "message is not valid UTF-8")),
        WsError::Protocol(_) => Some((CloseCode::Protocol, "protocol violation")),
        _ => None,
    }
}

impl WsConn {
    /// Wraps an upgraded socket; `leftover` is what the client sent after the handshake.
    pub fn new(
        stream: Stream,
        leftover: Vec<u8>,
        kind: WsKind,
        generation: u32,
        peer_ip: std::net::IpAddr,
        overflow_pool: Arc<AtomicUsize>,
    ) -> WsConn {
        let config = WebSocketConfig::default()
            .read_buffer_size(INBOUND_READ_BUFFER_BYTES)
            .max_write_buffer_size(OUTBOUND_BYTES_MAX)
            .max_message_size(Some(INBOUND_MESSAGE_BYTES_MAX))
            .max_frame_size(Some(INBOUND_MESSAGE_BYTES_MAX));
        WsConn {
            ws: WebSocket::from_partially_read(stream, leftover, Role::Server, Some(config)),
            kind,
            opened: Instant::now(),
            generation,
            peer_ip,
            first_message_seen: false,
            user: None,
            markets: HashMap::new(),
            tokens: HashMap::new(),
            named: BTreeSet::new(),
            snapshots_pending: 0,
            buffered: Vec::new(),
            held_books: Vec::new(),
            phase: Phase::Open,
            slow_close_uncounted: false,
            last_heard: Instant::now(),
            ping_sent: None,
            unread: false,
            overflow: VecDeque::new(),
            overflow_bytes: 0,
            overflow_pool,
            over_bound_since: None,
        }
    }

    /// Keeps a silent connection honest: silent for `after`, it gets a ping; silent for
    /// `after` again, it is closed (a peer that vanished without a close frees its slot).
    pub fn keep_alive(&mut self, after: Duration) {
        if !self.is_open() {
            return;
        }
        match self.ping_sent {
            None if self.last_heard.elapsed() >= after
                && self.ws.write(Message::Ping(Default::default())).is_ok() =>
            {
                self.ping_sent = Some(Instant::now());
            }
            Some(sent) if sent.elapsed() >= after => {
                self.fail(CloseCode::Policy, "no pong to the server's ping in time");
            }
            _ => {}
        }
    }

    /// The socket, for (de)registration.
    pub fn stream_mut(&mut self) -> &mut mio::net::TcpStream {
        self.ws.get_mut().socket()
    }

    /// Whether it is done (closed, failed, or past its close grace): the event loop drops it.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Whether everything queued for it, its close frame included, was handed to the socket
    /// (or it is closed): a stopping service waits for that, for a while.
    pub fn has_written_all(&self) -> bool {
        match self.phase {
            Phase::Open => false,
            Phase::Closing { sent, .. } => sent,
            Phase::Closed => true,
        }
    }

    /// Whether it still takes messages and frames (not closing or closed).
    fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// What this connection wants from the feed: an account's events, the frames of these
    /// markets, or (while a snapshot is being read) every market frame.
    pub fn interests(&self) -> Interests {
        if !self.is_open() {
            return Interests::default();
        }
        Interests {
            user: self.user.as_ref().map(|u| u.address),
            markets: self.markets.keys().copied().collect(),
            all_markets: self.kind == WsKind::Market && self.snapshots_pending > 0,
        }
    }

    /// The account whose open orders go now that this connection is ending (`/ws/user`
    /// with `"cancel_on_disconnect": true`, authenticated): once it is no longer open, and
    /// only once. A connection ends when it starts closing, not when its close frame has
    /// been read: a client that stopped reading is never read from again.
    pub fn take_ended_cancel(&mut self) -> Option<(ladder_engine::Address, u64)> {
        if self.is_open() {
            return None;
        }
        let user = self.user.as_mut()?;
        let connection = user.dead_man_connection.take()?;
        Some((user.address, connection))
    }

    /// Whether the subscribe message has arrived.
    pub fn subscribed(&self) -> bool {
        self.first_message_seen
    }

    /// Reads what arrived; returns what the event loop must do. A closing connection's
    /// messages are read and dropped (until the client's close or end of stream). `admit`
    /// charges a message's units of work to the client's rate limit (`Err`: seconds to wait).
    pub fn read(&mut self, admit: &dyn Fn(usize) -> Result<(), u64>) -> Vec<Action> {
        let mut actions = Vec::new();
        self.unread = false;
        let mut frames = 0;
        while self.phase != Phase::Closed {
            // A client that sends without pause (a flood of tiny frames) gets a turn's worth,
            // then the loop serves its other connections and comes back (`has_unread`).
            if frames == READ_FRAMES_PER_TURN {
                self.unread = true;
                break;
            }
            frames += 1;
            let open = self.is_open();
            let frame = self.ws.read();
            if frame.is_ok() {
                self.last_heard = Instant::now();
                self.ping_sent = None;
            }
            match frame {
                Ok(Message::Text(text)) if open => self.on_text(text.as_str(), admit, &mut actions),
                Ok(Message::Binary(_)) if open => {
                    self.fail(CloseCode::Unsupported, "binary frames are not supported")
                }
                Ok(Message::Close(_)) if open => self.phase = Phase::Closed,
                Ok(_) => {}
                Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) if open => match violation_close_code(&error) {
                    // Told why before the connection goes (RFC 6455 7.1.7), not a bare FIN;
                    // no error frame, and nothing more is read (the stream cannot be trusted).
                    Some((code, reason)) => {
                        self.close_now(code, reason);
                        break;
                    }
                    None => self.phase = Phase::Closed,
                },
                Err(_) => self.phase = Phase::Closed,
            }
        }
        actions
    }

    /// Whether frames may be left to read: the last [`WsConn::read`] stopped at its budget.
    pub fn has_unread(&self) -> bool {
        self.unread && self.phase != Phase::Closed
    }

    fn on_text(
        &mut self,
        text: &str,
        admit: &dyn Fn(usize) -> Result<(), u64>,
        actions: &mut Vec<Action>,
    ) {
        if text.trim() == "PING" {
            self.send("PONG");
            return;
        }
        match self.kind {
            WsKind::User if !self.first_message_seen => {
                self.first_message_seen = true;
                match parse_user_subscription(text) {
                    Ok(s) => actions.push(Action::AuthenticateUser {
                        auth: s.auth,
                        markets: s.markets,
                        cancel_on_disconnect: s.cancel_on_disconnect,
                    }),
                    Err(e) => self.fail(CloseCode::Policy, &e),
                }
            }
            WsKind::User => {}
            WsKind::Market => match parse_market_message(text) {
                Ok(message) => {
                    // A book per token asked for (a snapshot of the whole set: per token
                    // named), one for any other message.
                    let units = match message.operation {
                        MarketOperation::Snapshot if message.tokens.is_empty() => self.named.len(),
                        MarketOperation::Unsubscribe => 1,
                        _ => message.tokens.len(),
                    };
                    if let Err(wait_s) = admit(units.max(1)) {
                        let refusal = format!("rate limit exceeded; retry in {wait_s} s");
                        if !self.first_message_seen {
                            return self.fail(CloseCode::Again, &refusal);
                        }
                        return self.send(&error_frame(&refusal));
                    }
                    self.first_message_seen = true;
                    for reason in &message.rejected {
                        self.send(&error_frame(reason));
                    }
                    match message.operation {
                        MarketOperation::Snapshot if message.tokens.is_empty() => {
                            let named = self.named.iter().copied().collect();
                            self.request_books(named, actions)
                        }
                        MarketOperation::Subscribe | MarketOperation::Snapshot => {
                            self.request_books(message.tokens, actions)
                        }
                        MarketOperation::Unsubscribe => self.unsubscribe(&message.tokens),
                    }
                }
                Err(e) if !self.first_message_seen => self.fail(CloseCode::Policy, &e),
                Err(e) => self.send(&error_frame(&e)),
            },
        }
    }

    /// Asks for the books of `tokens` (their markets are followed once they arrive).
    fn request_books(&mut self, tokens: Vec<Bytes32>, actions: &mut Vec<Action>) {
        if tokens.is_empty() {
            return;
        }
        self.snapshots_pending += 1;
        actions.push(Action::Snapshot(tokens));
    }

    /// Takes `tokens` out of the subscribed set. A market stays followed while the set still
    /// names either of its tokens (API.md §17: either token delivers the whole market). An
    /// id that is not in the set (an unknown one among them) gets an `{"error"}` naming it;
    /// the connection stays (API.md §17).
    fn unsubscribe(&mut self, tokens: &[Bytes32]) {
        for token in tokens {
            if !self.named.remove(token) {
                let text = error_frame(&format!(
                    "unsubscribe: asset id {} is not subscribed",
                    crate::convert::wire_token(token)
                ));
                self.send(&text);
                continue;
            }
            let Some(market) = self.tokens.get(token).copied() else {
                continue;
            };
            let still_named = self
                .named
                .iter()
                .any(|t| self.tokens.get(t) == Some(&market));
            if !still_named {
                self.tokens.retain(|_, m| *m != market);
                self.markets.remove(&market);
                self.held_books.retain(|(m, ..)| *m != market);
            }
        }
    }

    /// The user subscription was checked: follow `address`'s events (or refuse). With
    /// `dead_man_connection`, its end cancels the account's open orders.
    pub fn authenticated(
        &mut self,
        result: Result<crate::auth::UserAuth, String>,
        markets: Vec<Bytes32>,
        dead_man_connection: Option<u64>,
    ) {
        match result {
            Ok(auth) => {
                self.user = Some(UserSub {
                    address: auth.address,
                    key_id: auth.key_id,
                    markets,
                    next_seq: 1,
                    dead_man_connection,
                });
            }
            Err(e) => self.fail(CloseCode::Policy, &e),
        }
    }

    /// The books asked for arrived: send them (after what was held back of a market already
    /// followed, up to its book), then what was held back that is newer.
    pub fn snapshot(&mut self, books: Vec<(Bytes32, Option<BookView>)>, timestamp_ms: u64) {
        self.snapshots_pending = self.snapshots_pending.saturating_sub(1);
        for (token, book) in books {
            match book {
                None => {
                    let text = error_frame(&format!(
                        "unknown asset id {}",
                        crate::convert::wire_token(&token)
                    ));
                    self.send(&text);
                }
                Some(view) => {
                    let market = view.market.condition_id;
                    let book_seq = view.market.event_seq;
                    for outcome in [ladder_engine::Outcome::Yes, ladder_engine::Outcome::No] {
                        self.tokens.insert(view.market.token_id(outcome), market);
                    }
                    self.named.insert(token);
                    let frame = book_frame(&view, timestamp_ms);
                    match self.markets.get(&market).copied() {
                        // A market followed already: its events up to the book's seq go
                        // first, so its sequence has no hole (a book holds no trade's
                        // print); those still on their way hold the book back.
                        Some(floor) if floor < book_seq => {
                            self.send_held_back_events(market, book_seq);
                            if self.markets.get(&market).is_some_and(|f| *f >= book_seq) {
                                self.held_books.retain(|(m, ..)| *m != market);
                                self.send(&frame);
                            } else {
                                // One book held per market: a newer one supersedes it.
                                self.held_books.retain(|(m, ..)| *m != market);
                                self.held_books
                                    .push((market, book_seq, frame, Instant::now()));
                            }
                        }
                        followed => {
                            self.markets
                                .insert(market, book_seq.max(followed.unwrap_or(0)));
                            self.held_books.retain(|(m, ..)| *m != market);
                            self.send(&frame);
                        }
                    }
                }
            }
        }
        if self.snapshots_pending == 0 {
            for (market, seq, frame) in std::mem::take(&mut self.buffered) {
                self.deliver_market(market, seq, &frame);
            }
        }
    }

    /// The API key of its user subscription, if it has one.
    pub fn user_key(&self) -> Option<uuid::Uuid> {
        self.user.as_ref().map(|sub| sub.key_id)
    }

    /// Ends a user subscription whose API key was deleted (a deleted key fails at once).
    pub fn end_for_deleted_key(&mut self) {
        self.fail(CloseCode::Policy, "auth: API key deleted");
    }

    /// Offers a feed frame to this connection.
    pub fn deliver(&mut self, item: &FeedItem) {
        if !self.is_open() {
            return;
        }
        match (item, self.kind) {
            (
                FeedItem::User {
                    address,
                    market,
                    prefix,
                },
                WsKind::User,
            ) => {
                let Some(sub) = self.user.as_mut() else {
                    return;
                };
                if sub.address != *address
                    || !(sub.markets.is_empty() || sub.markets.contains(market))
                {
                    return;
                }
                let frame = format!("{prefix}{}}}", sub.next_seq);
                sub.next_seq += 1;
                self.send_user(Message::Text(Utf8Bytes::from(frame)));
            }
            (FeedItem::Market { market, seq, frame }, WsKind::Market) => {
                if self.snapshots_pending > 0 {
                    if self.buffered.len() >= BUFFERED_FRAMES_MAX {
                        self.fail_slow(
                            "slow consumer: too many events while the snapshot was read",
                        );
                    } else {
                        self.buffered.push((*market, *seq, frame.clone()));
                    }
                    return;
                }
                self.deliver_market(*market, *seq, frame);
            }
            _ => {}
        }
    }

    fn deliver_market(&mut self, market: Bytes32, seq: u64, frame: &Utf8Bytes) {
        match self.markets.get_mut(&market) {
            Some(floor) if seq > *floor => {
                *floor = seq;
                self.send_shared(frame.clone());
                if !self.held_books.is_empty() {
                    self.release_held_books(|m, book_seq| m == market && book_seq <= seq);
                }
            }
            _ => {}
        }
    }

    /// Sends the events of `market` held back while a snapshot was read, up to `through_seq`
    /// (those past its floor), in order; the others stay held back.
    fn send_held_back_events(&mut self, market: Bytes32, through_seq: u64) {
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.buffered)
            .into_iter()
            .partition(|(m, seq, _)| *m == market && *seq <= through_seq);
        self.buffered = rest;
        for (_, seq, event) in due {
            if let Some(floor) = self.markets.get_mut(&market) {
                if seq > *floor {
                    *floor = seq;
                    self.send_shared(event);
                }
            }
        }
    }

    /// Sends the held books `due` takes (by market and seq), in the order they were held;
    /// a book sent raises its market's floor to its seq.
    fn release_held_books(&mut self, due: impl Fn(Bytes32, u64) -> bool) {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held_books)
            .into_iter()
            .partition(|(market, seq, _, _)| due(*market, *seq));
        self.held_books = later;
        for (market, seq, frame, _) in now {
            if !self.markets.contains_key(&market) {
                continue;
            }
            // Events of the market held back meanwhile (another snapshot pending), up to the
            // book, go first.
            self.send_held_back_events(market, seq);
            if let Some(floor) = self.markets.get_mut(&market) {
                *floor = (*floor).max(seq);
            }
            self.send(&frame);
        }
    }

    /// Sends the books held for longer than [`HELD_BOOK_WAIT_MAX`] (events that never
    /// came: the book says where the market stands).
    pub fn release_stale_books(&mut self) {
        if self
            .held_books
            .iter()
            .any(|(_, _, _, since)| since.elapsed() >= HELD_BOOK_WAIT_MAX)
        {
            // One book per market is held: a market names its book.
            let stale: Vec<Bytes32> = self
                .held_books
                .iter()
                .filter(|(_, _, _, since)| since.elapsed() >= HELD_BOOK_WAIT_MAX)
                .map(|(market, ..)| *market)
                .collect();
            self.release_held_books(|market, _| stale.contains(&market));
        }
    }

    /// Queues a text frame; a connection whose queue passes its bound is closed (1013).
    pub fn send(&mut self, text: &str) {
        match self.kind {
            WsKind::User => self.send_user(Message::text(text)),
            WsKind::Market => self.send_shared(Utf8Bytes::from(text)),
        }
    }

    /// Queues a text frame whose bytes other connections may share. The bound is on what
    /// waits before the frame: a frame is queued while less than the bound is unread, however
    /// large it is itself (one command's `price_change` on a fine-ticked market can pass
    /// 1 MiB alone, and a subscriber reading as fast as it can must still get it).
    fn send_shared(&mut self, text: Utf8Bytes) {
        if self
            .write_within(Message::Text(text), OUTBOUND_BYTES_MAX)
            .is_err()
        {
            self.fail_slow("slow consumer: outbound queue over 1 MiB");
        }
    }

    /// Queues a frame of a user connection. Past the bound, frames wait in the connection's
    /// overflow, in order, and move into the queue as it drains: the client has
    /// [`USER_CATCH_UP`] to empty it while at most [`USER_OUTBOUND_BYTES_MAX`] waits there
    /// ([`USER_OVERFLOW_POOL_BYTES_MAX`] service-wide). A burst of one user's events (a sweep
    /// of thousands of a maker's orders, a cancel-all, their trades' settlement) thus reaches
    /// a client that reads, and one that does not is closed (1013) within the catch-up time.
    fn send_user(&mut self, message: Message) {
        if !self.is_open() {
            return;
        }
        if self.overflow.is_empty() {
            match self.write_within(message, OUTBOUND_BYTES_MAX) {
                Ok(()) => {}
                Err(message) => {
                    self.over_bound_since = Some(Instant::now());
                    self.hold(message);
                }
            }
        } else {
            self.hold(message);
        }
    }

    /// Puts `message` in the overflow, or closes the connection (1013) when it is past its
    /// catch-up time or a bound on the overflow.
    fn hold(&mut self, message: Message) {
        let len = message.len() + FRAME_HEADER_BYTES_MAX;
        let pool = self.overflow_pool.load(Ordering::Acquire);
        if self.overdue()
            || self.overflow_bytes + len > USER_OUTBOUND_BYTES_MAX
            || pool + len > USER_OVERFLOW_POOL_BYTES_MAX
        {
            self.fail_slow("slow consumer: outbound queue over 1 MiB");
            return;
        }
        self.overflow_bytes += len;
        self.overflow_pool.fetch_add(len, Ordering::AcqRel);
        self.overflow.push_back((message, len));
    }

    /// Whether the overflow has waited past the catch-up time.
    fn overdue(&self) -> bool {
        self.over_bound_since
            .is_some_and(|since| since.elapsed() >= USER_CATCH_UP)
    }

    /// Moves what the outbound queue has room for from the overflow into it, in order;
    /// whether anything moved.
    fn drain_overflow(&mut self) -> bool {
        let mut moved = false;
        while let Some((message, len)) = self.overflow.pop_front() {
            match self.write_within(message, OUTBOUND_BYTES_MAX) {
                Ok(()) => {
                    self.release_overflow(len);
                    moved = true;
                }
                Err(message) => {
                    self.overflow.push_front((message, len));
                    break;
                }
            }
        }
        if self.overflow.is_empty() {
            self.over_bound_since = None;
        }
        moved
    }

    fn release_overflow(&mut self, len: usize) {
        self.overflow_bytes -= len;
        self.overflow_pool.fetch_sub(len, Ordering::AcqRel);
    }

    /// Drops the overflow (the connection is closing or gone).
    fn clear_overflow(&mut self) {
        self.overflow_pool
            .fetch_sub(self.overflow_bytes, Ordering::AcqRel);
        self.overflow_bytes = 0;
        self.overflow.clear();
        self.over_bound_since = None;
    }

    /// Closes (1013) a user connection whose overflow is still not empty past its catch-up
    /// time, once what the socket takes is written (the event loop's sweep calls it, so a
    /// client that stopped reading is closed without waiting for another event).
    pub fn close_if_overdue(&mut self) {
        if self.overdue() {
            self.flush();
            if self.overdue() && !self.overflow.is_empty() {
                self.fail_slow("slow consumer: outbound queue over 1 MiB");
            }
        }
    }

    /// Queues a frame while less than `bound` is unread before it. With the queue full, the
    /// frame comes back (to be offered again) and nothing changes; any other failure but a
    /// socket that would block ends the connection.
    fn write_within(&mut self, message: Message, bound: usize) -> Result<(), Message> {
        if !self.is_open() {
            return Ok(());
        }
        let room = bound + message.len() + FRAME_HEADER_BYTES_MAX;
        self.ws
            .set_config(|config| config.max_write_buffer_size = room);
        match self.ws.write(message) {
            Ok(()) => Ok(()),
            Err(WsError::WriteBufferFull(message)) => Err(message),
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(_) => {
                self.phase = Phase::Closed;
                Ok(())
            }
        }
    }

    /// Writes what the socket takes. Once a closing connection's close frame is written, the
    /// write half is shut (the client reads its close, then end of stream); one past its
    /// grace is given up.
    pub fn flush(&mut self) {
        let written = loop {
            let written = match self.ws.flush() {
                Ok(()) => true,
                Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => false,
                Err(_) => {
                    self.phase = Phase::Closed;
                    self.clear_overflow();
                    return;
                }
            };
            // The overflow moves in as the queue drains; the socket may take it at once.
            if self.overflow.is_empty() || !self.drain_overflow() || !written {
                break written;
            }
        };
        if let Phase::Closing { deadline, sent } = self.phase {
            if written && !sent {
                let _ = self
                    .ws
                    .get_mut()
                    .socket()
                    .shutdown(std::net::Shutdown::Write);
                self.phase = Phase::Closing {
                    deadline,
                    sent: true,
                };
            }
            if Instant::now() >= deadline {
                self.phase = Phase::Closed;
            }
        }
    }

    /// Closes a connection that fell behind (1013), to be counted once by
    /// [`WsConn::take_slow_close`].
    fn fail_slow(&mut self, reason: &str) {
        if self.is_open() {
            self.slow_close_uncounted = true;
        }
        self.fail(CloseCode::Again, reason);
    }

    /// Whether it was closed for falling behind since the last call (for the metric).
    pub fn take_slow_close(&mut self) -> bool {
        std::mem::take(&mut self.slow_close_uncounted)
    }

    /// Sends `{"error": reason}` and closes with `code`: both are queued behind what the
    /// connection was already sent (past its outbound bound if need be, so a slow consumer
    /// still learns why), and nothing else is queued after them.
    pub fn fail(&mut self, code: CloseCode, reason: &str) {
        if !self.is_open() {
            return;
        }
        // Frames waiting past the bound were never queued: they go with the connection.
        self.clear_overflow();
        self.ws
            .set_config(|config| config.max_write_buffer_size = usize::MAX);
        let _ = self.ws.write(Message::text(error_frame(reason)));
        self.close_now(code, reason);
    }

    /// Closes an open connection with 1001 (going away) because the service is stopping:
    /// no error frame, and a stop is no disconnect of a dead-man switch (the caller does
    /// not cancel for it). A node changing role (`changing_role`) closes with 1012 (service
    /// restart) instead: it runs again as another role, and the leader, not this node,
    /// decides what happens to a dead-man switch's orders.
    pub fn go_away(&mut self, changing_role: bool) {
        if self.is_open() {
            // What waits in the overflow goes before the close frame: the client that reads
            // gets its feed complete up to the stop.
            self.ws
                .set_config(|config| config.max_write_buffer_size = usize::MAX);
            while let Some((message, len)) = self.overflow.pop_front() {
                let _ = self.ws.write(message);
                self.release_overflow(len);
            }
            self.over_bound_since = None;
            match changing_role {
                true => self.close_now(CloseCode::Restart, "node changing role: connect again"),
                false => self.close_now(CloseCode::Away, "service shutting down"),
            }
        }
    }

    /// Queues the close frame (past the outbound bound: it always goes), writes what the
    /// socket takes, and ends the connection after the grace.
    fn close_now(&mut self, code: CloseCode, reason: &str) {
        self.ws
            .set_config(|config| config.max_write_buffer_size = usize::MAX);
        let _ = self.ws.close(Some(CloseFrame {
            code,
            reason: reason.chars().take(100).collect::<String>().into(),
        }));
        self.phase = Phase::Closing {
            deadline: Instant::now() + CLOSE_GRACE,
            sent: false,
        };
        self.flush();
    }
}

/// Parses `{"type":"user","auth":{...},"markets":[...]}`.
pub fn parse_user_subscribe(text: &str) -> Result<(Value, Vec<Bytes32>), String> {
    parse_user_subscription(text).map(|s| (s.auth, s.markets))
}

/// A `/ws/user` subscribe message.
#[derive(Clone, Debug, PartialEq)]
pub struct UserSubscription {
    /// The `auth` object.
    pub auth: Value,
    /// Markets to follow (empty: all).
    pub markets: Vec<Bytes32>,
    /// `"cancel_on_disconnect": true`: when the connection ends for any reason but a
    /// service shutdown, every open order of the key's address is cancelled (API.md §16).
    pub cancel_on_disconnect: bool,
}

/// Reads a `/ws/user` subscribe message, `cancel_on_disconnect` included.
pub fn parse_user_subscription(text: &str) -> Result<UserSubscription, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| "subscribe: expected a JSON object".to_string())?;
    let cancel_on_disconnect = match value.get("cancel_on_disconnect") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err("cancel_on_disconnect: expected true or false".into()),
    };
    match value.get("type").and_then(Value::as_str) {
        Some("user" | "USER") => {}
        _ => return Err("type: expected \"user\"".into()),
    }
    let auth = value
        .get("auth")
        .filter(|a| a.is_object())
        .cloned()
        .ok_or("auth: required")?;
    let markets = match value.get("markets") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let text = m
                    .as_str()
                    .ok_or(format!("markets[{i}]: expected a condition id"))?;
                text.parse::<ladder_protocol::B256>()
                    .map_err(|e| format!("markets[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?,
        Some(_) => return Err("markets: expected an array of condition ids".into()),
    };
    Ok(UserSubscription {
        auth,
        markets,
        cancel_on_disconnect,
    })
}
