//! A generated command stream modelled on exchange-core's benchmark: several markets, books
//! pre-filled to about a thousand resting orders each, then mostly passive placements,
//! cancels and moves (cancel + replace) with a few percent of aggressive orders that cross
//! the spread. Deterministic for a seed (its own xorshift generator, no `rand`).
//!
//! Every placement is accepted (balances are ample and aggressive orders are GTC, so they
//! rest what they do not fill), which lets the generator know each order's id: the engine
//! numbers accepted orders 1, 2, 3, ...
//!
//! Like exchange-core's generator, which follows its commands on a simple order book of its
//! own, this one applies each command to a shadow engine as it goes: it then knows which
//! orders a fill or a cancel took off the book, cancels only live orders, and keeps each book
//! near its starting size (a placement becomes a cancel while a book is over a tenth above
//! it, a cancel a placement while it is a tenth below). Without that the books grow without
//! bound (places outnumber cancels), and a long run measures cache misses on an ever larger
//! book rather than the engine ([`StreamSpec::stable_books`] turns it off, to measure that).

use std::collections::HashMap;

use ladder_engine::{
    Address, Asset, Bytes32, Command, Engine, EngineLimits, Event, FixedBytes, MarketSpec,
    NewOrder, OrderStatus, OrderType, Reply, Side, UNITS_PER_SHARE,
};

/// Shape of the stream.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    /// Markets (books).
    pub markets: usize,
    /// Traders (accounts).
    pub traders: usize,
    /// Resting orders placed per book before the measured part.
    pub resting_per_book: usize,
    /// Commands in the measured part.
    pub commands: usize,
    /// Percent of measured commands that are aggressive (crossing) orders.
    pub aggressive_percent: u32,
    /// Seed of the generator.
    pub seed: u64,
    /// Place Yes-token orders only (no No-token orders), so each market's book can be
    /// replayed on a single-token order book elsewhere. Off by default.
    pub yes_only: bool,
    /// Give each trader one side of the Yes axis only (even-indexed traders bid, odd ones
    /// ask), so no order ever meets one of its own trader's and self-trade prevention never
    /// acts. Needs at least two traders. Off by default.
    pub one_side_per_trader: bool,
    /// Keep each book near `resting_per_book` open orders (as exchange-core's generator
    /// does). On by default; off, the books grow by about a tenth of an order per command.
    pub stable_books: bool,
}

impl Default for StreamSpec {
    fn default() -> Self {
        StreamSpec {
            markets: 8,
            traders: 2_000,
            resting_per_book: 1_000,
            commands: 1_000_000,
            aggressive_percent: 3,
            seed: 0x1add_e55e,
            yes_only: false,
            one_side_per_trader: false,
            stable_books: true,
        }
    }
}

/// A stream: set-up commands (markets, links, deposits, initial books), then the measured ones.
pub struct Stream {
    /// Commands that build the starting state.
    pub setup: Vec<Command>,
    /// Commands to measure.
    pub measured: Vec<Command>,
}

/// Tick of the generated markets: 0.001 (10 price ticks), so books have many levels.
pub const TICK: u32 = 10;
const MID: u32 = 5_000;
const HALF_RANGE_TICKS: u32 = 150;
const AGGRESSIVE_DEPTH_TICKS: u32 = 100;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Condition id of generated market `m`.
pub fn condition(m: usize) -> Bytes32 {
    let mut b = [0xc0; 32];
    b[..8].copy_from_slice(&(m as u64).to_be_bytes());
    FixedBytes(b)
}

/// Token id of generated market `m`'s outcome (`0` Yes, `1` No).
pub fn token(m: usize, outcome: u8) -> Bytes32 {
    let mut b = [0x70 + outcome; 32];
    b[..8].copy_from_slice(&(m as u64).to_be_bytes());
    FixedBytes(b)
}

/// Address of generated trader `t`.
pub fn trader(t: usize) -> Address {
    let mut b = [0xa0; 20];
    b[..8].copy_from_slice(&(t as u64).to_be_bytes());
    Address(b)
}

/// The open orders of one book, by id, for picking one at random and removing any.
#[derive(Default, Clone)]
struct LiveOrders {
    ids: Vec<u64>,
    position: HashMap<u64, usize>,
}

