//! The one writer of `history.db`: the events of each journal record, in transactions of
//! many records, with the last sequence applied stored in the same transaction. Applying a
//! record at or before that sequence again changes nothing, so a writer that died between
//! two commits catches up from the journal without a row lost or doubled.

use std::path::Path;

use ladder_engine::{Event, OrderStatus, OrderView, Outcome, TradeStatus, TradeView};
use rusqlite::{params, Connection};

use crate::rows::{hex_text, int, Named};
use crate::schema::{open_for_writing, HASH_KEY_BYTES};

/// A price of 1 in ticks (a No price is this minus the Yes price).
const PRICE_ONE_TICKS: u32 = 10_000;

/// Writes history; one per database.
pub struct HistoryWriter {
    connection: Connection,
    applied_seq: u64,
    in_transaction: bool,
}

impl std::fmt::Debug for HistoryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryWriter")
            .field("applied_seq", &self.applied_seq)
            .finish()
    }
}

impl HistoryWriter {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> rusqlite::Result<HistoryWriter> {
        let connection = open_for_writing(path)?;
        let applied: i64 =
            connection.query_row("SELECT applied_seq FROM progress WHERE id = 0", [], |r| {
                r.get(0)
            })?;
        Ok(HistoryWriter {
            connection,
            applied_seq: u64::try_from(applied).unwrap_or(0),
            in_transaction: false,
        })
    }

    /// The last sequence whose events are applied (committed or in the open transaction).
    pub fn applied_seq(&self) -> u64 {
        self.applied_seq
    }

    /// Whether records were applied since the last commit.
    pub fn has_uncommitted(&self) -> bool {
        self.in_transaction
    }

    /// Applies the events of record `seq` (nothing when `seq` is already applied).
    pub fn apply(&mut self, seq: u64, events: &[Event]) -> rusqlite::Result<()> {
        if seq <= self.applied_seq {
            return Ok(());
        }
        if !self.in_transaction {
            self.connection.execute_batch("BEGIN IMMEDIATE")?;
            self.in_transaction = true;
        }
        for event in events {
            match event {
                Event::Trade(trade) => self.trade(seq, trade)?,
                Event::Order { order, .. }
                    if matches!(order.status, OrderStatus::Matched | OrderStatus::Canceled) =>
                {
                    self.closed_order(seq, order)?
                }
                _ => {}
            }
        }
        // The progress row is written once, with the commit.
        self.applied_seq = seq;
        Ok(())
    }

    /// Removes what records after `seq` wrote and sets the store back to `seq` (the journal
    /// lost those records: an `async` journal's unsynced tail, cut after a power loss).
    pub fn rewind_to(&mut self, seq: u64) -> rusqlite::Result<()> {
        self.commit()?;
        let seq = int(seq);
        self.connection.execute_batch("BEGIN IMMEDIATE")?;
        self.connection
            .execute("DELETE FROM trades WHERE final_seq > ?1", [seq])?;
        self.connection
            .execute("DELETE FROM orders WHERE closed_seq > ?1", [seq])?;
        self.connection
            .execute("DELETE FROM prices WHERE seq > ?1", [seq])?;
        self.connection
            .execute("UPDATE progress SET applied_seq = ?1 WHERE id = 0", [seq])?;
        self.connection.execute_batch("COMMIT")?;
        self.applied_seq = u64::try_from(seq).unwrap_or(0);
        Ok(())
    }

    /// Gives up the open transaction after a failed write: rolled back (SQLite may have done
    /// so already), nothing applied since the last commit counts.
    pub fn abandon(&mut self) {
        if self.in_transaction {
            // An error here means SQLite rolled back by itself (a full disk, an I/O error).
            let _ = self.connection.execute_batch("ROLLBACK");
            self.in_transaction = false;
        }
    }

    /// Reads back the last committed sequence (after `abandon`).
    pub fn reload(&mut self) -> rusqlite::Result<()> {
        self.abandon();
        let applied: i64 = self.connection.query_row(
            "SELECT applied_seq FROM progress WHERE id = 0",
            [],
            |r| r.get(0),
        )?;
        self.applied_seq = u64::try_from(applied).unwrap_or(0);
        Ok(())
    }

