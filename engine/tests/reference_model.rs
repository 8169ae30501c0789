//! Differential test: random command streams run through the engine and through an
//! independent reference model (`model/mod.rs`), compared after every command: replies,
//! trades, balances, open orders, both views of every book, events, and the engine's
//! invariants. At the end, a replay and a mid-stream snapshot must reach the same state hash.

mod model;
mod support;

use std::collections::{BTreeMap, BTreeSet};

use ladder_engine::*;
use model::{Holding, MReply, Model, Quirks, NS_PER_S};
use proptest::prelude::*;
use support::{account, signer, CONDITION, NO, SHARE, USDC, YES};

/// The second market's condition id and tokens.
const CONDITION_2: Bytes32 = FixedBytes([0x4c; 32]);
const YES_2: Bytes32 = FixedBytes([0x03; 32]);
const NO_2: Bytes32 = FixedBytes([0x04; 32]);
/// Condition id, Yes token and No token of the markets, in creation order.
const MARKETS: [(Bytes32, Bytes32, Bytes32); 2] =
    [(CONDITION, YES, NO), (CONDITION_2, YES_2, NO_2)];
/// A token no market has.
const UNKNOWN_TOKEN: Bytes32 = FixedBytes([0x77; 32]);
/// A transaction hash no batch has.
const UNKNOWN_TX: Bytes32 = FixedBytes([0xab; 32]);
/// The engine's known departures from the rules (see the ignored `engine_bug_*` tests).
const ENGINE_QUIRKS: Quirks = Quirks {
    fill_checks_deferred_when_delayed: false,
};
/// Start of the clock: 2023-11-14.
const START_NS: u64 = 1_700_000_000 * NS_PER_S;

// ----- the generated stream ----------------------------------------------------------------

/// One market's parameters.
#[derive(Clone, Copy, Debug)]
struct MarketParams {
    tick: u32,
    min_shares: u64,
    fee_bps: u32,
    delay_ms: u64,
}

/// The markets and the traders' starting funds.
#[derive(Clone, Debug)]
struct Setup {
    /// One or two markets.
    markets: Vec<MarketParams>,
    /// Per funded trader: collateral units, and Yes and No shares in every market.
    funding: Vec<(u64, u64, u64)>,
    /// Where in the stream (fraction of its length, in 1/256) to take a snapshot.
    snapshot_at: u8,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Gtc,
    /// Expires this many seconds after the placement's time.
    Gtd(u64),
    Fok,
    Fak,
}

/// A deliberate defect in an order.
#[derive(Clone, Copy, Debug)]
enum Tweak {
    None,
    OffTick,
    OutOfRange(u8),
    NonWhole,
    ZeroSize,
    /// Signed by another trader's EOA.
    WrongSigner,
    /// Signed by another trader's EOA, but verified outside the engine.
    VerifiedWrongSigner,
    /// Signed by the maker address itself (not a registered owner).
    SelfSigner,
    /// Reuses the hash of an earlier PlaceOrder (accepted or not).
    Duplicate(u16),
    UnknownToken,
    GtdNoExpiry,
    /// A GTD whose expiration is this many seconds before (0 = at) the current time.
    GtdPast(u64),
    NonGtdExpiry,
    /// A valid price at the edge of the range: one tick, or one minus one tick.
    Extreme(bool),
}

#[derive(Clone, Debug)]
struct PlaceOp {
    trader: u8,
    market: u8,
    no: bool,
    sell: bool,
    step: i32,
    shares: u64,
    kind: Kind,
    post_only: bool,
    tweak: Tweak,
}

#[derive(Clone, Debug)]
enum Op {
    Place(PlaceOp),
    Cancel {
        trader: u8,
        pick: u16,
        as_owner: bool,
    },
    CancelAll {
        trader: u8,
    },
    CancelMarket {
        trader: u8,
        market: u8,
        token: u8,
    },
    Deposit {
        trader: u8,
        asset: u8,
        amount: u64,
    },
    Withdraw {
        trader: u8,
        asset: u8,
        percent: u16,
    },
    Tick,
    Settle {
        pick: u16,
        status: u8,
    },
    /// Unlinks (or links again) a trader's EOA.
    Link {
        trader: u8,
        linked: bool,
    },
    Pause(u8),
    Resume(u8),
    Resolve {
        market: u8,
        resolution: u8,
    },
}

#[derive(Clone, Debug)]
struct Step {
    /// The clock moves on this much before the command.
    dt_ms: u64,
    /// The command is stamped this much earlier than the clock (an earlier stamp counts as
    /// the latest one seen).
    stale_ms: u64,
    op: Op,
}

fn market_strategy() -> impl Strategy<Value = MarketParams> {
    (
        prop_oneof![3 => Just(100u32), 1 => Just(10u32)],
        1u64..=2,
        prop_oneof![Just(0u32), Just(100), Just(33)],
        prop_oneof![3 => Just(0u64), 1 => Just(250u64)],
    )
        .prop_map(|(tick, min_shares, fee_bps, delay_ms)| MarketParams {
            tick,
            min_shares,
            fee_bps,
            delay_ms,
        })
}

fn setup_strategy() -> impl Strategy<Value = Setup> {
    let funding = (
        prop_oneof![
            Just(5 * USDC),
            Just(30 * USDC),
            Just(200 * USDC),
            Just(1_000 * USDC),
            1u64..50 * USDC,
        ],
        prop_oneof![Just(0u64), Just(10), Just(40), Just(200)],
        prop_oneof![Just(0u64), Just(10), Just(40), Just(200)],
    );
    (
        prop::collection::vec(market_strategy(), 1..=2),
        prop::collection::vec(funding, 3..=5),
        any::<u8>(),
    )
        .prop_map(|(markets, funding, snapshot_at)| Setup {
            markets,
            funding,
            snapshot_at,
        })
}

