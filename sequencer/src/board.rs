//! The read side of the books: a snapshot of every market's two books (Yes and No tokens),
//! replaced whenever a released batch changed that market, and every market's trade prices
//! in time order, from which gateway threads answer book, price and price-history reads
//! without going through the sequencer.
//!
//! The sequencer builds the snapshots of the markets a batch touched (those named by its
//! level, last-trade and market events) right after applying it; the release of that batch
//! installs them *before* any of its completions is delivered, so a read sees every
//! acknowledged order. Each market's snapshot sits behind an `ArcSwap`: a reader loads it
//! without a lock and the writer replaces it without waiting for readers. The directory of
//! markets is behind a read-write lock whose write side is taken only when a market is
//! created. A market's recent trade prices are a list behind a read-write lock: a reader holds
//! it for a binary search per bucket it answers (at most `HISTORY_BUCKETS_MAX`). Only the
//! prices the history store does not hold yet stay here (API.md §19): once the store holds
//! every trade below an index, the next trade of that market trims the ones below it, and a
//! price-history read merges the store's buckets with these ([`merge_price_buckets`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use ladder_engine::{
    BookView, ConditionId, Engine, Event, Outcome, TokenId, TradeView, NANOS_PER_SECOND,
};
use parking_lot::RwLock;

/// One market's book as of one released batch, kept as the Yes token sees it (the No
/// token's view is its mirror, made on read: half the sequencer's work per batch).
#[derive(Clone, Debug)]
pub struct MarketBooks {
    /// Seen from the Yes token.
    pub yes: BookView,
}

impl MarketBooks {
    /// The book seen from `outcome`'s token: the No token's bids are the Yes asks at the
    /// complementary price, and its asks the Yes bids, best first.
    pub fn of(&self, outcome: Outcome) -> BookView {
        match outcome {
            Outcome::Yes => self.yes.clone(),
            Outcome::No => {
                let mirror = |&(price, size): &(u32, u64)| (PRICE_ONE_TICKS - price, size);
                BookView {
                    market: self.yes.market,
                    outcome: Outcome::No,
                    bids: self.yes.asks.iter().map(mirror).collect(),
                    asks: self.yes.bids.iter().map(mirror).collect(),
                }
            }
        }
    }

    /// The book of the market at `index`, read from `engine`.
    pub fn read(engine: &Engine, index: u32) -> Option<MarketBooks> {
        let market = engine.market_at(index)?;
        Some(MarketBooks {
            yes: engine.book(&market.token_id(Outcome::Yes), usize::MAX)?,
        })
    }
}

/// A price of 1 in ticks: a No price is this minus the Yes price.
const PRICE_ONE_TICKS: u32 = 10_000;

/// Most buckets one price-history answer holds.
pub const HISTORY_BUCKETS_MAX: usize = 10_000;

/// A trade's price, as the read side and the history store keep it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TradePrice {
    /// The market's index.
    pub market: u32,
    /// The trade's index in the trade log.
    pub trade_index: u64,
    /// Match time, Unix seconds.
    pub time_s: u64,
    /// The price on the Yes token, in ticks.
    pub yes_price_ticks: u32,
    /// The tokens it traded ([`outcome_bit`] of each): the taker's, and the maker's too in
    /// a MINT or a MERGE (they trade at complementary prices).
    pub outcomes: u8,
}

/// One bucket of a price history: its start, and the Yes price of its last trade (the one of
/// highest index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PriceBucket {
    /// Start of the bucket, Unix seconds (a multiple of the bucket's length).
    pub start_s: u64,
    /// The Yes price of its last trade, in ticks.
    pub yes_price_ticks: u32,
    /// The index of that trade.
    pub trade_index: u64,
}

/// Buckets of the same query from two sources (the store and the read side) as one list,
/// oldest first, at most `HISTORY_BUCKETS_MAX`: where both have a bucket, the later trade's
/// price.
pub fn merge_price_buckets(a: Vec<PriceBucket>, b: Vec<PriceBucket>) -> Vec<PriceBucket> {
    let mut merged: BTreeMap<u64, PriceBucket> = BTreeMap::new();
    for bucket in a.into_iter().chain(b) {
        merged
            .entry(bucket.start_s)
            .and_modify(|kept| {
                if bucket.trade_index > kept.trade_index {
                    *kept = bucket;
                }
            })
            .or_insert(bucket);
    }
    merged.into_values().take(HISTORY_BUCKETS_MAX).collect()
}