    /// Commits what was applied since the last commit (synced to disk).
    pub fn commit(&mut self) -> rusqlite::Result<()> {
        if self.in_transaction {
            self.connection
                .prepare_cached("UPDATE progress SET applied_seq = ?1 WHERE id = 0")?
                .execute(params![int(self.applied_seq)])?;
            self.connection.execute_batch("COMMIT")?;
            self.in_transaction = false;
        }
        Ok(())
    }

    /// A new trade's price point; a final trade's row.
    fn trade(&mut self, seq: u64, trade: &TradeView) -> rusqlite::Result<()> {
        if trade.status == TradeStatus::Matched && trade.last_update_ns == trade.match_time_ns {
            let yes_price = match trade.taker.outcome {
                Outcome::Yes => trade.taker.price_ticks,
                Outcome::No => PRICE_ONE_TICKS.saturating_sub(trade.taker.price_ticks),
            };
            self.connection
                .prepare_cached(
                    "INSERT OR IGNORE INTO prices (trade_index, condition_id, time_s, \
                     yes_price_ticks, seq) VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![
                    int(trade.index),
                    hex_text(&trade.condition_id.0),
                    int(trade.match_time_ns / 1_000_000_000),
                    yes_price,
                    int(seq),
                ])?;
        }
        if !matches!(trade.status, TradeStatus::Confirmed | TradeStatus::Failed) {
            return Ok(());
        }
        let (t, m) = (&trade.taker, &trade.maker);
        self.connection
            .prepare_cached(
                "INSERT OR REPLACE INTO trades (trade_index, trade_id, transaction_hash, \
                 condition_id, yes_token_id, no_token_id, match_type, \
                 taker_order_id, taker_order_hash, taker_address, taker_outcome, taker_side, \
                 taker_price_ticks, maker_order_id, maker_order_hash, maker_address, \
                 maker_outcome, maker_side, maker_price_ticks, size_units, taker_fee_units, \
                 match_time_ns, last_update_ns, status, final_seq) VALUES (?1, ?2, ?3, ?4, \
                 ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, \
                 ?21, ?22, ?23, ?24, ?25)",
            )?
            .execute(params![
                int(trade.index),
                hex_text(&trade.id.0),
                hex_text(&trade.transaction_hash.0),
                hex_text(&trade.condition_id.0),
                hex_text(&trade.yes_token_id.0),
                hex_text(&trade.no_token_id.0),
                trade.match_type.name(),
                int(t.order_id),
                hex_text(&t.order_hash.0),
                hex_text(&t.address.0),
                t.outcome.name(),
                t.side.name(),
                t.price_ticks,
                int(m.order_id),
                hex_text(&m.order_hash.0),
                hex_text(&m.address.0),
                m.outcome.name(),
                m.side.name(),
                m.price_ticks,
                int(trade.size_units),
                int(trade.taker_fee_units),
                int(trade.match_time_ns),
                int(trade.last_update_ns),
                trade.status.name(),
                int(seq),
            ])?;
        Ok(())
    }

    /// An order that filled entirely or was cancelled.
    fn closed_order(&mut self, seq: u64, order: &OrderView) -> rusqlite::Result<()> {
        self.connection
            .prepare_cached(
                "INSERT OR REPLACE INTO orders (order_hash, order_id, maker, condition_id, \
                 token_id, outcome, side, price_ticks, size_units, filled_units, status, \
                 order_type, created_ns, expiration_s, closed_seq, hash_key) VALUES (?1, ?2, \
                 ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            )?
            .execute(params![
                hex_text(&order.hash.0),
                int(order.id),
                hex_text(&order.maker.0),
                hex_text(&order.condition_id.0),
                hex_text(&order.token_id.0),
                order.outcome.name(),
                order.side.name(),
                order.price_ticks,
                int(order.size_units),
                int(order.filled_units),
                order.status.name(),
                order.order_type.name(),
                int(order.created_ns),
                int(order.expiration_s),
                int(seq),
                &order.hash.0[..HASH_KEY_BYTES],
            ])?;
        Ok(())
    }
}