fn place_strategy() -> impl Strategy<Value = PlaceOp> {
    let kind = prop_oneof![
        11 => Just(Kind::Gtc),
        4 => (1u64..=8).prop_map(Kind::Gtd),
        2 => Just(Kind::Fok),
        2 => Just(Kind::Fak),
    ];
    let tweak = prop_oneof![
        90 => Just(Tweak::None),
        1 => Just(Tweak::OffTick),
        1 => (0u8..5).prop_map(Tweak::OutOfRange),
        1 => Just(Tweak::NonWhole),
        1 => Just(Tweak::ZeroSize),
        1 => Just(Tweak::WrongSigner),
        1 => Just(Tweak::VerifiedWrongSigner),
        1 => Just(Tweak::SelfSigner),
        2 => any::<u16>().prop_map(Tweak::Duplicate),
        1 => Just(Tweak::UnknownToken),
        1 => Just(Tweak::GtdNoExpiry),
        1 => (0u64..3).prop_map(Tweak::GtdPast),
        1 => Just(Tweak::NonGtdExpiry),
        2 => any::<bool>().prop_map(Tweak::Extreme),
    ];
    (
        (any::<u8>(), any::<u8>(), any::<bool>(), any::<bool>()),
        -6i32..=6,
        1u64..=20,
        kind,
        prop::bool::weighted(0.1),
        tweak,
    )
        .prop_map(
            |((trader, market, no, sell), step, shares, kind, post_only, tweak)| PlaceOp {
                trader,
                market,
                no,
                sell,
                step,
                shares,
                kind,
                post_only,
                tweak,
            },
        )
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        550 => place_strategy().prop_map(Op::Place),
        100 => (any::<u8>(), any::<u16>(), prop::bool::weighted(0.7))
            .prop_map(|(trader, pick, as_owner)| Op::Cancel { trader, pick, as_owner }),
        20 => any::<u8>().prop_map(|trader| Op::CancelAll { trader }),
        20 => (any::<u8>(), any::<u8>(), 0u8..3)
            .prop_map(|(trader, market, token)| Op::CancelMarket { trader, market, token }),
        50 => (any::<u8>(), any::<u8>(), prop_oneof![Just(0u64), 1u64..=50, 1u64..=200])
            .prop_map(|(trader, asset, amount)| Op::Deposit { trader, asset, amount }),
        60 => (any::<u8>(), any::<u8>(), 0u16..=130)
            .prop_map(|(trader, asset, percent)| Op::Withdraw { trader, asset, percent }),
        60 => Just(Op::Tick),
        80 => (any::<u16>(), 0u8..10).prop_map(|(pick, status)| Op::Settle { pick, status }),
        6 => (any::<u8>(), prop::bool::weighted(0.7))
            .prop_map(|(trader, linked)| Op::Link { trader, linked }),
        6 => any::<u8>().prop_map(Op::Pause),
        40 => any::<u8>().prop_map(Op::Resume),
        3 => (any::<u8>(), 0u8..3)
            .prop_map(|(market, resolution)| Op::Resolve { market, resolution }),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let dt = prop_oneof![6 => Just(1u64), 3 => 0u64..500, 1 => 500u64..4_000];
    let stale = prop_oneof![30 => Just(0u64), 1 => 1u64..3_000];
    (dt, stale, op_strategy()).prop_map(|(dt_ms, stale_ms, op)| Step {
        dt_ms,
        stale_ms,
        op,
    })
}

// ----- the driver --------------------------------------------------------------------------

/// The Yes-axis levels of every market.
type Levels = Vec<model::BookSides>;

/// Runs the engine and the model side by side.
struct Run {
    engine: Engine,
    model: Model,
    seq: u64,
    now_ns: u64,
    /// Every command applied, with its stamp and the engine's reply.
    log: Vec<(u64, u64, Command, Reply)>,
    /// Hashes of every PlaceOrder issued, accepted or not.
    hashes_used: Vec<Hash32>,
    next_hash: u64,
    /// Funded traders are 1..=funded; `funded + 1` is linked but starts without an account.
    funded: u8,
    /// Tick of each market.
    ticks: Vec<u32>,
    /// How often each kind of reply was given (for the coverage test).
    replies: BTreeMap<String, u64>,
    /// The engine's reply to the last command.
    last_reply: Option<Reply>,
}

impl Run {
    fn new(setup: &Setup) -> Run {
        let mut run = Run {
            engine: Engine::default(),
            model: Model::with_quirks(ENGINE_QUIRKS),
            seq: 0,
            now_ns: START_NS,
            log: Vec::new(),
            hashes_used: Vec::new(),
            next_hash: 0,
            funded: setup.funding.len() as u8,
            ticks: setup.markets.iter().map(|m| m.tick).collect(),
            replies: BTreeMap::new(),
            last_reply: None,
        };
        for (m, params) in setup.markets.iter().enumerate() {
            let (condition_id, yes_token_id, no_token_id) = MARKETS[m];
            run.apply(
                0,
                Command::CreateMarket(MarketSpec {
                    condition_id,
                    yes_token_id,
                    no_token_id,
                    tick_size_ticks: params.tick,
                    min_order_size_units: params.min_shares * SHARE,
                    neg_risk: false,
                    taker_delay_ms: params.delay_ms,
                    fee_rate_bps: params.fee_bps,
                }),
            );
        }
        for n in 1..=run.funded + 1 {
            run.apply(
                0,
                Command::LinkAccount {
                    account: account(n),
                    owner: signer(n),
                },
            );
        }
        for (i, &(collateral, yes, no)) in setup.funding.iter().enumerate() {
            let address = account(i as u8 + 1);
            let mut deposits = vec![(Asset::Collateral, collateral)];
            for &(_, yes_token, no_token) in &MARKETS[..setup.markets.len()] {
                deposits.push((Asset::Token(yes_token), yes * SHARE));
                deposits.push((Asset::Token(no_token), no * SHARE));
            }
            for (asset, amount) in deposits {
                if amount > 0 {
                    run.apply(
                        0,
                        Command::Deposit {
                            address,
                            asset,
                            amount,
                        },
                    );
                }
            }
        }
        run
    }

    fn market_count(&self) -> usize {
        self.ticks.len()
    }

    /// Every address the stream uses.
    fn addresses(&self) -> Vec<Address> {
        (1..=self.funded + 1).map(account).collect()
    }

    /// Every asset, with the model's name for it.
    fn assets(&self) -> Vec<(Asset, Holding)> {
        let mut all = vec![(Asset::Collateral, Holding::Collateral)];
        for (m, &(_, yes, no)) in MARKETS[..self.market_count()].iter().enumerate() {
            all.push((Asset::Token(yes), Holding::Token(m, Outcome::Yes)));
            all.push((Asset::Token(no), Holding::Token(m, Outcome::No)));
        }
        all
    }

    /// Trader byte → trader number: mostly funded traders, sometimes the unfunded one.
    fn trader(&self, byte: u8) -> u8 {
        if byte.is_multiple_of(16) {
            self.funded + 1
        } else {
            1 + byte % self.funded
        }
    }

    fn market(&self, byte: u8) -> usize {
        usize::from(byte) % self.market_count()
    }

    fn fresh_hash(&mut self) -> Hash32 {
        self.next_hash += 1;
        let mut hash = [0xddu8; 32];
        hash[..8].copy_from_slice(&self.next_hash.to_be_bytes());
        FixedBytes(hash)
    }

