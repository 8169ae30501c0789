//! The read side of the books: a snapshot of every market's two books (Yes and No tokens),
//! replaced whenever a released batch changed that market, from which gateway threads answer
//! book and price reads without going through the sequencer.
//!
//! The sequencer builds the snapshots of the markets a batch touched (those named by its
//! level, last-trade and market events) right after applying it; the release of that batch
//! installs them *before* any of its completions is delivered, so a read sees every
//! acknowledged order. Each market's snapshot sits behind an `ArcSwap`: a reader loads it
//! without a lock and the writer replaces it without waiting for readers. The directory of
//! markets is behind a read-write lock whose write side is taken only when a market is
//! created.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use ladder_engine::{BookView, Engine, Event, Outcome, TokenId};
use parking_lot::RwLock;

/// Both books of one market as of one released batch.
#[derive(Clone, Debug)]
pub struct MarketBooks {
    /// Seen from the Yes token.
    pub yes: BookView,
    /// Seen from the No token.
    pub no: BookView,
}

impl MarketBooks {
    /// The book seen from `outcome`'s token.
    pub fn of(&self, outcome: Outcome) -> &BookView {
        match outcome {
            Outcome::Yes => &self.yes,
            Outcome::No => &self.no,
        }
    }

    /// Both books of the market at `index`, read from `engine`.
    pub fn read(engine: &Engine, index: u32) -> Option<MarketBooks> {
        let market = engine.market_at(index)?;
        Some(MarketBooks {
            yes: engine.book(&market.token_id(Outcome::Yes), usize::MAX)?,
            no: engine.book(&market.token_id(Outcome::No), usize::MAX)?,
        })
    }
}

/// Snapshots to install: `(market index, books)`.
pub type BoardUpdates = Vec<(u32, Arc<MarketBooks>)>;

#[derive(Default)]
struct Directory {
    tokens: HashMap<TokenId, (u32, Outcome)>,
    markets: Vec<Arc<ArcSwap<MarketBooks>>>,
}

/// Every market's books, for reads that must not wait on the sequencer.
#[derive(Default)]
pub struct BookBoard {
    directory: RwLock<Directory>,
}

impl std::fmt::Debug for BookBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BookBoard")
            .field("markets", &self.directory.read().markets.len())
            .finish()
    }
}

impl BookBoard {
    /// Installs every market of `engine` (at start-up, before the sequencer runs).
    pub fn fill(&self, engine: &Engine) {
        let updates: BoardUpdates = (0..engine.market_count() as u32)
            .filter_map(|index| Some((index, Arc::new(MarketBooks::read(engine, index)?))))
            .collect();
        self.install(updates);
    }

    /// The books of `token`'s market, and which of them is `token`'s.
    pub fn books(&self, token: &TokenId) -> Option<(Arc<MarketBooks>, Outcome)> {
        let directory = self.directory.read();
        let &(index, outcome) = directory.tokens.get(token)?;
        let books = directory.markets.get(index as usize)?.load_full();
        Some((books, outcome))
    }

    /// Installs snapshots (markets new to the board are added).
    pub fn install(&self, updates: BoardUpdates) {
        let mut fresh = Vec::new();
        {
            let directory = self.directory.read();
            for (index, books) in updates {
                match directory.markets.get(index as usize) {
                    Some(slot) => slot.store(books),
                    None => fresh.push((index, books)),
                }
            }
        }
        if fresh.is_empty() {
            return;
        }
        let mut directory = self.directory.write();
        for (index, books) in fresh {
            let at = index as usize;
            if let Some(slot) = directory.markets.get(at) {
                slot.store(books);
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
            directory.markets.push(Arc::new(ArcSwap::new(books)));
        }
    }
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
    use ladder_engine::{
        Address, Asset, Bytes32, Command, EngineLimits, MarketSpec, NewOrder, OrderType, Side,
        UNITS_PER_SHARE,
    };

    fn market(m: u8) -> MarketSpec {
        MarketSpec {
            condition_id: Bytes32([0xc0 + m; 32]),
            yes_token_id: Bytes32([0x10 + m; 32]),
            no_token_id: Bytes32([0x20 + m; 32]),
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
            order_hash: Bytes32([n; 32]),
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
        assert!(
            board.books(&yes).unwrap().0.yes.bids.is_empty(),
            "nothing shows before the release installs it"
        );
        board.install(vec![(0, Arc::new(MarketBooks::read(&engine, 0).unwrap()))]);
        let (books, outcome) = board.books(&yes).unwrap();
        assert_eq!(outcome, Outcome::Yes);
        assert_eq!(books.yes.bids, vec![(4_000, 5 * UNITS_PER_SHARE)]);
        let (books, outcome) = board.books(&no).unwrap();
        assert_eq!(outcome, Outcome::No);
        assert_eq!(
            books.of(outcome).asks,
            vec![(6_000, 5 * UNITS_PER_SHARE)],
            "the No token sees the Yes bid as an ask at the complement"
        );
        assert_eq!(
            books.yes.market.event_seq,
            engine.market_at(0).unwrap().event_seq
        );

        let touched = apply(&mut engine, Command::CreateMarket(market(1)));
        assert_eq!(touched, vec![1]);
        assert!(board.books(&market(1).yes_token_id).is_none());
        board.install(vec![(1, Arc::new(MarketBooks::read(&engine, 1).unwrap()))]);
        let (books, _) = board.books(&market(1).no_token_id).unwrap();
        assert_eq!(books.yes.market.condition_id, market(1).condition_id);
        assert!(board.books(&Bytes32([0x99; 32])).is_none());
    }
}