impl LiveOrders {
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn insert(&mut self, id: u64) {
        self.position.insert(id, self.ids.len());
        self.ids.push(id);
    }

    fn remove(&mut self, id: u64) {
        if let Some(at) = self.position.remove(&id) {
            self.ids.swap_remove(at);
            if let Some(&moved) = self.ids.get(at) {
                self.position.insert(moved, at);
            }
        }
    }

    fn take_at(&mut self, at: usize) -> u64 {
        let id = self.ids[at];
        self.remove(id);
        id
    }
}

struct Generator {
    spec: StreamSpec,
    rng: XorShift,
    /// Orders placed (the id of the last one).
    placed: u64,
    /// Open orders per market, as the shadow engine has them.
    live: Vec<LiveOrders>,
    /// The market of every order placed, by id (index 0 unused).
    market_of: Vec<usize>,
    /// The engine the generated commands are applied to as they are made.
    shadow: Engine,
    /// Sequence number of the last command applied to the shadow.
    seq: u64,
}

impl Generator {
    fn order(&mut self, market: usize, aggressive: bool) -> Command {
        let mut trader_index = self.rng.below(self.spec.traders as u64) as usize;
        let yes = self.rng.below(2) == 0 || self.spec.yes_only;
        let bid = self.rng.below(2) == 0;
        if self.spec.one_side_per_trader {
            // Bidders are even, askers odd: the same draw, moved to a trader of its side.
            trader_index = (trader_index & !1) | usize::from(!bid);
            if trader_index >= self.spec.traders {
                trader_index -= 2;
            }
        }
        let offset = TICK * (1 + self.rng.below(u64::from(HALF_RANGE_TICKS / TICK)) as u32);
        // Axis price: bids below the mid, asks above; an aggressive order goes deep across.
        let axis = match (bid, aggressive) {
            (true, false) => MID - offset,
            (false, false) => MID + offset,
            (true, true) => MID + AGGRESSIVE_DEPTH_TICKS,
            (false, true) => MID - AGGRESSIVE_DEPTH_TICKS,
        };
        // Yes bid = BUY Yes; Yes ask = SELL Yes; on No the side flips and the price mirrors.
        let (side, price_ticks, outcome) = match (yes, bid) {
            (true, true) => (Side::Buy, axis, 0),
            (true, false) => (Side::Sell, axis, 0),
            (false, true) => (Side::Sell, 10_000 - axis, 1),
            (false, false) => (Side::Buy, 10_000 - axis, 1),
        };
        let shares = 1 + self.rng.below(if aggressive { 40 } else { 20 });
        self.placed += 1;
        let id = self.placed;
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&id.to_be_bytes());
        hash[8] = 0x0b;
        let maker = trader(trader_index);
        Command::PlaceOrder(NewOrder {
            order_hash: FixedBytes(hash),
            maker,
            signer: maker,
            token_id: token(market, outcome),
            side,
            price_ticks,
            size_units: shares * UNITS_PER_SHARE,
            order_type: OrderType::Gtc,
            post_only: false,
            expiration_s: 0,
            signer_verified: true,
            signed: None,
        })
    }

    fn cancel(&mut self, market: usize) -> Option<Command> {
        let live = &mut self.live[market];
        if live.len() == 0 {
            return None;
        }
        let pick = self.rng.below(live.len() as u64) as usize;
        let id = live.take_at(pick);
        // The requester is filled in by `with_owner` from the order's maker.
        Some(Command::CancelOrder {
            requester: Address::default(),
            order_id: id,
            condition_id: None,
            signer: None,
        })
    }

    /// Applies `command` to the shadow engine and follows what it did to the books.
    fn follow(&mut self, command: &Command) {
        self.seq += 1;
        let reply = self.shadow.apply(self.seq, self.seq * 1_000, command);
        if let Command::PlaceOrder(_) = command {
            let Reply::Placed(placement) = reply else {
                panic!("a generated order was refused: {reply:?} for {command:?}");
            };
            assert_eq!(
                placement.order_id, self.placed,
                "orders are numbered 1, 2, ..."
            );
            if placement.status == OrderStatus::Live {
                let market = self.market_of[placement.order_id as usize];
                self.live[market].insert(placement.order_id);
            }
        }
        for event in self.shadow.events() {
            if let Event::Order { order, .. } = event {
                if matches!(order.status, OrderStatus::Matched | OrderStatus::Canceled) {
                    if let Some(&market) = self.market_of.get(order.id as usize) {
                        self.live[market].remove(order.id);
                    }
                }
            }
        }
    }

    /// Makes a placement in `market` and applies it to the shadow.
    fn place(&mut self, market: usize, aggressive: bool, owners: &mut Vec<Address>) -> Command {
        let command = self.order(market, aggressive);
        self.market_of.push(market);
        owners.push(maker_of(&command));
        self.follow(&command);
        command
    }

    /// Makes a cancel of a random live order of `market` and applies it to the shadow.
    fn cancel_live(&mut self, market: usize, owners: &[Address]) -> Option<Command> {
        let command = with_owner(self.cancel(market)?, owners);
        self.follow(&command);
        Some(command)
    }
}

