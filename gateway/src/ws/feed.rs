//! The WebSocket feed: turns each durable batch's events into frames, encoded once, on the
//! thread that releases the batch, and hands the same frames to every gateway thread, which
//! routes them to its subscribers.
//!
//! Market frames are complete (their `seq` is the market's). User frames leave `seq` to the
//! connection: each is stored as a prefix ending in `"seq":`, and the connection appends its
//! own number and the closing brace.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};
use ladder_engine::{
    format_price_ticks, AxisSide, Bytes32, Event, MarketChange, Outcome, PriceTicks, Resolution,
    UNITS_PER_SHARE,
};
use ladder_sequencer::{PublishedBatch, Publisher};
use serde::Serialize;
use tungstenite::Utf8Bytes;

use crate::app::present::{open_order, trade};
use crate::convert::wire_token;
use crate::server::{LoopWake, ServerShared};

/// One encoded frame and who gets it.
#[derive(Clone, Debug)]
pub enum FeedItem {
    /// For subscribers of `address` (filtered by market): a frame without its `seq`.
    User {
        /// The account the event belongs to.
        address: ladder_engine::Address,
        /// The market it concerns.
        market: Bytes32,
        /// The frame up to and including `"seq":`.
        prefix: Arc<str>,
    },
    /// For subscribers of `market`: a complete frame.
    Market {
        /// The market.
        market: Bytes32,
        /// Its event sequence number.
        seq: u64,
        /// The frame: shared bytes, which every subscriber's socket queues without a copy of
        /// its own (API.md §17: one encoded frame per event is shared by all subscribers).
        frame: Utf8Bytes,
    },
}

/// The frames of one batch.
pub type FeedBatch = Arc<Vec<FeedItem>>;

/// Where a gateway thread takes its frames.
#[derive(Clone)]
pub struct FeedTarget {
    /// The gateway thread's channel.
    pub tx: Sender<FeedBatch>,
    /// Its wake-up, shared with its completion sink, which makes it at the release's end.
    pub wake: Arc<LoopWake>,
    /// The thread's open WebSocket connections: a thread with none is handed no frames (and
    /// so not woken for them). Counted before a connection can subscribe, as the service's
    /// counts by kind are, so no frame after its snapshot is missed.
    pub websockets: Arc<AtomicUsize>,
}

impl FeedTarget {
    /// Whether the gateway thread's queue has room for one more batch: a release queues at
    /// most one, so a release on that very thread (in the sequencer's seat) never waits for it.
    pub fn has_room(&self) -> bool {
        self.tx
            .capacity()
            .is_none_or(|capacity| self.tx.len() < capacity)
    }

    /// Queues `batch` for the gateway thread, to be woken at the end of the release. A
    /// thread so far behind that its queue is full is woken now, and waited for.
    fn queue(&self, batch: FeedBatch) {
        match self.tx.try_send(batch) {
            Ok(()) => {}
            Err(TrySendError::Full(batch)) => {
                self.wake.wake_now();
                let _ = self.tx.send(batch);
            }
            Err(TrySendError::Disconnected(_)) => return,
        }
        self.wake.owe();
    }
}

/// A market's ids, by creation index.
#[derive(Clone, Copy, Debug)]
pub struct MarketIds {
    /// Condition id.
    pub condition_id: Bytes32,
    /// Yes token.
    pub yes: Bytes32,
    /// No token.
    pub no: Bytes32,
}

/// The WebSocket feed: turns each durable batch's events into frames, on the releasing
/// thread, and queues the same frames for every gateway thread. Frames of a kind nobody is
/// connected for (`shared`'s WebSocket counts) are not encoded.
pub struct FeedPublisher {
    encoder: Encoder,
    targets: Vec<FeedTarget>,
    shared: Arc<ServerShared>,
    /// Frames of the batch being encoded (its room is kept for the next).
    items: Vec<FeedItem>,
}

impl FeedPublisher {
    /// A feed knowing the markets of `directory`, queueing frames for `targets`.
    pub fn new(
        directory: Vec<MarketIds>,
        targets: Vec<FeedTarget>,
        shared: Arc<ServerShared>,
    ) -> FeedPublisher {
        FeedPublisher {
            encoder: Encoder::new(directory),
            targets,
            shared,
            items: Vec::new(),
        }
    }
}

