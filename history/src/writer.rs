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

/// Keys in `recent_order_keys` past which a commit merges them into `order_keys`: few enough
/// that the small table's pages stay in the writer's cache, many enough that a merge puts
/// several keys on each page of the large table it touches.
pub const RECENT_KEYS_MERGE_AT: u64 = 262_144;

/// Writes history; one per database.
pub struct HistoryWriter {
    connection: Connection,
    applied_seq: u64,
    in_transaction: bool,
    /// Rows in `recent_order_keys` (committed or in the open transaction).
    recent_keys: u64,
    /// The count at which a commit merges them (a test sets a small one).
    merge_at: u64,
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
        let recent = count_recent_keys(&connection)?;
        Ok(HistoryWriter {
            connection,
            applied_seq: u64::try_from(applied).unwrap_or(0),
            in_transaction: false,
            recent_keys: recent,
            merge_at: RECENT_KEYS_MERGE_AT,
        })
    }

    /// Merges the recent keys at `merge_at` of them instead (tests).
    pub fn set_merge_at(&mut self, merge_at: u64) {
        self.merge_at = merge_at.max(1);
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
        for keys in ["order_keys", "recent_order_keys"] {
            self.connection.execute(
                &format!(
                    "DELETE FROM {keys} WHERE (hash_key, order_id) IN \
                     (SELECT hash_key, order_id FROM orders WHERE closed_seq > ?1)"
                ),
                [seq],
            )?;
        }
        self.connection
            .execute("DELETE FROM orders WHERE closed_seq > ?1", [seq])?;
        self.connection
            .execute("DELETE FROM prices WHERE seq > ?1", [seq])?;
        self.connection
            .execute("UPDATE progress SET applied_seq = ?1 WHERE id = 0", [seq])?;
        self.connection.execute_batch("COMMIT")?;
        self.applied_seq = u64::try_from(seq).unwrap_or(0);
        self.recent_keys = count_recent_keys(&self.connection)?;
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
        self.recent_keys = count_recent_keys(&self.connection)?;
        Ok(())
    }

    /// Commits what was applied since the last commit (synced to disk).
    pub fn commit(&mut self) -> rusqlite::Result<()> {
        if self.in_transaction {
            if self.recent_keys >= self.merge_at {
                // A table clustered by key is read in key order: the large table's pages
                // are visited once each, in order.
                self.connection.execute_batch(
                    "INSERT OR IGNORE INTO order_keys SELECT hash_key, order_id \
                     FROM recent_order_keys; DELETE FROM recent_order_keys;",
                )?;
                self.recent_keys = 0;
            }
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
                     yes_price_ticks, seq, outcomes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![
                    int(trade.index),
                    hex_text(&trade.condition_id.0),
                    int(trade.match_time_ns / 1_000_000_000),
                    yes_price,
                    int(seq),
                    ladder_sequencer::traded_outcomes(trade),
                ])?;
        }
        if !matches!(trade.status, TradeStatus::Confirmed | TradeStatus::Failed) {
            return Ok(());
        }
        let outcomes = ladder_sequencer::traded_outcomes(trade);
        if outcomes != ladder_sequencer::BOTH_OUTCOMES {
            // A price stored before its tokens were known (a store of schema 3 migrated
            // while the trade was pending) says both; its final row says which.
            self.connection
                .prepare_cached(
                    "UPDATE prices SET outcomes = ?2 WHERE trade_index = ?1 AND outcomes = 3",
                )?
                .execute(params![int(trade.index), outcomes])?;
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
        let added = self
            .connection
            .prepare_cached(
                "INSERT OR IGNORE INTO recent_order_keys (hash_key, order_id) VALUES (?1, ?2)",
            )?
            .execute(params![&order.hash.0[..HASH_KEY_BYTES], int(order.id)])?;
        self.recent_keys += added as u64;
        Ok(())
    }
}

