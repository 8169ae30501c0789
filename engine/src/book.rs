//! One market's book on the Yes-price axis: a direct-indexed ladder of price levels per
//! side, each a FIFO queue threaded through the order table, and bitsets for the best
//! prices. Storage is made once per market; placing or cancelling allocates nothing.

use serde::{Deserialize, Serialize};

use crate::orders::{Links, OrderTable, Slot, NIL};
use crate::price_bits::PriceBits;
use crate::types::{AxisSide, PriceTicks, Units, PRICE_SCALE};

/// One price level: a FIFO queue of orders and their total remaining size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Level {
    /// Oldest order.
    pub head: Slot,
    /// Newest order.
    pub tail: Slot,
    /// Sum of the remaining sizes.
    pub total_units: Units,
}

impl Default for Level {
    fn default() -> Self {
        Level {
            head: NIL,
            tail: NIL,
            total_units: 0,
        }
    }
}

/// One side of the ladder. A snapshot holds its occupied levels only (an empty ladder of
/// 10,001 levels would cost every market that ever had an order ~110 KB per side in every
/// snapshot); the ladder is made whole again when read back.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "OccupiedLevels", into = "OccupiedLevels")]
pub struct LadderSide {
    levels: Vec<Level>,
    occupied: PriceBits,
}

/// A ladder side as a snapshot holds it: each occupied level with its price.
#[derive(Serialize, Deserialize)]
struct OccupiedLevels(Vec<(PriceTicks, Level)>);

impl From<LadderSide> for OccupiedLevels {
    fn from(side: LadderSide) -> Self {
        let occupied = side
            .levels
            .iter()
            .enumerate()
            .filter(|(_, level)| level.head != NIL)
            .map(|(price, level)| (price as PriceTicks, *level))
            .collect();
        OccupiedLevels(occupied)
    }
}

impl From<OccupiedLevels> for LadderSide {
    fn from(OccupiedLevels(levels): OccupiedLevels) -> Self {
        let mut side = LadderSide::default();
        for (price, level) in levels {
            // A price off the ladder cannot come from a snapshot this engine wrote.
            if price > PRICE_SCALE {
                continue;
            }
            side.ensure_levels();
            side.levels[price as usize] = level;
            side.occupied.set(price);
        }
        side
    }
}

impl LadderSide {
    fn ensure_levels(&mut self) {
        if self.levels.is_empty() {
            self.levels = vec![Level::default(); PRICE_SCALE as usize + 1];
        }
    }

    /// Gives the levels' memory back when no order rests on this side.
    fn release_if_empty(&mut self) {
        if self.levels.iter().all(|level| level.head == NIL) {
            self.levels = Vec::new();
        }
    }

    /// The level at `price` (empty when the ladder was never used).
    pub fn level(&self, price: PriceTicks) -> Level {
        self.levels.get(price as usize).copied().unwrap_or_default()
    }

    /// Occupied levels.
    pub fn occupied(&self) -> &PriceBits {
        &self.occupied
    }
}

/// A market's book.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Book {
    bids: LadderSide,
    asks: LadderSide,
    best_bid: Option<PriceTicks>,
    best_ask: Option<PriceTicks>,
}

impl Book {
    /// The side `side` of the ladder.
    pub fn side(&self, side: AxisSide) -> &LadderSide {
        match side {
            AxisSide::Bid => &self.bids,
            AxisSide::Ask => &self.asks,
        }
    }

    fn side_mut(&mut self, side: AxisSide) -> &mut LadderSide {
        match side {
            AxisSide::Bid => &mut self.bids,
            AxisSide::Ask => &mut self.asks,
        }
    }

    /// Gives back the memory of the sides where no order rests (a resolved market's book:
    /// nothing rests there any more); a side is made again if an order ever rests on it.
    pub fn release_empty_sides(&mut self) {
        self.bids.release_if_empty();
        self.asks.release_if_empty();
    }

    /// Bytes the two ladders hold (0 for a book where nothing ever rested, or whose sides
    /// were released).
    pub fn ladder_bytes(&self) -> usize {
        (self.bids.levels.capacity() + self.asks.levels.capacity()) * std::mem::size_of::<Level>()
    }

    /// The best (highest) bid on the Yes axis.
    #[inline]
    pub fn best_bid(&self) -> Option<PriceTicks> {
        self.best_bid
    }

    /// The best (lowest) ask on the Yes axis.
    #[inline]
    pub fn best_ask(&self) -> Option<PriceTicks> {
        self.best_ask
    }

