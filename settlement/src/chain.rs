//! The chain backend (`--rpc-url`): each batch is sent to the exchange contract's
//! `matchOrders` over JSON-RPC; its receipt makes it MINED and the confirmation depth
//! CONFIRMED. A node that cannot be reached is retried with back-off (the batch shows
//! RETRYING) and, past the attempt limit, FAILED; a revert is FAILED at once (through
//! RETRYING). Before sending, the contract's `settledAt(batchId)` is read, in the latest block
//! and in the node's pending state, so a batch sent before a restart, or sent without its
//! answer coming back, is never sent twice: one waiting in the node's pool is waited for. A
//! refusal at estimation is a revert only if neither holds the batch. A sent transaction the
//! node no longer knows (dropped from its pool, lost in its restart) is sent again, and the same
//! read at the confirmation depth catches a reorganisation that dropped it (back to RETRYING,
//! sent again). A reverted transaction fails the batch only if no other one settled it.

use std::collections::HashMap;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use ladder_chain::exchange::SubmitError;
use ladder_chain::{ExchangeClient, Fill, Receipt, RpcError};
use ladder_engine::{Event, Hash32, MatchType, Side, TradeStatus, TradeView};
use ladder_protocol::Address;
use ladder_sequencer::bell::BellReceiver;
use ladder_sequencer::PublishedBatch;

use crate::outbox::{Outbox, SettlementRing};
use crate::thread::{PendingBatch, SettlementHandle};

/// How the chain backend paces itself.
#[derive(Clone, Debug)]
pub struct ChainSettings {
    /// How often receipts and the chain head are read.
    pub poll_interval: Duration,
    /// Blocks, the batch's own included, before a batch is CONFIRMED.
    pub confirmations: u64,
    /// Failed attempts to reach the node before a batch is FAILED.
    pub attempts_max: u32,
    /// The first back-off; it doubles per attempt, up to 30 s.
    pub backoff: Duration,
    /// How long a sent transaction may go without a receipt before the node is asked whether
    /// it still knows it (then at every poll).
    pub dropped_check_after: Duration,
}

impl Default for ChainSettings {
    fn default() -> Self {
        ChainSettings {
            poll_interval: Duration::from_millis(500),
            confirmations: 2,
            attempts_max: 8,
            backoff: Duration::from_millis(500),
            dropped_check_after: Duration::from_secs(5),
        }
    }
}

const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The exchange contract's revert reason for a batch it holds already (`matchOrders`).
const ALREADY_SETTLED: &str = "batch already settled";
/// JSON-RPC's code for an unknown method (a node that cannot call on its pending state).
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's code for parameters a node does not take (the `pending` block tag).
const INVALID_PARAMS: i64 = -32602;

/// Where a batch is on its way to the chain.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Not (known to be) on chain: check `settledAt`, then send.
    Send,
    /// Sent as transaction `tx`; waiting for its receipt. `checked`: when the node last
    /// said it knows the transaction (at first, when it took it).
    Receipt { tx: [u8; 32], checked: Instant },
    /// Settled in the node's pending state by a transaction this run did not see sent (one
    /// sent before a restart, or whose answer was lost): waiting for it to be mined.
    Pooled,
    /// Recorded at `block`; waiting for the confirmation depth.
    Depth { block: u64 },
}

/// Where the chain holds a batch.
enum Whereabouts {
    /// Recorded at this block (the latest state).
    Recorded(u64),
    /// In the node's pending state only: a transaction in its pool carries it.
    Pooled,
    /// Nowhere.
    Nowhere,
}

/// One batch being settled.
struct Tracked {
    fills: Vec<Fill>,
    /// The last status this thread journaled (or found journaled).
    status: TradeStatus,
    phase: Phase,
    /// Failed attempts to reach the node in a row.
    attempts: u32,
    next_try: Instant,
    /// Whether a transaction carrying the batch may have reached a node: a send was tried
    /// (answered or not), or the batch was found pending at start (a run before may have
    /// sent it). Such a batch never fails for want of the node; it waits for it.
    may_be_sent: bool,
}

/// The fill the contract records for one trade.
pub fn fill_of(trade: &TradeView) -> Fill {
    Fill {
        trade_id: trade.id.0,
        taker_order_hash: trade.taker.order_hash.0,
        maker_order_hash: trade.maker.order_hash.0,
        taker: Address(trade.taker.address.0),
        maker: Address(trade.maker.address.0),
        token_id: trade.token_id(trade.taker.outcome).0,
        side: match trade.taker.side {
            Side::Buy => 0,
            Side::Sell => 1,
        },
        price_ticks: u64::from(trade.taker.price_ticks),
        size: trade.size_units,
        match_type: match trade.match_type {
            MatchType::Complementary => 0,
            MatchType::Mint => 1,
            MatchType::Merge => 2,
        },
    }
}

