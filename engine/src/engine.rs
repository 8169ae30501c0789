//! The engine's state and its one entry point, `apply`: a command in, a reply and events
//! out. Placing, cancelling, timers and settlement live in their own modules.

use std::collections::{BTreeSet, VecDeque};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::command::{ApiKeySpec, Asset, Command, MarketSpec, Resolution};
use crate::event::{Event, MarketChange, OrderStatus};
use crate::key_hash::KeySet;
use crate::ledger::Ledger;
use crate::market::{MarketState, Markets};
use crate::orders::OrderTable;
use crate::reject::Reject;
use crate::reply::Reply;
use crate::room::vec_with_room;
use crate::seen_hashes::SeenHashes;
use crate::trades::TradeLog;
use crate::types::{Address, AxisSide, Bytes32, Hash32, OrderId, TimestampNs, Units};

/// Events one command is expected to produce at most (more grow the list).
pub(crate) const EVENTS_PREALLOCATED: usize = 1024;

/// An event to touch the event list's pages with.
const NO_EVENT: Event = Event::Market {
    market: 0,
    change: MarketChange::Paused,
    market_seq: 0,
};

/// Limits that bound the engine's memory (STYLE: a limit on everything).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineLimits {
    /// Open orders across all markets.
    pub open_orders_max: usize,
    /// Order slots made at start-up.
    pub open_orders_preallocated: usize,
    /// Orders accepted over the engine's life whose records (hash, fate, and the queue of
    /// closed orders the history store has yet to take) have room made at start-up; later
    /// ones grow the records.
    pub orders_preallocated: usize,
    /// Trades whose records have room made at start-up; later ones grow the records.
    pub trades_preallocated: usize,
    /// Whether the room made at start-up is also touched then, so that the operating system
    /// maps its pages before the first command rather than on the sequencer thread (a
    /// first touch costs microseconds a page). Costs the memory up front.
    pub prefault: bool,
    /// Markets.
    pub markets_max: usize,
    /// Largest order, in base units.
    pub order_size_units_max: Units,
    /// Largest balance any address may hold of one asset, in base units.
    pub balance_units_max: Units,
}

impl Default for EngineLimits {
    fn default() -> Self {
        EngineLimits {
            open_orders_max: 10_000_000,
            open_orders_preallocated: 65_536,
            orders_preallocated: 65_536,
            trades_preallocated: 16_384,
            prefault: false,
            markets_max: 100_000,
            order_size_units_max: 1_000_000_000 * crate::types::UNITS_PER_SHARE,
            balance_units_max: 1 << 62,
        }
    }
}

/// What happened to an order that is no longer open (for cancel replies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedOrder {
    /// The owner's account index.
    pub account: u32,
    /// `Matched` or `Canceled`.
    pub status: OrderStatus,
}

/// An API key record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    /// The owning address.
    pub address: Address,
    /// The L1 nonce it was created with (a uint256, big-endian).
    pub nonce: Bytes32,
}