    /// Turns a generated op into a command, at the time it will be applied.
    fn command(&mut self, op: &Op, now_ns: u64) -> Command {
        let now_s = now_ns / NS_PER_S;
        match op {
            Op::Place(p) => Command::PlaceOrder(self.new_order(p, now_s)),
            Op::Cancel {
                trader,
                pick,
                as_owner,
            } => {
                let count = self.model.orders.len() as u64;
                let order_id = if pick % 10 == 0 || count == 0 {
                    count + 1 + u64::from(*pick % 3)
                } else {
                    1 + u64::from(*pick) % count
                };
                let requester = match self.model.order(order_id) {
                    Some(o) if *as_owner => o.maker,
                    _ => account(self.trader(*trader)),
                };
                Command::CancelOrder {
                    requester,
                    order_id,
                    condition_id: None,
                    signer: None,
                }
            }
            Op::CancelAll { trader } => Command::CancelAll {
                requester: account(self.trader(*trader)),
            },
            Op::CancelMarket {
                trader,
                market,
                token,
            } => {
                let (condition_id, yes, no) = MARKETS[self.market(*market)];
                Command::CancelMarket {
                    requester: account(self.trader(*trader)),
                    signer: None,
                    condition_id,
                    token_id: match token {
                        0 => None,
                        1 => Some(yes),
                        _ => Some(no),
                    },
                }
            }
            Op::Deposit {
                trader,
                asset,
                amount,
            } => {
                let assets = self.assets();
                let asset = assets[usize::from(*asset) % assets.len()].0;
                let amount = match asset {
                    // Odd collateral amounts too: collateral need not be whole.
                    Asset::Collateral => amount * USDC / 2 + amount * 7,
                    Asset::Token(_) => amount * SHARE,
                };
                Command::Deposit {
                    address: account(self.trader(*trader)),
                    asset,
                    amount,
                }
            }
            Op::Withdraw {
                trader,
                asset,
                percent,
            } => {
                let address = account(self.trader(*trader));
                let assets = self.assets();
                let (asset, holding) = assets[usize::from(*asset) % assets.len()];
                let free = self.model.balance(&address, holding).free;
                let amount = (free * u64::from(*percent) / 100).max(1);
                Command::Withdraw {
                    address,
                    asset,
                    amount,
                }
            }
            Op::Tick => Command::Tick,
            Op::Settle { pick, status } => {
                let batches = &self.model.batches;
                let transaction_hash = if batches.is_empty() || pick % 25 == 0 {
                    UNKNOWN_TX
                } else {
                    // Mostly recent batches.
                    let back = usize::from(*pick) % batches.len().min(12);
                    batches[batches.len() - 1 - back]
                        .label
                        .expect("every batch is labelled")
                };
                let status = match status {
                    0..=2 => TradeStatus::Failed,
                    3 | 4 => TradeStatus::Retrying,
                    5 | 6 => TradeStatus::Mined,
                    7 | 8 => TradeStatus::Confirmed,
                    _ => TradeStatus::Matched,
                };
                Command::SettlementUpdate {
                    transaction_hash,
                    status,
                }
            }
            Op::Link { trader, linked } => {
                let n = self.trader(*trader);
                let (account, owner) = (account(n), signer(n));
                if *linked {
                    Command::LinkAccount { account, owner }
                } else {
                    Command::UnlinkAccount { account, owner }
                }
            }
            Op::Pause(m) => Command::PauseMarket {
                condition_id: MARKETS[self.market(*m)].0,
            },
            Op::Resume(m) => Command::ResumeMarket {
                condition_id: MARKETS[self.market(*m)].0,
            },
            Op::Resolve { market, resolution } => Command::ResolveMarket {
                condition_id: MARKETS[self.market(*market)].0,
                resolution: match resolution {
                    0 => Resolution::Yes,
                    1 => Resolution::No,
                    _ => Resolution::Void,
                },
            },
        }
    }

    fn new_order(&mut self, p: &PlaceOp, now_s: u64) -> NewOrder {
        let n = self.trader(p.trader);
        let m = self.market(p.market);
        let (_, yes, no) = MARKETS[m];
        let tick = self.ticks[m];
        let mut order = NewOrder {
            order_hash: self.fresh_hash(),
            maker: account(n),
            signer: signer(n),
            token_id: if p.no { no } else { yes },
            side: if p.sell { Side::Sell } else { Side::Buy },
            price_ticks: (5_000 + p.step * tick as i32) as u32,
            size_units: p.shares * SHARE,
            order_type: OrderType::Gtc,
            post_only: p.post_only,
            expiration_s: 0,
            signer_verified: false,
            signed: Default::default(),
        };
        match p.kind {
            Kind::Gtc => {}
            Kind::Gtd(s) => {
                order.order_type = OrderType::Gtd;
                order.expiration_s = now_s + s;
            }
            Kind::Fok => order.order_type = OrderType::Fok,
            Kind::Fak => order.order_type = OrderType::Fak,
        }
        let other_signer = signer(1 + n % self.funded);
        match p.tweak {
            Tweak::None => {}
            Tweak::OffTick => order.price_ticks += tick / 2,
            Tweak::OutOfRange(v) => {
                order.price_ticks = match v {
                    0 => 0,
                    1 => 10_000,
                    2 => tick / 2,
                    3 => 10_000 - tick / 2,
                    _ => 12_000,
                }
            }
            Tweak::NonWhole => order.size_units += SHARE / 4,
            Tweak::ZeroSize => order.size_units = 0,
            Tweak::WrongSigner => order.signer = other_signer,
            Tweak::VerifiedWrongSigner => {
                order.signer = other_signer;
                order.signer_verified = true;
            }
            Tweak::SelfSigner => order.signer = order.maker,
            Tweak::Duplicate(k) => {
                if !self.hashes_used.is_empty() {
                    order.order_hash = self.hashes_used[usize::from(k) % self.hashes_used.len()];
                }
            }
            Tweak::UnknownToken => order.token_id = UNKNOWN_TOKEN,
            Tweak::GtdNoExpiry => {
                order.order_type = OrderType::Gtd;
                order.expiration_s = 0;
            }
            Tweak::GtdPast(back) => {
                order.order_type = OrderType::Gtd;
                order.expiration_s = now_s - back;
            }
            Tweak::NonGtdExpiry => {
                if order.order_type == OrderType::Gtd {
                    order.order_type = OrderType::Gtc;
                }
                order.expiration_s = now_s + 5;
            }
            Tweak::Extreme(high) => {
                order.price_ticks = if high { 10_000 - tick } else { tick };
            }
        }
        self.hashes_used.push(order.order_hash);
        order
    }

    /// Applies one command `dt_ms` after the last to both and compares everything.
    fn apply(&mut self, dt_ms: u64, command: Command) {
        self.apply_at(self.now_ns + dt_ms * 1_000_000, command);
    }

    /// Applies one command stamped `stamp_ns` to both and compares everything.
    fn apply_at(&mut self, stamp_ns: u64, command: Command) {
        self.seq += 1;
        self.now_ns = self.now_ns.max(stamp_ns);
        let trades_before = all_trades(&self.engine).len();
        let batches_before = self.model.batches.len();
        let levels_before: Levels = (0..self.model_market_count())
            .map(|m| self.model.axis_levels(m))
            .collect();
        // A cancel the engine calls unchanged is answered unjournaled by the sequencer: its
        // reply must be the one applying it gives, and applying it must do no more than a
        // tick at that time does.
        let unchanged = self
            .engine
            .unchanged_by(&command)
            .map(|reply| (reply, self.engine.clone()));
        let got = self.engine.apply(self.seq, stamp_ns, &command);
        let want = self.model.apply(stamp_ns, &command);
        let at = format!("command #{} stamped {stamp_ns} ns: {command:?}", self.seq);
        if let Some((reply, mut ticked)) = unchanged {
            assert_eq!(reply, got, "unchanged_by's reply to {at}");
            ticked.apply(self.seq, stamp_ns, &Command::Tick);
            assert_eq!(
                ticked.state_hash(),
                self.engine.state_hash(),
                "{at} changed the state though unchanged_by said it would not"
            );
            *self.replies.entry("unchanged".into()).or_default() += 1;
        }
        if let Err(broken) = self.engine.check_invariants() {
            panic!("engine invariant broken after {at}: {broken}");
        }
        if let Err(broken) = self.model.self_check() {
            panic!("model bookkeeping broken after {at}: {broken}");
        }
        self.compare_trades(trades_before, batches_before, &at);
        self.compare_reply(&got, &want, batches_before, &at);
        if matches!(command, Command::SettlementUpdate { .. }) {
            for (i, t) in all_trades(&self.engine).iter().enumerate() {
                assert_eq!(
                    t.status, self.model.trades[i].status,
                    "trade {i} status after {at}"
                );
            }
        }
        self.compare_state(&at);
        self.compare_events(&command, &got, trades_before, &levels_before, &at);
        let name = |debug: String| -> String {
            debug.chars().take_while(|c| c.is_alphanumeric()).collect()
        };
        let kind = match &got {
            Reply::Rejected(r) => format!("rejected {}", name(format!("{r:?}"))),
            Reply::Placed(p) => format!("placed {:?}", p.status),
            Reply::Canceled(r) => match r.not_canceled.first() {
                Some((_, why)) => format!("not canceled {why:?}"),
                None if r.canceled.is_empty() => "cancel none".to_string(),
                None => "cancel some".to_string(),
            },
            Reply::Ok => format!("ok {}", command.type_name()),
        };
        *self.replies.entry(kind).or_default() += 1;
        self.log.push((self.seq, stamp_ns, command, got.clone()));
        self.last_reply = Some(got);
    }