impl Publisher for FeedPublisher {
    fn publish(&mut self, batch: &PublishedBatch) {
        let wanted = Wanted {
            user: self.shared.ws_user.load(Ordering::SeqCst) > 0,
            market: self.shared.ws_market.load(Ordering::SeqCst) > 0,
        };
        // Encoded even when nobody is connected: the encoder learns of new markets.
        for published in batch.iter() {
            self.encoder.encode(
                published.timestamp_ns,
                published.events,
                wanted,
                &mut self.items,
            );
        }
        if self.items.is_empty() {
            return;
        }
        let frames: FeedBatch = Arc::new(std::mem::take(&mut self.items));
        for target in &self.targets {
            if target.websockets.load(Ordering::SeqCst) > 0 {
                target.queue(frames.clone());
            }
        }
    }
}

/// Which kinds of frames someone is connected for.
#[derive(Clone, Copy, Debug)]
pub struct Wanted {
    /// `/ws/user` frames (orders, trades).
    pub user: bool,
    /// `/ws/market` frames (price changes, trades, tick sizes, resolutions).
    pub market: bool,
}

/// A market's ids as they appear in frames, written once.
#[derive(Clone, Debug, Default)]
struct MarketText {
    condition: String,
    yes: String,
    no: String,
}

/// Turns events into frames; knows every market's ids and their text.
pub struct Encoder {
    directory: Vec<MarketIds>,
    text: Vec<MarketText>,
}

impl Encoder {
    /// An encoder knowing the markets of `directory` (by creation index).
    pub fn new(directory: Vec<MarketIds>) -> Encoder {
        let text = directory.iter().map(market_text).collect();
        Encoder { directory, text }
    }