    /// The best price of `side`.
    #[inline]
    pub fn best(&self, side: AxisSide) -> Option<PriceTicks> {
        match side {
            AxisSide::Bid => self.best_bid,
            AxisSide::Ask => self.best_ask,
        }
    }

    /// The next occupied level of `side` behind `price`, moving away from the spread.
    pub fn next_level(&self, side: AxisSide, price: PriceTicks) -> Option<PriceTicks> {
        let bits = &self.side(side).occupied;
        match side {
            AxisSide::Bid => bits.highest_at_or_below(price.checked_sub(1)?),
            AxisSide::Ask => bits.lowest_at_or_above(price + 1),
        }
    }

    /// Appends the order in `slot` at the back of its level's queue.
    pub fn push_back(&mut self, orders: &mut OrderTable, slot: Slot) {
        let (side, price, remaining) = {
            let order = orders.get(slot);
            (
                order.axis_side(),
                order.axis_price(),
                order.remaining_units(),
            )
        };
        let ladder = self.side_mut(side);
        ladder.ensure_levels();
        let level = &mut ladder.levels[price as usize];
        let old_tail = level.tail;
        if old_tail == NIL {
            level.head = slot;
            ladder.occupied.set(price);
        } else {
            orders.links_mut(old_tail).next = slot;
        }
        level.tail = slot;
        level.total_units += remaining;
        let links = orders.links_mut(slot);
        links.prev = old_tail;
        links.next = NIL;
        self.improve_best(side, price);
    }

    fn improve_best(&mut self, side: AxisSide, price: PriceTicks) {
        match side {
            AxisSide::Bid => {
                if self.best_bid.is_none_or(|b| price > b) {
                    self.best_bid = Some(price);
                }
            }
            AxisSide::Ask => {
                if self.best_ask.is_none_or(|a| price < a) {
                    self.best_ask = Some(price);
                }
            }
        }
    }

    /// Takes the order in `slot` out of its level's queue (its remaining size leaves the level).
    pub fn unlink(&mut self, orders: &mut OrderTable, slot: Slot) {
        let (side, price, remaining) = {
            let order = orders.get(slot);
            (
                order.axis_side(),
                order.axis_price(),
                order.remaining_units(),
            )
        };
        let Links { prev, next, .. } = *orders.links(slot);
        if prev != NIL {
            orders.links_mut(prev).next = next;
        }
        if next != NIL {
            orders.links_mut(next).prev = prev;
        }
        let ladder = self.side_mut(side);
        let level = &mut ladder.levels[price as usize];
        if prev == NIL {
            level.head = next;
        }
        if next == NIL {
            level.tail = prev;
        }
        debug_assert!(level.total_units >= remaining);
        level.total_units -= remaining;
        let emptied = level.head == NIL;
        if emptied {
            debug_assert_eq!(level.total_units, 0);
            ladder.occupied.clear(price);
            self.refresh_best(side, price);
        }
        let links = orders.links_mut(slot);
        links.prev = NIL;
        links.next = NIL;
    }

    /// Records that a resting order at `price` on `side` lost `units` to a fill.
    #[inline]
    pub fn reduce(&mut self, side: AxisSide, price: PriceTicks, units: Units) {
        let level = &mut self.side_mut(side).levels[price as usize];
        debug_assert!(level.total_units >= units);
        level.total_units -= units;
    }

    fn refresh_best(&mut self, side: AxisSide, emptied: PriceTicks) {
        match side {
            AxisSide::Bid => {
                if self.best_bid == Some(emptied) {
                    self.best_bid = self.bids.occupied.highest_at_or_below(emptied);
                }
            }
            AxisSide::Ask => {
                if self.best_ask == Some(emptied) {
                    self.best_ask = self.asks.occupied.lowest_at_or_above(emptied);
                }
            }
        }
    }

    /// The level of `side` at `price`.
    #[inline]
    pub fn level(&self, side: AxisSide, price: PriceTicks) -> Level {
        self.side(side).level(price)
    }

    /// Levels of `side` from the best outward, as `(price, total)`.
    pub fn levels(&self, side: AxisSide) -> impl Iterator<Item = (PriceTicks, Units)> + '_ {
        let mut next = self.best(side);
        std::iter::from_fn(move || {
            let price = next?;
            next = self.next_level(side, price);
            Some((price, self.level(side, price).total_units))
        })
    }

    /// Whether an order on `side` at axis price `price` would meet the opposite side.
    #[inline]
    pub fn crosses(&self, side: AxisSide, price: PriceTicks) -> bool {
        match side {
            AxisSide::Bid => self.best_ask.is_some_and(|a| a <= price),
            AxisSide::Ask => self.best_bid.is_some_and(|b| b >= price),
        }
    }
}
