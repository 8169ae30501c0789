//! The open-order table: preallocated slots, a free list, and O(1) lookup by order id.
//!
//! Each slot carries intrusive links for two lists: its price level's FIFO queue and its
//! account's open-order list, so that cancelling by id touches no other order.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::types::{
    AxisSide, Hash32, OrderId, OrderType, Outcome, PriceTicks, Side, TimestampNs, Units,
};

/// A slot index in the order table.
pub type Slot = u32;
/// The end of an intrusive list.
pub const NIL: Slot = Slot::MAX;

/// Where an open order is: resting on its book, or waiting out the market's taker delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrderPlace {
    /// Matching as a taker, on no book yet.
    Taking,
    /// On the book (`live`).
    Resting,
    /// In the taker-delay queue (`delayed`).
    Delayed,
}

/// An open order.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Order {
    /// The numeric id.
    pub id: OrderId,
    /// EIP-712 digest.
    pub hash: Hash32,
    /// Account index of the maker.
    pub account: u32,
    /// Market index.
    pub market: u32,
    /// The token's outcome.
    pub outcome: Outcome,
    /// BUY or SELL.
    pub side: Side,
    /// Limit price on the order's own token.
    pub price_ticks: PriceTicks,
    /// Signed size in base units.
    pub size_units: Units,
    /// Filled so far.
    pub filled_units: Units,
    /// What this order holds reserved now: collateral for a BUY, tokens for a SELL.
    pub reserved_units: Units,
    /// GTC, GTD, FOK or FAK.
    pub order_type: OrderType,
    /// Placement time.
    pub created_ns: TimestampNs,
    /// Unix seconds; 0 = none.
    pub expiration_s: u64,
    /// On the book, delayed, or taking.
    pub place: OrderPlace,
    /// When a delayed order is due (0 when not delayed).
    pub due_ns: TimestampNs,
    /// Previous order at the same level (or in the delay queue).
    pub prev: Slot,
    /// Next order at the same level.
    pub next: Slot,
    /// Previous open order of the same account.
    pub account_prev: Slot,
    /// Next open order of the same account.
    pub account_next: Slot,
}

impl Order {
    /// Size not yet filled.
    pub fn remaining_units(&self) -> Units {
        self.size_units - self.filled_units
    }

    /// Side of the Yes-axis book this order rests on.
    pub fn axis_side(&self) -> AxisSide {
        AxisSide::of(self.outcome, self.side)
    }

    /// Limit price on the Yes axis.
    pub fn axis_price(&self) -> PriceTicks {
        crate::types::axis_price(self.outcome, self.price_ticks)
    }
}

/// The table of open orders.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OrderTable {
    slots: Vec<Option<Order>>,
    free: Vec<Slot>,
    by_id: FxHashMap<OrderId, Slot>,
    capacity_max: usize,
}

impl OrderTable {
    /// A table for at most `capacity_max` open orders, with `preallocate` slots made now.
    pub fn new(capacity_max: usize, preallocate: usize) -> OrderTable {
        let preallocate = preallocate.min(capacity_max);
        let mut by_id = FxHashMap::default();
        by_id.reserve(preallocate);
        OrderTable {
            slots: Vec::with_capacity(preallocate),
            free: Vec::with_capacity(preallocate),
            by_id,
            capacity_max,
        }
    }

    /// Number of open orders.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no order is open.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether another order fits.
    pub fn has_room(&self) -> bool {
        self.by_id.len() < self.capacity_max
    }

    /// Stores an order; the caller checked `has_room`.
    pub fn insert(&mut self, order: Order) -> Slot {
        let id = order.id;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(order);
                slot
            }
            None => {
                self.slots.push(Some(order));
                (self.slots.len() - 1) as Slot
            }
        };
        self.by_id.insert(id, slot);
        slot
    }

    /// Removes and returns the order in `slot`.
    pub fn remove(&mut self, slot: Slot) -> Order {
        let order = self.slots[slot as usize]
            .take()
            .expect("removing an empty order slot");
        self.by_id.remove(&order.id);
        self.free.push(slot);
        order
    }

    /// The slot of an open order.
    pub fn slot_of(&self, id: OrderId) -> Option<Slot> {
        self.by_id.get(&id).copied()
    }

    /// The order in `slot`.
    #[inline]
    pub fn get(&self, slot: Slot) -> &Order {
        self.slots[slot as usize]
            .as_ref()
            .expect("reading an empty order slot")
    }

    /// The order in `slot`, mutably.
    #[inline]
    pub fn get_mut(&mut self, slot: Slot) -> &mut Order {
        self.slots[slot as usize]
            .as_mut()
            .expect("writing an empty order slot")
    }

    /// Every open order, in slot order (not a stable order: sort by id where it matters).
    pub fn iter(&self) -> impl Iterator<Item = &Order> {
        self.slots.iter().flatten()
    }
}