    /// Encodes one command's events (`timestamp_ns` is the command's time) into `out`: the
    /// market's level changes first, one `price_change` frame per market, then the other
    /// frames in the order of their events.
    pub fn encode(
        &mut self,
        timestamp_ns: u64,
        events: &[Event],
        wanted: Wanted,
        out: &mut Vec<FeedItem>,
    ) {
        let timestamp = (timestamp_ns / 1_000_000).to_string();
        let mut changes: Vec<MarketLevels> = Vec::new();
        let mut later: Vec<FeedItem> = Vec::new();
        for event in events {
            match event {
                Event::Market {
                    market,
                    change:
                        MarketChange::Created {
                            condition_id,
                            yes_token_id,
                            no_token_id,
                        },
                    ..
                } => self.learn(
                    *market as usize,
                    MarketIds {
                        condition_id: *condition_id,
                        yes: *yes_token_id,
                        no: *no_token_id,
                    },
                ),
                Event::Level { .. } if wanted.market => self.level(event, &mut changes),
                Event::LastTrade { .. } if wanted.market => {
                    later.extend(self.last_trade(event, &timestamp))
                }
                Event::Market {
                    market,
                    change,
                    market_seq,
                } if wanted.market => {
                    later.extend(self.market_change(*market, change, *market_seq, &timestamp))
                }
                Event::Order { kind, order } if wanted.user => {
                    let head = format!(r#"{{"event_type":"order","type":"{}","#, kind.as_str());
                    later.push(FeedItem::User {
                        address: order.maker,
                        market: order.condition_id,
                        prefix: user_prefix(&head, &open_order(order), &timestamp),
                    });
                }
                Event::Trade(view) if wanted.user => {
                    for party in [view.taker.address, view.maker.address] {
                        later.push(FeedItem::User {
                            address: party,
                            market: view.condition_id,
                            prefix: user_prefix(
                                r#"{"event_type":"trade","#,
                                &trade(view, &party),
                                &timestamp,
                            ),
                        });
                    }
                }
                _ => {}
            }
        }
        for levels in changes {
            let price_changes = levels.entries.into_iter().flatten().flatten().collect();
            out.extend(self.price_change(levels.market, levels.seq, price_changes, &timestamp));
        }
        out.extend(later);
    }

    /// Adds a level's entries to its market's pending `price_change`. A level changed again
    /// by the same command leaves its earlier place for the end: each level is listed once,
    /// with its size after the command, and the last entry carries the market's best prices
    /// after the command.
    fn level(&self, event: &Event, changes: &mut Vec<MarketLevels>) {
        let Event::Level {
            market,
            side,
            price_ticks,
            total_units,
            best_bid,
            best_ask,
            market_seq,
        } = event
        else {
            return;
        };
        let Some(text) = self.text.get(*market as usize) else {
            return;
        };
        let entries = level_entries(
            text,
            *side,
            *price_ticks,
            *total_units,
            *best_bid,
            *best_ask,
        );
        let levels = match changes.iter().position(|l| l.market == *market) {
            Some(at) => &mut changes[at],
            None => {
                changes.push(MarketLevels {
                    market: *market,
                    seq: *market_seq,
                    entries: Vec::new(),
                    listed_at: HashMap::new(),
                });
                let last = changes.len() - 1;
                &mut changes[last]
            }
        };
        let place = levels.entries.len();
        if let Some(earlier) = levels.listed_at.insert((*side, *price_ticks), place) {
            levels.entries[earlier] = None;
        }
        levels.entries.push(Some(entries));
    }

    /// A market's `price_change` frame.
    fn price_change(
        &self,
        market: u32,
        seq: u64,
        price_changes: Vec<PriceChange>,
        timestamp: &str,
    ) -> Option<FeedItem> {
        let (ids, text) = self.market(market)?;
        let frame = PriceChangeFrame {
            event_type: "price_change",
            market: &text.condition,
            seq,
            timestamp,
            price_changes,
        };
        Some(FeedItem::Market {
            market: ids.condition_id,
            seq,
            frame: json_text(&frame),
        })
    }

    /// A `last_trade_price` frame.
    fn last_trade(&self, event: &Event, timestamp: &str) -> Option<FeedItem> {
        let Event::LastTrade {
            market,
            outcome,
            side,
            price_ticks,
            size_units,
            market_seq,
        } = event
        else {
            return None;
        };
        let (ids, text) = self.market(*market)?;
        let frame = LastTradeFrame {
            event_type: "last_trade_price",
            market: &text.condition,
            asset_id: if *outcome == Outcome::Yes {
                &text.yes
            } else {
                &text.no
            },
            seq: *market_seq,
            timestamp,
            price: format_price_ticks(*price_ticks),
            side: side.as_str(),
            size: (size_units / UNITS_PER_SHARE).to_string(),
        };
        Some(FeedItem::Market {
            market: ids.condition_id,
            seq: *market_seq,
            frame: json_text(&frame),
        })
    }

    /// A `tick_size_change` or `market_resolved` frame (no frame for other changes).
    fn market_change(
        &self,
        market: u32,
        change: &MarketChange,
        market_seq: u64,
        timestamp: &str,
    ) -> Option<FeedItem> {
        let (ids, text) = self.market(market)?;
        let frame = match change {
            MarketChange::TickSize {
                old_tick_ticks,
                new_tick_ticks,
            } => json_text(&TickSizeFrame {
                event_type: "tick_size_change",
                market: &text.condition,
                seq: market_seq,
                timestamp,
                old_tick_size: format_price_ticks(*old_tick_ticks),
                new_tick_size: format_price_ticks(*new_tick_ticks),
            }),
            MarketChange::Resolved { resolution } => {
                let (asset, outcome) = match resolution {
                    Resolution::Yes => (text.yes.as_str(), "Yes"),
                    Resolution::No => (text.no.as_str(), "No"),
                    Resolution::Void => ("", "void"),
                };
                json_text(&ResolvedFrame {
                    event_type: "market_resolved",
                    market: &text.condition,
                    seq: market_seq,
                    timestamp,
                    winning_asset_id: asset,
                    winning_outcome: outcome,
                })
            }
            _ => return None,
        };
        Some(FeedItem::Market {
            market: ids.condition_id,
            seq: market_seq,
            frame,
        })
    }

    /// A known market's ids and their text.
    fn market(&self, index: u32) -> Option<(&MarketIds, &MarketText)> {
        let index = index as usize;
        Some((self.directory.get(index)?, self.text.get(index)?))
    }

    fn learn(&mut self, index: usize, ids: MarketIds) {
        if self.directory.len() <= index {
            let blank = MarketIds {
                condition_id: Bytes32::default(),
                yes: Bytes32::default(),
                no: Bytes32::default(),
            };
            self.directory.resize(index + 1, blank);
            self.text.resize(index + 1, MarketText::default());
        }
        self.text[index] = market_text(&ids);
        self.directory[index] = ids;
    }
}

fn market_text(ids: &MarketIds) -> MarketText {
    MarketText {
        condition: ids.condition_id.to_string(),
        yes: wire_token(&ids.yes).to_string(),
        no: wire_token(&ids.no).to_string(),
    }
}

/// The frame text of `value` (its types serialize infallibly).
fn json_text<T: Serialize>(value: &T) -> Utf8Bytes {
    Utf8Bytes::from(serde_json::to_string(value).unwrap_or_default())
}

/// A user frame without its `seq`: `head` (`{"event_type":...,`), the fields of `body`, the
/// timestamp, and `"seq":` for the connection to complete.
fn user_prefix<T: Serialize>(head: &str, body: &T, timestamp: &str) -> Arc<str> {
    let body = serde_json::to_string(body).unwrap_or_default();
    let fields = body
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or("");
    let sep = if fields.is_empty() { "" } else { "," };
    Arc::from(format!(
        r#"{head}{fields}{sep}"timestamp":"{timestamp}","seq":"#
    ))
}

#[derive(Serialize)]
struct LastTradeFrame<'a> {
    event_type: &'static str,
    market: &'a str,
    asset_id: &'a str,
    seq: u64,
    timestamp: &'a str,
    price: String,
    side: &'static str,
    size: String,
}

