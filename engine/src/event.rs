//! Events: what a command changed, for responses, the user and market channels and
//! settlement. Each carries copies of what a consumer needs, so that consumers in other
//! threads never read engine state.

use serde::{Deserialize, Serialize};

use crate::command::TradeStatus;
use crate::types::{
    Address, AxisSide, ConditionId, Hash32, MatchType, OrderId, OrderType, Outcome, PriceTicks,
    Side, TimestampNs, TokenId, Units,
};

pub use ladder_types::OrderStatus;

/// A self-contained copy of an order's public fields (API.md §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderView {
    /// Numeric id.
    pub id: OrderId,
    /// EIP-712 digest.
    pub hash: Hash32,
    /// The maker (funding) address.
    pub maker: Address,
    /// The market's condition id.
    pub condition_id: ConditionId,
    /// The token.
    pub token_id: TokenId,
    /// Yes or No.
    pub outcome: Outcome,
    /// BUY or SELL.
    pub side: Side,
    /// Limit price on its token.
    pub price_ticks: PriceTicks,
    /// Signed size.
    pub size_units: Units,
    /// Filled so far.
    pub filled_units: Units,
    /// Status now.
    pub status: OrderStatus,
    /// Placement time.
    pub created_ns: TimestampNs,
    /// Unix seconds; 0 = none.
    pub expiration_s: u64,
    /// GTC, GTD, FOK or FAK.
    pub order_type: OrderType,
}

/// What happened to an order (API.md §16's `type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrderEventKind {
    /// Accepted (live or delayed).
    Placement,
    /// Filled in part or in whole, or moved from delayed to live.
    Update,
    /// Left the book without filling entirely.
    Cancellation,
}

impl OrderEventKind {
    /// `PLACEMENT`, `UPDATE` or `CANCELLATION`.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderEventKind::Placement => "PLACEMENT",
            OrderEventKind::Update => "UPDATE",
            OrderEventKind::Cancellation => "CANCELLATION",
        }
    }
}

/// One side of a fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FillParty {
    /// The order's id.
    pub order_id: OrderId,
    /// The order's hash.
    pub order_hash: Hash32,
    /// The order's maker address.
    pub address: Address,
    /// The token it traded.
    pub outcome: Outcome,
    /// Its side.
    pub side: Side,
    /// Its own-token price at this fill.
    pub price_ticks: PriceTicks,
}

/// A trade: one fill between a taker order and one maker order (API.md §2.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TradeView {
    /// Position in the trade log.
    pub index: u64,
    /// `0x` 32-byte trade id.
    pub id: Hash32,
    /// The settlement batch's transaction hash.
    pub transaction_hash: Hash32,
    /// The market's condition id.
    pub condition_id: ConditionId,
    /// Yes token of the market (to name both tokens).
    pub yes_token_id: TokenId,
    /// No token of the market.
    pub no_token_id: TokenId,
    /// How the two orders matched.
    pub match_type: MatchType,
    /// The incoming order.
    pub taker: FillParty,
    /// The resting order.
    pub maker: FillParty,
    /// Shares filled, in base units.
    pub size_units: Units,
    /// The taker's fee, in collateral units.
    pub taker_fee_units: Units,
    /// Match time.
    pub match_time_ns: TimestampNs,
    /// Last status change.
    pub last_update_ns: TimestampNs,
    /// Settlement status.
    pub status: TradeStatus,
}

impl TradeView {
    /// The token id of `outcome` in this trade's market.
    pub fn token_id(&self, outcome: Outcome) -> TokenId {
        match outcome {
            Outcome::Yes => self.yes_token_id,
            Outcome::No => self.no_token_id,
        }
    }
}

/// Something a command changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// An order was placed, filled or cancelled.
    Order {
        /// What happened.
        kind: OrderEventKind,
        /// The order after it happened.
        order: OrderView,
    },
    /// A trade was made or changed settlement status.
    Trade(TradeView),
    /// A price level of a market's book changed its total.
    Level {
        /// Market index.
        market: u32,
        /// Bid or ask on the Yes axis.
        side: AxisSide,
        /// Yes-axis price.
        price_ticks: PriceTicks,
        /// The level's new total (0 = gone).
        total_units: Units,
        /// Best bid on the Yes axis after the change.
        best_bid: Option<PriceTicks>,
        /// Best ask on the Yes axis after the change.
        best_ask: Option<PriceTicks>,
        /// The market's event sequence of the `price_change` this change belongs to (every
        /// level change of one command in one market shares it).
        market_seq: u64,
    },
    /// A taker order's matching ended: the last-trade price of its token.
    LastTrade {
        /// Market index.
        market: u32,
        /// The taker's token.
        outcome: Outcome,
        /// The taker's side.
        side: Side,
        /// Price of the last fill, on the taker's token.
        price_ticks: PriceTicks,
        /// Total shares the taker order filled.
        size_units: Units,
        /// The market's event sequence of this event.
        market_seq: u64,
    },
    /// A market was created, paused, resumed, resolved or had its tick size changed.
    Market {
        /// Market index.
        market: u32,
        /// What changed.
        change: MarketChange,
        /// The market's event sequence of this event (creation, pause and resume are not
        /// published on the market channel and repeat the current value).
        market_seq: u64,
    },
}

/// What changed about a market.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MarketChange {
    /// Created, with its ids.
    Created {
        /// Condition id.
        condition_id: ConditionId,
        /// Yes token.
        yes_token_id: TokenId,
        /// No token.
        no_token_id: TokenId,
    },
    /// Paused.
    Paused,
    /// Resumed.
    Resumed,
    /// Resolved or voided.
    Resolved {
        /// Yes, No or void.
        resolution: crate::command::Resolution,
    },
    /// Tick size changed from the given value.
    TickSize {
        /// The previous tick.
        old_tick_ticks: PriceTicks,
        /// The new tick.
        new_tick_ticks: PriceTicks,
    },
}
