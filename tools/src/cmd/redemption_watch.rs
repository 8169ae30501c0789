//! With `--rpc-url`: redemptions made on the chain (an ERC-4337 operation through the
//! bundler beside the node, or anyone calling the exchange's `redeem`) become
//! `RecordRedemption` commands once final (`--chain-confirmations` blocks), so that the
//! entries leave `GET /claimable` (API.md §2.9). A helper thread reads the chain; the
//! runtime's loop journals what it found while it is the primary, then keeps the next block
//! to read in `<data>/chain-redemptions` (written durably). Recording a redemption again
//! (after a crash between the two) finds nothing left and changes nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError};
use ladder_chain::redemptions::{redemptions_in, Redemption};
use ladder_chain::RpcClient;
use ladder_engine::{Asset, Command, Engine, MarketState};
use ladder_protocol::Address;
use ladder_sequencer::{Completion, Work};

/// The file that keeps the next block to read.
const CURSOR_FILE: &str = "chain-redemptions";
/// Blocks read by one `eth_getLogs` at most (nodes and providers cap the range).
const BLOCKS_PER_READ: u64 = 2_000;

/// Reads of [`BLOCKS_PER_READ`] blocks the helper makes for one request while it finds
/// nothing (a watch far behind the chain catches up at the node's pace).
const READS_PER_ANSWER: usize = 50;

/// What the helper thread found: the redemptions of blocks `from..=through`, and whether
/// final blocks remain past `through` (the watch is behind: it reads on at once).
type Found = Result<(Vec<Redemption>, u64, bool), String>;

/// The watch, driven by the runtime's loop.
pub struct RedemptionWatch {
    requests: Sender<u64>,
    answers: Receiver<Found>,
    in_flight: bool,
    next_block: u64,
    cursor: PathBuf,
    poll: Duration,
    last_read: Option<Instant>,
    /// Whether the last read failed (logged once, then its recovery).
    failing: bool,
    /// Whether final blocks remain past the cursor: the next read is not left for the poll
    /// (a watch that starts at block 0, or after a long stop, catches up at the node's pace).
    behind: bool,
    /// `next_block`, shared with the bundler: redemptions from there on are on the chain
    /// but not journaled yet.
    unrecorded_from: Arc<AtomicU64>,
}