    /// Markets created so far (during set-up, fewer than `market_count`).
    fn model_market_count(&self) -> usize {
        self.engine.market_count()
    }

    fn compare_reply(&self, got: &Reply, want: &MReply, batches_before: usize, at: &str) {
        match (got, want) {
            (Reply::Ok, MReply::Ok) => {}
            (Reply::Rejected(a), MReply::Rejected(b)) if a == b => {}
            (Reply::Canceled(a), MReply::Canceled(b)) if a == b => {}
            (
                Reply::Placed(p),
                MReply::Placed {
                    order_id,
                    status,
                    making,
                    taking,
                    trades,
                },
            ) if p.order_id == *order_id
                && Some(p.order_hash) == self.model.order(*order_id).map(|o| o.hash)
                && p.status == *status
                && p.making_units == *making
                && p.taking_units == *taking
                && p.trade_ids.len() == *trades
                && p.transaction_hash.is_some() == (*trades > 0) =>
            {
                if *trades > 0 {
                    // This placement's batch is the last one made by this command.
                    let batch = self.model.batches.last().expect("a batch");
                    assert!(self.model.batches.len() > batches_before, "{at}");
                    let ids: Vec<Hash32> = all_trades(&self.engine)
                        [batch.first..batch.first + batch.count]
                        .iter()
                        .map(|t| t.id)
                        .collect();
                    assert_eq!(p.trade_ids, ids, "trade ids of the placement, {at}");
                    assert_eq!(p.transaction_hash, batch.label, "batch hash, {at}");
                }
            }
            _ => panic!("reply differs after {at}\n engine: {got:?}\n model:  {want:?}"),
        }
    }

    fn compare_trades(&mut self, trades_before: usize, batches_before: usize, at: &str) {
        let engine_trades = all_trades(&self.engine);
        assert_eq!(
            engine_trades.len(),
            self.model.trades.len(),
            "number of trades after {at}\n engine new: {:?}\n model new: {:?}",
            &engine_trades[trades_before.min(engine_trades.len())..],
            &self.model.trades[trades_before.min(self.model.trades.len())..]
        );
        for (i, (e, m)) in engine_trades
            .iter()
            .zip(&self.model.trades)
            .enumerate()
            .skip(trades_before)
        {
            let got = (
                e.condition_id,
                e.taker.order_id,
                e.maker.order_id,
                e.size_units,
                e.taker.price_ticks,
                e.maker.price_ticks,
                e.taker_fee_units,
                (e.taker.address, e.taker.outcome, e.taker.side),
                (e.maker.address, e.maker.outcome, e.maker.side),
                e.status,
            );
            let want = (
                MARKETS[m.market].0,
                m.taker,
                m.maker,
                m.size,
                m.taker_price,
                m.maker_price,
                m.taker_fee,
                (m.taker_address, m.taker_outcome, m.taker_side),
                (m.maker_address, m.maker_outcome, m.maker_side),
                m.status,
            );
            assert_eq!(got, want, "trade {i} after {at}");
            let match_type = if m.taker_outcome == m.maker_outcome {
                MatchType::Complementary
            } else if m.taker_side == Side::Buy {
                MatchType::Mint
            } else {
                MatchType::Merge
            };
            assert_eq!(e.match_type, match_type, "match type of trade {i}, {at}");
            assert_eq!(
                e.match_time_ns, self.now_ns,
                "match time of trade {i}, {at}"
            );
            // Fills stay within both orders' limits.
            let taker = self.model.order(m.taker).expect("taker order");
            let maker = self.model.order(m.maker).expect("maker order");
            match taker.side {
                Side::Buy => assert!(e.taker.price_ticks <= taker.price, "{at}"),
                Side::Sell => assert!(e.taker.price_ticks >= taker.price, "{at}"),
            }
            assert_eq!(e.maker.price_ticks, maker.price, "{at}");
            assert!(
                taker.filled <= taker.size && maker.filled <= maker.size,
                "{at}"
            );
            assert_eq!(
                model::axis(e.taker.outcome, e.taker.price_ticks),
                model::axis(e.maker.outcome, e.maker.price_ticks),
                "both sides of trade {i} at one Yes-axis price, {at}"
            );
        }
        // Learn the engine's transaction hash of each new batch, and check each batch's
        // trades share it and no two batches do.
        for b in batches_before..self.model.batches.len() {
            let batch = self.model.batches[b].clone();
            let hash = engine_trades[batch.first].transaction_hash;
            for t in &engine_trades[batch.first..batch.first + batch.count] {
                assert_eq!(t.transaction_hash, hash, "one hash per batch, {at}");
            }
            assert!(
                self.model.batches.iter().all(|x| x.label != Some(hash)),
                "batch hash {hash:?} reused, {at}"
            );
            self.model.label_batch(b, hash);
        }
    }

