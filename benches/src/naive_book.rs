//! A naive direct-indexed limit order book: the baseline the brief measures the engine
//! against ("our engine, ledger included, should not be slower than a naive book").
//!
//! One token, prices in ticks indexing an array of levels, a FIFO per level kept as a
//! doubly linked list through an array of orders indexed by their (dense) ids, the best bid
//! and ask found by scanning the array. Price-time priority, fills at the maker's price, the
//! remainder of a taker rests. Nothing else: no ledger, no reservations, no order hashes, no
//! trades kept, no events, no validation. It exists only to be timed beside the engine.

/// Ticks in the price array (prices are in (0, 1) in ticks of 0.0001).
const PRICE_SLOTS: usize = 10_001;

/// "No order" in a list link.
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Order {
    price: u32,
    remaining: u64,
    buy: bool,
    prev: u32,
    next: u32,
}

#[derive(Clone, Copy)]
struct Level {
    head: u32,
    tail: u32,
    total: u64,
    count: u32,
}

const EMPTY_LEVEL: Level = Level {
    head: NONE,
    tail: NONE,
    total: 0,
    count: 0,
};

/// The book. Order ids must be dense (1, 2, 3, ...): they index its order array.
pub struct NaiveBook {
    orders: Vec<Order>,
    bids: Vec<Level>,
    asks: Vec<Level>,
    /// Highest bid price with orders, 0 when none.
    best_bid: u32,
    /// Lowest ask price with orders, `PRICE_SLOTS` when none.
    best_ask: u32,
}

impl Default for NaiveBook {
    fn default() -> Self {
        Self::new()
    }
}

impl NaiveBook {
    /// An empty book.
    pub fn new() -> NaiveBook {
        NaiveBook {
            orders: Vec::new(),
            bids: vec![EMPTY_LEVEL; PRICE_SLOTS],
            asks: vec![EMPTY_LEVEL; PRICE_SLOTS],
            best_bid: 0,
            best_ask: PRICE_SLOTS as u32,
        }
    }

    /// An empty book with room for `orders` ids.
    pub fn with_capacity(orders: usize) -> NaiveBook {
        let mut book = NaiveBook::new();
        book.orders.reserve(orders + 1);
        book
    }

    /// Places order `id` (a BUY when `buy`) of `size` at `price` ticks (1..=10,000): it
    /// takes from the other side at the makers' prices, and its remainder rests. Returns the
    /// size filled.
    pub fn place(&mut self, id: u64, price: u32, size: u64, buy: bool) -> u64 {
        let mut left = size;
        if buy {
            while left > 0 && self.best_ask <= price {
                left = self.take(false, self.best_ask, left);
                if self.asks[self.best_ask as usize].count == 0 {
                    self.best_ask = self.next_ask(self.best_ask);
                }
            }
        } else {
            while left > 0 && self.best_bid >= price && self.best_bid > 0 {
                left = self.take(true, self.best_bid, left);
                if self.bids[self.best_bid as usize].count == 0 {
                    self.best_bid = self.previous_bid(self.best_bid);
                }
            }
        }
        if left > 0 {
            self.rest(id, price, left, buy);
        }
        size - left
    }

    /// Cancels order `id`; `true` when it was resting.
    pub fn cancel(&mut self, id: u64) -> bool {
        let Some(order) = self.orders.get(id as usize).copied() else {
            return false;
        };
        if order.remaining == 0 {
            return false;
        }
        self.unlink(id as u32, order);
        self.orders[id as usize].remaining = 0;
        if order.buy && order.price == self.best_bid && self.bids[order.price as usize].count == 0 {
            self.best_bid = self.previous_bid(order.price);
        }
        if !order.buy && order.price == self.best_ask && self.asks[order.price as usize].count == 0
        {
            self.best_ask = self.next_ask(order.price);
        }
        true
    }

    /// The levels of one side, best first: (price ticks, total size).
    pub fn levels(&self, buy: bool) -> Vec<(u32, u64)> {
        let side = if buy { &self.bids } else { &self.asks };
        let mut levels: Vec<(u32, u64)> = side
            .iter()
            .enumerate()
            .filter(|(_, level)| level.count > 0)
            .map(|(price, level)| (price as u32, level.total))
            .collect();
        if buy {
            levels.reverse();
        }
        levels
    }

    /// Resting orders.
    pub fn resting(&self) -> usize {
        self.bids
            .iter()
            .chain(&self.asks)
            .map(|l| l.count as usize)
            .sum()
    }

