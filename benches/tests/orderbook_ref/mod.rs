//! The same single-token command stream on [orderbook-rs](https://crates.io/crates/orderbook-rs),
//! for the `engine` bench (Ladder against orderbook-rs) and the test that checks the two books
//! agree (`tests/engine_vs_orderbook_rs.rs`).
//!
//! The stream is `engine_stream`'s with one market, Yes-token orders only and each trader on
//! one side of the book only. Each Ladder command maps to one orderbook-rs call:
//!
//! - `PlaceOrder` (GTC, never post-only) → `add_limit_order` GTC, same side, the same price in
//!   ticks of 0.0001 and the size in whole shares (Ladder's base units / `UNITS_PER_SHARE`);
//! - `CancelOrder` → `cancel_order` of the same id.
//!
//! Ids: Ladder numbers accepted orders 1, 2, 3, ... in placement order and the stream's
//! placements are all accepted, so the n-th `PlaceOrder` (set-up included) is Ladder's order
//! n and orderbook-rs's `Id::Sequential(n)`; the test checks Ladder's replies against that.
//!
//! Semantic differences, and how the stream avoids them:
//!
//! - Self-trade prevention: Ladder cancels a taker's own resting order when the walk reaches
//!   it; orderbook-rs's `CancelMaker` cancels every same-user order at each level the walk
//!   touches, and with STP off it lets a user trade with itself. The stream gives each
//!   trader one side only (`one_side_per_trader`), so no order can meet its own trader's and
//!   orderbook-rs runs with STP off (its default, and its fast path).
//! - No-token orders, which Ladder books on the Yes axis (BUY No at q = SELL Yes at 1 − q),
//!   are left out (`yes_only`).
//! - Ladder also reserves balances, settles every fill in its ledger, records trades and
//!   emits events; orderbook-rs is a bare book (no trade listener, no state tracker).

use ladder_benches::engine_stream::{token, Stream, StreamSpec, TICK};
use ladder_benches::naive_book::NaiveBook;
use ladder_engine::{Command, Engine, OrderType, Side, UNITS_PER_SHARE};
use orderbook_rs::prelude::{Id, OrderBook, OrderBookError, Side as RefSide, TimeInForce};

/// The single-token stream: one market, Yes orders only, one side per trader.
pub fn single_token_spec(commands: usize) -> StreamSpec {
    StreamSpec {
        markets: 1,
        commands,
        yes_only: true,
        one_side_per_trader: true,
        ..StreamSpec::default()
    }
}

/// One orderbook-rs call.
#[derive(Clone, Copy, Debug)]
pub enum RefOp {
    /// `add_limit_order`, GTC.
    Add {
        /// Ladder's order id, as a sequential id.
        id: Id,
        /// Ladder's order id.
        number: u64,
        /// Price in ticks of 0.0001.
        price: u128,
        /// Whole shares.
        shares: u64,
        /// BUY or SELL (of the Yes token).
        side: RefSide,
    },
    /// `cancel_order`.
    Cancel {
        /// Ladder's order id, as a sequential id.
        id: Id,
        /// Ladder's order id.
        number: u64,
    },
}

/// A Ladder stream as orderbook-rs calls.
pub struct RefStream {
    /// Calls that build the starting book (the set-up's resting orders).
    pub setup: Vec<RefOp>,
    /// Calls to measure, one per measured Ladder command.
    pub measured: Vec<RefOp>,
}

impl RefStream {
    /// Maps `stream` (built from [`single_token_spec`]) to orderbook-rs calls.
    pub fn of(stream: &Stream) -> RefStream {
        let mut placed = 0;
        let setup = convert(&stream.setup, &mut placed, true);
        let measured = convert(&stream.measured, &mut placed, false);
        RefStream { setup, measured }
    }

    /// A book with the set-up applied, ticks of 0.001 like the generated market.
    pub fn prepared_book(&self) -> OrderBook<()> {
        let mut book = OrderBook::new("LADDER-YES");
        book.set_tick_size(u128::from(TICK));
        for op in &self.setup {
            apply(&book, op).expect("set-up order accepted");
        }
        book
    }
}

fn convert(commands: &[Command], placed: &mut u64, setup: bool) -> Vec<RefOp> {
    let yes = token(0, 0);
    let mut ops = Vec::with_capacity(commands.len());
    for command in commands {
        match command {
            Command::PlaceOrder(order) => {
                assert_eq!(
                    order.token_id, yes,
                    "a No-token or other-market order: generate with single_token_spec"
                );
                assert!(order.order_type == OrderType::Gtc && !order.post_only);
                assert_eq!(order.size_units % UNITS_PER_SHARE, 0, "whole shares");
                *placed += 1;
                ops.push(RefOp::Add {
                    id: Id::sequential(*placed),
                    number: *placed,
                    price: u128::from(order.price_ticks),
                    shares: order.size_units / UNITS_PER_SHARE,
                    side: match order.side {
                        Side::Buy => RefSide::Buy,
                        Side::Sell => RefSide::Sell,
                    },
                });
            }
            Command::CancelOrder { order_id, .. } => ops.push(RefOp::Cancel {
                id: Id::sequential(*order_id),
                number: *order_id,
            }),
            // Markets and deposits: nothing to do on a bare book.
            Command::CreateMarket(_) | Command::Deposit { .. } if setup => {}
            other => panic!("no orderbook-rs equivalent for {other:?}"),
        }
    }
    ops
}