    /// The events agree with what the command did: cancellations, trades, last-trade
    /// reports and level totals.
    fn compare_events(
        &self,
        command: &Command,
        reply: &Reply,
        trades_before: usize,
        levels_before: &Levels,
        at: &str,
    ) {
        let events = self.engine.events();
        let cancelled: Vec<OrderId> = events
            .iter()
            .filter_map(|e| match e {
                Event::Order {
                    kind: OrderEventKind::Cancellation,
                    order,
                } if order.status == OrderStatus::Canceled => Some(order.id),
                _ => None,
            })
            .collect();
        assert_eq!(
            cancelled, self.model.cancelled,
            "cancellation events of {at}"
        );
        let last_trades: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::LastTrade {
                    market,
                    outcome,
                    side,
                    price_ticks,
                    size_units,
                    ..
                } => Some((*market as usize, *outcome, *side, *price_ticks, *size_units)),
                _ => None,
            })
            .collect();
        assert_eq!(
            last_trades, self.model.last_trades,
            "last-trade events of {at}"
        );
        let trade_events: Vec<Hash32> = events
            .iter()
            .filter_map(|e| match e {
                Event::Trade(t) => Some(t.id),
                _ => None,
            })
            .collect();
        // Trades made by this command (timers first), then those whose status changed.
        let mut expected: Vec<Hash32> = all_trades(&self.engine)[trades_before..]
            .iter()
            .map(|t| t.id)
            .collect();
        if let (
            Command::SettlementUpdate {
                transaction_hash, ..
            },
            Reply::Ok,
        ) = (command, reply)
        {
            expected.extend(
                self.engine
                    .held_trades()
                    .filter(|t| t.transaction_hash == *transaction_hash)
                    .map(|t| t.id),
            );
        }
        assert_eq!(trade_events, expected, "trade events of {at}");
        // Every level whose total changed has an event, and the last event of a level
        // gives its new total.
        let mut reported: BTreeMap<(usize, AxisSide, u32), u64> = BTreeMap::new();
        for e in events {
            if let Event::Level {
                market,
                side,
                price_ticks,
                total_units,
                ..
            } = e
            {
                reported.insert((*market as usize, *side, *price_ticks), *total_units);
            }
        }
        let total = |levels: &[(u32, u64)], price: u32| {
            levels
                .iter()
                .find(|(p, _)| *p == price)
                .map_or(0, |(_, s)| *s)
        };
        let levels_after: Levels = (0..self.model_market_count())
            .map(|m| self.model.axis_levels(m))
            .collect();
        let empty = (Vec::new(), Vec::new());
        for (m, (bids, asks)) in levels_after.iter().enumerate() {
            let before = levels_before.get(m).unwrap_or(&empty);
            for (side, before, after) in [
                (AxisSide::Bid, &before.0, bids),
                (AxisSide::Ask, &before.1, asks),
            ] {
                let prices: BTreeSet<u32> =
                    before.iter().chain(after.iter()).map(|l| l.0).collect();
                for price in prices {
                    let now = total(after, price);
                    match reported.get(&(m, side, price)) {
                        Some(r) => {
                            assert_eq!(*r, now, "market {m} {side:?} {price} level event, {at}")
                        }
                        None => assert_eq!(
                            total(before, price),
                            now,
                            "market {m} {side:?} {price} changed without an event, {at}"
                        ),
                    }
                }
            }
        }
        for ((m, side, price), r) in &reported {
            let (bids, asks) = &levels_after[*m];
            let after = if *side == AxisSide::Bid { bids } else { asks };
            assert_eq!(
                *r,
                total(after, *price),
                "market {m} {side:?} {price} level event, {at}"
            );
        }
    }

    /// Reads compared once at the end: each address's trades (newest first) and claimable
    /// positions.
    fn compare_final_reads(&self) {
        let all = all_trades(&self.engine);
        for address in self.addresses() {
            let got: Vec<Hash32> = self
                .engine
                .trades_of(&address, &TradeFilter::default())
                .iter()
                .map(|t| t.id)
                .collect();
            let want: Vec<Hash32> = self
                .model
                .trades
                .iter()
                .enumerate()
                .rev()
                .filter(|(_, t)| t.taker_address == address || t.maker_address == address)
                .map(|(i, _)| all[i].id)
                .collect();
            assert_eq!(got, want, "{address:?} trades");
            let got: Vec<_> = self
                .engine
                .claimable(&address)
                .iter()
                .map(|c| {
                    (
                        c.condition_id,
                        c.token_id,
                        c.outcome,
                        c.balance_units,
                        c.reason,
                    )
                })
                .collect();
            let want: Vec<_> = self
                .model
                .claimable(&address)
                .into_iter()
                .map(|(m, outcome, units, voided)| {
                    let (condition_id, yes, no) = MARKETS[m];
                    let token = if outcome == Outcome::Yes { yes } else { no };
                    let reason = if voided {
                        ClaimReason::VoidedRefund
                    } else {
                        ClaimReason::ResolvedWinner
                    };
                    (condition_id, token, outcome, units, reason)
                })
                .collect();
            assert_eq!(got, want, "{address:?} claimable");
        }
    }

    fn compare_state(&self, at: &str) {
        let assets = self.assets();
        for address in self.addresses() {
            for &(asset, holding) in &assets {
                let e = self.engine.balance(&address, asset);
                let m = self.model.balance(&address, holding);
                assert_eq!(
                    (e.free, e.reserved, e.debt),
                    (m.free, m.reserved, m.debt),
                    "{address:?} {holding:?} balance (free, reserved, debt) after {at}"
                );
            }
            let got: Vec<_> = self
                .engine
                .open_orders(&address, &OrderFilter::default())
                .iter()
                .map(|o| {
                    (
                        o.id,
                        o.filled_units,
                        o.status,
                        o.size_units,
                        o.price_ticks,
                        o.side,
                        (o.condition_id, o.token_id, o.outcome),
                        o.order_type,
                        o.expiration_s,
                        o.hash,
                        o.created_ns,
                        o.maker,
                    )
                })
                .collect();
            let want: Vec<_> = self
                .model
                .open_orders(&address)
                .iter()
                .map(|o| {
                    let status = match o.place {
                        model::Place::Delayed { .. } => OrderStatus::Delayed,
                        _ => OrderStatus::Live,
                    };
                    let (condition_id, yes, no) = MARKETS[o.market];
                    let token_id = if o.outcome == Outcome::Yes { yes } else { no };
                    (
                        o.id,
                        o.filled,
                        status,
                        o.size,
                        o.price,
                        o.side,
                        (condition_id, token_id, o.outcome),
                        o.kind,
                        o.expiration_s,
                        o.hash,
                        o.created_ns,
                        o.maker,
                    )
                })
                .collect();
            assert_eq!(got, want, "{address:?} open orders after {at}");
        }
        for (m, &(_, yes, no)) in MARKETS[..self.model_market_count()].iter().enumerate() {
            for (token, outcome) in [(yes, Outcome::Yes), (no, Outcome::No)] {
                let book = self.engine.book(&token, usize::MAX).expect("the market");
                let (bids, asks) = self.model.book(m, outcome);
                assert_eq!(
                    (&book.bids, &book.asks),
                    (&bids, &asks),
                    "market {m} {outcome:?} book (bids, asks) after {at}"
                );
            }
        }
    }
}

/// Runs a whole stream: compared step by step, then replayed and restored from a snapshot.
/// Returns how often each path was taken.
fn run_stream(setup: &Setup, steps: &[Step]) -> BTreeMap<String, u64> {
    let mut run = Run::new(setup);
    let snapshot_step = steps.len() * usize::from(setup.snapshot_at) / 256;
    let mut snapshot: Option<(usize, Vec<u8>, Bytes32)> = None;
    for (i, step) in steps.iter().enumerate() {
        if i == snapshot_step {
            snapshot = Some((
                run.log.len(),
                run.engine.snapshot_bytes(),
                run.engine.state_hash(),
            ));
        }
        let clock_ns = run.now_ns + step.dt_ms * 1_000_000;
        let command = run.command(&step.op, clock_ns);
        run.apply_at(clock_ns - step.stale_ms * 1_000_000, command);
    }
    // Settlement states agree at the end.
    for (i, t) in all_trades(&run.engine).iter().enumerate() {
        assert_eq!(t.status, run.model.trades[i].status, "trade {i} status");
    }
    run.compare_final_reads();
    let forgotten_cancels = run.check_forgetting(1 + usize::from(setup.snapshot_at) % 13);
    // Determinism: the same stream into a fresh engine gives the same replies and state.
    run.check_replay();
    // A snapshot taken mid-stream, fed the rest, ends in the same state.
    if let Some((from, bytes, hash_then)) = snapshot {
        let mut restored = Engine::from_snapshot_bytes(&bytes).expect("snapshot decodes");
        assert_eq!(restored.state_hash(), hash_then, "restored state hash");
        for (seq, now_ns, command, reply) in &run.log[from..] {
            assert_eq!(
                &restored.apply(*seq, *now_ns, command),
                reply,
                "restored reply"
            );
        }
        assert_eq!(
            restored.state_hash(),
            run.engine.state_hash(),
            "snapshot + rest state hash"
        );
    }
    let mut stats = run.replies;
    *stats
        .entry("cancel of a forgotten order".into())
        .or_default() += forgotten_cancels;
    for (k, v) in &run.model.stats {
        *stats.entry(k.to_string()).or_default() += v;
    }
    stats
}