    /// Takes up to `want` from the level at `price` of the bids (`from_bids`) or asks, oldest
    /// first; returns what is still wanted.
    fn take(&mut self, from_bids: bool, price: u32, mut want: u64) -> u64 {
        loop {
            let level = self.level(from_bids, price);
            let head = level.head;
            if head == NONE || want == 0 {
                return want;
            }
            let maker = self.orders[head as usize];
            let fill = maker.remaining.min(want);
            want -= fill;
            if fill == maker.remaining {
                self.unlink(head, maker);
                self.orders[head as usize].remaining = 0;
            } else {
                self.level_mut(from_bids, price).total -= fill;
                self.orders[head as usize].remaining -= fill;
            }
        }
    }

    fn rest(&mut self, id: u64, price: u32, size: u64, buy: bool) {
        let index = id as usize;
        if self.orders.len() <= index {
            let blank = Order {
                price: 0,
                remaining: 0,
                buy: false,
                prev: NONE,
                next: NONE,
            };
            self.orders.resize(index + 1, blank);
        }
        let level = self.level_mut(buy, price);
        let tail = level.tail;
        level.tail = id as u32;
        if tail == NONE {
            level.head = id as u32;
        }
        level.total += size;
        level.count += 1;
        if tail != NONE {
            self.orders[tail as usize].next = id as u32;
        }
        self.orders[index] = Order {
            price,
            remaining: size,
            buy,
            prev: tail,
            next: NONE,
        };
        if buy && price > self.best_bid {
            self.best_bid = price;
        }
        if !buy && price < self.best_ask {
            self.best_ask = price;
        }
    }

    fn unlink(&mut self, id: u32, order: Order) {
        if order.prev != NONE {
            self.orders[order.prev as usize].next = order.next;
        }
        if order.next != NONE {
            self.orders[order.next as usize].prev = order.prev;
        }
        let level = self.level_mut(order.buy, order.price);
        if level.head == id {
            level.head = order.next;
        }
        if level.tail == id {
            level.tail = order.prev;
        }
        level.total -= order.remaining;
        level.count -= 1;
    }

    fn level(&self, bids: bool, price: u32) -> Level {
        if bids {
            self.bids[price as usize]
        } else {
            self.asks[price as usize]
        }
    }

    fn level_mut(&mut self, bids: bool, price: u32) -> &mut Level {
        if bids {
            &mut self.bids[price as usize]
        } else {
            &mut self.asks[price as usize]
        }
    }

    fn next_ask(&self, from: u32) -> u32 {
        (from as usize..PRICE_SLOTS)
            .find(|&p| self.asks[p].count > 0)
            .unwrap_or(PRICE_SLOTS) as u32
    }

    fn previous_bid(&self, from: u32) -> u32 {
        (1..=from as usize)
            .rev()
            .find(|&p| self.bids[p].count > 0)
            .unwrap_or(0) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taker_fills_at_makers_prices_oldest_first_and_rests_its_remainder() {
        let mut book = NaiveBook::new();
        book.place(1, 5_100, 10, false);
        book.place(2, 5_000, 4, false);
        book.place(3, 5_000, 6, false);
        assert_eq!(book.place(4, 5_050, 12, true), 10);
        // Orders 2 and 3 filled (4 + 6), order 1 untouched; 2 left of the taker rest at 5,050.
        assert_eq!(book.levels(false), vec![(5_100, 10)]);
        assert_eq!(book.levels(true), vec![(5_050, 2)]);
        assert!(!book.cancel(2));
        assert!(book.cancel(4));
        assert_eq!(book.levels(true), vec![]);
        assert_eq!(book.resting(), 1);
    }

    #[test]
    fn a_partial_fill_leaves_the_maker_first_in_its_queue() {
        let mut book = NaiveBook::new();
        book.place(1, 4_000, 10, true);
        book.place(2, 4_000, 10, true);
        assert_eq!(book.place(3, 3_900, 3, false), 3);
        assert_eq!(book.levels(true), vec![(4_000, 17)]);
        assert_eq!(book.place(4, 4_000, 8, false), 8);
        // Order 1 (7 left) filled, then 1 of order 2.
        assert_eq!(book.levels(true), vec![(4_000, 9)]);
        assert!(!book.cancel(1));
        assert!(book.cancel(2));
        assert_eq!(book.resting(), 0);
    }
}
