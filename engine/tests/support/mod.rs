//! A small harness for engine tests: one market, funded linked accounts, order builders,
//! and an invariant check after every command.
#![allow(dead_code)]

use ladder_engine::*;

/// The test market's condition id.
pub const CONDITION: Bytes32 = FixedBytes([0x3b; 32]);
/// Its Yes token.
pub const YES: Bytes32 = FixedBytes([0x01; 32]);
/// Its No token.
pub const NO: Bytes32 = FixedBytes([0x02; 32]);
/// One share in base units.
pub const SHARE: u64 = UNITS_PER_SHARE;
/// One collateral unit (1 USDC) in base units.
pub const USDC: u64 = 1_000_000;

/// The smart account of trader `n`.
pub fn account(n: u8) -> Address {
    Address([n; 20])
}

/// The EOA that controls trader `n`'s account.
pub fn signer(n: u8) -> Address {
    Address([0x80 | n; 20])
}

/// A market spec with a 0.01 tick and a 1-share minimum.
pub fn market_spec() -> MarketSpec {
    MarketSpec {
        condition_id: CONDITION,
        yes_token_id: YES,
        no_token_id: NO,
        tick_size_ticks: 100,
        min_order_size_units: SHARE,
        neg_risk: false,
        taker_delay_ms: 0,
        fee_rate_bps: 0,
    }
}

/// The engine plus a sequence and a clock.
pub struct Harness {
    pub engine: Engine,
    pub seq: u64,
    pub now_ns: u64,
    salt: u64,
}

impl Harness {
    /// One market; traders 1..=4 linked and funded with 1,000 USDC, 500 Yes and 500 No.
    pub fn new() -> Harness {
        Harness::with_market(market_spec())
    }

    /// As `new`, with another market spec.
    pub fn with_market(spec: MarketSpec) -> Harness {
        let mut h = Harness {
            engine: Engine::default(),
            seq: 0,
            now_ns: 1_700_000_000 * NANOS_PER_SECOND,
            salt: 0,
        };
        h.ok(Command::CreateMarket(spec));
        for n in 1..=4 {
            h.ok(Command::LinkAccount {
                account: account(n),
                owner: signer(n),
            });
            h.ok(Command::Deposit {
                address: account(n),
                asset: Asset::Collateral,
                amount: 1_000 * USDC,
            });
            h.ok(Command::Deposit {
                address: account(n),
                asset: Asset::Token(YES),
                amount: 500 * SHARE,
            });
            h.ok(Command::Deposit {
                address: account(n),
                asset: Asset::Token(NO),
                amount: 500 * SHARE,
            });
        }
        h
    }

    /// Applies a command one millisecond after the last, checking every invariant.
    pub fn apply(&mut self, command: Command) -> Reply {
        self.seq += 1;
        self.now_ns += 1_000_000;
        let reply = self.engine.apply(self.seq, self.now_ns, &command);
        if let Err(broken) = self.engine.check_invariants() {
            panic!("invariant broken after {command:?}: {broken}");
        }
        reply
    }

    /// Applies a command that must succeed with `Reply::Ok`.
    pub fn ok(&mut self, command: Command) {
        assert_eq!(self.apply(command), Reply::Ok);
    }

    /// Moves the clock forward by `ms` without a command.
    pub fn advance_ms(&mut self, ms: u64) {
        self.now_ns += ms * 1_000_000;
    }

    /// A GTC order of trader `n`.
    pub fn order(
        &mut self,
        n: u8,
        token: Bytes32,
        side: Side,
        price_ticks: u32,
        shares: u64,
    ) -> NewOrder {
        self.salt += 1;
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&self.salt.to_be_bytes());
        hash[31] = 0xee;
        NewOrder {
            order_hash: FixedBytes(hash),
            maker: account(n),
            signer: signer(n),
            token_id: token,
            side,
            price_ticks,
            size_units: shares * SHARE,
            order_type: OrderType::Gtc,
            post_only: false,
            expiration_s: 0,
            signer_verified: false,
            signed: None,
        }
    }

    /// Places an order that must be accepted.
    pub fn place(&mut self, order: NewOrder) -> Placement {
        match self.apply(Command::PlaceOrder(order)) {
            Reply::Placed(p) => p,
            other => panic!("expected a placement, got {other:?}"),
        }
    }

    /// Places an order that must be rejected.
    pub fn reject(&mut self, order: NewOrder) -> Reject {
        match self.apply(Command::PlaceOrder(order)) {
            Reply::Rejected(r) => r,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    /// Places a GTC order of trader `n` that must be accepted.
    pub fn gtc(
        &mut self,
        n: u8,
        token: Bytes32,
        side: Side,
        price_ticks: u32,
        shares: u64,
    ) -> Placement {
        let order = self.order(n, token, side, price_ticks, shares);
        self.place(order)
    }

    /// Collateral of trader `n`.
    pub fn collateral(&self, n: u8) -> Balance {
        self.engine.balance(&account(n), Asset::Collateral)
    }

    /// Position of trader `n` in `token`.
    pub fn tokens(&self, n: u8, token: Bytes32) -> Balance {
        self.engine.balance(&account(n), Asset::Token(token))
    }

    /// Events of the last command.
    pub fn events(&self) -> Vec<Event> {
        self.engine.events().to_vec()
    }

    /// Ids of the orders the last command cancelled, in the order of their events.
    pub fn cancelled(&self) -> Vec<u64> {
        self.engine
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::Order {
                    kind: OrderEventKind::Cancellation,
                    order,
                } => Some(order.id),
                _ => None,
            })
            .collect()
    }
}

/// A balance with nothing reserved and no debt.
pub fn free(units: u64) -> Balance {
    Balance {
        free: units,
        reserved: 0,
        debt: 0,
    }
}