/// Generates the stream of `spec`.
pub fn generate(spec: &StreamSpec) -> Stream {
    assert!(
        !spec.one_side_per_trader || spec.traders >= 2,
        "one_side_per_trader needs at least two traders"
    );
    let mut gen = Generator {
        spec: spec.clone(),
        rng: XorShift(spec.seed | 1),
        placed: 0,
        live: vec![LiveOrders::default(); spec.markets],
        market_of: vec![usize::MAX],
        shadow: Engine::new(EngineLimits::default()),
        seq: 0,
    };
    let mut owners: Vec<Address> = vec![Address::default()];
    let mut setup = Vec::new();
    for m in 0..spec.markets {
        setup.push(Command::CreateMarket(MarketSpec {
            condition_id: condition(m),
            yes_token_id: token(m, 0),
            no_token_id: token(m, 1),
            tick_size_ticks: TICK,
            min_order_size_units: UNITS_PER_SHARE,
            neg_risk: false,
            taker_delay_ms: 0,
            fee_rate_bps: 0,
        }));
    }
    let plenty = 1u64 << 50;
    for t in 0..spec.traders {
        setup.push(Command::Deposit {
            address: trader(t),
            asset: Asset::Collateral,
            amount: plenty,
        });
        for m in 0..spec.markets {
            for outcome in 0..2 {
                setup.push(Command::Deposit {
                    address: trader(t),
                    asset: Asset::Token(token(m, outcome)),
                    amount: plenty,
                });
            }
        }
    }
    for command in &setup {
        gen.follow(command);
    }
    for _ in 0..spec.resting_per_book {
        for m in 0..spec.markets {
            let command = gen.place(m, false, &mut owners);
            setup.push(command);
        }
    }
    let target = spec.resting_per_book;
    let mut measured = Vec::with_capacity(spec.commands + spec.commands / 8);
    while measured.len() < spec.commands {
        let market = gen.rng.below(spec.markets as u64) as usize;
        let roll = gen.rng.below(100) as u32;
        let open = gen.live[market].len();
        let (over, under) = if spec.stable_books {
            (open * 10 > target * 11, open * 10 < target * 9)
        } else {
            (false, false)
        };
        if roll < spec.aggressive_percent {
            measured.push(gen.place(market, true, &mut owners));
        } else if (roll < 50 && !over) || under {
            measured.push(gen.place(market, false, &mut owners));
        } else if roll < 85 || over {
            if let Some(cancel) = gen.cancel_live(market, &owners) {
                measured.push(cancel);
            }
        } else if let Some(cancel) = gen.cancel_live(market, &owners) {
            // A move: cancel, then place again nearby.
            measured.push(cancel);
            measured.push(gen.place(market, false, &mut owners));
        }
    }
    Stream { setup, measured }
}

fn maker_of(command: &Command) -> Address {
    match command {
        Command::PlaceOrder(order) => order.maker,
        _ => Address::default(),
    }
}

fn with_owner(command: Command, owners: &[Address]) -> Command {
    match command {
        Command::CancelOrder { order_id, .. } => Command::CancelOrder {
            requester: owners[order_id as usize],
            order_id,
            condition_id: None,
            signer: None,
        },
        other => other,
    }
}
