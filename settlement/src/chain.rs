//! The chain backend (`--rpc-url`): each batch is sent to the exchange contract's
//! `matchOrders` over JSON-RPC; its receipt makes it MINED and the confirmation depth
//! CONFIRMED. A node that cannot be reached is retried with back-off (the batch shows
//! RETRYING) and, past the attempt limit, FAILED; a revert is FAILED at once (through
//! RETRYING). Before sending, the contract's `settledAt(batchId)` is read, so a batch sent
//! before a restart is never sent twice; the same read at the confirmation depth catches a
//! reorganisation that dropped it (back to RETRYING, sent again).

use std::collections::HashMap;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use ladder_chain::exchange::SubmitError;
use ladder_chain::{ExchangeClient, Fill, RpcError};
use ladder_engine::{Event, Hash32, MatchType, Side, TradeStatus, TradeView};
use ladder_protocol::Address;
use ladder_sequencer::{PublishedBatch, Submitter};

use crate::outbox::{Outbox, Stopped};
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
}

impl Default for ChainSettings {
    fn default() -> Self {
        ChainSettings {
            poll_interval: Duration::from_millis(500),
            confirmations: 2,
            attempts_max: 8,
            backoff: Duration::from_millis(500),
        }
    }
}

const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Where a batch is on its way to the chain.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Not (known to be) on chain: check `settledAt`, then send.
    Send,
    /// Sent as transaction `tx`; waiting for its receipt.
    Receipt { tx: [u8; 32] },
    /// Recorded at `block`; waiting for the confirmation depth.
    Depth { block: u64 },
}