/// Both tokens' bits: a MINT or a MERGE (and, in the history store, a price stored before
/// its tokens were known).
pub const BOTH_OUTCOMES: u8 = 3;

/// `outcome`'s bit in [`TradePrice::outcomes`] (and in the history store's `outcomes`).
pub fn outcome_bit(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Yes => 1,
        Outcome::No => 2,
    }
}

/// The tokens `trade` traded: the taker's and the maker's (the same one in a
/// COMPLEMENTARY match), as [`outcome_bit`]s.
pub fn traded_outcomes(trade: &TradeView) -> u8 {
    outcome_bit(trade.taker.outcome) | outcome_bit(trade.maker.outcome)
}

/// A price on `outcome`'s token from a price on the Yes token.
pub fn token_price(outcome: Outcome, yes_price_ticks: u32) -> u32 {
    match outcome {
        Outcome::Yes => yes_price_ticks,
        Outcome::No => PRICE_ONE_TICKS.saturating_sub(yes_price_ticks),
    }
}

/// A trade's time (Unix seconds), index, price on the Yes token (ticks) and the tokens it
/// traded.
type PricePoint = (u64, u64, u32, u8);

/// What a batch brings to the read side.
#[derive(Debug, Default)]
pub struct BoardUpdates {
    /// New snapshots: `(market index, books)`.
    pub books: Vec<(u32, Arc<MarketBooks>)>,
    /// New trades' prices, in match order.
    pub trades: Vec<TradePrice>,
}

impl BoardUpdates {
    /// Whether there is nothing to install.
    pub fn is_empty(&self) -> bool {
        self.books.is_empty() && self.trades.is_empty()
    }
}

/// One market on the read side.
struct MarketSide {
    books: ArcSwap<MarketBooks>,
    /// Recent trade prices `(time, index, price)` in match order (times never go back: the
    /// sequencer's clock is monotonic).
    trades: RwLock<VecDeque<PricePoint>>,
}

#[derive(Default)]
struct Directory {
    tokens: HashMap<TokenId, (u32, Outcome)>,
    markets: Vec<Arc<MarketSide>>,
}

/// Every market's books, for reads that must not wait on the sequencer.
#[derive(Default)]
pub struct BookBoard {
    directory: RwLock<Directory>,
    /// The history store holds the price of every trade below this index.
    prices_stored_below: AtomicU64,
}

impl std::fmt::Debug for BookBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BookBoard")
            .field("markets", &self.directory.read().markets.len())
            .finish()
    }
}

impl BookBoard {
    /// Installs every market of `engine` and the prices of the trades it holds (at start-up,
    /// before the sequencer runs; older prices are in the history store).
    pub fn fill(&self, engine: &Engine) {
        let books = (0..engine.market_count() as u32)
            .filter_map(|index| Some((index, Arc::new(MarketBooks::read(engine, index)?))))
            .collect();
        let trades = engine
            .held_trades()
            .filter_map(|trade| price_point(engine, trade))
            .collect();
        self.install(BoardUpdates { books, trades });
    }

    /// The history store now holds the price of every trade below `trade_index`: they leave
    /// the read side as their markets trade again.
    pub fn prices_stored_below(&self, trade_index: u64) {
        self.prices_stored_below
            .fetch_max(trade_index, Ordering::AcqRel);
    }

    /// The books of `token`'s market, and which of them is `token`'s.
    pub fn books(&self, token: &TokenId) -> Option<(Arc<MarketBooks>, Outcome)> {
        let directory = self.directory.read();
        let &(index, outcome) = directory.tokens.get(token)?;
        let books = directory.markets.get(index as usize)?.books.load_full();
        Some((books, outcome))
    }

    /// The tick of `token`'s market, in price ticks of 0.0001 (`None`: unknown token), as of
    /// the last release.
    pub fn tick_of(&self, token: &TokenId) -> Option<u32> {
        let directory = self.directory.read();
        let &(index, _) = directory.tokens.get(token)?;
        let market = directory.markets.get(index as usize)?;
        let tick = market.books.load().yes.market.tick_size_ticks;
        Some(tick)
    }

