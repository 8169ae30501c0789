//! The state hash: a Keccak-256 digest of the engine's logical state in a canonical
//! order, independent of hash-map layout and slot numbers, so that a replay, a restored
//! snapshot and a standby agree exactly when their states do. Snapshots are the state
//! encoded with bincode.

use sha3::{Digest, Keccak256};

use crate::engine::Engine;
use crate::orders::{Order, NIL};
use crate::types::{AxisSide, Bytes32, FixedBytes};

/// Feeds fixed-width fields into the digest.
struct Canonical(Keccak256);

impl Canonical {
    fn u64(&mut self, v: u64) {
        self.0.update(v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.update(v.to_be_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.0.update(v);
    }
    fn debug(&mut self, v: &impl std::fmt::Debug) {
        let text = format!("{v:?}");
        self.u64(text.len() as u64);
        self.0.update(text.as_bytes());
    }
    fn order(&mut self, order: &Order) {
        self.u64(order.id);
        self.bytes(&order.hash.0);
        self.u64(u64::from(order.account));
        self.u64(u64::from(order.market));
        self.debug(&(order.outcome, order.side, order.order_type, order.place));
        self.u64(u64::from(order.price_ticks));
        self.u64(order.size_units);
        self.u64(order.filled_units);
        self.u64(order.reserved_units);
        self.u64(order.created_ns);
        self.u64(order.expiration_s);
        self.u64(order.due_ns);
    }
}

/// An error decoding a snapshot.
#[derive(Debug)]
pub struct SnapshotError(pub String);

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "engine snapshot: {}", self.0)
    }
}

impl std::error::Error for SnapshotError {}

impl Engine {
    /// The digest of the whole logical state.
    pub fn state_hash(&self) -> Bytes32 {
        let mut h = Canonical(Keccak256::new());
        h.bytes(b"ladder:state:v1");
        h.u64(self.last_seq);
        h.u64(self.now_ns);
        h.u64(self.orders.accepted());
        for (id, fate) in self.orders.fates() {
            h.u64(id);
            h.u64(u64::from(fate.account));
            h.debug(&fate.status);
        }
        self.hash_markets(&mut h);
        self.hash_accounts(&mut h);
        for (due, id) in &self.delayed {
            h.u64(*due);
            h.order(
                self.orders
                    .get(self.orders.slot_of(*id).expect("delayed order is open")),
            );
        }
        h.u64(self.orders.len() as u64);
        h.u64(self.trades.count());
        for trade in self.trades.iter() {
            h.debug(trade);
        }
        h.u64(self.forgotten_through);
        h.u64(self.term.0);
        h.u64(self.term.1);
        for (seq, batch) in &self.retired_batches {
            h.u64(*seq);
            h.u64(*batch);
        }
        let (known, fading) = self.seen_hashes.parts();
        let mut hashes: Vec<_> = known.collect();
        hashes.sort_unstable();
        for hash in hashes {
            h.bytes(&hash.0);
        }
        for (seq, hash) in fading {
            h.u64(*seq);
            h.bytes(&hash.0);
        }
        for (seq, id, hash) in &self.retired_orders {
            h.u64(*seq);
            h.u64(*id);
            h.bytes(&hash.0);
        }
        let mut controllers: Vec<_> = self.controllers.iter().collect();
        controllers.sort_unstable();
        for (account, owner) in controllers {
            h.bytes(&account.0);
            h.bytes(&owner.0);
        }
        for (key, record) in self.api_key_records() {
            h.bytes(&key);
            h.bytes(&record.address.0);
            h.bytes(&record.nonce.0);
        }
        let mut nonces: Vec<_> = self.user_op_nonces.iter().collect();
        nonces.sort_unstable();
        h.u64(nonces.len() as u64);
        for (sender, nonce) in nonces {
            h.bytes(&sender.0);
            h.u64(*nonce);
        }
        let mut receipts: Vec<_> = self.user_op_receipts.iter().collect();
        receipts.sort_unstable_by_key(|(hash, _)| **hash);
        h.u64(receipts.len() as u64);
        for (hash, receipt) in receipts {
            h.bytes(&hash.0);
            h.debug(receipt);
        }
        h.u64(self.heartbeats.len() as u64);
        for (key, address) in &self.heartbeats {
            h.bytes(key);
            h.bytes(&address.0);
        }
        // Hashed only when some are armed, so that a state without any hashes as before.
        if !self.dead_man_switches.is_empty() {
            h.u64(self.dead_man_switches.len() as u64);
            for ((process, connection), address) in &self.dead_man_switches {
                h.u64(*process);
                h.u64(*connection);
                h.bytes(&address.0);
            }
        }
        let mut creations: Vec<_> = self.api_key_creations.iter().collect();
        creations.sort_unstable();
        h.u64(creations.len() as u64);
        for ((address, nonce), count) in creations {
            h.bytes(&address.0);
            h.bytes(&nonce.0);
            h.u64(u64::from(*count));
        }
        h.debug(&(
            self.collateral_deposited_units,
            self.collateral_withdrawn_units,
            self.ledger.fees_collected_units,
        ));
        let mut payouts: Vec<_> = self.redemption_payouts_units.iter().collect();
        payouts.sort_unstable();
        h.debug(&payouts);
        FixedBytes(h.0.finalize().into())
    }

    fn hash_markets(&self, h: &mut Canonical) {
        for market in self.markets.all() {
            h.debug(&market.spec);
            h.debug(&market.state);
            h.i64(market.full_sets_units);
            h.debug(&(
                market.deposited_units,
                market.withdrawn_units,
                market.redeemed_units,
                market.last_trade,
                market.event_seq,
                market.level_change_seq,
                market.level_change_market_seq,
            ));
            for side in [AxisSide::Bid, AxisSide::Ask] {
                for (price, total) in market.book.levels(side) {
                    h.u64(u64::from(price));
                    h.u64(total);
                    let mut slot = market.book.level(side, price).head;
                    while slot != NIL {
                        let order = self.orders.get(slot);
                        h.order(order);
                        slot = self.orders.links(slot).next;
                    }
                }
            }
        }
    }

    fn hash_accounts(&self, h: &mut Canonical) {
        for account in self.ledger.accounts() {
            h.bytes(&account.address.0);
            h.debug(&account.collateral);
            h.u64(u64::from(account.open_count));
            let mut slot = account.open_head;
            while slot != NIL {
                let order = self.orders.get(slot);
                h.u64(order.id);
                slot = self.orders.links(slot).account_next;
            }
            h.debug(&account.trades);
            h.debug(&account.api_keys);
        }
        for (account, market, outcome, balance) in self.ledger.positions_sorted() {
            h.debug(&(account, market, outcome, balance));
        }
    }

    /// The whole state, encoded for a snapshot.
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        bincode::serde::encode_to_vec(self, bincode::config::standard())
            .expect("engine state always encodes")
    }

    /// Restores a state written by `snapshot_bytes`.
    pub fn from_snapshot_bytes(bytes: &[u8]) -> Result<Engine, SnapshotError> {
        let (mut engine, used): (Engine, usize) =
            bincode::serde::decode_from_slice(bytes, bincode::config::standard())
                .map_err(|e| SnapshotError(e.to_string()))?;
        if used != bytes.len() {
            return Err(SnapshotError(format!(
                "{} trailing bytes after the state",
                bytes.len() - used
            )));
        }
        engine.events = Vec::with_capacity(crate::engine::EVENTS_PREALLOCATED);
        Ok(engine)
    }
}