/// The deterministic state machine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Engine {
    pub(crate) limits: EngineLimits,
    pub(crate) markets: Markets,
    pub(crate) orders: OrderTable,
    pub(crate) ledger: Ledger,
    pub(crate) trades: TradeLog,
    /// Batches whose trades became final, with the sequence of the record that made them
    /// so, oldest first: they leave with the `ForgetHistory` that covers that sequence.
    pub(crate) retired_batches: VecDeque<(u64, u64)>,
    /// The highest `through_seq` of the `ForgetHistory` commands applied: what left the engine
    /// is in a history store that holds at least this much.
    pub(crate) forgotten_through: u64,
    /// The newest term begun (`BeginTerm`) and the sequence of its record; 0 and 0 before any.
    pub(crate) term: (u64, u64),
    pub(crate) seen_hashes: SeenHashes,
    /// Orders that closed, with the sequence of the record that closed them and their
    /// hashes, oldest first: their fates leave with the `ForgetHistory` that covers it.
    pub(crate) retired_orders: VecDeque<(u64, OrderId, Hash32)>,
    pub(crate) expiries: BTreeSet<(u64, OrderId)>,
    pub(crate) delayed: BTreeSet<(TimestampNs, OrderId)>,
    pub(crate) controllers: KeySet<(Address, Address)>,
    pub(crate) api_keys: FxHashMap<[u8; 16], ApiKeyRecord>,
    /// Keys ever created per address and L1 nonce (API.md §7: the next key's id derives
    /// from it, so a deleted key never comes back).
    pub(crate) api_key_creations: FxHashMap<(Address, Bytes32), u32>,
    /// API keys with heartbeats running, and their addresses (see `heartbeats.rs`).
    pub(crate) heartbeats: std::collections::BTreeMap<[u8; 16], Address>,
    /// Open `/ws/user` connections with `cancel_on_disconnect`, by (process, connection),
    /// and their addresses (see `dead_man.rs`).
    pub(crate) dead_man_switches: std::collections::BTreeMap<(u64, u64), Address>,
    /// The next user operation sequence number of each smart account (see `user_ops.rs`).
    pub(crate) user_op_nonces: FxHashMap<Address, u64>,
    /// Receipts of the user operations carried out, by their hash.
    pub(crate) user_op_receipts: FxHashMap<Hash32, crate::user_ops::UserOpReceipt>,
    pub(crate) now_ns: TimestampNs,
    pub(crate) last_seq: u64,
    pub(crate) collateral_deposited_units: u128,
    pub(crate) collateral_withdrawn_units: u128,
    pub(crate) redemption_payouts_units: FxHashMap<u32, Units>,
    #[serde(skip)]
    pub(crate) events: Vec<Event>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(EngineLimits::default())
    }
}

impl Engine {
    /// An empty engine.
    pub fn new(limits: EngineLimits) -> Engine {
        Engine {
            limits,
            markets: Markets::default(),
            orders: OrderTable::new(
                limits.open_orders_max,
                limits.open_orders_preallocated,
                limits.orders_preallocated,
                limits.prefault,
            ),
            ledger: Ledger::default(),
            trades: TradeLog::with_room(limits.trades_preallocated),
            retired_batches: VecDeque::new(),
            forgotten_through: 0,
            term: (0, 0),
            seen_hashes: SeenHashes::with_room(limits.orders_preallocated),
            retired_orders: VecDeque::with_capacity(limits.orders_preallocated),
            expiries: BTreeSet::new(),
            delayed: BTreeSet::new(),
            controllers: KeySet::default(),
            api_keys: FxHashMap::default(),
            api_key_creations: FxHashMap::default(),
            heartbeats: std::collections::BTreeMap::new(),
            dead_man_switches: std::collections::BTreeMap::new(),
            user_op_nonces: FxHashMap::default(),
            user_op_receipts: FxHashMap::default(),
            now_ns: 0,
            last_seq: 0,
            collateral_deposited_units: 0,
            collateral_withdrawn_units: 0,
            redemption_payouts_units: FxHashMap::default(),
            events: vec_with_room(EVENTS_PREALLOCATED, NO_EVENT, limits.prefault),
        }
    }

    /// Applies one command stamped with sequence `seq` and time `now_ns`.
    ///
    /// Time never runs backwards inside the engine: an earlier stamp counts as the last one.
    /// Timers that are due (GTD expiry, taker delay) fire first. The events of this command
    /// are in `events()` until the next call.
    pub fn apply(&mut self, seq: u64, now_ns: TimestampNs, command: &Command) -> Reply {
        self.events.clear();
        self.last_seq = seq;
        self.now_ns = self.now_ns.max(now_ns);
        self.fire_due_timers();
        self.apply_command(command)
    }