    /// The price history of `token` held here (`None`: unknown token): its market's condition
    /// id, which of the market's tokens it is, and for each `bucket_s`-second bucket (aligned
    /// to multiples of it) holding recent trades of the token from `start_s` to `end_s`
    /// inclusive, the bucket and its last such trade, oldest first, at most
    /// `HISTORY_BUCKETS_MAX` buckets. A trade of the other token alone is not the token's.
    pub fn price_history(
        &self,
        token: &TokenId,
        start_s: u64,
        end_s: u64,
        bucket_s: u64,
    ) -> Option<(ConditionId, Outcome, Vec<PriceBucket>)> {
        let bucket_s = bucket_s.max(1);
        let (market, outcome) = {
            let directory = self.directory.read();
            let &(index, outcome) = directory.tokens.get(token)?;
            (directory.markets.get(index as usize)?.clone(), outcome)
        };
        let condition_id = market.books.load().yes.market.condition_id;
        let trades = market.trades.read();
        let from = trades.partition_point(|p| p.0 < start_s);
        let to = trades.partition_point(|p| p.0 <= end_s).max(from);
        let bit = outcome_bit(outcome);
        let mut history = Vec::new();
        let mut at = from;
        while at < to && history.len() < HISTORY_BUCKETS_MAX {
            let bucket = trades[at].0 - trades[at].0 % bucket_s;
            let next = bucket.saturating_add(bucket_s);
            // The first price at or after the next bucket (times are in order).
            let end = trades.partition_point(|p| p.0 < next).clamp(at + 1, to);
            let last_of_token = trades.range(at..end).rev().find(|p| p.3 & bit != 0);
            if let Some(&(_, trade_index, yes_price_ticks, _)) = last_of_token {
                history.push(PriceBucket {
                    start_s: bucket,
                    yes_price_ticks,
                    trade_index,
                });
            }
            at = end;
        }
        Some((condition_id, outcome, history))
    }

    /// Installs snapshots and trades (markets new to the board are added).
    pub fn install(&self, updates: BoardUpdates) {
        let BoardUpdates { books, trades } = updates;
        let mut fresh = Vec::new();
        {
            let directory = self.directory.read();
            for (index, books) in books {
                match directory.markets.get(index as usize) {
                    Some(side) => side.books.store(books),
                    None => fresh.push((index, books)),
                }
            }
        }
        if !fresh.is_empty() {
            let mut directory = self.directory.write();
            for (index, books) in fresh {
                let at = index as usize;
                if let Some(side) = directory.markets.get(at) {
                    side.books.store(books);
                    continue;
                }
                // Markets are numbered densely in creation order, so a new one is the next.
                debug_assert_eq!(at, directory.markets.len());
                if at != directory.markets.len() {
                    continue;
                }
                for outcome in [Outcome::Yes, Outcome::No] {
                    let token = books.yes.market.token_id(outcome);
                    directory.tokens.insert(token, (index, outcome));
                }
                directory.markets.push(Arc::new(MarketSide {
                    books: ArcSwap::new(books),
                    trades: RwLock::new(VecDeque::new()),
                }));
            }
        }
        if trades.is_empty() {
            return;
        }
        let stored_below = self.prices_stored_below.load(Ordering::Acquire);
        let directory = self.directory.read();
        for price in trades {
            if let Some(side) = directory.markets.get(price.market as usize) {
                let mut recent = side.trades.write();
                while recent.front().is_some_and(|p| p.1 < stored_below) {
                    recent.pop_front();
                }
                recent.push_back((
                    price.time_s,
                    price.trade_index,
                    price.yes_price_ticks,
                    price.outcomes,
                ));
            }
        }
    }
}

/// A trade's market and price on the Yes token.
pub fn price_point(engine: &Engine, trade: &TradeView) -> Option<TradePrice> {
    Some(TradePrice {
        market: engine.market_index(&trade.condition_id)?,
        trade_index: trade.index,
        time_s: trade.match_time_ns / NANOS_PER_SECOND,
        // The taker's price seen from the Yes token.
        yes_price_ticks: token_price(trade.taker.outcome, trade.taker.price_ticks),
        outcomes: traded_outcomes(trade),
    })
}

