//! The order table: preallocated slots, a free list, O(1) lookup by order id, and the
//! fate of every order accepted and not yet forgotten (a closed order's fate leaves once the
//! history store holds it).
//!
//! Each slot has intrusive links for two lists: its price level's FIFO queue and its
//! account's open-order list, so that cancelling by id touches no other order's record.
//! The links live in their own dense array beside the orders: unlinking an order rewrites
//! its neighbours' links, and 16-byte links stay in cache where whole orders would not.
//!
//! Order ids are dense (accepted orders are numbered 1, 2, 3, ...), so the id → slot lookup
//! is a chunked array indexed by `id - 1` that also records each order's fate: no hashing (a
//! cancel's hottest miss was a hash map's control bytes).

use serde::{Deserialize, Serialize};

use crate::engine::ClosedOrder;
use crate::event::OrderStatus;
use crate::forgetful_log::ForgetfulLog;
use crate::room::vec_with_room;
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
}

/// An open order's places in two intrusive lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Links {
    /// Previous order at the same level.
    pub prev: Slot,
    /// Next order at the same level.
    pub next: Slot,
    /// Previous open order of the same account.
    pub account_prev: Slot,
    /// Next open order of the same account.
    pub account_next: Slot,
}

impl Links {
    /// In no list.
    pub const NONE: Links = Links {
        prev: NIL,
        next: NIL,
        account_prev: NIL,
        account_next: NIL,
    };
}

/// What the table knows of an order id, in 8 bytes (millions are kept): its slot while
/// open, how it ended after, and its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Fate {
    /// The slot while the order is open (resting, delayed or taking), else `ENDED_MATCHED`
    /// or `ENDED_CANCELED`.
    place: u32,
    /// The owner's account index.
    account: u32,
}

/// `Fate::place` of an order that filled entirely.
const ENDED_MATCHED: u32 = u32::MAX - 1;
/// `Fate::place` of an order that was cancelled.
const ENDED_CANCELED: u32 = u32::MAX;

impl Fate {
    /// The slot of an open order.
    #[inline]
    fn slot(self) -> Option<Slot> {
        (self.place < ENDED_MATCHED).then_some(self.place)
    }

    /// The owner and status (`Live` while open).
    fn closed_order(self) -> ClosedOrder {
        let status = match self.place {
            ENDED_MATCHED => OrderStatus::Matched,
            ENDED_CANCELED => OrderStatus::Canceled,
            _ => OrderStatus::Live,
        };
        ClosedOrder {
            account: self.account,
            status,
        }
    }
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

/// The table of open orders, and the fate of every order accepted.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OrderTable {
    slots: Vec<Option<Order>>,
    /// List links of each slot, beside `slots`.
    links: Vec<Links>,
    free: Vec<Slot>,
    /// Every order id accepted and not forgotten, at `id - 1`.
    fates: ForgetfulLog<Fate>,
    /// Number of open orders.
    open: usize,
    capacity_max: usize,
}

impl OrderTable {
    /// A table for at most `capacity_max` open orders, with `preallocate` slots made now (pages
    /// touched when `prefault`) and room for the fates of `orders_preallocated` orders.
    pub fn new(
        capacity_max: usize,
        preallocate: usize,
        orders_preallocated: usize,
        prefault: bool,
    ) -> OrderTable {
        let preallocate = preallocate.min(capacity_max);
        OrderTable {
            slots: vec_with_room(preallocate, None, prefault),
            links: vec_with_room(preallocate, Links::NONE, prefault),
            free: vec_with_room(preallocate, NIL, prefault),
            fates: ForgetfulLog::with_room(orders_preallocated),
            open: 0,
            capacity_max,
        }
    }

    /// Number of open orders.
    pub fn len(&self) -> usize {
        self.open
    }

    /// Whether no order is open.
    pub fn is_empty(&self) -> bool {
        self.open == 0
    }