/// What the settler needs of the exchange contract (the real one is [`ExchangeClient`]).
pub trait ChainExchange: Send {
    /// The block at which the contract recorded `batch_id` (0: not recorded).
    fn settled_at(&self, batch_id: &[u8; 32]) -> Result<u64, RpcError>;
    /// Sends the batch; the chain transaction's hash.
    fn submit(&self, batch_id: &[u8; 32], fills: &[Fill]) -> Result<[u8; 32], SubmitError>;
    /// The receipt of a sent transaction, once mined.
    fn receipt(&self, tx: &[u8; 32]) -> Result<Option<Receipt>, RpcError>;
    /// The newest block.
    fn block_number(&self) -> Result<u64, RpcError>;
    /// Whether the batch is settled in the node's pending state (mined, or in its pool).
    fn settled_pending(&self, batch_id: &[u8; 32]) -> Result<bool, RpcError>;
    /// Whether the node still knows a sent transaction (pending or mined).
    fn transaction_known(&self, tx: &[u8; 32]) -> Result<bool, RpcError>;
}

impl ChainExchange for ExchangeClient {
    fn settled_at(&self, batch_id: &[u8; 32]) -> Result<u64, RpcError> {
        ExchangeClient::settled_at(self, batch_id)
    }
    fn submit(&self, batch_id: &[u8; 32], fills: &[Fill]) -> Result<[u8; 32], SubmitError> {
        ExchangeClient::submit(self, batch_id, fills)
    }
    fn receipt(&self, tx: &[u8; 32]) -> Result<Option<Receipt>, RpcError> {
        ExchangeClient::receipt(self, tx)
    }
    fn block_number(&self) -> Result<u64, RpcError> {
        ExchangeClient::block_number(self)
    }
    fn settled_pending(&self, batch_id: &[u8; 32]) -> Result<bool, RpcError> {
        ExchangeClient::settled_pending(self, batch_id)
    }
    fn transaction_known(&self, tx: &[u8; 32]) -> Result<bool, RpcError> {
        ExchangeClient::transaction_known(self, tx)
    }
}