/// `twin`'s reply with each cancel refused as `Forgotten` given the reason `plain` gave, which
/// must be one the history store gives for a closed order (not owner, already filled or
/// already canceled): the engine forgot the order, the gateway finds it in the store.
fn resolve_forgotten(twin: Reply, plain: &Reply) -> Reply {
    let (Reply::Canceled(mut report), Reply::Canceled(plain_report)) = (twin.clone(), plain) else {
        return twin;
    };
    for (id, reason) in report.not_canceled.iter_mut() {
        if *reason == NotCanceled::Forgotten {
            let given = plain_report
                .not_canceled
                .iter()
                .find(|(other, _)| other == id)
                .map(|(_, r)| *r);
            assert!(
                matches!(
                    given,
                    Some(
                        NotCanceled::NotOwner
                            | NotCanceled::AlreadyFilled
                            | NotCanceled::AlreadyCanceled
                    )
                ),
                "order {id} forgotten where the engine that forgets nothing says {given:?}"
            );
            *reason = given.unwrap_or(NotCanceled::NotFound);
        }
    }
    Reply::Canceled(report)
}

/// The trades the engine holds, oldest first.
fn all_trades(engine: &Engine) -> Vec<TradeView> {
    engine.held_trades().copied().collect()
}

proptest! {
    // PROPTEST_CASES=10000 for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256),
        max_shrink_iters: 4_096,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_agrees_with_the_reference_model(
        setup in setup_strategy(),
        steps in prop::collection::vec(step_strategy(), 50..300),
    ) {
        run_stream(&setup, &steps);
    }
}

/// The generator reaches every rule the model checks: a fixed sample of streams takes each
/// path at least once (so a change to the generator cannot silently stop testing one).
#[test]
fn the_streams_cover_every_path() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let streams = (
        setup_strategy(),
        prop::collection::vec(step_strategy(), 50..300),
    );
    let mut stats: BTreeMap<String, u64> = BTreeMap::new();
    model::DEBT_REPAID.with(|c| c.set(0));
    for _ in 0..64 {
        let (setup, steps) = streams.new_tree(&mut runner).expect("a stream").current();
        for (k, v) in run_stream(&setup, &steps) {
            *stats.entry(k).or_default() += v;
        }
    }
    stats.insert("debt repaid".into(), model::DEBT_REPAID.with(|c| c.get()));
    for (k, v) in &stats {
        println!("{v:>7}  {k}");
    }
    let missing: Vec<&str> = EXPECTED_PATHS
        .iter()
        .copied()
        .filter(|k| stats.get(*k).copied().unwrap_or(0) == 0)
        .collect();
    assert!(missing.is_empty(), "paths never taken: {missing:?}");
}

/// Paths `the_streams_cover_every_path` requires.
const EXPECTED_PATHS: &[&str] = &[
    "placed Live",
    "placed Matched",
    "placed Delayed",
    "placed fok",
    "placed fak",
    "placed resting type, filled",
    "placed resting type, partly filled",
    "placed resting type, no fill",
    "fill complementary",
    "fill mint",
    "fill merge",
    "fill with fee",
    "crossing buy with a fee",
    "debt covered from an open order",
    "self-trade cancel",
    "gtd expired",
    "delayed: taking",
    "delayed: killed",
    "delayed: market not active",
    "batch failed",
    "batch mined",
    "batch confirmed",
    "batch retrying",
    "reversal into debt",
    "debt repaid",
    "token debt settled in an ended market",
    "cancel some",
    "unchanged",
    "not canceled NotFound",
    "not canceled NotOwner",
    "not canceled AlreadyFilled",
    "not canceled AlreadyCanceled",
    "cancel of a forgotten order",
    "rejected UnknownToken",
    "rejected MarketNotActive",
    "rejected PriceOutOfRange",
    "rejected PriceOffTick",
    "rejected SizeNotWhole",
    "rejected BelowMinimumSize",
    "rejected GtdWithoutExpiration",
    "rejected ExpirationPast",
    "rejected ExpirationNotGtd",
    "rejected PostOnlyNeedsRestingType",
    "rejected DuplicateOrder",
    "rejected SignerNotController",
    "ok unlink_account",
    "rejected NotEnoughBalance",
    "rejected PostOnlyWouldCross",
    "rejected FokNotFilled",
    "rejected FakNoMatch",
    "rejected WithdrawalExceedsFree",
    "rejected ZeroAmount",
    "rejected UnknownTransaction",
    "rejected InvalidStatusChange",
    "ok withdraw",
    "ok deposit",
    "ok resolve_market",
];

// ----- scenarios: edge cases driven by hand through the same comparison ------------------

/// A market with `fee_bps` and `delay_ms`; traders 1..=4 funded with 1,000 USDC and 100 of
/// each token, trader 5 linked without an account.
fn scenario(fee_bps: u32, delay_ms: u64) -> Run {
    Run::new(&Setup {
        markets: vec![MarketParams {
            tick: 100,
            min_shares: 1,
            fee_bps,
            delay_ms,
        }],
        funding: vec![(1_000 * USDC, 100, 100); 4],
        snapshot_at: 0,
    })
}

impl Run {
    /// Places an order of trader `n` one millisecond after the last command (a GTD
    /// expires at the next whole second).
    fn put(
        &mut self,
        n: u8,
        token: Bytes32,
        side: Side,
        price_ticks: u32,
        shares: u64,
        order_type: OrderType,
    ) -> Reply {
        let mut order = NewOrder {
            order_hash: self.fresh_hash(),
            maker: account(n),
            signer: signer(n),
            token_id: token,
            side,
            price_ticks,
            size_units: shares * SHARE,
            order_type,
            post_only: false,
            expiration_s: 0,
            signer_verified: false,
            signed: Default::default(),
        };
        if order_type == OrderType::Gtd {
            order.expiration_s = self.now_ns / NS_PER_S + 1;
        }
        self.send(1, Command::PlaceOrder(order))
    }

    /// Applies a command `dt_ms` after the last and returns the engine's reply.
    fn send(&mut self, dt_ms: u64, command: Command) -> Reply {
        self.apply(dt_ms, command);
        self.last_reply.clone().expect("a reply")
    }

    fn cancel(&mut self, n: u8, order_id: OrderId) -> Reply {
        self.send(
            1,
            Command::CancelOrder {
                requester: account(n),
                order_id,
                condition_id: None,
                signer: None,
            },
        )
    }

    /// Replays the log into a fresh engine, hinted ahead as the sequencer hints it (the
    /// run itself was not): same replies, same state hash.
    fn check_replay(&self) {
        let mut replay = Engine::default();
        for (i, (seq, now_ns, command, reply)) in self.log.iter().enumerate() {
            replay.prefetch_ahead(i, |j| self.log.get(j).map(|entry| &entry.2));
            assert_eq!(
                &replay.apply(*seq, *now_ns, command),
                reply,
                "replayed reply"
            );
        }
        assert_eq!(replay.state_hash(), self.engine.state_hash(), "replay");
    }