    /// Whether another order fits.
    pub fn has_room(&self) -> bool {
        self.open < self.capacity_max
    }

    /// The id the next accepted order gets.
    pub fn next_id(&self) -> OrderId {
        self.fates.len() + 1
    }

    /// Stores a new order, whose id must be `next_id()`, in no list; the caller checked
    /// `has_room`.
    pub fn insert(&mut self, order: Order) -> Slot {
        assert_eq!(order.id, self.next_id(), "order ids are given out in order");
        let account = order.account;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(order);
                self.links[slot as usize] = Links::NONE;
                slot
            }
            None => {
                self.slots.push(Some(order));
                self.links.push(Links::NONE);
                (self.slots.len() - 1) as Slot
            }
        };
        assert!(slot < ENDED_MATCHED, "order slots exhausted");
        self.fates.push(Fate {
            place: slot,
            account,
        });
        self.open += 1;
        slot
    }

    /// Removes and returns the order in `slot`, which ends as `status`.
    pub fn remove(&mut self, slot: Slot, status: OrderStatus) -> Order {
        let order = self.slots[slot as usize]
            .take()
            .expect("removing an empty order slot");
        let fate = self
            .fates
            .get_mut(order.id - 1)
            .expect("an open order's fate is held");
        fate.place = match status {
            OrderStatus::Matched => ENDED_MATCHED,
            OrderStatus::Canceled => ENDED_CANCELED,
            other => panic!("an order cannot end {other:?}"),
        };
        self.open -= 1;
        self.free.push(slot);
        order
    }

    /// Starts loading what `slot_of(id)` reads.
    #[inline]
    pub fn prefetch_fate(&self, id: OrderId) {
        if let Some(fate) = id.checked_sub(1).and_then(|i| self.fates.get(i)) {
            crate::prefetch::prefetch(fate);
        }
    }

    /// The slot of an open order.
    #[inline]
    pub fn slot_of(&self, id: OrderId) -> Option<Slot> {
        self.fates.get(id.checked_sub(1)?)?.slot()
    }

    /// The owner and status of an order accepted and not forgotten (`Live` while open).
    pub fn fate(&self, id: OrderId) -> Option<ClosedOrder> {
        self.fates
            .get(id.checked_sub(1)?)
            .map(|fate| fate.closed_order())
    }

    /// Whether order `id` was accepted and its fate forgotten since.
    pub fn forgotten(&self, id: OrderId) -> bool {
        id >= 1 && id < self.next_id() && self.fate(id).is_none()
    }

    /// Forgets the fate of order `id`, which is closed.
    pub fn forget(&mut self, id: OrderId) {
        debug_assert!(
            self.slot_of(id).is_none(),
            "only a closed order is forgotten"
        );
        if let Some(index) = id.checked_sub(1) {
            self.fates.forget(index);
        }
    }

    /// Orders whose fates are held: open, or closed and not yet forgotten.
    pub fn held(&self) -> u64 {
        self.fates.held()
    }

    /// Orders ever accepted.
    pub fn accepted(&self) -> u64 {
        self.fates.len()
    }

    /// The id, owner and status of every order accepted and not forgotten, by id.
    pub fn fates(&self) -> impl Iterator<Item = (OrderId, ClosedOrder)> + '_ {
        self.fates
            .iter()
            .map(|(index, fate)| (index + 1, fate.closed_order()))
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

    /// The list links of `slot`.
    #[inline]
    pub fn links(&self, slot: Slot) -> &Links {
        &self.links[slot as usize]
    }

    /// The list links of `slot`, mutably.
    #[inline]
    pub fn links_mut(&mut self, slot: Slot) -> &mut Links {
        &mut self.links[slot as usize]
    }

    /// Every open order, in slot order (not a stable order: sort by id where it matters).
    pub fn iter(&self) -> impl Iterator<Item = &Order> {
        self.slots.iter().flatten()
    }
}