/// Starts the chain settlement thread (arguments as [`crate::start`]).
pub fn start_chain(
    client: ExchangeClient,
    settings: ChainSettings,
    events: BellReceiver<PublishedBatch>,
    ring: SettlementRing,
    pending: Vec<PendingBatch>,
) -> std::io::Result<SettlementHandle> {
    let thread: JoinHandle<()> = std::thread::Builder::new()
        .name("settlement-chain".into())
        .spawn(move || {
            let mut settler = ChainSettler::new(Box::new(client), settings, pending);
            let mut outbox = Outbox::new(ring);
            loop {
                let wait = if outbox.is_backed_up() {
                    Duration::from_millis(10)
                } else {
                    settler.settings.poll_interval
                };
                match events.recv_timeout(wait) {
                    Ok(batch) => settler.observe(&batch),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                settler.advance(Instant::now());
                for (tx, status) in settler.changes.drain(..) {
                    if outbox.send(tx, status).is_err() {
                        return;
                    }
                }
                if outbox.flush().is_err() {
                    return;
                }
            }
        })?;
    Ok(SettlementHandle::new(thread))
}

/// The batches on their way and the status changes they made, to be journaled in order.
struct ChainSettler {
    client: Box<dyn ChainExchange>,
    settings: ChainSettings,
    batches: HashMap<Hash32, Tracked>,
    changes: Vec<(Hash32, TradeStatus)>,
}

impl ChainSettler {
    fn new(
        client: Box<dyn ChainExchange>,
        settings: ChainSettings,
        pending: Vec<PendingBatch>,
    ) -> ChainSettler {
        let mut settler = ChainSettler {
            client,
            settings,
            batches: HashMap::new(),
            changes: Vec::new(),
        };
        for batch in pending {
            settler.track(
                batch.transaction_hash,
                batch.status,
                batch.trades.iter().map(fill_of).collect(),
                true,
            );
        }
        settler
    }

    fn track(&mut self, tx: Hash32, status: TradeStatus, fills: Vec<Fill>, may_be_sent: bool) {
        self.batches.insert(
            tx,
            Tracked {
                fills,
                status,
                phase: Phase::Send,
                attempts: 0,
                next_try: Instant::now(),
                may_be_sent,
            },
        );
    }

    /// New matches start a batch; the other trade events are this thread's own changes.
    fn observe(&mut self, published: &PublishedBatch) {
        for item in published.iter() {
            for event in item.events {
                let Event::Trade(trade) = event else { continue };
                if trade.status != TradeStatus::Matched {
                    continue;
                }
                let tx = trade.transaction_hash;
                match self.batches.get_mut(&tx) {
                    Some(tracked) if !tracked.may_be_sent => tracked.fills.push(fill_of(trade)),
                    Some(_) => {}
                    None => self.track(tx, TradeStatus::Matched, vec![fill_of(trade)], false),
                }
            }
        }
    }

    /// Moves every batch that is due one step on.
    fn advance(&mut self, now: Instant) {
        let due: Vec<Hash32> = self
            .batches
            .iter()
            .filter(|(_, t)| t.next_try <= now)
            .map(|(tx, _)| *tx)
            .collect();
        for tx in due {
            self.step(tx, now);
        }
    }

    fn step(&mut self, tx: Hash32, now: Instant) {
        let Some(phase) = self.batches.get(&tx).map(|t| t.phase) else {
            return;
        };
        let poll = self.settings.poll_interval;
        match phase {
            Phase::Send => match self.whereabouts(&tx) {
                Ok(Whereabouts::Recorded(block)) => self.recorded(tx, block, now),
                Ok(Whereabouts::Pooled) => self.pooled(tx, now),
                Ok(Whereabouts::Nowhere) => self.send(tx, now),
                Err(e) => self.unreachable(tx, &e, now),
            },
            Phase::Pooled => match self.whereabouts(&tx) {
                Ok(Whereabouts::Recorded(block)) => self.recorded(tx, block, now),
                Ok(Whereabouts::Pooled) => self.set_next(tx, now + poll),
                Ok(Whereabouts::Nowhere) => {
                    tracing::warn!(batch = %hex(&tx), "settlement batch left the node's pool unmined; sending again");
                    self.send_again(tx, now);
                }
                Err(e) => self.unreachable(tx, &e, now),
            },
            Phase::Receipt {
                tx: chain_tx,
                checked,
            } => match self.client.receipt(&chain_tx) {
                Ok(None)
                    if now.saturating_duration_since(checked)
                        < self.settings.dropped_check_after =>
                {
                    self.set_next(tx, now + poll)
                }
                // Asked once per `dropped_check_after`, not at every poll.
                Ok(None) => match self.client.transaction_known(&chain_tx) {
                    Ok(true) => {
                        if let Some(t) = self.batches.get_mut(&tx) {
                            t.phase = Phase::Receipt {
                                tx: chain_tx,
                                checked: now,
                            };
                        }
                        self.set_next(tx, now + poll)
                    }
                    Ok(false) => {
                        tracing::warn!(batch = %hex(&tx), transaction = %hex_bytes(&chain_tx), "settlement transaction dropped by the node unmined; sending again");
                        self.send_again(tx, now);
                    }
                    Err(e) => self.unreachable(tx, &e, now),
                },
                Ok(Some(r)) if r.success => self.recorded(tx, r.block_number, now),
                // Another transaction may have settled the batch first, or wait in the pool
                // to (this one then reverts on `batch already settled`): only a batch the
                // chain holds nowhere fails.
                Ok(Some(_)) => match self.whereabouts(&tx) {
                    Ok(Whereabouts::Recorded(block)) => self.recorded(tx, block, now),
                    Ok(Whereabouts::Pooled) => self.pooled(tx, now),
                    Ok(Whereabouts::Nowhere) => {
                        self.fail(tx, "the settlement transaction reverted")
                    }
                    Err(e) => self.unreachable(tx, &e, now),
                },
                Err(e) => self.unreachable(tx, &e, now),
            },
            Phase::Depth { block } => {
                let head = match self.client.block_number() {
                    Ok(head) => head,
                    Err(e) => return self.unreachable(tx, &e, now),
                };
                if head + 1 < block + self.settings.confirmations {
                    return self.set_next(tx, now + poll);
                }
                match self.client.settled_at(&tx.0) {
                    Ok(0) => {
                        tracing::warn!(batch = %hex(&tx), "settled batch vanished from the chain (reorganisation); sending again");
                        self.change(tx, TradeStatus::Retrying);
                        if let Some(t) = self.batches.get_mut(&tx) {
                            t.phase = Phase::Send;
                            t.next_try = now;
                        }
                    }
                    Ok(_) => {
                        self.change(tx, TradeStatus::Confirmed);
                        self.batches.remove(&tx);
                    }
                    Err(e) => self.unreachable(tx, &e, now),
                }
            }
        }
    }

    /// Where the chain holds the batch: recorded in the latest block, in the node's pending
    /// state only, or nowhere. A node that says it cannot read a pending state (no such
    /// method or parameter) is taken to hold nothing pending; any other failure is the
    /// caller's to retry.
    fn whereabouts(&self, tx: &Hash32) -> Result<Whereabouts, RpcError> {
        let block = self.client.settled_at(&tx.0)?;
        if block > 0 {
            return Ok(Whereabouts::Recorded(block));
        }
        match self.client.settled_pending(&tx.0) {
            Ok(true) => Ok(Whereabouts::Pooled),
            Ok(false) => Ok(Whereabouts::Nowhere),
            Err(RpcError::Node {
                code: METHOD_NOT_FOUND | INVALID_PARAMS,
                ..
            }) => Ok(Whereabouts::Nowhere),
            Err(e) => Err(e),
        }
    }

    /// The batch waits in the node's pool: wait for it to be mined, without sending.
    fn pooled(&mut self, tx: Hash32, now: Instant) {
        tracing::info!(batch = %hex(&tx), "settlement batch waits in the node's pool; not sent again");
        if let Some(t) = self.batches.get_mut(&tx) {
            t.phase = Phase::Pooled;
            t.attempts = 0;
            t.may_be_sent = true;
            t.next_try = now + self.settings.poll_interval;
        }
    }

    /// The transaction that carried the batch is gone unmined: RETRYING, sent again (after
    /// the same checks as a first send).
    fn send_again(&mut self, tx: Hash32, now: Instant) {
        if self.batches.get(&tx).map(|t| t.status) != Some(TradeStatus::Retrying) {
            self.change(tx, TradeStatus::Retrying);
        }
        if let Some(t) = self.batches.get_mut(&tx) {
            t.phase = Phase::Send;
            t.attempts = 0;
            t.next_try = now;
        }
    }

    /// Sends the batch; a batch journaled as MINED that is not on chain goes back to RETRYING.
    fn send(&mut self, tx: Hash32, now: Instant) {
        if self.batches.get(&tx).map(|t| t.status) == Some(TradeStatus::Mined) {
            self.change(tx, TradeStatus::Retrying);
        }
        let Some(tracked) = self.batches.get(&tx) else {
            return;
        };
        match self.client.submit(&tx.0, &tracked.fills) {
            Ok(chain_tx) => {
                tracing::info!(batch = %hex(&tx), transaction = %hex_bytes(&chain_tx), fills = tracked.fills.len(), "settlement batch sent");
                let first_look = self.settings.poll_interval.min(Duration::from_millis(100));
                if let Some(t) = self.batches.get_mut(&tx) {
                    t.phase = Phase::Receipt {
                        tx: chain_tx,
                        checked: now,
                    };
                    t.may_be_sent = true;
                    t.next_try = now + first_look;
                }
            }
            // Refused at estimation, which may run on the pending state: a transaction in
            // the pool or just mined may hold the batch. The contract's own words say so;
            // otherwise only a batch the chain holds nowhere fails.
            Err(SubmitError::Reverted(why)) => match self.whereabouts(&tx) {
                Ok(Whereabouts::Recorded(block)) => self.recorded(tx, block, now),
                Ok(Whereabouts::Pooled) => self.pooled(tx, now),
                Ok(Whereabouts::Nowhere) if why.contains(ALREADY_SETTLED) => self.pooled(tx, now),
                Ok(Whereabouts::Nowhere) => self.fail(tx, &format!("reverted: {why}")),
                Err(e) => self.unreachable(tx, &e, now),
            },
            Err(SubmitError::Rpc(e)) => self.unreachable(tx, &e, now),
            // The node may have taken it: from now on the batch waits rather than fails.
            Err(SubmitError::Unanswered(e)) => {
                if let Some(t) = self.batches.get_mut(&tx) {
                    t.may_be_sent = true;
                }
                self.unreachable(tx, &e, now)
            }
        }
    }

    /// The contract holds the batch at `block`: MINED, then wait for the depth.
    fn recorded(&mut self, tx: Hash32, block: u64, now: Instant) {
        if self.batches.get(&tx).map(|t| t.status) != Some(TradeStatus::Mined) {
            self.change(tx, TradeStatus::Mined);
        }
        if let Some(t) = self.batches.get_mut(&tx) {
            t.phase = Phase::Depth { block };
            t.attempts = 0;
            t.next_try = now;
        }
    }

    /// The node could not be reached: RETRYING, back off; FAILED past the attempt limit, but
    /// only while the batch cannot be on chain. Once it was sent (its receipt awaited) or
    /// recorded (MINED), failing would reverse on the ledger what the contract may hold: it
    /// waits for the node instead, however long.
    fn unreachable(&mut self, tx: Hash32, error: &RpcError, now: Instant) {
        let Some(tracked) = self.batches.get_mut(&tx) else {
            return;
        };
        tracked.attempts += 1;
        let attempts = tracked.attempts;
        let may_be_on_chain = tracked.may_be_sent || !matches!(tracked.phase, Phase::Send);
        if attempts >= self.settings.attempts_max && !may_be_on_chain {
            return self.fail(tx, &format!("{attempts} attempts: {error}"));
        }
        let backoff = self
            .settings
            .backoff
            .saturating_mul(1 << (attempts - 1).min(16))
            .min(BACKOFF_MAX);
        tracked.next_try = now + backoff;
        tracing::warn!(batch = %hex(&tx), attempts, error = %error, "settlement: RPC failed; retrying");
        let mined = matches!(tracked.phase, Phase::Depth { .. });
        if tracked.status != TradeStatus::Retrying && !mined {
            self.change(tx, TradeStatus::Retrying);
        }
    }

    /// FAILED, through RETRYING; the engine reverses the batch's ledger movement.
    fn fail(&mut self, tx: Hash32, why: &str) {
        tracing::warn!(batch = %hex(&tx), why, "settlement batch failed");
        if self.batches.get(&tx).map(|t| t.status) != Some(TradeStatus::Retrying) {
            self.change(tx, TradeStatus::Retrying);
        }
        self.change(tx, TradeStatus::Failed);
        self.batches.remove(&tx);
    }

    fn change(&mut self, tx: Hash32, status: TradeStatus) {
        if let Some(t) = self.batches.get_mut(&tx) {
            t.status = status;
        }
        self.changes.push((tx, status));
    }

    fn set_next(&mut self, tx: Hash32, at: Instant) {
        if let Some(t) = self.batches.get_mut(&tx) {
            t.next_try = at;
        }
    }
}

fn hex(tx: &Hash32) -> String {
    hex_bytes(&tx.0)
}

fn hex_bytes(bytes: &[u8; 32]) -> String {
    let mut out = String::with_capacity(66);
    out.push_str("0x");
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use ladder_engine::FixedBytes;
    use std::sync::{Arc, Mutex};

    use super::*;
    use ladder_engine::Bytes32;

    /// A scripted chain: batches recorded by block, a head, and switches for failures.
    #[derive(Default)]
    struct Chain {
        settled: HashMap<[u8; 32], u64>,
        receipts: HashMap<[u8; 32], Receipt>,
        head: u64,
        down: bool,
        rejecting: bool,
        sent: usize,
        /// Sent transactions wait in the pool (batch by transaction) until `mine`.
        holding: bool,
        pool: HashMap<[u8; 32], [u8; 32]>,
        /// A sent transaction's answer is lost (the node took it).
        answers_lost: bool,
        /// Mined transactions revert, though the batch is recorded (by another one).
        receipts_revert: bool,
        /// A refused estimate finds the batch already in the pool (sent by a run before).
        pooled_on_reject: bool,
        /// The pending state cannot be read, with this error.
        pending_error: Option<RpcError>,
    }

    impl Chain {
        /// Mines the pool in one new block.
        fn mine(&mut self) {
            self.head += 1;
            let block = self.head;
            for (chain_tx, batch) in std::mem::take(&mut self.pool) {
                self.settled.insert(batch, block);
                self.receipts.insert(
                    chain_tx,
                    Receipt {
                        block_number: block,
                        success: true,
                    },
                );
            }
        }
    }

    struct Fake(Arc<Mutex<Chain>>);

    fn down() -> RpcError {
        RpcError::Transport("connection refused".into())
    }

    impl ChainExchange for Fake {
        fn settled_at(&self, batch_id: &[u8; 32]) -> Result<u64, RpcError> {
            let c = self.0.lock().unwrap();
            if c.down {
                return Err(down());
            }
            Ok(c.settled.get(batch_id).copied().unwrap_or(0))
        }
        fn submit(&self, batch_id: &[u8; 32], _: &[Fill]) -> Result<[u8; 32], SubmitError> {
            let mut c = self.0.lock().unwrap();
            if c.down {
                return Err(SubmitError::Rpc(down()));
            }
            if c.rejecting && c.pooled_on_reject {
                c.pool.insert([0xee; 32], *batch_id);
                return Err(SubmitError::Reverted("batch already settled".into()));
            }
            if c.rejecting {
                return Err(SubmitError::Reverted(
                    "exchange is rejecting batches".into(),
                ));
            }
            c.sent += 1;
            let mut chain_tx = *batch_id;
            chain_tx[0] ^= 0xff;
            chain_tx[1] = c.sent as u8;
            if c.holding {
                c.pool.insert(chain_tx, *batch_id);
            } else {
                c.head += 1;
                let block = c.head;
                c.settled.insert(*batch_id, block);
                let success = !c.receipts_revert;
                c.receipts.insert(
                    chain_tx,
                    Receipt {
                        block_number: block,
                        success,
                    },
                );
            }
            if c.answers_lost {
                return Err(SubmitError::Unanswered(RpcError::Transport(
                    "timed out".into(),
                )));
            }
            Ok(chain_tx)
        }
        fn receipt(&self, tx: &[u8; 32]) -> Result<Option<Receipt>, RpcError> {
            let c = self.0.lock().unwrap();
            if c.down {
                return Err(down());
            }
            Ok(c.receipts.get(tx).copied())
        }
        fn block_number(&self) -> Result<u64, RpcError> {
            let c = self.0.lock().unwrap();
            if c.down {
                return Err(down());
            }
            Ok(c.head)
        }
        fn settled_pending(&self, batch_id: &[u8; 32]) -> Result<bool, RpcError> {
            let c = self.0.lock().unwrap();
            if c.down {
                return Err(down());
            }
            if let Some(e) = &c.pending_error {
                return Err(e.clone());
            }
            Ok(c.settled.contains_key(batch_id) || c.pool.values().any(|b| b == batch_id))
        }
        fn transaction_known(&self, tx: &[u8; 32]) -> Result<bool, RpcError> {
            let c = self.0.lock().unwrap();
            if c.down {
                return Err(down());
            }
            Ok(c.receipts.contains_key(tx) || c.pool.contains_key(tx))
        }
    }

    const BATCH: Bytes32 = FixedBytes([7; 32]);

    fn settings() -> ChainSettings {
        ChainSettings {
            poll_interval: Duration::ZERO,
            confirmations: 2,
            attempts_max: 3,
            backoff: Duration::ZERO,
            dropped_check_after: Duration::ZERO,
        }
    }

    /// A settler that found `BATCH` pending at start, journaled with `status`.
    fn settler(chain: &Arc<Mutex<Chain>>, status: TradeStatus) -> ChainSettler {
        let pending = vec![PendingBatch {
            transaction_hash: BATCH,
            status,
            last_update_ns: 0,
            trades: Vec::new(),
        }];
        ChainSettler::new(Box::new(Fake(chain.clone())), settings(), pending)
    }

    /// A settler whose `BATCH` was just matched (never sent).
    fn fresh_settler(chain: &Arc<Mutex<Chain>>) -> ChainSettler {
        let mut s = ChainSettler::new(Box::new(Fake(chain.clone())), settings(), Vec::new());
        s.track(BATCH, Matched, Vec::new(), false);
        s
    }

    /// Advances `rounds` times; the statuses journaled.
    fn run(s: &mut ChainSettler, rounds: usize) -> Vec<TradeStatus> {
        for _ in 0..rounds {
            s.advance(Instant::now());
        }
        s.changes.drain(..).map(|(_, status)| status).collect()
    }

    use TradeStatus::*;

    #[test]
    fn a_batch_is_sent_once_mined_on_its_receipt_and_confirmed_at_the_depth() {
        let chain = Arc::new(Mutex::new(Chain::default()));
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 5), [Mined], "one block: not deep enough");
        chain.lock().unwrap().head += 1;
        assert_eq!(run(&mut s, 2), [Confirmed]);
        assert_eq!(chain.lock().unwrap().sent, 1);
        assert!(s.batches.is_empty());
    }

    #[test]
    fn a_batch_already_on_chain_after_a_restart_is_not_sent_again() {
        let chain = Arc::new(Mutex::new(Chain::default()));
        {
            let mut c = chain.lock().unwrap();
            c.settled.insert(BATCH.0, 4);
            c.head = 9;
        }
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 3), [Mined, Confirmed]);
        let mut again = settler(&chain, Mined);
        assert_eq!(run(&mut again, 3), [Confirmed], "MINED stays MINED");
        assert_eq!(chain.lock().unwrap().sent, 0);
    }

    #[test]
    fn a_revert_fails_the_batch_through_retrying() {
        let chain = Arc::new(Mutex::new(Chain {
            rejecting: true,
            ..Chain::default()
        }));
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 3), [Retrying, Failed]);
        assert!(s.batches.is_empty());
    }

    #[test]
    fn an_unreachable_node_is_retried_then_failed_and_a_recovery_in_time_mines() {
        let chain = Arc::new(Mutex::new(Chain {
            down: true,
            ..Chain::default()
        }));
        let mut s = fresh_settler(&chain);
        assert_eq!(run(&mut s, 1), [Retrying]);
        assert_eq!(run(&mut s, 1), [], "RETRYING is journaled once");
        chain.lock().unwrap().down = false;
        assert_eq!(run(&mut s, 3), [Mined]);

        let chain = Arc::new(Mutex::new(Chain {
            down: true,
            ..Chain::default()
        }));
        let mut s = fresh_settler(&chain);
        assert_eq!(run(&mut s, 3), [Retrying, Failed], "three attempts");
    }

    #[test]
    fn a_batch_found_pending_at_start_waits_for_the_node_instead_of_failing() {
        // A run before may have sent it, whatever it journaled.
        for status in [Matched, Mined, Retrying] {
            let chain = Arc::new(Mutex::new(Chain {
                down: true,
                ..Chain::default()
            }));
            let mut s = settler(&chain, status);
            let changes = run(&mut s, 10);
            assert!(!changes.contains(&Failed), "{status:?}: {changes:?}");
            chain.lock().unwrap().down = false;
            assert_eq!(run(&mut s, 3).last(), Some(&Mined), "{status:?}");
        }
    }

    #[test]
    fn a_lost_answer_then_a_node_that_goes_away_never_fails_the_batch() {
        let chain = Arc::new(Mutex::new(Chain {
            holding: true,
            answers_lost: true,
            ..Chain::default()
        }));
        let mut s = fresh_settler(&chain);
        assert_eq!(run(&mut s, 1), [Retrying]);
        chain.lock().unwrap().down = true;
        assert_eq!(run(&mut s, 10), [], "waits for the node, however long");
        {
            let mut c = chain.lock().unwrap();
            c.down = false;
            c.mine();
        }
        assert_eq!(run(&mut s, 2), [Mined]);
        assert_eq!(chain.lock().unwrap().sent, 1, "not sent twice");
    }

    #[test]
    fn a_refused_estimate_of_a_batch_in_the_pool_waits_for_it() {
        let chain = Arc::new(Mutex::new(Chain {
            holding: true,
            rejecting: true,
            pooled_on_reject: true,
            ..Chain::default()
        }));
        let mut s = fresh_settler(&chain);
        assert_eq!(run(&mut s, 5), [], "neither FAILED nor RETRYING");
        chain.lock().unwrap().mine();
        assert_eq!(run(&mut s, 2), [Mined]);
    }

    #[test]
    fn a_batch_that_leaves_the_pool_unmined_is_sent_again() {
        let chain = Arc::new(Mutex::new(Chain {
            holding: true,
            ..Chain::default()
        }));
        chain.lock().unwrap().pool.insert([0xee; 32], BATCH.0);
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 2), [], "waits in the pool");
        chain.lock().unwrap().pool.clear();
        assert_eq!(run(&mut s, 2), [Retrying], "gone: sent again");
        assert_eq!(chain.lock().unwrap().sent, 1);
        chain.lock().unwrap().mine();
        assert_eq!(run(&mut s, 2), [Mined]);
    }

    #[test]
    fn a_pending_state_that_cannot_be_read_now_is_retried_not_taken_for_empty() {
        let chain = Arc::new(Mutex::new(Chain {
            pending_error: Some(RpcError::Node {
                code: -32005,
                message: "rate limited".into(),
                data: None,
            }),
            ..Chain::default()
        }));
        let mut s = fresh_settler(&chain);
        assert_eq!(run(&mut s, 2), [Retrying]);
        assert_eq!(chain.lock().unwrap().sent, 0, "not sent on a guess");
        chain.lock().unwrap().pending_error = Some(RpcError::Node {
            code: -32602,
            message: "unknown block tag pending".into(),
            data: None,
        });
        assert_eq!(run(&mut s, 2), [Mined], "a node without a pending state");
    }

    #[test]
    fn a_transaction_without_a_receipt_is_looked_up_only_after_the_wait() {
        let chain = Arc::new(Mutex::new(Chain {
            holding: true,
            ..Chain::default()
        }));
        let mut s = fresh_settler(&chain);
        s.settings.dropped_check_after = Duration::from_secs(3600);
        assert_eq!(run(&mut s, 1), []);
        chain.lock().unwrap().pool.clear();
        assert_eq!(run(&mut s, 5), [], "not yet looked up: not sent again");
        assert_eq!(chain.lock().unwrap().sent, 1);
    }

    #[test]
    fn a_batch_that_may_be_on_chain_waits_for_the_node_instead_of_failing() {
        // Mined, then the node goes away for longer than the attempt limit.
        let chain = Arc::new(Mutex::new(Chain::default()));
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 3), [Mined]);
        chain.lock().unwrap().down = true;
        assert_eq!(
            run(&mut s, 10),
            [],
            "no FAILED, no reversal of a mined batch"
        );
        {
            let mut c = chain.lock().unwrap();
            c.down = false;
            c.head += 1;
        }
        assert_eq!(run(&mut s, 2), [Confirmed]);
        // Sent, its receipt not yet read, then the node goes away.
        let chain = Arc::new(Mutex::new(Chain::default()));
        let mut s = settler(&chain, Matched);
        s.advance(Instant::now());
        assert_eq!(chain.lock().unwrap().sent, 1);
        chain.lock().unwrap().down = true;
        assert_eq!(run(&mut s, 10), [Retrying], "waits, RETRYING once");
        chain.lock().unwrap().down = false;
        assert_eq!(run(&mut s, 3), [Mined]);
        assert_eq!(chain.lock().unwrap().sent, 1, "not sent twice");
    }

    #[test]
    fn a_reorganisation_that_drops_the_batch_sends_it_again() {
        let chain = Arc::new(Mutex::new(Chain::default()));
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 3), [Mined]);
        {
            let mut c = chain.lock().unwrap();
            c.settled.clear();
            c.head += 1;
        }
        assert_eq!(run(&mut s, 1), [Retrying]);
        chain.lock().unwrap().head += 1;
        assert_eq!(run(&mut s, 4), [Mined]);
        chain.lock().unwrap().head += 1;
        assert_eq!(run(&mut s, 1), [Confirmed]);
        assert_eq!(chain.lock().unwrap().sent, 2);
    }

    #[test]
    fn a_send_whose_answer_was_lost_waits_for_its_transaction_instead_of_sending_again() {
        let chain = Arc::new(Mutex::new(Chain {
            holding: true,
            answers_lost: true,
            ..Chain::default()
        }));
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 1), [Retrying], "the send looked unanswered");
        assert_eq!(run(&mut s, 10), [], "it waits in the pool: no FAILED");
        assert_eq!(chain.lock().unwrap().sent, 1, "not sent twice");
        chain.lock().unwrap().mine();
        assert_eq!(run(&mut s, 2), [Mined]);
        chain.lock().unwrap().head += 1;
        assert_eq!(run(&mut s, 2), [Confirmed]);
    }

    #[test]
    fn after_a_restart_a_batch_waiting_in_the_pool_is_waited_for() {
        let chain = Arc::new(Mutex::new(Chain {
            holding: true,
            ..Chain::default()
        }));
        chain.lock().unwrap().pool.insert([0xee; 32], BATCH.0);
        // The restarted service's estimate would revert (`batch already settled`).
        chain.lock().unwrap().rejecting = true;
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 5), [], "waits: neither sent nor FAILED");
        assert_eq!(chain.lock().unwrap().sent, 0);
        chain.lock().unwrap().mine();
        assert_eq!(run(&mut s, 2), [Mined]);
    }

    #[test]
    fn a_transaction_the_node_dropped_is_sent_again() {
        let chain = Arc::new(Mutex::new(Chain {
            holding: true,
            ..Chain::default()
        }));
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 3), [], "sent; waiting for the receipt");
        assert_eq!(chain.lock().unwrap().sent, 1);
        chain.lock().unwrap().pool.clear();
        assert_eq!(run(&mut s, 2), [Retrying], "dropped: sent again");
        assert_eq!(chain.lock().unwrap().sent, 2);
        chain.lock().unwrap().mine();
        assert_eq!(run(&mut s, 2), [Mined]);
        chain.lock().unwrap().head += 1;
        assert_eq!(run(&mut s, 2), [Confirmed]);
    }

    #[test]
    fn a_reverted_transaction_of_a_batch_another_one_settled_is_mined_not_failed() {
        let chain = Arc::new(Mutex::new(Chain {
            receipts_revert: true,
            ..Chain::default()
        }));
        let mut s = settler(&chain, Matched);
        assert_eq!(run(&mut s, 3), [Mined]);
        chain.lock().unwrap().head += 1;
        assert_eq!(run(&mut s, 2), [Confirmed]);
    }
}