impl RedemptionWatch {
    /// Starts the helper thread; the first block to read comes from `data_dir`.
    pub fn start(
        rpc: RpcClient,
        exchange: Address,
        confirmations: u64,
        poll: Duration,
        data_dir: &Path,
        unrecorded_from: Arc<AtomicU64>,
    ) -> Result<RedemptionWatch, String> {
        let cursor = data_dir.join(CURSOR_FILE);
        let next_block = match std::fs::read_to_string(&cursor) {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|_| format!("{}: not a block number", cursor.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(format!("{}: {e}", cursor.display())),
        };
        unrecorded_from.store(next_block, Ordering::Release);
        let (requests, inbox) = bounded::<u64>(1);
        let (outbox, answers) = bounded::<Found>(1);
        std::thread::Builder::new()
            .name("chain-redemptions".into())
            .spawn(move || {
                for from in inbox {
                    let found = read_final(&rpc, &exchange, confirmations, from);
                    if outbox.send(found).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("chain redemptions thread: {e}"))?;
        Ok(RedemptionWatch {
            requests,
            answers,
            in_flight: false,
            next_block,
            cursor,
            poll,
            last_read: None,
            failing: false,
            behind: false,
            unrecorded_from,
        })
    }

    /// Journals what the last read found (while `primary`), and asks for the next read when
    /// one is due. `run` carries a command through the sequencer.
    pub fn tick(&mut self, primary: bool, mut run: impl FnMut(Work) -> Result<Completion, String>) {
        match self.answers.try_recv() {
            Ok(found) => {
                self.in_flight = false;
                let failed = found.is_err();
                if !failed && self.failing {
                    tracing::info!("chain redemptions: read again");
                }
                self.behind = false;
                match found {
                    Ok((redemptions, through, more)) if primary => {
                        // Only once past `through`: a redemption that waits is read again
                        // at the next poll, not at once.
                        let moved = self.record(&redemptions, through, &mut run);
                        self.behind = more && moved;
                    }
                    Ok(_) => {}
                    Err(e) if !self.failing => {
                        tracing::warn!(error = %e, "chain redemptions: not read; trying again at each poll")
                    }
                    Err(_) => {}
                }
                self.failing = failed;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return,
        }
        let due = self.behind || self.last_read.is_none_or(|at| at.elapsed() >= self.poll);
        if primary && !self.in_flight && due && self.requests.try_send(self.next_block).is_ok() {
            self.in_flight = true;
            self.last_read = Some(Instant::now());
        }
    }

    /// Journals each redemption, then moves the cursor past `through` (whether it did). A
    /// redemption in a
    /// market this service does not hold is passed over, and so is one of an account that
    /// holds nothing of the market here (anyone may redeem nothing on the chain: it must not
    /// hold up the redemptions after it); one in a market it has not resolved yet waits (the
    /// blocks are read again later), as does one the service refused.
    fn record(
        &mut self,
        redemptions: &[Redemption],
        through: u64,
        run: &mut impl FnMut(Work) -> Result<Completion, String>,
    ) -> bool {
        for redemption in redemptions {
            match market_state(redemption, run) {
                Ok(Some((MarketState::Resolved(_), _))) => {}
                Ok(Some((_, false))) => {
                    tracing::info!(
                        account = %redemption.account.to_lowercase_hex(),
                        condition_id = %redemption.condition_id,
                        block = redemption.block,
                        "redemption on the chain by an account that holds nothing of the market here: passed over"
                    );
                    continue;
                }
                Ok(None) => {
                    tracing::info!(
                        account = %redemption.account.to_lowercase_hex(),
                        condition_id = %redemption.condition_id,
                        block = redemption.block,
                        "redemption on the chain in a market this service does not hold: passed over"
                    );
                    continue;
                }
                Ok(Some(_)) | Err(_) => {
                    tracing::debug!(
                        block = redemption.block,
                        "chain redemption waits: its market is not resolved here yet"
                    );
                    return false;
                }
            }
            let command = Command::RecordRedemption {
                address: redemption.account,
                condition_id: redemption.condition_id,
            };
            match run(Work::Command(command)) {
                Ok(Completion::Applied { .. }) => tracing::info!(
                    account = %redemption.account.to_lowercase_hex(),
                    condition_id = %redemption.condition_id,
                    block = redemption.block,
                    "redemption on the chain recorded"
                ),
                // Refused (a full journal, say): read again from the same block later.
                Ok(_) | Err(_) => {
                    tracing::warn!(
                        block = redemption.block,
                        "chain redemption not recorded yet"
                    );
                    return false;
                }
            }
        }
        if through + 1 > self.next_block {
            self.next_block = through + 1;
            self.unrecorded_from
                .store(self.next_block, Ordering::Release);
            let text = format!("{}\n", self.next_block);
            if let Err(e) = ladder_journal::write_file_durably(&self.cursor, text.as_bytes()) {
                tracing::warn!(error = %e, "chain redemptions: cursor not kept");
            }
        }
        true
    }
}

/// The state of the redemption's market as the engine holds it, and whether the redeeming
/// account holds any of its tokens (`None`: no such market), asked through the sequencer.
fn market_state(
    redemption: &Redemption,
    run: &mut impl FnMut(Work) -> Result<Completion, String>,
) -> Result<Option<(MarketState, bool)>, String> {
    let (condition_id, account) = (redemption.condition_id, redemption.account);
    query_through(run, move |e: &Engine| {
        e.market(&condition_id).map(|m| {
            let holds = [m.yes_token_id, m.no_token_id]
                .into_iter()
                .any(|token| e.balance(&account, Asset::Token(token)).total() > 0);
            (m.state, holds)
        })
    })
}

/// Runs `read` against the engine on the sequencer thread through `run` (which carries work
/// to the sequencer and waits for its completion), and gives its value.
pub(crate) fn query_through<T: Send + 'static>(
    run: &mut impl FnMut(Work) -> Result<Completion, String>,
    read: impl FnOnce(&Engine) -> T + Send + 'static,
) -> Result<T, String> {
    let (query, answer) = ladder_sequencer::query(read);
    match run(Work::Query(query))? {
        Completion::Answered { .. } => answer.take().ok_or_else(|| "no answer".to_string()),
        _ => Err("unexpected completion".into()),
    }
}

/// The redemptions in final blocks from `from` on (at most [`BLOCKS_PER_READ`] blocks), the
/// last block read (`from - 1` when no block from `from` on is final yet), and whether
/// final blocks remain after it.
fn read_final(rpc: &RpcClient, exchange: &Address, confirmations: u64, from: u64) -> Found {
    let head = rpc.block_number().map_err(|e| e.to_string())?;
    // A block is final once `confirmations` blocks, its own included, are on the chain.
    let Some(last_final) = (head + 1).checked_sub(confirmations.max(1)) else {
        return Ok((Vec::new(), from.saturating_sub(1), false));
    };
    if last_final < from {
        return Ok((Vec::new(), from.saturating_sub(1), false));
    }
    // Range after range while nothing is found, up to a bound per answer.
    let mut start = from;
    for _ in 0..READS_PER_ANSWER {
        let through = last_final.min(start.saturating_add(BLOCKS_PER_READ - 1));
        let found = match redemptions_in(rpc, exchange, start, through) {
            Ok(found) => found,
            // The ranges read stand (a provider that limits calls per second fails after a
            // few); the next read, at the next poll, starts after them.
            Err(e) if start > from => {
                tracing::debug!(error = %e, from = start, "chain redemptions: read stopped");
                return Ok((Vec::new(), start - 1, false));
            }
            Err(e) => return Err(e.to_string()),
        };
        if !found.is_empty() || through == last_final {
            return Ok((found, through, through < last_final));
        }
        start = through + 1;
    }
    Ok((Vec::new(), start - 1, true))
}