/// Rows in `recent_order_keys`.
fn count_recent_keys(connection: &Connection) -> rusqlite::Result<u64> {
    let count: i64 =
        connection.query_row("SELECT count(*) FROM recent_order_keys", [], |r| r.get(0))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use ladder_engine::{
        Address, FixedBytes, Hash32, OrderEventKind, OrderType, OrderView, Outcome, Side,
    };
    use ladder_sequencer::HistoryReads;

    use super::*;
    use crate::HistoryReader;

    fn closed(id: u64) -> (Hash32, Event) {
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&(id.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes());
        hash[31] = id as u8;
        let order = OrderView {
            id,
            hash: FixedBytes(hash),
            maker: Address([7; 20]),
            condition_id: FixedBytes([1; 32]),
            token_id: FixedBytes([2; 32]),
            outcome: Outcome::Yes,
            side: Side::Buy,
            price_ticks: 5_000,
            size_units: 1_000_000,
            filled_units: 0,
            status: OrderStatus::Canceled,
            created_ns: 1,
            expiration_s: 0,
            order_type: OrderType::Gtc,
        };
        let event = Event::Order {
            kind: OrderEventKind::Cancellation,
            order,
        };
        (FixedBytes(hash), event)
    }

    /// A price stored as "both tokens" (a schema-3 store migrated while its trade was
    /// pending) learns its token when the trade's final row is stored.
    #[test]
    fn a_final_trade_names_the_tokens_of_its_price_stored_before_they_were_known() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::history_path(dir.path());
        let mut writer = HistoryWriter::open(&path).unwrap();
        let party = |order_id, side| ladder_engine::FillParty {
            order_id,
            order_hash: FixedBytes([order_id as u8; 32]),
            address: Address([order_id as u8; 20]),
            outcome: Outcome::No,
            side,
            price_ticks: 2_000,
        };
        let trade = ladder_engine::TradeView {
            index: 1,
            id: FixedBytes([1; 32]),
            transaction_hash: FixedBytes([2; 32]),
            condition_id: FixedBytes([1; 32]),
            yes_token_id: FixedBytes([3; 32]),
            no_token_id: FixedBytes([4; 32]),
            match_type: ladder_engine::MatchType::Complementary,
            taker: party(1, Side::Sell),
            maker: party(2, Side::Buy),
            size_units: 1_000_000,
            taker_fee_units: 0,
            match_time_ns: 60_000_000_000,
            last_update_ns: 61_000_000_000,
            status: TradeStatus::Confirmed,
        };
        Connection::open(&path)
            .unwrap()
            .execute(
                "INSERT INTO prices (trade_index, condition_id, time_s, yes_price_ticks, seq, \
                 outcomes) VALUES (1, '0x', 60, 8000, 1, 3)",
                [],
            )
            .unwrap();
        writer.apply(2, &[Event::Trade(trade)]).unwrap();
        writer.commit().unwrap();
        let outcomes: i64 = Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT outcomes FROM prices WHERE trade_index = 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(outcomes, 2, "a No trade alone");
    }

    /// Keys are found whether they are still recent or merged, and a rewind takes the keys
    /// of the orders it removes from both tables.
    #[test]
    fn a_closed_order_is_found_by_its_hash_before_and_after_its_key_is_merged() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::history_path(dir.path());
        let mut writer = HistoryWriter::open(&path).unwrap();
        writer.set_merge_at(5);
        let mut hashes = Vec::new();
        for id in 1..=10u64 {
            let (hash, event) = closed(id);
            writer.apply(id, &[event]).unwrap();
            hashes.push(hash);
            if id % 3 == 0 {
                writer.commit().unwrap();
            }
        }
        writer.commit().unwrap();
        let count = |table: &str| -> i64 {
            Connection::open(&path)
                .unwrap()
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        // Merged at the commit after id 6 (6 recent keys); the other commits found fewer than 5.
        assert_eq!((count("order_keys"), count("recent_order_keys")), (6, 4));
        let reads = HistoryReader::new(&path, Arc::new(AtomicU64::new(0)), Arc::new(|| 0));
        for hash in &hashes {
            assert!(reads.order_hash_stored(hash).unwrap(), "{hash:?}");
        }
        let mut unknown = hashes[0];
        unknown.0[31] ^= 0xff;
        assert!(!reads.order_hash_stored(&unknown).unwrap());

        writer.rewind_to(5).unwrap();
        assert_eq!((count("order_keys"), count("recent_order_keys")), (5, 0));
        for (i, hash) in hashes.iter().enumerate() {
            assert_eq!(
                reads.order_hash_stored(hash).unwrap(),
                i < 5,
                "order {}",
                i + 1
            );
        }
        // Reopened, the writer counts the recent keys again.
        let (hash, event) = closed(11);
        writer.apply(11, &[event]).unwrap();
        writer.commit().unwrap();
        drop(writer);
        let writer = HistoryWriter::open(&path).unwrap();
        assert_eq!(writer.recent_keys, 1);
        assert!(reads.order_hash_stored(&hash).unwrap());
    }
}
