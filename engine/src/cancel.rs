//! Taking orders off the book: cancels by id, by market and for a whole account, and the
//! bookkeeping every order's end shares (account list, expiry index, reservation, fate).

use crate::command::Command;
use crate::engine::Engine;
use crate::event::{Event, OrderEventKind, OrderStatus, OrderView};
use crate::orders::{OrderPlace, Slot, NIL};
use smallvec::smallvec;

use crate::reply::{CancelIds, CancelReport, NotCanceled, NotCanceledIds, Reply};
use crate::types::{Address, ConditionId, OrderId, Outcome, Side, TokenId, Units};

/// The report of a cancel of `order_id` refused for `reason` (one id, held inline).
fn refused_cancel(order_id: OrderId, reason: NotCanceled) -> CancelReport {
    CancelReport {
        canceled: CancelIds::new(),
        not_canceled: smallvec![(order_id, reason)],
    }
}

impl Engine {
    /// Cancels one order for `requester`.
    pub(crate) fn cancel_one(
        &mut self,
        requester: &Address,
        order_id: OrderId,
        condition_id: Option<&ConditionId>,
        signer: Option<&Address>,
    ) -> CancelReport {
        match self.cancel_target(requester, order_id, condition_id, signer) {
            Ok(slot) => {
                self.cancel_slot(slot);
                CancelReport {
                    canceled: smallvec![order_id],
                    not_canceled: NotCanceledIds::new(),
                }
            }
            Err(reason) => refused_cancel(order_id, reason),
        }
    }

    /// The open order a cancel of `order_id` by `requester` takes, or why it takes none.
    fn cancel_target(
        &self,
        requester: &Address,
        order_id: OrderId,
        condition_id: Option<&ConditionId>,
        signer: Option<&Address>,
    ) -> Result<Slot, NotCanceled> {
        if signer.is_some_and(|s| !self.may_sign_for(requester, s)) {
            return Err(NotCanceled::InvalidSignature);
        }
        let slot = self.orders.slot_of(order_id);
        let elsewhere = match (slot, condition_id) {
            (Some(slot), Some(condition)) => {
                self.markets
                    .get(self.orders.get(slot).market)
                    .spec
                    .condition_id
                    != *condition
            }
            _ => false,
        };
        if elsewhere {
            return Err(NotCanceled::NotFound);
        }
        // The owner's address, read from its account, settles ownership without looking the
        // requester up (every account has its own address).
        match slot {
            Some(slot)
                if self.ledger.account(self.orders.get(slot).account).address == *requester =>
            {
                Ok(slot)
            }
            Some(_) => Err(NotCanceled::NotOwner),
            None => Err(match self.orders.fate(order_id) {
                None if self.orders.forgotten(order_id) => NotCanceled::Forgotten,
                None => NotCanceled::NotFound,
                Some(fate) if self.ledger.account(fate.account).address != *requester => {
                    NotCanceled::NotOwner
                }
                Some(fate) if fate.status == OrderStatus::Matched => NotCanceled::AlreadyFilled,
                Some(_) => NotCanceled::AlreadyCanceled,
            }),
        }
    }