/// One batch being settled.
struct Tracked {
    fills: Vec<Fill>,
    /// The last status this thread journaled (or found journaled).
    status: TradeStatus,
    phase: Phase,
    attempts: u32,
    next_try: Instant,
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

/// Starts the chain settlement thread (arguments as [`crate::start`]).
pub fn start_chain(
    client: ExchangeClient,
    settings: ChainSettings,
    events: Receiver<PublishedBatch>,
    submitter: Submitter,
    sink: u16,
    pending: Vec<PendingBatch>,
) -> std::io::Result<SettlementHandle> {
    let thread: JoinHandle<()> = std::thread::Builder::new()
        .name("settlement-chain".into())
        .spawn(move || {
            let mut settler = ChainSettler {
                client,
                settings,
                batches: HashMap::new(),
                outbox: Outbox::new(submitter, sink),
            };
            for batch in pending {
                settler.track(
                    batch.transaction_hash,
                    batch.status,
                    batch.trades.iter().map(fill_of).collect(),
                );
            }
            loop {
                let wait = if settler.outbox.is_backed_up() {
                    Duration::from_millis(10)
                } else {
                    settler.settings.poll_interval
                };
                match events.recv_timeout(wait) {
                    Ok(batch) => settler.observe(&batch),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                if settler.advance(Instant::now()).is_err() || settler.outbox.flush().is_err() {
                    return;
                }
            }
        })?;
    Ok(SettlementHandle::new(thread))
}

struct ChainSettler {
    client: ExchangeClient,
    settings: ChainSettings,
    batches: HashMap<Hash32, Tracked>,
    outbox: Outbox,
}

impl ChainSettler {
    fn track(&mut self, tx: Hash32, status: TradeStatus, fills: Vec<Fill>) {
        self.batches.insert(
            tx,
            Tracked {
                fills,
                status,
                phase: Phase::Send,
                attempts: 0,
                next_try: Instant::now(),
            },
        );
    }

    /// New matches start a batch; the other trade events are this thread's own changes.
    fn observe(&mut self, published: &PublishedBatch) {
        for item in published.iter() {
            for event in &item.events {
                let Event::Trade(trade) = event else { continue };
                if trade.status != TradeStatus::Matched {
                    continue;
                }
                let tx = trade.transaction_hash;
                match self.batches.get_mut(&tx) {
                    Some(tracked) if tracked.attempts == 0 => tracked.fills.push(fill_of(trade)),
                    Some(_) => {}
                    None => self.track(tx, TradeStatus::Matched, vec![fill_of(trade)]),
                }
            }
        }
    }

    /// Moves every batch that is due one step on.
    fn advance(&mut self, now: Instant) -> Result<(), Stopped> {
        let due: Vec<Hash32> = self
            .batches
            .iter()
            .filter(|(_, t)| t.next_try <= now)
            .map(|(tx, _)| *tx)
            .collect();
        for tx in due {
            self.step(tx, now)?;
        }
        Ok(())
    }

    fn step(&mut self, tx: Hash32, now: Instant) -> Result<(), Stopped> {
        let Some(phase) = self.batches.get(&tx).map(|t| t.phase) else {
            return Ok(());
        };
        let poll = self.settings.poll_interval;
        match phase {
            Phase::Send => match self.client.settled_at(&tx.0) {
                Ok(block) if block > 0 => self.recorded(tx, block, now),
                Ok(_) => self.send(tx, now),
                Err(e) => self.unreachable(tx, &e, now),
            },
            Phase::Receipt { tx: chain_tx } => match self.client.receipt(&chain_tx) {
                Ok(None) => {
                    self.set_next(tx, now + poll);
                    Ok(())
                }
                Ok(Some(r)) if r.success => self.recorded(tx, r.block_number, now),
                Ok(Some(_)) => self.fail(tx, "the settlement transaction reverted"),
                Err(e) => self.unreachable(tx, &e, now),
            },
            Phase::Depth { block } => {
                let head = match self.client.block_number() {
                    Ok(head) => head,
                    Err(e) => return self.unreachable(tx, &e, now),
                };
                if head + 1 < block + self.settings.confirmations {
                    self.set_next(tx, now + poll);
                    return Ok(());
                }
                match self.client.settled_at(&tx.0) {
                    Ok(0) => {
                        tracing::warn!(batch = %hex(&tx), "settled batch vanished from the chain (reorganisation); sending again");
                        self.change(tx, TradeStatus::Retrying)?;
                        if let Some(t) = self.batches.get_mut(&tx) {
                            t.phase = Phase::Send;
                            t.next_try = now;
                        }
                        Ok(())
                    }
                    Ok(_) => {
                        self.change(tx, TradeStatus::Confirmed)?;
                        self.batches.remove(&tx);
                        Ok(())
                    }
                    Err(e) => self.unreachable(tx, &e, now),
                }
            }
        }
    }

    /// Sends the batch; a batch journaled as MINED that is not on chain goes back to RETRYING.
    fn send(&mut self, tx: Hash32, now: Instant) -> Result<(), Stopped> {
        if self.batches.get(&tx).map(|t| t.status) == Some(TradeStatus::Mined) {
            self.change(tx, TradeStatus::Retrying)?;
        }
        let Some(tracked) = self.batches.get(&tx) else {
            return Ok(());
        };
        match self.client.submit(&tx.0, &tracked.fills) {
            Ok(chain_tx) => {
                tracing::info!(batch = %hex(&tx), transaction = %hex_bytes(&chain_tx), fills = tracked.fills.len(), "settlement batch sent");
                if let Some(t) = self.batches.get_mut(&tx) {
                    t.phase = Phase::Receipt { tx: chain_tx };
                    t.next_try = now + self.settings.poll_interval.min(Duration::from_millis(100));
                }
                Ok(())
            }
            Err(SubmitError::Reverted(why)) => self.fail(tx, &format!("reverted: {why}")),
            Err(SubmitError::Rpc(e)) => self.unreachable(tx, &e, now),
        }
    }

    /// The contract holds the batch at `block`: MINED, then wait for the depth.
    fn recorded(&mut self, tx: Hash32, block: u64, now: Instant) -> Result<(), Stopped> {
        if self.batches.get(&tx).map(|t| t.status) != Some(TradeStatus::Mined) {
            self.change(tx, TradeStatus::Mined)?;
        }
        if let Some(t) = self.batches.get_mut(&tx) {
            t.phase = Phase::Depth { block };
            t.attempts = 0;
            t.next_try = now;
        }
        Ok(())
    }

    /// The node could not be reached: RETRYING, back off; FAILED past the attempt limit.
    fn unreachable(&mut self, tx: Hash32, error: &RpcError, now: Instant) -> Result<(), Stopped> {
        let Some(tracked) = self.batches.get_mut(&tx) else {
            return Ok(());
        };
        tracked.attempts += 1;
        let attempts = tracked.attempts;
        if attempts >= self.settings.attempts_max {
            return self.fail(tx, &format!("{attempts} attempts: {error}"));
        }
        let backoff = self
            .settings
            .backoff
            .saturating_mul(1 << (attempts - 1).min(16))
            .min(BACKOFF_MAX);
        tracked.next_try = now + backoff;
        tracing::warn!(batch = %hex(&tx), attempts, error = %error, "settlement: RPC failed; retrying");
        if tracked.status != TradeStatus::Retrying && !matches!(tracked.phase, Phase::Depth { .. })
        {
            self.change(tx, TradeStatus::Retrying)?;
        }
        Ok(())
    }

    /// FAILED, through RETRYING; the engine reverses the batch's ledger movement.
    fn fail(&mut self, tx: Hash32, why: &str) -> Result<(), Stopped> {
        tracing::warn!(batch = %hex(&tx), why, "settlement batch failed");
        if self.batches.get(&tx).map(|t| t.status) != Some(TradeStatus::Retrying) {
            self.change(tx, TradeStatus::Retrying)?;
        }
        self.change(tx, TradeStatus::Failed)?;
        self.batches.remove(&tx);
        Ok(())
    }

    fn change(&mut self, tx: Hash32, status: TradeStatus) -> Result<(), Stopped> {
        if let Some(t) = self.batches.get_mut(&tx) {
            t.status = status;
        }
        self.outbox.send(tx, status)
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