/// The markets `events` changed: those named by level, last-trade and market events.
pub fn touched_markets(events: &[Event], into: &mut Vec<u32>) {
    for event in events {
        match event {
            Event::Level { market, .. }
            | Event::LastTrade { market, .. }
            | Event::Market { market, .. } => into.push(*market),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_engine::FixedBytes;
    use ladder_engine::{
        Address, Asset, Bytes32, Command, EngineLimits, MarketSpec, NewOrder, OrderType, Side,
        UNITS_PER_SHARE,
    };

    fn market(m: u8) -> MarketSpec {
        MarketSpec {
            condition_id: FixedBytes([0xc0 + m; 32]),
            yes_token_id: FixedBytes([0x10 + m; 32]),
            no_token_id: FixedBytes([0x20 + m; 32]),
            tick_size_ticks: 100,
            min_order_size_units: UNITS_PER_SHARE,
            neg_risk: false,
            taker_delay_ms: 0,
            fee_rate_bps: 0,
        }
    }

    fn bid(n: u8, token: Bytes32, price_ticks: u32) -> Command {
        let maker = Address([0xaa; 20]);
        Command::PlaceOrder(NewOrder {
            order_hash: FixedBytes([n; 32]),
            maker,
            signer: maker,
            token_id: token,
            side: Side::Buy,
            price_ticks,
            size_units: 5 * UNITS_PER_SHARE,
            order_type: OrderType::Gtc,
            post_only: false,
            expiration_s: 0,
            signer_verified: true,
            signed: None,
        })
    }

    #[test]
    fn the_board_follows_the_engine_market_by_market() {
        let mut engine = Engine::new(EngineLimits::default());
        let mut seq = 0;
        let mut apply = |engine: &mut Engine, command: Command| {
            seq += 1;
            engine.apply(seq, seq, &command);
            let mut touched = Vec::new();
            touched_markets(engine.events(), &mut touched);
            touched
        };
        apply(&mut engine, Command::CreateMarket(market(0)));
        apply(
            &mut engine,
            Command::Deposit {
                address: Address([0xaa; 20]),
                asset: Asset::Collateral,
                amount: 1_000 * UNITS_PER_SHARE,
            },
        );
        let board = BookBoard::default();
        board.fill(&engine);
        let yes = market(0).yes_token_id;
        let no = market(0).no_token_id;
        assert!(board.books(&yes).unwrap().0.yes.bids.is_empty());

        let touched = apply(&mut engine, bid(1, yes, 4_000));
        assert_eq!(
            touched,
            vec![0],
            "a resting order changes its market's level"
        );
        // BUY No at 0.30 rests as an ask at 0.70 on the Yes axis.
        assert_eq!(apply(&mut engine, bid(2, no, 3_000)), vec![0]);
        assert!(
            board.books(&yes).unwrap().0.yes.bids.is_empty(),
            "nothing shows before the release installs it"
        );
        board.install(BoardUpdates {
            books: vec![(0, Arc::new(MarketBooks::read(&engine, 0).unwrap()))],
            trades: Vec::new(),
        });
        let (books, outcome) = board.books(&yes).unwrap();
        assert_eq!(outcome, Outcome::Yes);
        assert_eq!(books.yes.bids, vec![(4_000, 5 * UNITS_PER_SHARE)]);
        assert_eq!(books.yes.asks, vec![(7_000, 5 * UNITS_PER_SHARE)]);
        let (books, outcome) = board.books(&no).unwrap();
        assert_eq!(outcome, Outcome::No);
        assert_eq!(
            books.of(outcome).asks,
            vec![(6_000, 5 * UNITS_PER_SHARE)],
            "the No token sees the Yes bid as an ask at the complement"
        );
        assert_eq!(
            books.of(Outcome::No),
            engine.book(&no, usize::MAX).unwrap(),
            "the mirrored No view is the engine's"
        );
        assert_eq!(
            books.yes.market.event_seq,
            engine.market_at(0).unwrap().event_seq
        );

        let touched = apply(&mut engine, Command::CreateMarket(market(1)));
        assert_eq!(touched, vec![1]);
        assert!(board.books(&market(1).yes_token_id).is_none());
        let price = |trade_index, time_s, yes_price_ticks| TradePrice {
            market: 1,
            trade_index,
            time_s,
            yes_price_ticks,
            outcomes: outcome_bit(Outcome::Yes) | outcome_bit(Outcome::No),
        };
        board.install(BoardUpdates {
            books: vec![(1, Arc::new(MarketBooks::read(&engine, 1).unwrap()))],
            trades: vec![
                price(0, 125, 3_000),
                price(1, 170, 3_500),
                price(2, 185, 4_000),
            ],
        });
        let yes1 = market(1).yes_token_id;
        let condition1 = market(1).condition_id;
        // (bucket, Yes price, trade index) as a token sees it.
        let history = |token: &TokenId, start, end, bucket| {
            board
                .price_history(token, start, end, bucket)
                .map(|(condition, outcome, buckets)| {
                    assert_eq!(condition, condition1);
                    buckets
                        .iter()
                        .map(|b| {
                            (
                                b.start_s,
                                token_price(outcome, b.yes_price_ticks),
                                b.trade_index,
                            )
                        })
                        .collect::<Vec<_>>()
                })
        };
        assert_eq!(
            history(&yes1, 0, 1_000, 60),
            Some(vec![(120, 3_500, 1), (180, 4_000, 2)]),
            "the last price of each minute"
        );
        assert_eq!(
            history(&market(1).no_token_id, 130, 180, 60),
            Some(vec![(120, 6_500, 1)]),
            "the range cuts trades out, the No token sees the complement"
        );
        assert_eq!(
            history(&yes1, 0, 1_000, 1),
            Some(vec![(125, 3_000, 0), (170, 3_500, 1), (185, 4_000, 2)])
        );
        assert_eq!(history(&yes1, 200, 300, 60), Some(vec![]));
        assert_eq!(board.price_history(&FixedBytes([0x99; 32]), 0, 1, 60), None);

        // Once the store holds trades 0 and 1, the market's next trade lets them go; the
        // store's buckets and the board's merge, the later trade winning a shared bucket.
        board.prices_stored_below(2);
        board.install(BoardUpdates {
            books: Vec::new(),
            trades: vec![price(3, 190, 4_200)],
        });
        assert_eq!(
            history(&yes1, 0, 1_000, 60),
            Some(vec![(180, 4_200, 3)]),
            "trades 0 and 1 left the read side (trade 2 stays: not stored)"
        );
        let stored = vec![
            PriceBucket {
                start_s: 120,
                yes_price_ticks: 3_500,
                trade_index: 1,
            },
            PriceBucket {
                start_s: 180,
                yes_price_ticks: 4_000,
                trade_index: 2,
            },
        ];
        let (_, _, recent) = board.price_history(&yes1, 0, 1_000, 60).unwrap();
        let merged: Vec<(u64, u32)> = merge_price_buckets(stored, recent)
            .iter()
            .map(|b| (b.start_s, b.yes_price_ticks))
            .collect();
        assert_eq!(merged, [(120, 3_500), (180, 4_200)]);

        // A trade of one token alone is not the other's: each token's last trade in the
        // minute is its own (a Yes trade at 0.30, then a No trade at 0.30, Yes 0.70).
        let of = |outcome, trade_index, time_s, yes_price_ticks| TradePrice {
            outcomes: outcome_bit(outcome),
            ..price(trade_index, time_s, yes_price_ticks)
        };
        board.install(BoardUpdates {
            books: Vec::new(),
            trades: vec![
                of(Outcome::Yes, 4, 250, 3_000),
                of(Outcome::No, 5, 255, 7_000),
            ],
        });
        assert_eq!(history(&yes1, 240, 300, 60), Some(vec![(240, 3_000, 4)]));
        assert_eq!(
            history(&market(1).no_token_id, 240, 300, 60),
            Some(vec![(240, 3_000, 5)])
        );
        let (books, _) = board.books(&market(1).no_token_id).unwrap();
        assert_eq!(books.yes.market.condition_id, market(1).condition_id);
        assert!(board.books(&FixedBytes([0x99; 32])).is_none());
    }
}