    /// The reply of a cancel command that would change nothing (no order to take off the
    /// book), of a key creation or deletion or a user operation that would be refused, or of
    /// a stop of heartbeats that do not run, without applying it; `None` for any other
    /// command (an order is not asked: its checks would run twice for every order taken).
    /// The sequencer answers such a command without journaling it: a
    /// replay without it reaches the same state, and a client cannot fill the journal with
    /// cancels of orders that are not theirs.
    pub fn unchanged_by(&self, command: &Command) -> Option<Reply> {
        match command {
            Command::CancelOrder {
                requester,
                order_id,
                condition_id,
                signer,
            } => self
                .cancel_target(requester, *order_id, condition_id.as_ref(), signer.as_ref())
                .err()
                .map(|reason| Reply::Canceled(refused_cancel(*order_id, reason))),
            Command::CancelMarket {
                requester,
                condition_id,
                token_id,
                signer,
            } => {
                let ids = match self.market_order_ids(requester, condition_id, token_id.as_ref()) {
                    Ok(ids) => ids,
                    Err(reject) => return Some(Reply::Rejected(reject)),
                };
                let signer_controls = signer.is_none_or(|s| self.may_sign_for(requester, &s));
                if ids.is_empty() || !signer_controls {
                    return Some(Reply::Canceled(CancelReport::none_canceled(
                        ids,
                        NotCanceled::InvalidSignature,
                    )));
                }
                None
            }
            Command::CancelAll { requester } => self
                .account_order_ids(requester, |_| true)
                .is_empty()
                .then(|| Reply::Canceled(CancelReport::default())),
            Command::ForgetHistory { through_seq } => {
                self.nothing_to_forget(*through_seq).then_some(Reply::Ok)
            }
            // A term no newer than the one held begins nothing.
            Command::BeginTerm { term } => (*term <= self.term.0).then_some(Reply::Ok),
            // Nor does a refused key creation or deletion: its L1 or L2 signature was checked
            // by the gateway, but whether the signer controls the address is the engine's
            // to say, and anyone can sign for an address that is not theirs.
            Command::CreateApiKey(spec) => self
                .check_create_api_key(spec, None)
                .err()
                .map(Reply::Rejected),
            Command::CreateCountedApiKey {
                spec,
                creations_before,
            } => self
                .check_create_api_key(spec, Some(*creations_before))
                .err()
                .map(Reply::Rejected),
            Command::DeleteApiKey {
                address,
                signer,
                key_id,
            } => self
                .check_delete_api_key(address, signer, key_id)
                .err()
                .map(Reply::Rejected),
            // Stopping heartbeats that do not run stops nothing.
            Command::StopHeartbeats { key_id } => {
                (!self.heartbeats.contains_key(key_id)).then_some(Reply::Ok)
            }
            // A refused user operation changes nothing either (nor fills the journal).
            Command::RedeemUserOp {
                sender,
                signer,
                nonce,
                condition_id,
                ..
            } => self
                .check_user_op(sender, signer, *nonce, condition_id)
                .err()
                .map(Reply::Rejected),
            _ => None,
        }
    }

    /// Cancels the requester's orders on one market (one token of it, when given). When the
    /// signer does not control the requester, nothing is cancelled and each of those orders
    /// is reported `invalid signature`.
    pub(crate) fn cancel_market(
        &mut self,
        requester: &Address,
        condition_id: &ConditionId,
        token_id: Option<&TokenId>,
        signer_controls: bool,
    ) -> Reply {
        let ids = match self.market_order_ids(requester, condition_id, token_id) {
            Ok(ids) => ids,
            Err(reject) => return Reply::Rejected(reject),
        };
        if !signer_controls {
            return Reply::Canceled(CancelReport::none_canceled(
                ids,
                NotCanceled::InvalidSignature,
            ));
        }
        Reply::Canceled(self.cancel_ids(&ids))
    }

    /// Ids of `requester`'s open orders on one market (one token of it, when given), oldest
    /// first: what a market cancel takes.
    pub fn market_order_ids(
        &self,
        requester: &Address,
        condition_id: &ConditionId,
        token_id: Option<&TokenId>,
    ) -> Result<Vec<OrderId>, crate::reject::Reject> {
        let market = self
            .markets
            .find(condition_id)
            .ok_or(crate::reject::Reject::UnknownMarket)?;
        let outcome: Option<Outcome> = match token_id {
            None => None,
            Some(token) => match self.markets.find_token(token) {
                Some((m, outcome)) if m == market => Some(outcome),
                _ => return Err(crate::reject::Reject::UnknownToken),
            },
        };
        Ok(self.account_order_ids(requester, |o| {
            o.market == market && outcome.is_none_or(|x| x == o.outcome)
        }))
    }

    /// Cancels every open order of the requester.
    pub(crate) fn cancel_all(&mut self, requester: &Address) -> CancelReport {
        let ids = self.account_order_ids(requester, |_| true);
        self.cancel_ids(&ids)
    }

    fn cancel_ids(&mut self, ids: &[OrderId]) -> CancelReport {
        let mut report = CancelReport::default();
        for &id in ids {
            if let Some(slot) = self.orders.slot_of(id) {
                self.cancel_slot(slot);
                report.canceled.push(id);
            }
        }
        report
    }

    /// Ids of `requester`'s open orders that pass `keep`, oldest first.
    fn account_order_ids(
        &self,
        requester: &Address,
        keep: impl Fn(&crate::orders::Order) -> bool,
    ) -> Vec<OrderId> {
        let mut ids = Vec::new();
        let Some(account) = self.ledger.find(requester) else {
            return ids;
        };
        let mut slot = self.ledger.account(account).open_head;
        while slot != NIL {
            let order = self.orders.get(slot);
            if keep(order) {
                ids.push(order.id);
            }
            slot = self.orders.links(slot).account_next;
        }
        ids
    }

