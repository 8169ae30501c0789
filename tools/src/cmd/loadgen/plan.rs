//! What each connection sends: a scenario's mix of orders and cancels, decided before the
//! clock starts so that the measured loop only writes bytes.
//!
//! Prices are Yes-axis prices in ticks of 0.0001 on a market with a 0.01 tick. Bids sit at or
//! below 0.49 and asks at or above 0.51, so quotes never cross each other; only the taker
//! orders cross, and they are FAK so that nothing they leave behind rests on the wrong side.
//! Each quote is one of the four resting kinds: a bid is BUY Yes @p or SELL No @(1-p), an ask
//! is SELL Yes @p or BUY No @(1-p). Each taker is one of the four crossing kinds, so a taker
//! meets COMPLEMENTARY, MINT (BUY Yes vs BUY No) and MERGE (SELL Yes vs SELL No) matches.

use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One Yes-axis price step: the market's tick (0.01) in ticks of 0.0001.
pub const TICK: u32 = 100;
/// Price ticks of 1.0.
pub const ONE: u32 = 10_000;
/// Largest taker size in shares (burst and mm).
pub const TAKER_SHARES_MAX: u64 = 10;
/// Shares of one pre-built book order in `mm`.
pub const MM_BOOK_SHARES: u64 = 50;
/// Pre-built book orders per Yes-axis level in `mm`.
pub const MM_BOOK_ORDERS_PER_LEVEL: usize = 2;
/// Most pre-built book orders per side in `burst` (their size grows with the run instead).
pub const BURST_BOOK_ORDERS_PER_SIDE_MAX: u64 = 200;

/// The load scenarios of `ladder loadgen --scenario`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Non-crossing GTC orders only: the book grows.
    Resting,
    /// A market maker's mix: quotes, cancels of its oldest quotes, and a few crossing takers.
    Mm,
    /// Aggressive FAK takers against a book built before the clock starts.
    Burst,
}

impl std::str::FromStr for Scenario {
    type Err = String;

    /// Parses `resting`, `mm` or `burst`.
    fn from_str(text: &str) -> Result<Scenario, String> {
        match text {
            "resting" => Ok(Scenario::Resting),
            "mm" => Ok(Scenario::Mm),
            "burst" => Ok(Scenario::Burst),
            _ => Err("expected resting, mm or burst".into()),
        }
    }
}

impl Scenario {
    /// The flag value.
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::Resting => "resting",
            Scenario::Mm => "mm",
            Scenario::Burst => "burst",
        }
    }

    /// Whether each connection has a taker account besides its maker account.
    pub const fn has_takers(self) -> bool {
        !matches!(self, Scenario::Resting)
    }
}

/// Which account of a connection signs an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Rests quotes (and cancels them in `mm`).
    Maker,
    /// Sends crossing FAK orders.
    Taker,
}

/// An order to sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intent {
    /// Who signs it.
    pub role: Role,
    /// The Yes token (true) or the No token.
    pub yes: bool,
    /// BUY or SELL of that token.
    pub side: Side,
    /// The token's price in ticks of 0.0001.
    pub price_ticks: u32,
    /// Whole shares.
    pub shares: u64,
    /// GTC for quotes, FAK for takers.
    pub order_type: OrderType,
}

impl Intent {
    /// A resting order at Yes-axis price `yes_price_ticks` on the bid (or ask) side, as the
    /// `kind`-th of the two ways to express it (0: the Yes token, 1: the No token).
    pub fn quote(bid: bool, yes_price_ticks: u32, shares: u64, kind: u8) -> Intent {
        let on_yes = kind.is_multiple_of(2);
        let side = match (bid, on_yes) {
            (true, true) | (false, false) => Side::Buy,
            (true, false) | (false, true) => Side::Sell,
        };
        let price_ticks = if on_yes {
            yes_price_ticks
        } else {
            ONE - yes_price_ticks
        };
        Intent {
            role: Role::Maker,
            yes: on_yes,
            side,
            price_ticks,
            shares,
            order_type: OrderType::Gtc,
        }
    }

    /// A FAK that takes the asks (`buy_yes_axis`) or the bids up to Yes-axis price
    /// `limit_yes_ticks`, written on the Yes or No token by `kind`.
    pub fn taker(buy_yes_axis: bool, limit_yes_ticks: u32, shares: u64, kind: u8) -> Intent {
        Intent {
            role: Role::Taker,
            order_type: OrderType::Fak,
            ..Intent::quote(buy_yes_axis, limit_yes_ticks, shares, kind)
        }
    }
}

/// One request of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// POST /order with this order.
    Order(Intent),
    /// DELETE /order of the connection's oldest live quote (learnt on /ws/user); a spare quote
    /// is placed instead when none is known yet.
    Cancel,
}

/// What one connection sends, in order, and the spare quotes that stand in for cancels.
#[derive(Clone, Debug, Default)]
pub struct ConnPlan {
    /// The requests in sending order.
    pub slots: Vec<Slot>,
    /// Quotes placed when a cancel slot finds no cancellable order.
    pub spares: Vec<Intent>,
}

/// Splits `total` requests over `connections` (request `i` goes to connection `i % N`).
pub fn plan(scenario: Scenario, connections: usize, total: u64, seed: u64) -> Vec<ConnPlan> {
    let mut rng = StdRng::seed_from_u64(seed);
    let connections = connections.max(1);
    let mut plans = vec![ConnPlan::default(); connections];
    for i in 0..total {
        let plan = &mut plans[(i % connections as u64) as usize];
        let slot = match scenario {
            Scenario::Resting => Slot::Order(resting_quote(&mut rng)),
            Scenario::Mm => mm_slot(&mut rng),
            Scenario::Burst => Slot::Order(burst_taker(&mut rng)),
        };
        if slot == Slot::Cancel {
            plan.spares.push(mm_quote(&mut rng));
        }
        plan.slots.push(slot);
    }
    plans
}

