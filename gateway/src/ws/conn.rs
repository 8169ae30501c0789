//! One WebSocket connection: its subscription, the frames it is owed, and the bound on what
//! it may leave unread (past it, the connection is closed; nothing else waits for it).

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use crate::stream::Stream;
use ladder_engine::{BookView, Bytes32};
use serde_json::Value;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::{Error as WsError, Message, WebSocket};

use super::feed::FeedItem;
use super::{
    book_frame, error_frame, parse_market_message, MarketMessage, WsKind,
    INBOUND_MESSAGE_BYTES_MAX, OUTBOUND_BYTES_MAX,
};

/// Frames held for a connection while its book snapshot is being read.
pub const BUFFERED_FRAMES_MAX: usize = 65_536;

/// What the event loop must do for a connection after reading from it.
#[derive(Debug)]
pub enum Action {
    /// Check a `/ws/user` subscription's credentials, then follow these markets (empty: all).
    AuthenticateUser {
        /// The `auth` object.
        auth: Value,
        /// Markets to follow.
        markets: Vec<Bytes32>,
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
    markets: Vec<Bytes32>,
    next_seq: u64,
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
    first_message_seen: bool,
    user: Option<UserSub>,
    /// Followed markets and the sequence their snapshot was current as of.
    markets: HashMap<Bytes32, u64>,
    tokens: HashMap<Bytes32, Bytes32>,
    snapshots_pending: u32,
    buffered: Vec<(Bytes32, u64, Arc<str>)>,
    closed: bool,
}

impl WsConn {
    /// Wraps an upgraded socket; `leftover` is what the client sent after the handshake.
    pub fn new(stream: Stream, leftover: Vec<u8>, kind: WsKind, generation: u32) -> WsConn {
        let config = WebSocketConfig::default()
            .max_write_buffer_size(OUTBOUND_BYTES_MAX)
            .max_message_size(Some(INBOUND_MESSAGE_BYTES_MAX))
            .max_frame_size(Some(INBOUND_MESSAGE_BYTES_MAX));
        WsConn {
            ws: WebSocket::from_partially_read(stream, leftover, Role::Server, Some(config)),
            kind,
            opened: Instant::now(),
            generation,
            first_message_seen: false,
            user: None,
            markets: HashMap::new(),
            tokens: HashMap::new(),
            snapshots_pending: 0,
            buffered: Vec::new(),
            closed: false,
        }
    }

    /// The socket, for (de)registration.
    pub fn stream_mut(&mut self) -> &mut mio::net::TcpStream {
        self.ws.get_mut().socket()
    }

    /// Whether it is done (closed or failed).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// What this connection wants from the feed: an account's events, the frames of these
    /// markets, or (while a snapshot is being read) every market frame.
    pub fn interests(&self) -> Interests {
        Interests {
            user: self.user.as_ref().map(|u| u.address),
            markets: self.markets.keys().copied().collect(),
            all_markets: self.kind == WsKind::Market && self.snapshots_pending > 0,
        }
    }

    /// Whether the subscribe message has arrived.
    pub fn subscribed(&self) -> bool {
        self.first_message_seen
    }

    /// Reads what arrived; returns what the event loop must do.
    pub fn read(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        while !self.closed {
            match self.ws.read() {
                Ok(Message::Text(text)) => self.on_text(text.as_str(), &mut actions),
                Ok(Message::Binary(_)) => {
                    self.fail(CloseCode::Unsupported, "binary frames are not supported")
                }
                Ok(Message::Close(_)) => self.closed = true,
                Ok(_) => {}
                Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => self.closed = true,
            }
        }
        actions
    }