    /// Forgetting changes nothing but what the engine holds: the same stream with a
    /// `ForgetHistory` through the record before it ahead of every `every`-th command gives
    /// the same replies and events, and at the end the engine holds exactly the trades that
    /// were not yet final at the last `ForgetHistory`; a snapshot of it restores it.
    fn check_forgetting(&self, every: usize) -> u64 {
        let mut forgotten_cancels = 0;
        let mut twin = Engine::default();
        let mut twin_seq = 0;
        let mut final_at_last_forget: BTreeSet<u64> = BTreeSet::new();
        let mut final_now: BTreeSet<u64> = BTreeSet::new();
        let mut plain = Engine::default();
        for (i, (seq, now_ns, command, reply)) in self.log.iter().enumerate() {
            if i % every == every - 1 {
                let forget = Command::ForgetHistory {
                    through_seq: twin_seq,
                };
                twin_seq += 1;
                // Stamped with no later time than the last command: no timer falls due in it.
                assert_eq!(twin.apply(twin_seq, 0, &forget), Reply::Ok);
                assert!(twin.events().is_empty(), "forgetting makes no event");
                final_at_last_forget = final_now.clone();
            }
            twin_seq += 1;
            let twin_reply = twin.apply(twin_seq, *now_ns, command);
            if let Reply::Canceled(report) = &twin_reply {
                forgotten_cancels += report
                    .not_canceled
                    .iter()
                    .filter(|(_, r)| *r == NotCanceled::Forgotten)
                    .count() as u64;
            }
            assert_eq!(&resolve_forgotten(twin_reply, reply), reply, "twin reply");
            plain.apply(*seq, *now_ns, command);
            assert_eq!(twin.events(), plain.events(), "twin events");
            for event in plain.events() {
                if let Event::Trade(t) = event {
                    if t.status.is_final() {
                        final_now.insert(t.index);
                    }
                }
            }
        }
        let held: Vec<u64> = twin.held_trades().map(|t| t.index).collect();
        let expected: Vec<u64> = plain
            .held_trades()
            .map(|t| t.index)
            .filter(|i| !final_at_last_forget.contains(i))
            .collect();
        assert_eq!(held, expected, "held trades");
        assert_eq!(twin.trade_count(), plain.trade_count());
        for address in self.addresses() {
            let everything = TradeFilter::default();
            let twin_list: Vec<u64> = twin
                .trades_of(&address, &everything)
                .iter()
                .map(|t| t.index)
                .collect();
            let plain_list: Vec<u64> = plain
                .trades_of(&address, &everything)
                .iter()
                .map(|t| t.index)
                .filter(|i| !final_at_last_forget.contains(i))
                .collect();
            assert_eq!(twin_list, plain_list, "an account's held trades");
        }
        let restored = Engine::from_snapshot_bytes(&twin.snapshot_bytes()).expect("decodes");
        assert_eq!(restored.state_hash(), twin.state_hash(), "restored twin");
        forgotten_cancels
    }
}

fn placed(reply: &Reply) -> &Placement {
    match reply {
        Reply::Placed(p) => p,
        other => panic!("expected a placement, got {other:?}"),
    }
}

#[test]
fn a_delayed_order_that_rests_queues_behind_orders_already_on_the_book() {
    let mut run = scenario(0, 250);
    let ask = run.put(1, YES, Side::Sell, 5_000, 1, OrderType::Gtc);
    let delayed = run.put(2, YES, Side::Buy, 5_000, 3, OrderType::Gtc);
    assert_eq!(placed(&delayed).status, OrderStatus::Delayed);
    run.cancel(1, placed(&ask).order_id);
    // Enters the book at 0.50 while order 2 is still waiting.
    let early = run.put(3, YES, Side::Buy, 5_000, 1, OrderType::Gtc);
    assert_eq!(placed(&early).status, OrderStatus::Live);
    run.send(300, Command::Tick);
    // Order 2 rests now, behind order 4: a seller of 1 meets order 4 first.
    run.put(4, YES, Side::Sell, 5_000, 1, OrderType::Gtc);
    run.send(300, Command::Tick);
    let trades = all_trades(&run.engine);
    let last = trades.last().expect("a trade");
    assert_eq!(last.maker.order_id, placed(&early).order_id);
    run.check_replay();
}

#[test]
fn a_buy_that_will_rest_holds_no_fee_and_a_crossing_one_holds_its_fills_fees() {
    let mut run = scenario(100, 0);
    run.send(
        1,
        Command::Deposit {
            address: account(5),
            asset: Asset::Collateral,
            amount: 5 * USDC,
        },
    );
    // 10 at 0.50 is 5 USDC, all it holds: a maker pays no fee.
    let r = run.put(5, YES, Side::Buy, 5_000, 10, OrderType::Gtc);
    assert_eq!(placed(&r).status, OrderStatus::Live);
    run.cancel(5, placed(&r).order_id);
    // Against an ask at 0.50 it would pay 5 USDC and a 0.05 fee: refused.
    run.put(1, YES, Side::Sell, 5_000, 10, OrderType::Gtc);
    let r = run.put(5, YES, Side::Buy, 5_000, 10, OrderType::Gtc);
    assert_eq!(r, Reply::Rejected(Reject::NotEnoughBalance));
    run.check_replay();
}

#[test]
fn expiry_fires_before_a_due_delayed_order_and_a_delayed_gtd_can_expire() {
    let mut run = scenario(0, 250);
    // A GTD ask expiring at the next second, and a delayed bid that would take it.
    run.put(1, YES, Side::Sell, 5_000, 2, OrderType::Gtd);
    let bid = run.put(2, YES, Side::Buy, 5_000, 2, OrderType::Gtc);
    assert_eq!(placed(&bid).status, OrderStatus::Delayed);
    let gtd_bid = run.put(3, YES, Side::Buy, 5_100, 2, OrderType::Gtd);
    assert_eq!(placed(&gtd_bid).status, OrderStatus::Delayed);
    // Past both the expiry and the delay: the ask and the delayed GTD expire first, then
    // the delayed GTC finds nothing and rests.
    run.send(1_500, Command::Tick);
    assert!(all_trades(&run.engine).is_empty());
    assert_eq!(
        run.engine.book(&YES, 10).unwrap().bids,
        vec![(5_000, 2 * SHARE)]
    );
    run.check_replay();
}

#[test]
fn a_delayed_order_is_cancelled_if_the_market_is_paused_when_it_is_due() {
    let mut run = scenario(0, 250);
    run.put(1, YES, Side::Sell, 5_000, 2, OrderType::Gtc);
    run.put(2, YES, Side::Buy, 5_000, 2, OrderType::Gtc);
    run.send(
        1,
        Command::PauseMarket {
            condition_id: CONDITION,
        },
    );
    run.send(300, Command::Tick);
    assert!(run
        .engine
        .open_orders(&account(2), &OrderFilter::default())
        .is_empty());
    // Paused then resumed before the due time: it matches.
    run.send(
        1,
        Command::ResumeMarket {
            condition_id: CONDITION,
        },
    );
    run.put(2, YES, Side::Buy, 5_000, 2, OrderType::Gtc);
    run.send(
        1,
        Command::PauseMarket {
            condition_id: CONDITION,
        },
    );
    run.send(
        1,
        Command::ResumeMarket {
            condition_id: CONDITION,
        },
    );
    run.send(300, Command::Tick);
    assert_eq!(all_trades(&run.engine).len(), 1);
    run.check_replay();
}

