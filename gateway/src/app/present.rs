//! Engine replies and views in the wire shapes of API.md §2.

use ladder_engine::{
    CancelReport, ClaimReason, ClaimableView, MarketState, MarketView, OrderView, Outcome,
    Placement, Side, TradeView, NANOS_PER_SECOND, UNITS_PER_SHARE,
};
use ladder_protocol::wire::responses::{
    CancelResult, ClaimableEntry, MakerOrder, Market, MarketToken, OpenOrder, OrderPlacementResult,
    RefundReason, Trade, TraderSide,
};
use ladder_protocol::{owner_uuid, Address, TickSize};

use crate::convert::wire_token;

/// An open order (API.md §2.1).
pub fn open_order(view: &OrderView) -> OpenOrder {
    let maker = view.maker;
    OpenOrder {
        id: view.id,
        market: view.condition_id,
        asset_id: Some(wire_token(&view.token_id)),
        outcome: view.outcome,
        side: view.side,
        price_ticks: view.price_ticks,
        original_size_shares: view.size_units / UNITS_PER_SHARE,
        size_matched_shares: view.filled_units / UNITS_PER_SHARE,
        status: view.status,
        created_at_s: (view.created_ns / NANOS_PER_SECOND) as i64,
        order_hash: view.hash,
        maker_address: maker,
        owner: owner_uuid(&maker),
        expiration_s: view.expiration_s,
        order_type: view.order_type,
    }
}

/// A trade as `caller` sees it (API.md §2.6, API.md §11).
pub fn trade(view: &TradeView, caller: &Address) -> Trade {
    let taker_address = view.taker.address;
    let maker_address = view.maker.address;
    let trader_side = if *caller == taker_address {
        TraderSide::Taker
    } else {
        TraderSide::Maker
    };
    Trade {
        id: view.id,
        market: view.condition_id,
        outcome: view.taker.outcome,
        side: view.taker.side,
        price_ticks: view.taker.price_ticks,
        size_shares: view.size_units / UNITS_PER_SHARE,
        status: view.status,
        match_time_s: view.match_time_ns / NANOS_PER_SECOND,
        last_update_s: view.last_update_ns / NANOS_PER_SECOND,
        bucket_index: 0,
        transaction_hash: view.transaction_hash,
        taker_order_id: view.taker.order_hash,
        asset_id: wire_token(&view.token_id(view.taker.outcome)),
        fee_rate_bps: 0,
        owner: owner_uuid(caller),
        maker_address: taker_address,
        trader_side,
        maker_orders: vec![MakerOrder {
            order_id: view.maker.order_id,
            maker_address,
            owner: owner_uuid(&maker_address),
            matched_amount_shares: view.size_units / UNITS_PER_SHARE,
            price_ticks: view.maker.price_ticks,
            fee_rate_bps: 0,
            asset_id: wire_token(&view.token_id(view.maker.outcome)),
            outcome: view.maker.outcome,
        }],
    }
}

/// A token's displayed price: its last trade, else the midpoint, else 0.
pub fn token_price(
    market: &MarketView,
    outcome: Outcome,
    best_bid: Option<u32>,
    best_ask: Option<u32>,
) -> u32 {
    if let Some(last) = market.last_trade[outcome.index()] {
        return last.price_ticks;
    }
    match (best_bid, best_ask) {
        (Some(b), Some(a)) => midpoint_ticks(b, a),
        _ => 0,
    }
}

/// The midpoint of two prices, rounded to the nearest tick of 0.0001 (halves up).
pub fn midpoint_ticks(bid: u32, ask: u32) -> u32 {
    (bid + ask).div_ceil(2)
}

/// A market (API.md §2.7); `prices` are the Yes and No token prices.
pub fn market(view: &MarketView, prices: [u32; 2]) -> Market {
    Market {
        condition_id: view.condition_id,
        tokens: [Outcome::Yes, Outcome::No]
            .iter()
            .map(|&o| MarketToken {
                token_id: wire_token(&view.token_id(o)),
                outcome: o,
                price_ticks: prices[o.index()],
            })
            .collect(),
        // The engine only admits the four tick sizes; 0.01 would be a safe stand-in.
        minimum_tick_size: TickSize::from_ticks(view.tick_size_ticks)
            .unwrap_or(TickSize::Hundredth),
        neg_risk: view.neg_risk,
        active: view.state == MarketState::Active,
    }
}

/// An accepted order's placement result (API.md §2.4): BUY making is collateral units and
/// taking is shares; SELL the other way round.
pub fn placement(p: &Placement, side: Side) -> OrderPlacementResult {
    let (making_amount, taking_amount) = match side {
        Side::Buy => (p.making_units, p.taking_units / UNITS_PER_SHARE),
        Side::Sell => (p.making_units / UNITS_PER_SHARE, p.taking_units),
    };
    OrderPlacementResult {
        success: true,
        error_msg: None,
        making_amount,
        taking_amount,
        order_id: Some(p.order_hash),
        status: p.status,
        transactions_hashes: p.transaction_hash.iter().copied().collect(),
        trade_ids: p.trade_ids.to_vec(),
    }
}

/// A cancel report (API.md §2.5).
pub fn cancel_result(report: &CancelReport) -> CancelResult {
    let mut result = CancelResult::default();
    for id in &report.canceled {
        result.canceled.push(id.to_string());
    }
    for (id, reason) in &report.not_canceled {
        result
            .not_canceled
            .insert(id.to_string(), reason.as_str().to_string());
    }
    result
}

/// A claimable entry (API.md §2.9).
pub fn claimable(view: &ClaimableView) -> ClaimableEntry {
    ClaimableEntry {
        market_id: view.condition_id,
        outcome: view.outcome,
        token_id: wire_token(&view.token_id),
        balance_units: view.balance_units,
        refund_reason: match view.reason {
            ClaimReason::ResolvedWinner => RefundReason::ResolvedWinner,
            ClaimReason::VoidedRefund => RefundReason::VoidedRefund,
        },
    }
}