    fn on_text(&mut self, text: &str, actions: &mut Vec<Action>) {
        if text.trim() == "PING" {
            self.send("PONG");
            return;
        }
        match self.kind {
            WsKind::User if !self.first_message_seen => {
                self.first_message_seen = true;
                match parse_user_subscribe(text) {
                    Ok((auth, markets)) => actions.push(Action::AuthenticateUser { auth, markets }),
                    Err(e) => self.fail(CloseCode::Policy, &e),
                }
            }
            WsKind::User => {}
            WsKind::Market => match parse_market_message(text) {
                Ok(MarketMessage::Subscribe(tokens)) => {
                    self.first_message_seen = true;
                    self.snapshots_pending += 1;
                    actions.push(Action::Snapshot(tokens));
                }
                Ok(MarketMessage::Unsubscribe(tokens)) => {
                    for token in tokens {
                        if let Some(market) = self.tokens.remove(&token) {
                            self.tokens.retain(|_, m| *m != market);
                            self.markets.remove(&market);
                        }
                    }
                }
                Err(e) if !self.first_message_seen => self.fail(CloseCode::Policy, &e),
                Err(e) => self.send(&error_frame(&e)),
            },
        }
    }

    /// The user subscription was checked: follow `address`'s events (or refuse).
    pub fn authenticated(
        &mut self,
        result: Result<ladder_engine::Address, String>,
        markets: Vec<Bytes32>,
    ) {
        match result {
            Ok(address) => {
                self.user = Some(UserSub {
                    address,
                    markets,
                    next_seq: 1,
                });
            }
            Err(e) => self.fail(CloseCode::Policy, &e),
        }
    }

    /// The books asked for arrived: send them, then what was held back that is newer.
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
                    self.tokens.insert(token, market);
                    self.markets.insert(market, view.market.event_seq);
                    self.send(&book_frame(&view, timestamp_ms));
                }
            }
        }
        if self.snapshots_pending == 0 {
            for (market, seq, frame) in std::mem::take(&mut self.buffered) {
                self.deliver_market(market, seq, &frame);
            }
        }
    }

    /// Offers a feed frame to this connection.
    pub fn deliver(&mut self, item: &FeedItem) {
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
                self.send(&frame);
            }
            (FeedItem::Market { market, seq, frame }, WsKind::Market) => {
                if self.snapshots_pending > 0 {
                    if self.buffered.len() >= BUFFERED_FRAMES_MAX {
                        self.fail(
                            CloseCode::Again,
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

    fn deliver_market(&mut self, market: Bytes32, seq: u64, frame: &str) {
        match self.markets.get_mut(&market) {
            Some(floor) if seq > *floor => {
                *floor = seq;
                self.send(frame);
            }
            _ => {}
        }
    }

    /// Queues a text frame; a connection whose queue passes its bound is closed.
    pub fn send(&mut self, text: &str) {
        if self.closed {
            return;
        }
        match self.ws.write(Message::text(text.to_string())) {
            Ok(()) => {}
            Err(WsError::WriteBufferFull(_)) => {
                self.fail(CloseCode::Again, "slow consumer: outbound queue over 1 MiB")
            }
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => self.closed = true,
        }
    }

    /// Writes what the socket takes.
    pub fn flush(&mut self) {
        match self.ws.flush() {
            Ok(()) => {}
            Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => self.closed = true,
        }
    }

    /// Sends `{"error": reason}` and closes with `code`.
    pub fn fail(&mut self, code: CloseCode, reason: &str) {
        if self.closed {
            return;
        }
        let _ = self.ws.write(Message::text(error_frame(reason)));
        let _ = self.ws.close(Some(CloseFrame {
            code,
            reason: reason.chars().take(100).collect::<String>().into(),
        }));
        let _ = self.ws.flush();
        self.closed = true;
    }
}

/// Parses `{"type":"user","auth":{...},"markets":[...]}`.
pub fn parse_user_subscribe(text: &str) -> Result<(Value, Vec<Bytes32>), String> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| "subscribe: expected a JSON object".to_string())?;
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
                    .map(|b| crate::convert::engine_b256(&b))
                    .map_err(|e| format!("markets[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?,
        Some(_) => return Err("markets: expected an array of condition ids".into()),
    };
    Ok((auth, markets))
}
