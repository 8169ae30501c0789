//! The feed thread: turns each durable batch's events into WebSocket frames, encoded once,
//! and hands the same frames to every gateway thread, which routes them to its subscribers.
//!
//! Market frames are complete (their `seq` is the market's). User frames leave `seq` to the
//! connection: each is stored as a prefix ending in `"seq":`, and the connection appends its
//! own number and the closing brace.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use ladder_engine::{
    format_price, AxisSide, Bytes32, Event, MarketChange, OrderEventKind, Outcome, PriceTicks,
    Resolution, UNITS_PER_SHARE,
};
use ladder_sequencer::PublishedBatch;
use mio::Waker;
use serde_json::{json, Map, Value};

use crate::app::present::{open_order, trade};
use crate::convert::{wire_address, wire_b256, wire_token};

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
        /// The frame.
        frame: Arc<str>,
    },
}

/// The frames of one batch.
pub type FeedBatch = Arc<Vec<FeedItem>>;

/// Where a gateway thread takes its frames.
#[derive(Clone)]
pub struct FeedTarget {
    /// The gateway thread's channel.
    pub tx: Sender<FeedBatch>,
    /// Its waker.
    pub waker: Arc<Waker>,
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

/// Starts the feed thread; it ends when `events` closes.
pub fn start(
    events: Receiver<PublishedBatch>,
    mut directory: Vec<MarketIds>,
    targets: Vec<FeedTarget>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("feed".into())
        .spawn(move || {
            for batch in events.iter() {
                let mut items = Vec::new();
                for published in batch.iter() {
                    encode(
                        &mut directory,
                        published.timestamp_ns,
                        &published.events,
                        &mut items,
                    );
                }
                if items.is_empty() {
                    continue;
                }
                let shared: FeedBatch = Arc::new(items);
                for target in &targets {
                    let _ = target.tx.send(shared.clone());
                    let _ = target.waker.wake();
                }
            }
        })
}

fn user_prefix(mut object: Map<String, Value>) -> Arc<str> {
    object.remove("seq");
    let text = Value::Object(object).to_string();
    let open = &text[..text.len() - 1];
    let sep = if open.ends_with('{') { "" } else { "," };
    Arc::from(format!("{open}{sep}\"seq\":"))
}

/// Encodes one command's events (`timestamp_ns` is the command's time).
pub fn encode(
    directory: &mut Vec<MarketIds>,
    timestamp_ns: u64,
    events: &[Event],
    out: &mut Vec<FeedItem>,
) {
    let timestamp = (timestamp_ns / 1_000_000).to_string();
    let mut changes: Vec<(u32, u64, Vec<Value>)> = Vec::new();
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
            } => {
                let index = *market as usize;
                if directory.len() <= index {
                    directory.resize(
                        index + 1,
                        MarketIds {
                            condition_id: Bytes32::default(),
                            yes: Bytes32::default(),
                            no: Bytes32::default(),
                        },
                    );
                }
                directory[index] = MarketIds {
                    condition_id: *condition_id,
                    yes: *yes_token_id,
                    no: *no_token_id,
                };
            }
            Event::Level {
                market,
                side,
                price_ticks,
                total_units,
                best_bid,
                best_ask,
                market_seq,
            } => {
                let Some(ids) = directory.get(*market as usize) else {
                    continue;
                };
                let entries =
                    level_entries(ids, *side, *price_ticks, *total_units, *best_bid, *best_ask);
                match changes.iter_mut().find(|(m, _, _)| m == market) {
                    Some((_, _, list)) => list.extend(entries),
                    None => changes.push((*market, *market_seq, entries)),
                }
            }
            Event::LastTrade {
                market,
                outcome,
                side,
                price_ticks,
                size_units,
                market_seq,
            } => {
                let Some(ids) = directory.get(*market as usize) else {
                    continue;
                };
                let token = if *outcome == Outcome::Yes {
                    ids.yes
                } else {
                    ids.no
                };
                let frame = json!({
                    "event_type": "last_trade_price", "market": wire_b256(&ids.condition_id), "asset_id": wire_token(&token).to_string(),
                    "seq": market_seq, "timestamp": timestamp, "price": format_price(*price_ticks), "side": side.as_str(),
                    "size": (size_units / UNITS_PER_SHARE).to_string(),
                });
                later.push(FeedItem::Market {
                    market: ids.condition_id,
                    seq: *market_seq,
                    frame: Arc::from(frame.to_string()),
                });
            }
            Event::Market {
                market,
                change,
                market_seq,
            } => {
                let Some(ids) = directory.get(*market as usize) else {
                    continue;
                };
                let frame = match change {
                    MarketChange::TickSize {
                        old_tick_ticks,
                        new_tick_ticks,
                    } => json!({
                        "event_type": "tick_size_change", "market": wire_b256(&ids.condition_id), "seq": market_seq, "timestamp": timestamp,
                        "old_tick_size": format_price(*old_tick_ticks), "new_tick_size": format_price(*new_tick_ticks),
                    }),
                    MarketChange::Resolved { resolution } => {
                        let (asset, outcome) = match resolution {
                            Resolution::Yes => (wire_token(&ids.yes).to_string(), "Yes"),
                            Resolution::No => (wire_token(&ids.no).to_string(), "No"),
                            Resolution::Void => (String::new(), "void"),
                        };
                        json!({
                            "event_type": "market_resolved", "market": wire_b256(&ids.condition_id), "seq": market_seq,
                            "timestamp": timestamp, "winning_asset_id": asset, "winning_outcome": outcome,
                        })
                    }
                    _ => continue,
                };
                later.push(FeedItem::Market {
                    market: ids.condition_id,
                    seq: *market_seq,
                    frame: Arc::from(frame.to_string()),
                });
            }
            Event::Order { kind, order } => {
                let mut object = Map::new();
                object.insert("event_type".into(), json!("order"));
                object.insert("type".into(), json!(kind_name(*kind)));
                if let Value::Object(fields) =
                    serde_json::to_value(open_order(order)).unwrap_or(Value::Null)
                {
                    object.extend(fields);
                }
                object.insert("timestamp".into(), json!(timestamp));
                later.push(FeedItem::User {
                    address: order.maker,
                    market: order.condition_id,
                    prefix: user_prefix(object),
                });
            }
            Event::Trade(view) => {
                for party in [view.taker.address, view.maker.address] {
                    let mut object = Map::new();
                    object.insert("event_type".into(), json!("trade"));
                    if let Value::Object(fields) =
                        serde_json::to_value(trade(view, &wire_address(&party)))
                            .unwrap_or(Value::Null)
                    {
                        object.extend(fields);
                    }
                    object.insert("timestamp".into(), json!(timestamp));
                    later.push(FeedItem::User {
                        address: party,
                        market: view.condition_id,
                        prefix: user_prefix(object),
                    });
                }
            }
        }
    }
    for (market, seq, list) in changes {
        let ids = directory[market as usize];
        let frame = json!({
            "event_type": "price_change", "market": wire_b256(&ids.condition_id), "seq": seq, "timestamp": timestamp,
            "price_changes": list,
        });
        out.push(FeedItem::Market {
            market: ids.condition_id,
            seq,
            frame: Arc::from(frame.to_string()),
        });
    }
    out.extend(later);
}