#[test]
fn delayed_orders_due_together_run_in_due_order_and_resolution_cancels_the_rest() {
    let mut run = scenario(0, 250);
    run.put(1, YES, Side::Sell, 5_000, 2, OrderType::Gtc);
    let first = run.put(2, YES, Side::Buy, 5_000, 2, OrderType::Gtc);
    let second = run.put(3, NO, Side::Sell, 5_000, 2, OrderType::Gtc);
    let third = run.put(4, YES, Side::Buy, 5_500, 2, OrderType::Fak);
    run.send(300, Command::Tick);
    let trades = all_trades(&run.engine);
    assert_eq!(trades.len(), 1);
    assert_eq!(trades[0].taker.order_id, placed(&first).order_id);
    // The FAK found nothing and was killed; the other rests.
    let reply = run.cancel(4, placed(&third).order_id);
    assert!(
        matches!(reply, Reply::Canceled(r) if r.not_canceled[0].1 == NotCanceled::AlreadyCanceled)
    );
    let _ = second;
    run.put(2, YES, Side::Sell, 5_000, 1, OrderType::Gtc);
    run.send(
        1,
        Command::ResolveMarket {
            condition_id: CONDITION,
            resolution: Resolution::No,
        },
    );
    for n in 1..=4 {
        assert!(run
            .engine
            .open_orders(&account(n), &OrderFilter::default())
            .is_empty());
    }
    run.check_replay();
}

#[test]
fn a_failed_batch_with_one_maker_twice_leaves_debt_that_credits_repay() {
    let mut run = scenario(100, 0);
    run.put(1, YES, Side::Sell, 4_900, 1, OrderType::Gtc);
    run.put(3, NO, Side::Buy, 5_000, 2, OrderType::Gtc);
    run.put(1, YES, Side::Sell, 5_000, 1, OrderType::Gtc);
    let taker = run.put(2, YES, Side::Buy, 5_000, 4, OrderType::Gtc);
    assert_eq!(placed(&taker).trade_ids.len(), 3);
    // Both sides move what they got on.
    let free = run.engine.balance(&account(1), Asset::Collateral).free;
    run.send(
        1,
        Command::Withdraw {
            address: account(1),
            asset: Asset::Collateral,
            amount: free,
        },
    );
    run.put(2, YES, Side::Sell, 9_900, 104, OrderType::Gtc);
    run.put(1, NO, Side::Sell, 9_900, 102, OrderType::Gtc);
    let tx = placed(&taker).transaction_hash.expect("a batch");
    for status in [TradeStatus::Retrying, TradeStatus::Failed] {
        run.send(
            1,
            Command::SettlementUpdate {
                transaction_hash: tx,
                status,
            },
        );
    }
    // Trader 1 owes collateral and has no BUY to cancel for it: the debt stays. Trader 2
    // owed Yes its offer held: the offer is cancelled and its tokens repay the debt.
    assert!(run.engine.balance(&account(1), Asset::Collateral).debt > 0);
    assert_eq!(run.engine.balance(&account(2), Asset::Token(YES)).debt, 0);
    assert!(run.model.cancelled.len() == 1, "{:?}", run.model.cancelled);
    run.send(
        1,
        Command::Deposit {
            address: account(1),
            asset: Asset::Collateral,
            amount: 3 * USDC,
        },
    );
    run.send(
        1,
        Command::CancelAll {
            requester: account(2),
        },
    );
    run.check_replay();
}

#[test]
fn a_fok_passes_over_its_own_orders_and_fills_from_others() {
    let mut run = scenario(33, 0);
    run.put(2, YES, Side::Sell, 4_800, 3, OrderType::Gtc);
    run.put(1, NO, Side::Buy, 5_100, 1, OrderType::Gtc); // Yes ask at 0.49
    run.put(1, YES, Side::Sell, 5_000, 2, OrderType::Gtc);
    let fok = run.put(2, YES, Side::Buy, 5_000, 4, OrderType::Fok);
    assert_eq!(fok, Reply::Rejected(Reject::FokNotFilled));
    let fok = run.put(2, YES, Side::Buy, 5_000, 3, OrderType::Fok);
    assert_eq!(placed(&fok).status, OrderStatus::Matched);
    let id = placed(&fok).order_id;
    let reply = run.cancel(2, id);
    let already_filled = vec![(id, NotCanceled::AlreadyFilled)];
    assert!(matches!(reply, Reply::Canceled(r) if r.not_canceled.as_slice() == already_filled));
    // A selling taker pays its fee out of the proceeds.
    run.put(3, YES, Side::Buy, 4_700, 3, OrderType::Gtc);
    let fak = run.put(4, YES, Side::Sell, 4_000, 5, OrderType::Fak);
    assert_eq!(placed(&fak).status, OrderStatus::Matched);
    run.check_replay();
}

#[test]
fn timers_fire_exactly_at_their_due_time_and_stale_stamps_do_not_move_time_back() {
    let mut run = scenario(0, 250);
    // Start on a whole second.
    let second = run.now_ns / NS_PER_S + 1;
    run.apply_at(second * NS_PER_S, Command::Tick);
    run.put(1, YES, Side::Sell, 5_000, 1, OrderType::Gtc);
    let placed_at = run.now_ns + 1_000_000;
    let delayed = run.put(2, YES, Side::Buy, 5_000, 1, OrderType::Gtc);
    assert_eq!(placed(&delayed).status, OrderStatus::Delayed);
    let due = placed_at + 250 * 1_000_000;
    run.apply_at(due - 1, Command::Tick);
    assert!(all_trades(&run.engine).is_empty(), "one nanosecond early");
    // A stale stamp counts as the latest time seen: still not due.
    run.apply_at(due - 5_000_000_000, Command::Tick);
    assert!(all_trades(&run.engine).is_empty());
    run.apply_at(due, Command::Tick);
    assert_eq!(all_trades(&run.engine).len(), 1, "due exactly now");
    // A GTD expiring at the next second leaves at that second, not a nanosecond before.
    let gtd = run.put(3, YES, Side::Buy, 4_000, 1, OrderType::Gtd);
    let id = placed(&gtd).order_id;
    let expiry = (run.now_ns / NS_PER_S + 1) * NS_PER_S;
    run.apply_at(expiry - 1, Command::Tick);
    assert!(run.engine.open_order(id).is_some());
    run.apply_at(expiry - 2_000_000_000, Command::Tick);
    assert!(run.engine.open_order(id).is_some());
    run.apply_at(expiry, Command::Tick);
    assert!(run.engine.open_order(id).is_none());
    run.check_replay();
}

// ----- regressions of disagreements the model found -------------------------------------------
//
// A departure from the rules is modelled as a quirk (`ENGINE_QUIRKS`) while it exists, so the
// differential test keeps comparing everything else; these tests state the rules that were
// once broken.

#[test]
fn a_delayed_fok_that_cannot_fill_is_still_rejected_at_placement() {
    let mut spec = support::market_spec();
    spec.taker_delay_ms = 250;
    let mut h = support::Harness::with_market(spec);
    h.gtc(1, YES, Side::Sell, 5_000, 1);
    let mut fok = h.order(2, YES, Side::Buy, 5_000, 3);
    fok.order_type = OrderType::Fok;
    // 1 share offered by others, 3 wanted: the rule rejects now; the engine answers delayed.
    assert_eq!(h.reject(fok), Reject::FokNotFilled);
}

#[test]
fn a_delayed_fak_with_nothing_from_others_is_still_rejected_at_placement() {
    let mut spec = support::market_spec();
    spec.taker_delay_ms = 250;
    let mut h = support::Harness::with_market(spec);
    h.gtc(2, YES, Side::Sell, 5_000, 1);
    let mut fak = h.order(2, YES, Side::Buy, 5_000, 3);
    fak.order_type = OrderType::Fak;
    // Only the maker's own ask crosses: the rule rejects now; the engine answers delayed.
    assert_eq!(h.reject(fak), Reject::FakNoMatch);
}
