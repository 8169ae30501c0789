//! Reads of `history.db` from gateway threads: a few read-only connections, taken from a pool
//! for one read each (WAL mode: a read never waits for the writer, and sees the last commit).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ladder_engine::{
    Address, ConditionId, Hash32, OrderId, OrderStatus, Outcome, TradeFilter, TradeView,
    NANOS_PER_SECOND,
};
use ladder_sequencer::{HistoryReads, PriceBucket};
use parking_lot::Mutex;
use rusqlite::types::Value;
use rusqlite::Connection;

use crate::rows::{from_hex, hex_text, int, text_column, trade_from_row, Named, TRADE_COLUMNS};
use crate::schema::{open_for_reading, HASH_KEY_BYTES};

/// Whether an order hash is stored: both key tables (a key is in one of them), then the full
/// hash in the row, each a search of a primary key. A join in each arm rather than `order_id
/// IN (SELECT ... UNION ALL ...)`, for which SQLite builds a temporary table on every call.
const ORDER_BY_HASH: &str = "\
    SELECT 1 FROM order_keys AS k JOIN orders AS o ON o.order_id = k.order_id \
        WHERE k.hash_key = ?1 AND o.order_hash = ?2 \
    UNION ALL \
    SELECT 1 FROM recent_order_keys AS k JOIN orders AS o ON o.order_id = k.order_id \
        WHERE k.hash_key = ?1 AND o.order_hash = ?2";

/// Why reads fail while the store is stranded.
const STRANDED: &str = "history store: it lacks records the journal no longer holds (history.db \
    lost, or replaced by an older copy, after retention): bring back a snapshot at or before \
    where it stands and the journal after it (API.md §19)";

/// Idle read connections kept for reuse.
const POOLED_CONNECTIONS_MAX: usize = 16;

/// Reads the history store.
pub struct HistoryReader {
    path: PathBuf,
    pool: Mutex<Vec<Connection>>,
    stored_through: Arc<AtomicU64>,
    released: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Whether `prices` has its `outcomes` column (schema 4): until the historian has
    /// migrated an older store, a price history is read unfiltered (the market's).
    prices_have_outcomes: std::sync::atomic::AtomicBool,
    /// Set by the historian while the store lacks records the journal no longer holds.
    stranded: Arc<AtomicBool>,
}

impl std::fmt::Debug for HistoryReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryReader")
            .field("path", &self.path)
            .field("stored_through", &self.stored_through)
            .finish()
    }
}