    fn apply_command(&mut self, command: &Command) -> Reply {
        match command {
            Command::PlaceOrder(order) => self.place(order),
            Command::CancelOrder {
                requester,
                order_id,
                condition_id,
                signer,
            } => Reply::Canceled(self.cancel_one(
                requester,
                *order_id,
                condition_id.as_ref(),
                signer.as_ref(),
            )),
            Command::CancelMarket {
                requester,
                condition_id,
                token_id,
                signer,
            } => {
                let signer_controls = signer.is_none_or(|s| self.may_sign_for(requester, &s));
                self.cancel_market(requester, condition_id, token_id.as_ref(), signer_controls)
            }
            Command::CancelAll { requester } => Reply::Canceled(self.cancel_all(requester)),
            Command::StartHeartbeats { key_id, address } => {
                self.start_heartbeats(*key_id, *address)
            }
            Command::StopHeartbeats { key_id } => self.stop_heartbeats(key_id),
            Command::HeartbeatsExpired { key_id, address } => {
                self.expire_heartbeats(key_id, address)
            }
            Command::RedeemUserOp {
                user_op_hash,
                sender,
                signer,
                nonce,
                condition_id,
            } => self.redeem_user_op(user_op_hash, sender, signer, *nonce, condition_id),
            Command::Tick => Reply::Ok,
            Command::ForgetHistory { through_seq } => {
                self.forget_history(*through_seq);
                Reply::Ok
            }
            Command::ArmDeadManSwitch {
                process,
                connection,
                address,
            } => self.arm_dead_man_switch((*process, *connection), *address),
            Command::DeadManSwitchTripped {
                process,
                connection,
                address,
            } => self.trip_dead_man_switch((*process, *connection), address),
            Command::DeadManSwitchesLost { process } => self.lose_dead_man_switches(*process),
            Command::DisarmDeadManSwitches { keep } => self.disarm_dead_man_switches(keep),
            Command::BeginTerm { term } => {
                if *term > self.term.0 {
                    self.term = (*term, self.last_seq);
                }
                Reply::Ok
            }
            other => self
                .apply_admin(other)
                .map_or_else(Reply::Rejected, |()| Reply::Ok),
        }
    }

    /// The events of the last command.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The sequence number of the last command applied.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The engine's time: the latest stamp seen.
    pub fn now_ns(&self) -> TimestampNs {
        self.now_ns
    }

    /// The engine's limits.
    pub fn limits(&self) -> &EngineLimits {
        &self.limits
    }

    fn apply_admin(&mut self, command: &Command) -> Result<(), Reject> {
        match command {
            Command::CreateMarket(spec) => self.create_market(spec),
            Command::PauseMarket { condition_id } => {
                self.set_market_state(condition_id, MarketState::Paused)
            }
            Command::ResumeMarket { condition_id } => {
                self.set_market_state(condition_id, MarketState::Active)
            }
            Command::ResolveMarket {
                condition_id,
                resolution,
            } => self.resolve_market(condition_id, *resolution),
            Command::SetTickSize {
                condition_id,
                tick_size_ticks,
            } => self.set_tick_size(condition_id, *tick_size_ticks),
            Command::LinkAccount { account, owner } => {
                self.controllers.insert((*account, *owner));
                Ok(())
            }
            Command::UnlinkAccount { account, owner } => {
                self.controllers.remove(&(*account, *owner));
                Ok(())
            }
            Command::CreateApiKey(spec) => self.create_api_key(spec, None),
            Command::CreateCountedApiKey {
                spec,
                creations_before,
            } => self.create_api_key(spec, Some(*creations_before)),
            Command::DeleteApiKey {
                address,
                signer,
                key_id,
            } => self.delete_api_key(address, signer, key_id),
            Command::Deposit {
                address,
                asset,
                amount,
            } => self.deposit(*address, *asset, *amount),
            Command::Withdraw {
                address,
                asset,
                amount,
            } => self.withdraw(address, *asset, *amount),
            Command::SettlementUpdate {
                transaction_hash,
                status,
            } => self.update_settlement(transaction_hash, *status),
            Command::RecordRedemption {
                address,
                condition_id,
            } => self.record_redemption(address, condition_id),
            Command::PlaceOrder(_)
            | Command::CancelOrder { .. }
            | Command::CancelMarket { .. }
            | Command::CancelAll { .. }
            | Command::StartHeartbeats { .. }
            | Command::StopHeartbeats { .. }
            | Command::HeartbeatsExpired { .. }
            | Command::RedeemUserOp { .. }
            | Command::ForgetHistory { .. }
            | Command::BeginTerm { .. }
            | Command::ArmDeadManSwitch { .. }
            | Command::DeadManSwitchTripped { .. }
            | Command::DeadManSwitchesLost { .. }
            | Command::DisarmDeadManSwitches { .. }
            | Command::Tick => unreachable!("handled by apply"),
        }
    }