#[derive(Serialize)]
struct TickSizeFrame<'a> {
    event_type: &'static str,
    market: &'a str,
    seq: u64,
    timestamp: &'a str,
    old_tick_size: String,
    new_tick_size: String,
}

#[derive(Serialize)]
struct ResolvedFrame<'a> {
    event_type: &'static str,
    market: &'a str,
    seq: u64,
    timestamp: &'a str,
    winning_asset_id: &'a str,
    winning_outcome: &'static str,
}

#[derive(Serialize)]
struct PriceChangeFrame<'a> {
    event_type: &'static str,
    market: &'a str,
    seq: u64,
    timestamp: &'a str,
    price_changes: Vec<PriceChange>,
}

/// One market's level changes of one command, for its `price_change` frame: each level's
/// entries (one per token) at the place of its last change (`None`: changed again later).
struct MarketLevels {
    market: u32,
    seq: u64,
    entries: Vec<Option<[PriceChange; 2]>>,
    /// Where each level (side and price on the Yes axis) is listed now.
    listed_at: HashMap<(AxisSide, PriceTicks), usize>,
}

/// One level change of `price_change`, from one token's side.
#[derive(Clone, Serialize)]
struct PriceChange {
    asset_id: String,
    price: String,
    size: String,
    side: &'static str,
    best_bid: String,
    best_ask: String,
}