    /// Ids of every open order (resting or delayed) of `market`, ascending.
    pub(crate) fn open_order_ids_in_market(&self, market: u32) -> Vec<OrderId> {
        let mut ids: Vec<OrderId> = self
            .orders
            .iter()
            .filter(|o| o.market == market)
            .map(|o| o.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Cancels the open order in `slot`: it leaves its book or the delay queue, its
    /// reservation is released, and a CANCELLATION event is published.
    pub(crate) fn cancel_slot(&mut self, slot: Slot) {
        let order = self.orders.get(slot);
        let (market, place, id, due_ns) = (order.market, order.place, order.id, order.due_ns);
        match place {
            OrderPlace::Resting => {
                let (side, price) = (order.axis_side(), order.axis_price());
                self.markets
                    .get_mut(market)
                    .book
                    .unlink(&mut self.orders, slot);
                self.push_level_event(market, side, price);
            }
            OrderPlace::Delayed => {
                self.delayed.remove(&(due_ns, id));
            }
            OrderPlace::Taking => {}
        }
        self.push_order_event_with(OrderEventKind::Cancellation, slot, OrderStatus::Canceled);
        self.close_slot(slot, OrderStatus::Canceled);
    }

    /// Removes the order in `slot` from the table for good, releasing what it still
    /// reserves. It must already be off its book and out of the delay queue.
    pub(crate) fn close_slot(&mut self, slot: Slot, fate: OrderStatus) {
        self.unlink_account_order(slot);
        let order = self.orders.remove(slot, fate);
        self.retired_orders
            .push_back((self.last_seq, order.id, order.hash));
        if order.expiration_s != 0 {
            self.expiries.remove(&(order.expiration_s, order.id));
        }
        self.release_reservation(
            order.account,
            order.market,
            order.outcome,
            order.side,
            order.reserved_units,
        );
    }

    /// Gives back `units` reserved by an order of `account`.
    pub(crate) fn release_reservation(
        &mut self,
        account: u32,
        market: u32,
        outcome: Outcome,
        side: Side,
        units: Units,
    ) {
        if units == 0 {
            return;
        }
        match side {
            Side::Buy => self.ledger.collateral_mut(account).release(units),
            Side::Sell => self
                .ledger
                .position_mut(account, market, outcome)
                .release(units),
        }
    }

    /// Appends the order in `slot` to its account's open-order list.
    pub(crate) fn link_account_order(&mut self, account: u32, slot: Slot) {
        let tail = self.ledger.account(account).open_tail;
        if tail == NIL {
            self.ledger.account_mut(account).open_head = slot;
        } else {
            self.orders.links_mut(tail).account_next = slot;
        }
        let links = self.orders.links_mut(slot);
        links.account_prev = tail;
        links.account_next = NIL;
        let acct = self.ledger.account_mut(account);
        acct.open_tail = slot;
        acct.open_count += 1;
    }

    fn unlink_account_order(&mut self, slot: Slot) {
        let account = self.orders.get(slot).account;
        let links = self.orders.links(slot);
        let (prev, next) = (links.account_prev, links.account_next);
        if prev != NIL {
            self.orders.links_mut(prev).account_next = next;
        } else {
            self.ledger.account_mut(account).open_head = next;
        }
        if next != NIL {
            self.orders.links_mut(next).account_prev = prev;
        } else {
            self.ledger.account_mut(account).open_tail = prev;
        }
        self.ledger.account_mut(account).open_count -= 1;
    }

    /// A view of the order in `slot` with `status`.
    pub(crate) fn order_view(&self, slot: Slot, status: OrderStatus) -> OrderView {
        let order = self.orders.get(slot);
        let market = self.markets.get(order.market);
        OrderView {
            id: order.id,
            hash: order.hash,
            maker: self.ledger.account(order.account).address,
            condition_id: market.spec.condition_id,
            token_id: market.token_id(order.outcome),
            outcome: order.outcome,
            side: order.side,
            price_ticks: order.price_ticks,
            size_units: order.size_units,
            filled_units: order.filled_units,
            status,
            created_ns: order.created_ns,
            expiration_s: order.expiration_s,
            order_type: order.order_type,
        }
    }

    /// Publishes an order event with the order's current status.
    pub(crate) fn push_order_event(&mut self, kind: OrderEventKind, slot: Slot) {
        let status = match self.orders.get(slot).place {
            OrderPlace::Delayed => OrderStatus::Delayed,
            OrderPlace::Resting | OrderPlace::Taking => OrderStatus::Live,
        };
        self.push_order_event_with(kind, slot, status);
    }

    /// Publishes an order event with `status`.
    pub(crate) fn push_order_event_with(
        &mut self,
        kind: OrderEventKind,
        slot: Slot,
        status: OrderStatus,
    ) {
        let order = self.order_view(slot, status);
        self.events.push(Event::Order { kind, order });
    }
}