    fn create_market(&mut self, spec: &MarketSpec) -> Result<(), Reject> {
        if self.markets.len() >= self.limits.markets_max {
            return Err(Reject::TooManyMarkets);
        }
        let market = self.markets.create(spec.clone())?;
        let created = MarketChange::Created {
            condition_id: spec.condition_id,
            yes_token_id: spec.yes_token_id,
            no_token_id: spec.no_token_id,
        };
        self.push_market_event(market, created);
        Ok(())
    }

    /// The market of `condition_id`, refused when there is none.
    pub(crate) fn known_market_index(&self, condition_id: &Hash32) -> Result<u32, Reject> {
        self.market_index(condition_id).ok_or(Reject::UnknownMarket)
    }

    /// The market of `condition_id`, refused once resolved or voided.
    fn unresolved_market_index(&self, condition_id: &Hash32) -> Result<u32, Reject> {
        let index = self.known_market_index(condition_id)?;
        let state = self.markets.get(index).state;
        if let MarketState::Resolved(_) = state {
            return Err(Reject::MarketNotActive {
                state: state.describe(),
            });
        }
        Ok(index)
    }

    fn set_market_state(
        &mut self,
        condition_id: &Hash32,
        state: MarketState,
    ) -> Result<(), Reject> {
        let index = self.unresolved_market_index(condition_id)?;
        let market = self.markets.get_mut(index);
        if market.state == state {
            return Ok(());
        }
        market.state = state;
        let change = match state {
            MarketState::Paused => MarketChange::Paused,
            _ => MarketChange::Resumed,
        };
        self.push_market_event(index, change);
        Ok(())
    }

    fn set_tick_size(&mut self, condition_id: &Hash32, tick_ticks: u32) -> Result<(), Reject> {
        if !crate::market::TICK_SIZES_ALLOWED.contains(&tick_ticks) {
            return Err(Reject::InvalidTickSize);
        }
        let index = self.unresolved_market_index(condition_id)?;
        let market = self.markets.get_mut(index);
        let old_tick_ticks = market.spec.tick_size_ticks;
        if old_tick_ticks == tick_ticks {
            return Ok(());
        }
        market.spec.tick_size_ticks = tick_ticks;
        self.push_market_event(
            index,
            MarketChange::TickSize {
                old_tick_ticks,
                new_tick_ticks: tick_ticks,
            },
        );
        Ok(())
    }

    fn resolve_market(
        &mut self,
        condition_id: &Hash32,
        resolution: Resolution,
    ) -> Result<(), Reject> {
        let index = self.unresolved_market_index(condition_id)?;
        for id in self.open_order_ids_in_market(index) {
            if let Some(slot) = self.orders.slot_of(id) {
                self.cancel_slot(slot);
            }
        }
        let market = self.markets.get_mut(index);
        market.state = MarketState::Resolved(resolution);
        market.book.release_empty_sides();
        self.settle_token_debts_in(index);
        self.push_market_event(index, MarketChange::Resolved { resolution });
        Ok(())
    }