/// A level change seen from both tokens: a Yes bid at p is a No ask at 1 − p.
fn level_entries(
    text: &MarketText,
    side: AxisSide,
    price: PriceTicks,
    total: u64,
    best_bid: Option<PriceTicks>,
    best_ask: Option<PriceTicks>,
) -> [PriceChange; 2] {
    let p = |v: Option<PriceTicks>| v.map(format_price_ticks).unwrap_or_default();
    let mirror = |v: Option<PriceTicks>| v.map(|x| 10_000 - x);
    let size = (total / UNITS_PER_SHARE).to_string();
    let (yes_side, no_side) = match side {
        AxisSide::Bid => ("BUY", "SELL"),
        AxisSide::Ask => ("SELL", "BUY"),
    };
    [
        PriceChange {
            asset_id: text.yes.clone(),
            price: format_price_ticks(price),
            size: size.clone(),
            side: yes_side,
            best_bid: p(best_bid),
            best_ask: p(best_ask),
        },
        PriceChange {
            asset_id: text.no.clone(),
            price: format_price_ticks(10_000 - price),
            size,
            side: no_side,
            best_bid: p(mirror(best_ask)),
            best_ask: p(mirror(best_bid)),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_engine::{FixedBytes, Side};
    use serde_json::{json, Value};

    const ALL: Wanted = Wanted {
        user: true,
        market: true,
    };

    fn encoder() -> Encoder {
        let mut yes = [0u8; 32];
        yes[31] = 11;
        let mut no = [0u8; 32];
        no[31] = 12;
        Encoder::new(vec![MarketIds {
            condition_id: FixedBytes([0xab; 32]),
            yes: FixedBytes(yes),
            no: FixedBytes(no),
        }])
    }

    fn frames(encoder: &mut Encoder, events: &[Event], wanted: Wanted) -> Vec<Value> {
        let mut out = Vec::new();
        encoder.encode(1_700_000_000_123_456_789, events, wanted, &mut out);
        out.iter()
            .map(|item| match item {
                FeedItem::Market { frame, .. } => {
                    serde_json::from_str(frame.as_str()).expect("json")
                }
                FeedItem::User { prefix, .. } => {
                    serde_json::from_str(&format!("{prefix}7}}")).expect("json")
                }
            })
            .collect()
    }

    fn target(
        poll: &mio::Poll,
        websockets: usize,
    ) -> (FeedTarget, crossbeam_channel::Receiver<FeedBatch>) {
        let (tx, rx) = crossbeam_channel::bounded(4);
        let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(1)).expect("waker"));
        let target = FeedTarget {
            tx,
            wake: Arc::new(LoopWake::new(waker)),
            websockets: Arc::new(AtomicUsize::new(websockets)),
        };
        (target, rx)
    }

    #[test]
    fn frames_go_only_to_loops_with_a_websocket_and_wait_for_the_release_to_wake_them() {
        // One waker per poll: a poll for each loop.
        let polls = [
            mio::Poll::new().expect("poll"),
            mio::Poll::new().expect("poll"),
        ];
        let (quiet, quiet_rx) = target(&polls[0], 0);
        let (busy, busy_rx) = target(&polls[1], 1);
        let (quiet_owes, busy_owes) = (quiet.wake.clone(), busy.wake.clone());
        let shared = Arc::new(ServerShared::default());
        shared.ws_market.store(1, Ordering::SeqCst);
        let directory = encoder().directory;
        let mut feed = FeedPublisher::new(directory, vec![quiet, busy], shared);
        let mut batch = ladder_sequencer::BatchEvents::default();
        let resolved = Event::Market {
            market: 0,
            change: MarketChange::Resolved {
                resolution: Resolution::Yes,
            },
            market_seq: 1,
        };
        batch.push(1, 1_700_000_000_000_000_000, &[resolved]);
        feed.publish(&Arc::new(batch));
        assert!(
            quiet_rx.is_empty(),
            "a loop with no WebSocket is handed nothing"
        );
        assert!(!quiet_owes.is_owed());
        let frames = busy_rx
            .try_recv()
            .expect("the loop with a socket has the frames");
        assert_eq!(frames.len(), 1);
        assert!(
            busy_owes.is_owed(),
            "its sink wakes it at the release's end"
        );
    }

    #[test]
    fn market_frames_have_the_contract_shapes_with_keys_in_order() {
        let mut e = encoder();
        let condition = format!("0x{}", "ab".repeat(32));
        let events = [
            Event::Level {
                market: 0,
                side: AxisSide::Bid,
                price_ticks: 5_500,
                total_units: 10_000_000,
                best_bid: Some(5_500),
                best_ask: None,
                market_seq: 4,
            },
            Event::LastTrade {
                market: 0,
                outcome: Outcome::No,
                side: Side::Buy,
                price_ticks: 4_500,
                size_units: 3_000_000,
                market_seq: 5,
            },
            Event::Market {
                market: 0,
                change: MarketChange::TickSize {
                    old_tick_ticks: 100,
                    new_tick_ticks: 10,
                },
                market_seq: 6,
            },
            Event::Market {
                market: 0,
                change: MarketChange::Resolved {
                    resolution: Resolution::Yes,
                },
                market_seq: 7,
            },
        ];
        let got = frames(&mut e, &events, ALL);
        assert_eq!(
            got[0],
            json!({"event_type": "price_change", "market": condition, "seq": 4,
                "timestamp": "1700000000123", "price_changes": [
                {"asset_id": "11", "price": "0.55", "size": "10", "side": "BUY", "best_bid": "0.55", "best_ask": ""},
                {"asset_id": "12", "price": "0.45", "size": "10", "side": "SELL", "best_bid": "", "best_ask": "0.45"}]})
        );
        assert_eq!(
            got[1],
            json!({"event_type": "last_trade_price", "market": condition, "asset_id": "12", "seq": 5,
                "timestamp": "1700000000123", "price": "0.45", "side": "BUY", "size": "3"})
        );
        assert_eq!(
            got[2],
            json!({"event_type": "tick_size_change", "market": condition, "seq": 6,
                "timestamp": "1700000000123", "old_tick_size": "0.01", "new_tick_size": "0.001"})
        );
        assert_eq!(
            got[3],
            json!({"event_type": "market_resolved", "market": condition, "seq": 7,
                "timestamp": "1700000000123", "winning_asset_id": "11", "winning_outcome": "Yes"})
        );
        let keys: Vec<&String> = got[1].as_object().expect("object").keys().collect();
        assert_eq!(
            keys,
            [
                "event_type",
                "market",
                "asset_id",
                "seq",
                "timestamp",
                "price",
                "side",
                "size"
            ]
        );
        let nobody = Wanted {
            user: false,
            market: false,
        };
        assert!(frames(&mut e, &events, nobody).is_empty());
    }

    #[test]
    fn a_level_changed_twice_by_one_command_is_listed_once_with_its_last_size() {
        let mut e = encoder();
        let level = |price_ticks, shares: u64, best_bid| Event::Level {
            market: 0,
            side: AxisSide::Bid,
            price_ticks,
            total_units: shares * 1_000_000,
            best_bid,
            best_ask: None,
            market_seq: 4,
        };
        // A cancel-all of bids at 0.50, 0.49 and 0.50 again (a refreshed quote): the 0.50
        // level changes, then 0.49, then 0.50 once more, and the book is empty after.
        let events = [
            level(5_000, 7, Some(5_000)),
            level(4_900, 0, Some(5_000)),
            level(5_000, 0, None),
        ];
        let got = frames(&mut e, &events, ALL);
        assert_eq!(got.len(), 1);
        let entries: Vec<(&str, &str, &str, &str)> = got[0]["price_changes"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|c| {
                (
                    c["asset_id"].as_str().unwrap(),
                    c["price"].as_str().unwrap(),
                    c["size"].as_str().unwrap(),
                    c["best_bid"].as_str().unwrap(),
                )
            })
            .collect();
        // Each level once, in the order of its last change: the last entries carry the
        // best prices after the command (no bid left).
        assert_eq!(
            entries,
            [
                ("11", "0.49", "0", "0.5"),
                ("12", "0.51", "0", ""),
                ("11", "0.5", "0", ""),
                ("12", "0.5", "0", ""),
            ]
        );
    }

    #[test]
    fn a_market_created_later_is_learned_from_its_event() {
        let mut e = Encoder::new(Vec::new());
        let created = Event::Market {
            market: 0,
            change: MarketChange::Created {
                condition_id: FixedBytes([1; 32]),
                yes_token_id: FixedBytes([0; 32]),
                no_token_id: FixedBytes([0; 32]),
            },
            market_seq: 1,
        };
        let trade = Event::LastTrade {
            market: 0,
            outcome: Outcome::Yes,
            side: Side::Sell,
            price_ticks: 100,
            size_units: 1_000_000,
            market_seq: 2,
        };
        let got = frames(&mut e, &[created, trade], ALL);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["market"], json!(format!("0x{}", "01".repeat(32))));
        assert_eq!(got[0]["asset_id"], json!("0"));
        assert_eq!(got[0]["price"], json!("0.01"));
    }
}
