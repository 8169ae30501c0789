//! Markets: their definitions, states, books and the lookup from condition and token ids.

use serde::{Deserialize, Serialize};

use crate::book::Book;
use crate::command::{MarketSpec, Resolution};
use crate::key_hash::KeyMap;
use crate::reject::Reject;
use crate::types::{ConditionId, Outcome, PriceTicks, Side, TokenId, Units, PRICE_SCALE};

/// Tick sizes a market may use, in price ticks of 0.0001.
pub const TICK_SIZES_ALLOWED: [PriceTicks; 4] = [1_000, 100, 10, 1];

/// A market's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MarketState {
    /// Accepting orders.
    Active,
    /// Refusing new orders; cancels still work.
    Paused,
    /// Resolved to a winner (or void); no more trading.
    Resolved(Resolution),
}

impl MarketState {
    /// A word for messages.
    pub fn describe(self) -> &'static str {
        match self {
            MarketState::Active => "active",
            MarketState::Paused => "paused",
            MarketState::Resolved(Resolution::Void) => "voided",
            MarketState::Resolved(_) => "resolved",
        }
    }
}

/// The last trade on one token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastTrade {
    /// Price on that token.
    pub price_ticks: PriceTicks,
    /// The taker's side on that token.
    pub side: Side,
}

/// One market.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Market {
    /// Its definition.
    pub spec: MarketSpec,
    /// Its state.
    pub state: MarketState,
    /// Its book.
    pub book: Book,
    /// Full sets minted by MINT matches and not merged back: each holds one collateral unit.
    /// Signed: a failed settlement may take back a MINT whose sets were merged since.
    pub full_sets_units: i64,
    /// Tokens credited by deposits (outside the engine's minting), per outcome.
    pub deposited_units: [Units; 2],
    /// Tokens withdrawn, per outcome.
    pub withdrawn_units: [Units; 2],
    /// Tokens redeemed after resolution, per outcome.
    pub redeemed_units: [Units; 2],
    /// Last trade per outcome.
    pub last_trade: [Option<LastTrade>; 2],
    /// Event sequence of the market's public feed: rises by one per published event.
    pub event_seq: u64,
    /// The command sequence whose level changes opened the current `price_change`.
    pub level_change_seq: u64,
    /// The market event sequence of that `price_change`.
    pub level_change_market_seq: u64,
}

impl Market {
    /// The token id of `outcome`.
    pub fn token_id(&self, outcome: Outcome) -> TokenId {
        match outcome {
            Outcome::Yes => self.spec.yes_token_id,
            Outcome::No => self.spec.no_token_id,
        }
    }

    /// Whether orders are accepted.
    pub fn check_active(&self) -> Result<(), Reject> {
        match self.state {
            MarketState::Active => Ok(()),
            other => Err(Reject::MarketNotActive {
                state: other.describe(),
            }),
        }
    }

    /// Checks an own-token price against the tick grid and range.
    pub fn check_price(&self, price_ticks: PriceTicks) -> Result<(), Reject> {
        check_price_on_tick(price_ticks, self.spec.tick_size_ticks)
    }
}

/// Whether `price_ticks` suits a market of tick `tick_ticks`: within `[tick, 1 - tick]`
/// first, then a multiple of the tick (API.md §8, rows 6 and 7).
pub fn check_price_on_tick(price_ticks: PriceTicks, tick_ticks: PriceTicks) -> Result<(), Reject> {
    if price_ticks < tick_ticks || price_ticks > PRICE_SCALE - tick_ticks {
        return Err(Reject::PriceOutOfRange {
            price_ticks,
            tick_ticks,
        });
    }
    if !price_ticks.is_multiple_of(tick_ticks) {
        return Err(Reject::PriceOffTick {
            price_ticks,
            tick_ticks,
        });
    }
    Ok(())
}

/// Every market, in creation order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Markets {
    markets: Vec<Market>,
    by_condition: KeyMap<ConditionId, u32>,
    by_token: KeyMap<TokenId, (u32, Outcome)>,
}

impl Markets {
    /// Adds a market.
    pub fn create(&mut self, spec: MarketSpec) -> Result<u32, Reject> {
        if !TICK_SIZES_ALLOWED.contains(&spec.tick_size_ticks) {
            return Err(Reject::InvalidTickSize);
        }
        if self.by_condition.contains_key(&spec.condition_id) {
            return Err(Reject::MarketExists);
        }
        if spec.yes_token_id == spec.no_token_id {
            return Err(Reject::TokenIdsEqual);
        }
        for (outcome, token) in [
            (Outcome::Yes, &spec.yes_token_id),
            (Outcome::No, &spec.no_token_id),
        ] {
            if self.by_token.contains_key(token) {
                return Err(Reject::TokenInUse { outcome });
            }
        }
        let index = self.markets.len() as u32;
        self.by_condition.insert(spec.condition_id, index);
        self.by_token
            .insert(spec.yes_token_id, (index, Outcome::Yes));
        self.by_token.insert(spec.no_token_id, (index, Outcome::No));
        self.markets.push(Market {
            spec,
            state: MarketState::Active,
            book: Book::default(),
            full_sets_units: 0,
            deposited_units: [0; 2],
            withdrawn_units: [0; 2],
            redeemed_units: [0; 2],
            last_trade: [None; 2],
            event_seq: 0,
            level_change_seq: 0,
            level_change_market_seq: 0,
        });
        Ok(index)
    }

    /// The market of a condition id.
    #[inline]
    pub fn find(&self, condition_id: &ConditionId) -> Option<u32> {
        self.by_condition.get(condition_id).copied()
    }

    /// The market and outcome of a token id.
    #[inline]
    pub fn find_token(&self, token_id: &TokenId) -> Option<(u32, Outcome)> {
        self.by_token.get(token_id).copied()
    }

    /// The market at `index`.
    #[inline]
    pub fn get(&self, index: u32) -> &Market {
        &self.markets[index as usize]
    }

    /// The market at `index`, mutably.
    #[inline]
    pub fn get_mut(&mut self, index: u32) -> &mut Market {
        &mut self.markets[index as usize]
    }

    /// Every market in creation order.
    pub fn all(&self) -> &[Market] {
        &self.markets
    }

    /// Number of markets.
    pub fn len(&self) -> usize {
        self.markets.len()
    }
}