fn kind_name(kind: OrderEventKind) -> &'static str {
    kind.as_str()
}

/// A level change seen from both tokens: a Yes bid at p is a No ask at 1 − p.
fn level_entries(
    ids: &MarketIds,
    side: AxisSide,
    price: PriceTicks,
    total: u64,
    best_bid: Option<PriceTicks>,
    best_ask: Option<PriceTicks>,
) -> Vec<Value> {
    let p = |v: Option<PriceTicks>| v.map(format_price).unwrap_or_default();
    let mirror = |v: Option<PriceTicks>| v.map(|x| 10_000 - x);
    let size = (total / UNITS_PER_SHARE).to_string();
    let (yes_side, no_side) = match side {
        AxisSide::Bid => ("BUY", "SELL"),
        AxisSide::Ask => ("SELL", "BUY"),
    };
    vec![
        json!({ "asset_id": wire_token(&ids.yes).to_string(), "price": format_price(price), "size": size, "side": yes_side,
                "best_bid": p(best_bid), "best_ask": p(best_ask) }),
        json!({ "asset_id": wire_token(&ids.no).to_string(), "price": format_price(10_000 - price), "size": size, "side": no_side,
                "best_bid": p(mirror(best_ask)), "best_ask": p(mirror(best_bid)) }),
    ]
}