fn resting_quote(rng: &mut StdRng) -> Intent {
    let bid = rng.gen_bool(0.5);
    let level = rng.gen_range(0..20);
    let price = if bid {
        4_900 - level * TICK
    } else {
        5_100 + level * TICK
    };
    Intent::quote(bid, price, rng.gen_range(1..=10), rng.gen_range(0..2))
}

fn mm_quote(rng: &mut StdRng) -> Intent {
    let bid = rng.gen_bool(0.5);
    let level = rng.gen_range(0..5);
    let price = if bid {
        4_900 - level * TICK
    } else {
        5_100 + level * TICK
    };
    Intent::quote(bid, price, rng.gen_range(1..=10), rng.gen_range(0..2))
}

/// 55 % quotes, 35 % cancels, 10 % crossing takers reaching 0.55 / 0.45.
fn mm_slot(rng: &mut StdRng) -> Slot {
    match rng.gen_range(0..100) {
        0..55 => Slot::Order(mm_quote(rng)),
        55..90 => Slot::Cancel,
        _ => {
            let buy = rng.gen_bool(0.5);
            let limit = if buy { 5_500 } else { 4_500 };
            Slot::Order(Intent::taker(
                buy,
                limit,
                rng.gen_range(1..=5),
                rng.gen_range(0..2),
            ))
        }
    }
}

/// Takers that may sweep all ten levels of the pre-built book (0.51..0.60 / 0.40..0.49).
fn burst_taker(rng: &mut StdRng) -> Intent {
    let buy = rng.gen_bool(0.5);
    let limit = if buy { 6_000 } else { 4_000 };
    Intent::taker(
        buy,
        limit,
        rng.gen_range(1..=TAKER_SHARES_MAX),
        rng.gen_range(0..2),
    )
}

/// The book placed (untimed) before the clock starts: none for `resting`; a few levels of
/// depth for `mm`; for `burst`, enough depth on each side for every taker of the run to fill
/// even if all of them went to that side's half of the flow with their largest size.
pub fn book(scenario: Scenario, total: u64) -> Vec<Intent> {
    let mut out = Vec::new();
    match scenario {
        Scenario::Resting => {}
        Scenario::Mm => {
            for level in 0..5 {
                for kind in 0..MM_BOOK_ORDERS_PER_LEVEL {
                    let k = kind as u8;
                    out.push(Intent::quote(true, 4_900 - level * TICK, MM_BOOK_SHARES, k));
                    out.push(Intent::quote(
                        false,
                        5_100 + level * TICK,
                        MM_BOOK_SHARES,
                        k,
                    ));
                }
            }
        }
        Scenario::Burst => {
            // Each side meets about half of the takers; provide 1.5 times that at full size.
            let per_side_shares = (total * TAKER_SHARES_MAX * 3 / 4).max(1_000);
            let orders = BURST_BOOK_ORDERS_PER_SIDE_MAX
                .min(per_side_shares / 100)
                .max(10);
            let shares = per_side_shares.div_ceil(orders);
            for i in 0..orders {
                let level = (i % 10) as u32;
                let kind = (i / 10 % 2) as u8;
                out.push(Intent::quote(true, 4_900 - level * TICK, shares, kind));
                out.push(Intent::quote(false, 5_100 + level * TICK, shares, kind));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_of_either_token_sit_on_the_side_asked_for() {
        let bid_no = Intent::quote(true, 4_800, 3, 1);
        assert_eq!(
            (bid_no.yes, bid_no.side, bid_no.price_ticks),
            (false, Side::Sell, 5_200)
        );
        let ask_no = Intent::quote(false, 5_200, 3, 1);
        assert_eq!(
            (ask_no.yes, ask_no.side, ask_no.price_ticks),
            (false, Side::Buy, 4_800)
        );
        let ask_yes = Intent::quote(false, 5_200, 3, 0);
        assert_eq!((ask_yes.yes, ask_yes.side), (true, Side::Sell));
    }

    #[test]
    fn requests_are_dealt_round_robin_and_every_cancel_has_a_spare() {
        let plans = plan(Scenario::Mm, 3, 1_000, 7);
        let lens: Vec<usize> = plans.iter().map(|p| p.slots.len()).collect();
        assert_eq!(lens, vec![334, 333, 333]);
        for p in &plans {
            let cancels = p.slots.iter().filter(|s| **s == Slot::Cancel).count();
            assert_eq!(cancels, p.spares.len());
            assert!(cancels > 0);
        }
    }

    #[test]
    fn no_quote_crosses_another() {
        for p in plan(Scenario::Resting, 2, 2_000, 1) {
            for slot in p.slots {
                let Slot::Order(o) = slot else {
                    panic!("resting has no cancels")
                };
                let yes_axis = if o.yes {
                    o.price_ticks
                } else {
                    ONE - o.price_ticks
                };
                let bid = (o.side == Side::Buy) == o.yes;
                assert!(if bid {
                    yes_axis <= 4_900
                } else {
                    yes_axis >= 5_100
                });
                assert_eq!(o.order_type, OrderType::Gtc);
            }
        }
    }

    #[test]
    fn the_burst_book_outlasts_the_run() {
        let total = 20_000;
        let book_shares: u64 = book(Scenario::Burst, total)
            .iter()
            .filter(|o| (o.side == Side::Buy) == o.yes)
            .map(|o| o.shares)
            .sum();
        assert!(book_shares >= total * TAKER_SHARES_MAX / 2, "{book_shares}");
    }
}