impl HistoryReader {
    /// A reader of the database at `path` (which the writer created), reporting the
    /// writer's progress from `stored_through` and the sequencer's from `released`.
    pub fn new(
        path: &Path,
        stored_through: Arc<AtomicU64>,
        released: Arc<dyn Fn() -> u64 + Send + Sync>,
    ) -> HistoryReader {
        HistoryReader {
            path: path.to_path_buf(),
            pool: Mutex::new(Vec::new()),
            stored_through,
            released,
            prices_have_outcomes: std::sync::atomic::AtomicBool::new(false),
            stranded: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The flag for the historian to set while the store lacks records the journal no longer
    /// holds: reads fail meanwhile, since what the engine forgot is then nowhere to read, and
    /// an answer without it would be wrong (`not found`, an empty price history) or would let
    /// a long-closed order's hash be placed again.
    pub(crate) fn stranded_flag(&self) -> Arc<AtomicBool> {
        self.stranded.clone()
    }

    /// Whether the historian reports the store stranded (it lacks records the journal no
    /// longer holds).
    pub fn is_stranded(&self) -> bool {
        self.stranded.load(Ordering::Acquire)
    }

    /// `Err` while the historian reports the store stranded.
    fn check_stranded(&self) -> Result<(), String> {
        match self.stranded.load(Ordering::Acquire) {
            true => Err(STRANDED.to_string()),
            false => Ok(()),
        }
    }

    /// Runs `read` on a pooled connection (a new one when none is idle).
    fn with_connection<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, String> {
        self.check_stranded()?;
        let pooled = self.pool.lock().pop();
        let connection = match pooled {
            Some(c) => c,
            None => open_for_reading(&self.path).map_err(|e| format!("history store: {e}"))?,
        };
        let result = read(&connection).map_err(|e| format!("history store: {e}"));
        let mut pool = self.pool.lock();
        if pool.len() < POOLED_CONNECTIONS_MAX {
            pool.push(connection);
        }
        result
    }
}

impl HistoryReads for HistoryReader {
    fn trade(&self, index: u64) -> Result<Option<TradeView>, String> {
        self.with_connection(|c| {
            let mut statement = c.prepare_cached(&format!(
                "SELECT {TRADE_COLUMNS} FROM trades WHERE trade_index = ?1"
            ))?;
            let mut rows = statement.query_map([int(index)], trade_from_row)?;
            rows.next().transpose()
        })
    }

    fn trades_of(
        &self,
        address: &Address,
        filter: &TradeFilter,
        limit: usize,
    ) -> Result<Vec<TradeView>, String> {
        let (sql, values) = trades_query(address, filter, limit);
        let found = self.with_connection(|c| {
            let mut statement = c.prepare_cached(&sql)?;
            let rows =
                statement.query_map(rusqlite::params_from_iter(values.iter()), trade_from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        // SQL selected by the same rules; the engine's own test is the last word.
        Ok(found.into_iter().filter(|t| filter.matches(t)).collect())
    }

    fn closed_order(&self, id: OrderId) -> Result<Option<(Address, OrderStatus)>, String> {
        self.with_connection(|c| {
            let mut statement =
                c.prepare_cached("SELECT maker, status FROM orders WHERE order_id = ?1")?;
            let mut rows = statement.query_map([int(id)], |row| {
                let maker = text_column(row, 0, |t| from_hex(t).map(Address))?;
                let status = text_column(row, 1, OrderStatus::from_name)?;
                Ok((maker, status))
            })?;
            rows.next().transpose()
        })
    }

    fn order_hash_stored(&self, hash: &Hash32) -> Result<bool, String> {
        self.with_connection(|c| {
            let mut statement = c.prepare_cached(ORDER_BY_HASH)?;
            statement.exists(rusqlite::params![
                &hash.0[..HASH_KEY_BYTES],
                hex_text(&hash.0)
            ])
        })
    }

    fn price_buckets(
        &self,
        market: &ConditionId,
        outcome: Outcome,
        start_s: u64,
        end_s: u64,
        bucket_s: u64,
        limit: usize,
    ) -> Result<Vec<PriceBucket>, String> {
        let bucket_s = int(bucket_s.max(1));
        self.with_connection(|c| {
            let by_token = self.prices_have_outcomes.load(Ordering::Acquire) || {
                let has: bool = c.query_row(
                    "SELECT EXISTS (SELECT 1 FROM pragma_table_info('prices') \
                     WHERE name = 'outcomes')",
                    [],
                    |row| row.get(0),
                )?;
                self.prices_have_outcomes.store(has, Ordering::Release);
                has
            };
            // SQLite takes a bare column's value from the row that gives the group its MAX.
            let mut statement = c.prepare_cached(if by_token {
                "SELECT (time_s / ?4) * ?4 AS bucket, yes_price_ticks, MAX(trade_index) \
                 FROM prices WHERE condition_id = ?1 AND time_s BETWEEN ?2 AND ?3 \
                 AND outcomes & ?6 != 0 GROUP BY bucket ORDER BY bucket LIMIT ?5"
            } else {
                // ?6 is bound either way (it is never 0).
                "SELECT (time_s / ?4) * ?4 AS bucket, yes_price_ticks, MAX(trade_index) \
                 FROM prices WHERE condition_id = ?1 AND time_s BETWEEN ?2 AND ?3 \
                 AND ?6 != 0 GROUP BY bucket ORDER BY bucket LIMIT ?5"
            })?;
            let rows = statement.query_map(
                rusqlite::params![
                    hex_text(&market.0),
                    int(start_s),
                    int(end_s),
                    bucket_s,
                    int(limit as u64),
                    ladder_sequencer::outcome_bit(outcome),
                ],
                |row| {
                    let start: i64 = row.get(0)?;
                    let price: i64 = row.get(1)?;
                    let index: i64 = row.get(2)?;
                    Ok(PriceBucket {
                        start_s: start.max(0) as u64,
                        yes_price_ticks: price.clamp(0, i64::from(u32::MAX)) as u32,
                        trade_index: index.max(0) as u64,
                    })
                },
            )?;
            rows.collect()
        })
    }

    fn stored_through(&self) -> u64 {
        self.stored_through.load(Ordering::Acquire)
    }

    fn usable(&self) -> Result<(), String> {
        self.check_stranded()
    }

    fn lag(&self) -> u64 {
        (self.released)().saturating_sub(self.stored_through())
    }
}

/// The statement and its values for [`HistoryReads::trades_of`]: the union of the trades
/// the address took as taker and as maker (one index each), newest first.
fn trades_query(address: &Address, filter: &TradeFilter, limit: usize) -> (String, Vec<Value>) {
    let mut conditions = String::new();
    let mut values: Vec<Value> = Vec::new();
    let mut add = |condition: &str, value: Vec<Value>| {
        conditions.push_str(" AND ");
        conditions.push_str(condition);
        values.extend(value);
    };
    if let Some(id) = &filter.id {
        add("trade_id = ?", vec![Value::Text(hex_text(&id.0))]);
    }
    if let Some(market) = &filter.market {
        add("condition_id = ?", vec![Value::Text(hex_text(&market.0))]);
    }
    if let Some(token) = &filter.token_id {
        let token = hex_text(&token.0);
        add(
            "((taker_outcome = 'Yes' AND yes_token_id = ?) OR (taker_outcome = 'No' AND \
             no_token_id = ?) OR (maker_outcome = 'Yes' AND yes_token_id = ?) OR \
             (maker_outcome = 'No' AND no_token_id = ?))",
            vec![Value::Text(token); 4],
        );
    }
    if let Some(other) = &filter.maker_address {
        let other = hex_text(&other.0);
        add(
            "(taker_address = ? OR maker_address = ?)",
            vec![Value::Text(other); 2],
        );
    }
    if let Some(before_s) = filter.before_s {
        // Matched strictly before `before_s`: before its first nanosecond.
        let before_ns = before_s.saturating_mul(NANOS_PER_SECOND);
        add("match_time_ns < ?", vec![Value::Integer(int(before_ns))]);
    }
    if let Some(after_s) = filter.after_s {
        // Strictly after `after_s`: from the next second on.
        let from_ns = after_s.saturating_add(1).saturating_mul(NANOS_PER_SECOND);
        add("match_time_ns >= ?", vec![Value::Integer(int(from_ns))]);
    }
    let me = Value::Text(hex_text(&address.0));
    let mut all = vec![me.clone()];
    all.extend(values.iter().cloned());
    all.push(me);
    all.extend(values);
    all.push(Value::Integer(int(limit as u64)));
    let sql = format!(
        "SELECT {TRADE_COLUMNS} FROM (\
         SELECT * FROM trades WHERE taker_address = ?{conditions} \
         UNION \
         SELECT * FROM trades WHERE maker_address = ?{conditions}) \
         ORDER BY trade_index DESC LIMIT ?"
    );
    (sql, all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::HistoryWriter;

    #[test]
    fn a_hash_is_looked_up_through_primary_keys_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::schema::history_path(dir.path());
        drop(HistoryWriter::open(&path).unwrap());
        let connection = open_for_reading(&path).unwrap();
        let mut plan = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {ORDER_BY_HASH}"))
            .unwrap();
        let steps: Vec<String> = plan
            .query_map([&[0u8; 8][..], &[0u8; 8][..]], |row| row.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let searches = steps.iter().filter(|s| s.starts_with("SEARCH")).count();
        assert_eq!(searches, 4, "{steps:?}");
        for step in &steps {
            let structural = ["COMPOUND QUERY", "LEFT-MOST SUBQUERY", "UNION ALL"];
            assert!(
                step.contains("PRIMARY KEY") || structural.contains(&step.as_str()),
                "{step}: {steps:?}"
            );
        }
    }
}