    pub(crate) fn push_market_event(&mut self, market: u32, change: MarketChange) {
        let published = matches!(
            change,
            MarketChange::Resolved { .. } | MarketChange::TickSize { .. }
        );
        let state = self.markets.get_mut(market);
        if published {
            state.event_seq += 1;
        }
        let market_seq = state.event_seq;
        self.events.push(Event::Market {
            market,
            change,
            market_seq,
        });
    }

    /// Records a level change of `market`'s book as an event; every change of one command
    /// in one market belongs to one `price_change` and shares its sequence number.
    pub(crate) fn push_level_event(&mut self, market: u32, side: AxisSide, price_ticks: u32) {
        let seq = self.last_seq;
        let state = self.markets.get_mut(market);
        if state.level_change_seq != seq || state.event_seq == 0 {
            state.event_seq += 1;
            state.level_change_seq = seq;
            state.level_change_market_seq = state.event_seq;
        }
        let market_seq = state.level_change_market_seq;
        let total_units = state.book.level(side, price_ticks).total_units;
        let (best_bid, best_ask) = (state.book.best_bid(), state.book.best_ask());
        self.events.push(Event::Level {
            market,
            side,
            price_ticks,
            total_units,
            best_bid,
            best_ask,
            market_seq,
        });
    }

    /// Records a key; `creations_before`, when given, must be how many keys were created
    /// before for the address and nonce (the count its id was derived from).
    fn create_api_key(
        &mut self,
        spec: &ApiKeySpec,
        creations_before: Option<u32>,
    ) -> Result<(), Reject> {
        self.check_create_api_key(spec, creations_before)?;
        let account = self.ledger.find_or_open(spec.address);
        let creations = self
            .api_key_creations
            .entry((spec.address, spec.nonce))
            .or_insert(0);
        *creations = creations.saturating_add(1);
        let keys = &mut self.ledger.account_mut(account).api_keys;
        keys.push(spec.key_id);
        self.api_keys.insert(
            spec.key_id,
            ApiKeyRecord {
                address: spec.address,
                nonce: spec.nonce,
            },
        );
        Ok(())
    }

    /// Why a key creation would be refused, changing nothing (`Ok`: it would be made).
    pub(crate) fn check_create_api_key(
        &self,
        spec: &ApiKeySpec,
        creations_before: Option<u32>,
    ) -> Result<(), Reject> {
        if !self.may_sign_for(&spec.address, &spec.signer) {
            return Err(Reject::SignerNotController);
        }
        let keys = self.ledger.find(&spec.address).map_or(&[][..], |account| {
            &self.ledger.account(account).api_keys[..]
        });
        // API.md §7: an address at its limit hears about the limit, whatever nonce it sent.
        if keys.len() >= spec.max_keys_per_address as usize {
            return Err(Reject::ApiKeyLimit);
        }
        let nonce_used = keys.iter().any(|key| {
            self.api_keys
                .get(key)
                .is_some_and(|record| record.nonce == spec.nonce)
        });
        if nonce_used {
            return Err(Reject::ApiKeyNonceUsed);
        }
        // Key ids derive from the address and the nonce (API.md §7), so a nonce in use is
        // told as such first; an id taken otherwise is refused all the same.
        if self.api_keys.contains_key(&spec.key_id) {
            return Err(Reject::ApiKeyExists);
        }
        let creations = self
            .api_key_creations
            .get(&(spec.address, spec.nonce))
            .copied()
            .unwrap_or(0);
        if creations_before.is_some_and(|before| before != creations) {
            return Err(Reject::ApiKeyRaced { creations });
        }
        Ok(())
    }

    /// Why a key deletion would be refused, changing nothing (`Ok`: it would be deleted).
    pub(crate) fn check_delete_api_key(
        &self,
        address: &Address,
        signer: &Address,
        key_id: &[u8; 16],
    ) -> Result<(), Reject> {
        if !self.may_sign_for(address, signer) {
            return Err(Reject::SignerNotController);
        }
        match self.api_keys.get(key_id) {
            Some(record) if record.address == *address => Ok(()),
            _ => Err(Reject::UnknownApiKey),
        }
    }