/// Applies one call; `Ok(true)` when an order was added or a resting one cancelled.
#[inline]
pub fn apply(book: &OrderBook<()>, op: &RefOp) -> Result<bool, OrderBookError> {
    match *op {
        RefOp::Add {
            id,
            price,
            shares,
            side,
            ..
        } => book
            .add_limit_order(id, price, shares, side, TimeInForce::Gtc, None)
            .map(|_| true),
        RefOp::Cancel { id, .. } => book.cancel_order(id).map(|removed| removed.is_some()),
    }
}

/// A naive direct-indexed book with the set-up applied.
pub fn prepared_naive_book(stream: &RefStream) -> NaiveBook {
    let mut book = NaiveBook::with_capacity(stream.setup.len() + stream.measured.len());
    for op in &stream.setup {
        apply_naive(&mut book, op);
    }
    book
}

/// Applies one call to the naive book; `true` when an order was added or a resting one
/// cancelled.
#[inline]
pub fn apply_naive(book: &mut NaiveBook, op: &RefOp) -> bool {
    match *op {
        RefOp::Add {
            number,
            price,
            shares,
            side,
            ..
        } => {
            book.place(number, price as u32, shares, side == RefSide::Buy);
            true
        }
        RefOp::Cancel { number, .. } => book.cancel(number),
    }
}

/// Checks that Ladder's Yes book and the naive book hold the same levels and orders.
pub fn compare_naive(engine: &Engine, book: &NaiveBook) -> Result<(), String> {
    let yes = token(0, 0);
    let ladder = engine
        .book(&yes, usize::MAX)
        .ok_or("Ladder has no Yes book")?;
    if engine.open_order_count() != book.resting() {
        return Err(format!(
            "resting orders: Ladder {}, naive {}",
            engine.open_order_count(),
            book.resting()
        ));
    }
    for (name, ours, buy) in [("bids", &ladder.bids, true), ("asks", &ladder.asks, false)] {
        let theirs: Vec<(u32, u64)> = book
            .levels(buy)
            .into_iter()
            .map(|(price, shares)| (price, shares * UNITS_PER_SHARE))
            .collect();
        if *ours != theirs {
            return Err(format!("{name} differ: Ladder {ours:?}, naive {theirs:?}"));
        }
    }
    Ok(())
}

/// Checks that Ladder's Yes book and orderbook-rs's book hold the same orders: the same
/// count, best bid and ask, and every level's price and size.
pub fn compare_books(engine: &Engine, book: &OrderBook<()>) -> Result<(), String> {
    let yes = token(0, 0);
    let ladder = engine
        .book(&yes, usize::MAX)
        .ok_or("Ladder has no Yes book")?;
    let reference = book
        .create_snapshot(usize::MAX)
        .map_err(|e| format!("orderbook-rs snapshot: {e}"))?;
    let ladder_levels = |side: &[(u32, u64)]| {
        side.iter()
            .map(|&(p, units)| (u128::from(p), u128::from(units)))
            .collect::<Vec<_>>()
    };
    let resting: usize = reference
        .bids
        .iter()
        .chain(&reference.asks)
        .map(|l| l.order_count())
        .sum();
    if engine.open_order_count() != resting {
        return Err(format!(
            "resting orders: Ladder {}, orderbook-rs {resting}",
            engine.open_order_count()
        ));
    }
    let best = (
        engine.best_price(&yes, Side::Buy).map(u128::from),
        engine.best_price(&yes, Side::Sell).map(u128::from),
    );
    if best != (book.best_bid(), book.best_ask()) {
        return Err(format!(
            "best bid/ask: Ladder {best:?}, orderbook-rs {:?}",
            (book.best_bid(), book.best_ask())
        ));
    }
    for (name, ours, theirs) in [
        ("bids", &ladder.bids, &reference.bids),
        ("asks", &ladder.asks, &reference.asks),
    ] {
        let ours = ladder_levels(ours);
        let theirs: Vec<(u128, u128)> = theirs
            .iter()
            .map(|l| {
                let shares = l.visible_quantity().as_u64() + l.hidden_quantity().as_u64();
                (
                    l.price().as_u128(),
                    u128::from(shares) * u128::from(UNITS_PER_SHARE),
                )
            })
            .collect();
        if ours != theirs {
            return Err(format!(
                "{name} differ: Ladder {ours:?}, orderbook-rs {theirs:?}"
            ));
        }
    }
    Ok(())
}