    fn delete_api_key(
        &mut self,
        address: &Address,
        signer: &Address,
        key_id: &[u8; 16],
    ) -> Result<(), Reject> {
        self.check_delete_api_key(address, signer, key_id)?;
        self.api_keys.remove(key_id);
        // A deleted key's heartbeats end with it (its orders stay).
        self.heartbeats.remove(key_id);
        if let Some(account) = self.ledger.find(address) {
            self.ledger
                .account_mut(account)
                .api_keys
                .retain(|k| k != key_id);
        }
        Ok(())
    }

    fn deposit(&mut self, address: Address, asset: Asset, amount: Units) -> Result<(), Reject> {
        if amount == 0 {
            return Err(Reject::ZeroAmount);
        }
        let token = match asset {
            Asset::Collateral => None,
            Asset::Token(token_id) => Some(
                self.markets
                    .find_token(&token_id)
                    .ok_or(Reject::UnknownToken)?,
            ),
        };
        let balance_max = self.limits.balance_units_max;
        let account = self.ledger.find_or_open(address);
        let balance = match token {
            None => self.ledger.collateral_mut(account),
            Some((market, outcome)) => self.ledger.position_mut(account, market, outcome),
        };
        match balance.total().checked_add(amount) {
            Some(total) if total <= balance_max => balance.credit(amount),
            _ => return Err(Reject::Overflow),
        }
        match token {
            None => self.collateral_deposited_units += u128::from(amount),
            Some((market, outcome)) => {
                self.markets.get_mut(market).deposited_units[outcome.index()] += amount
            }
        }
        Ok(())
    }

    fn withdraw(&mut self, address: &Address, asset: Asset, amount: Units) -> Result<(), Reject> {
        if amount == 0 {
            return Err(Reject::ZeroAmount);
        }
        let token = match asset {
            Asset::Collateral => None,
            Asset::Token(token_id) => Some(
                self.markets
                    .find_token(&token_id)
                    .ok_or(Reject::UnknownToken)?,
            ),
        };
        let account = self.ledger.find(address);
        let balance = match (account, token) {
            (None, _) => {
                return Err(Reject::WithdrawalExceedsFree {
                    amount_units: amount,
                    free_units: 0,
                })
            }
            (Some(account), None) => self.ledger.collateral_mut(account),
            (Some(account), Some((market, outcome))) => {
                self.ledger.position_mut(account, market, outcome)
            }
        };
        if balance.free < amount {
            return Err(Reject::WithdrawalExceedsFree {
                amount_units: amount,
                free_units: balance.free,
            });
        }
        balance.spend_free(amount);
        match token {
            None => self.collateral_withdrawn_units += u128::from(amount),
            Some((market, outcome)) => {
                self.markets.get_mut(market).withdrawn_units[outcome.index()] += amount
            }
        }
        Ok(())
    }

    pub(crate) fn record_redemption(
        &mut self,
        address: &Address,
        condition_id: &Hash32,
    ) -> Result<(), Reject> {
        let index = self.known_market_index(condition_id)?;
        let resolution = match self.markets.get(index).state {
            MarketState::Resolved(resolution) => resolution,
            _ => return Err(Reject::MarketNotResolved),
        };
        let Some(account) = self.ledger.find(address) else {
            return Ok(());
        };
        let mut held = [0; 2];
        for outcome in [crate::types::Outcome::Yes, crate::types::Outcome::No] {
            let position = self.ledger.position_mut(account, index, outcome);
            held[outcome.index()] = std::mem::take(&mut position.free);
            self.markets.get_mut(index).redeemed_units[outcome.index()] += held[outcome.index()];
        }
        let payout = crate::claims::position_payout_units(resolution, held[0], held[1]);
        self.ledger.collateral_mut(account).credit(payout);
        *self.redemption_payouts_units.entry(index).or_default() += payout;
        Ok(())
    }
}
