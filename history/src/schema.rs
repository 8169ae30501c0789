//! The tables of `history.db` (documented for operators in `history/README.md`) and how a
//! connection to it is opened.
//!
//! Values are stored so that the `sqlite3` CLI shows them as the API does: hashes, ids and
//! addresses as `0x` lowercase hex text, enumerations as their API names, amounts as integers
//! in base units (a share or a unit of collateral is 1,000,000), times in nanoseconds or
//! seconds since the Unix epoch as the column name says.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// The database's file name in the data directory.
pub const HISTORY_FILE_NAME: &str = "history.db";

/// The schema's version (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 4;

/// The bytes of an order hash that `orders.hash_key` and the key tables hold.
pub const HASH_KEY_BYTES: usize = 8;

/// How long a statement waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The columns of `orders` (in the schema and in the migration from version 1).
macro_rules! orders_columns {
    () => {
        "
    order_id INTEGER PRIMARY KEY,
    hash_key BLOB NOT NULL,
    order_hash TEXT NOT NULL,
    maker TEXT NOT NULL,
    condition_id TEXT NOT NULL,
    token_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    side TEXT NOT NULL,
    price_ticks INTEGER NOT NULL,
    size_units INTEGER NOT NULL,
    filled_units INTEGER NOT NULL,
    status TEXT NOT NULL,
    order_type TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    expiration_s INTEGER NOT NULL,
    closed_seq INTEGER NOT NULL
"
    };
}

/// The writer's page cache: the hash-key index's pages that inserts touch stay in memory
/// (a fixed bound: the process's memory does not grow with the database).
const WRITER_CACHE_KIB: i64 = 32 * 1024;

/// The WAL's size, in pages, past which a commit copies it into the database: a page dirtied
/// by many commits in between is copied once (SQLite's default is 1,000 pages).
const WAL_CHECKPOINT_PAGES: i64 = 8_192;

/// Version 1 kept closed orders in a table keyed by their hash text: every insert landed on a
/// random page of the widest table. Version 2 keys them by id (they close roughly in id
/// order, so rows are appended) and finds a hash through a narrow index of its first bytes.
const MIGRATE_FROM_1: &str = concat!(
    "
BEGIN IMMEDIATE;
CREATE TABLE orders_v2 (
",
    orders_columns!(),
    "
);
INSERT INTO orders_v2 SELECT order_id, unhex(substr(order_hash, 3, 16)), order_hash, maker,
    condition_id, token_id, outcome, side, price_ticks, size_units, filled_units, status,
    order_type, created_ns, expiration_s, closed_seq FROM orders ORDER BY order_id;
DROP TABLE orders;
ALTER TABLE orders_v2 RENAME TO orders;
PRAGMA user_version = 2;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
"
);

/// The key tables: an order's hash key and id, clustered by key. `order_keys` is large and
/// grows only by merges; `recent_order_keys` takes each new key and is merged in, in key
/// order, once it holds [`crate::writer::RECENT_KEYS_MERGE_AT`] keys.
macro_rules! key_tables {
    () => {
        "
CREATE TABLE IF NOT EXISTS order_keys (
    hash_key BLOB NOT NULL,
    order_id INTEGER NOT NULL,
    PRIMARY KEY (hash_key, order_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS recent_order_keys (
    hash_key BLOB NOT NULL,
    order_id INTEGER NOT NULL,
    PRIMARY KEY (hash_key, order_id)
) WITHOUT ROWID;
"
    };
}

/// Version 2 found a hash through an index on `orders (hash_key)`: every closed order added an
/// entry at a random place in it, a page read and written per insert once the index outgrew
/// the cache. Version 3 keeps the keys in tables clustered by key, new keys in a small one
/// that is merged into the large one in key order (each page of the large one is then
/// touched once per merge for many keys).
const MIGRATE_FROM_2: &str = concat!(
    "
BEGIN IMMEDIATE;
",
    key_tables!(),
    "
INSERT OR IGNORE INTO order_keys SELECT hash_key, order_id FROM orders ORDER BY hash_key, order_id;
DROP INDEX IF EXISTS orders_by_hash_key;
PRAGMA user_version = 3;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
"
);

/// Version 3 kept one price history per market: a token's history also showed the other
/// token's trades, mirrored. Version 4 notes which tokens each trade traded (1 Yes, 2 No, 3
/// both: a MINT or a MERGE). A final trade's row says; a price whose trade is not final yet
/// was stored by a build that did not know and is taken for both.
const MIGRATE_FROM_3: &str = "
BEGIN IMMEDIATE;
ALTER TABLE prices ADD COLUMN outcomes INTEGER NOT NULL DEFAULT 3;
UPDATE prices SET outcomes = (
    SELECT CASE WHEN t.taker_outcome = t.maker_outcome
        THEN (CASE t.taker_outcome WHEN 'Yes' THEN 1 ELSE 2 END) ELSE 3 END
    FROM trades t WHERE t.trade_index = prices.trade_index)
WHERE EXISTS (SELECT 1 FROM trades t WHERE t.trade_index = prices.trade_index);
PRAGMA user_version = 4;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
";

/// Every table and index, created when missing.
const SCHEMA: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS progress (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    applied_seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO progress (id, applied_seq) VALUES (0, 0);

CREATE TABLE IF NOT EXISTS trades (
    trade_index INTEGER PRIMARY KEY,
    trade_id TEXT NOT NULL,
    transaction_hash TEXT NOT NULL,
    condition_id TEXT NOT NULL,
    yes_token_id TEXT NOT NULL,
    no_token_id TEXT NOT NULL,
    match_type TEXT NOT NULL,
    taker_order_id INTEGER NOT NULL,
    taker_order_hash TEXT NOT NULL,
    taker_address TEXT NOT NULL,
    taker_outcome TEXT NOT NULL,
    taker_side TEXT NOT NULL,
    taker_price_ticks INTEGER NOT NULL,
    maker_order_id INTEGER NOT NULL,
    maker_order_hash TEXT NOT NULL,
    maker_address TEXT NOT NULL,
    maker_outcome TEXT NOT NULL,
    maker_side TEXT NOT NULL,
    maker_price_ticks INTEGER NOT NULL,
    size_units INTEGER NOT NULL,
    taker_fee_units INTEGER NOT NULL,
    match_time_ns INTEGER NOT NULL,
    last_update_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    final_seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS trades_by_taker ON trades (taker_address, trade_index);
CREATE INDEX IF NOT EXISTS trades_by_maker ON trades (maker_address, trade_index);

CREATE TABLE IF NOT EXISTS orders (
",
    orders_columns!(),
    "
);
",
    key_tables!(),
    "

CREATE TABLE IF NOT EXISTS prices (
    trade_index INTEGER PRIMARY KEY,
    condition_id TEXT NOT NULL,
    time_s INTEGER NOT NULL,
    yes_price_ticks INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    outcomes INTEGER NOT NULL DEFAULT 3
);
CREATE INDEX IF NOT EXISTS prices_by_market ON prices (condition_id, time_s);
"
);

/// The path of `history.db` in `data_dir`.
pub fn history_path(data_dir: &Path) -> PathBuf {
    data_dir.join(HISTORY_FILE_NAME)
}

/// Opens (creating it and its tables when missing) the database for writing: WAL mode, so
/// that readers never wait for the writer, and every commit synced (`synchronous = FULL`):
/// the journal may be trimmed once the store holds its records.
pub fn open_for_writing(path: &Path) -> rusqlite::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
    connection.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
    let version = schema_version(&connection)?;
    if version > SCHEMA_VERSION {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
            Some(format!(
                "history.db has schema version {version}, newer than this build's \
                 {SCHEMA_VERSION}"
            )),
        ));
    }
    if version == 1 {
        connection.execute_batch(MIGRATE_FROM_1)?;
    }
    if (1..=2).contains(&version) {
        connection.execute_batch(MIGRATE_FROM_2)?;
    }
    if (1..=3).contains(&version) && prices_table_exists(&connection)? {
        connection.execute_batch(MIGRATE_FROM_3)?;
    }
    connection.execute_batch(SCHEMA)?;
    connection.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    Ok(connection)
}

/// Whether the store has its `prices` table (a store made before it had none).
fn prices_table_exists(connection: &Connection) -> rusqlite::Result<bool> {
    connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'prices')",
        [],
        |row| row.get(0),
    )
}

/// The schema version a store says it has (`PRAGMA user_version`).
fn schema_version(connection: &Connection) -> rusqlite::Result<i64> {
    connection.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Refuses a store written by a newer build (its schema version above this build's): the
/// service must not start on it, where a full disk, say, is only waited out. A file SQLite
/// cannot read as a database at all (not one, or corrupt) is moved aside with its WAL as
/// `<name>.unreadable-<unix time>`, and the store starts again from the journal (as a lost
/// one: API.md §19).
pub fn refuse_newer_schema(path: &Path) -> Result<(), String> {
    if !path.exists() {
        return Ok(());
    }
    let version: i64 = match open_for_reading(path).and_then(|c| schema_version(&c)) {
        Ok(version) => version,
        Err(e) if unreadable(&e) => {
            let aside = set_aside(path)?;
            tracing::error!(
                error = %e,
                set_aside = %aside.display(),
                "history store unreadable: set aside, starting again from the journal"
            );
            return Ok(());
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if version > SCHEMA_VERSION {
        return Err(format!(
            "{}: schema version {version}, newer than this build's {SCHEMA_VERSION}: run the \
             build that wrote it",
            path.display()
        ));
    }
    Ok(())
}

/// Whether SQLite found the file not a database, or a corrupt one.
fn unreadable(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

/// Renames the store at `path` and its WAL and shared-memory files to
/// `<name>.unreadable-<unix time>[-wal|-shm]`, durably; the new name of the store.
fn set_aside(path: &Path) -> Result<PathBuf, String> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let aside = path.with_file_name(format!("{name}.unreadable-{seconds}"));
    // The WAL first: a crash in between must not leave it beside a store created afresh.
    for suffix in ["-wal", "-shm", ""] {
        let from = PathBuf::from(format!("{}{suffix}", path.display()));
        let to = PathBuf::from(format!("{}{suffix}", aside.display()));
        match std::fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", from.display())),
        }
    }
    if let Some(dir) = path.parent() {
        ladder_journal::sync_dir(dir).map_err(|e| e.to_string())?;
    }
    Ok(aside)
}

/// The last sequence an existing store holds, read without writing to it (`None`: no
/// store, or it cannot be read either).
pub fn stored_through_read_only(path: &Path) -> Option<u64> {
    if !path.exists() {
        return None;
    }
    let applied: i64 = open_for_reading(path)
        .and_then(|c| {
            c.query_row("SELECT applied_seq FROM progress WHERE id = 0", [], |r| {
                r.get(0)
            })
        })
        .map_err(|e| tracing::warn!(error = %e, "history store not readable either"))
        .ok()?;
    u64::try_from(applied).ok()
}

/// Opens a read-only connection (the database must exist).
pub fn open_for_reading(path: &Path) -> rusqlite::Result<Connection> {
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    Ok(connection)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use ladder_engine::{Address, FixedBytes, Hash32, OrderStatus};
    use ladder_sequencer::HistoryReads;

    use super::*;
    use crate::HistoryReader;

    /// `orders` as schema version 1 declared it.
    const ORDERS_V1: &str = "
        CREATE TABLE orders (
            order_hash TEXT PRIMARY KEY, order_id INTEGER NOT NULL, maker TEXT NOT NULL,
            condition_id TEXT NOT NULL, token_id TEXT NOT NULL, outcome TEXT NOT NULL,
            side TEXT NOT NULL, price_ticks INTEGER NOT NULL, size_units INTEGER NOT NULL,
            filled_units INTEGER NOT NULL, status TEXT NOT NULL, order_type TEXT NOT NULL,
            created_ns INTEGER NOT NULL, expiration_s INTEGER NOT NULL,
            closed_seq INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX orders_by_id ON orders (order_id);
        PRAGMA user_version = 1;";

    fn hash(first: u8) -> Hash32 {
        let mut bytes = [0x5au8; 32];
        bytes[0] = first;
        FixedBytes(bytes)
    }

    fn reader(path: &Path) -> HistoryReader {
        HistoryReader::new(path, Arc::new(AtomicU64::new(0)), Arc::new(|| 0))
    }

    #[test]
    fn a_version_1_store_is_migrated_and_its_orders_found_by_id_and_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        let old = Connection::open(&path).unwrap();
        old.execute_batch(ORDERS_V1).unwrap();
        for (id, first, status) in [(7, 0x01, "canceled"), (3, 0xfe, "matched")] {
            old.execute(
                "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, 'Yes', 'BUY', 5000, 10000000, \
                 0, ?6, 'GTC', 1, 0, 9)",
                rusqlite::params![
                    crate::rows::hex_text(&hash(first).0),
                    id,
                    crate::rows::hex_text(&[0x11; 20]),
                    crate::rows::hex_text(&[0x22; 32]),
                    crate::rows::hex_text(&[0x33; 32]),
                    status,
                ],
            )
            .unwrap();
        }
        drop(old);

        let migrated = open_for_writing(&path).unwrap();
        assert_eq!(schema_version(&migrated).unwrap(), SCHEMA_VERSION);
        drop(migrated);

        let reads = reader(&path);
        assert!(reads.order_hash_stored(&hash(0x01)).unwrap());
        assert!(reads.order_hash_stored(&hash(0xfe)).unwrap());
        assert!(!reads.order_hash_stored(&hash(0x02)).unwrap());
        assert_eq!(
            reads.closed_order(7).unwrap(),
            Some((Address([0x11; 20]), OrderStatus::Canceled))
        );
        assert_eq!(
            reads.closed_order(3).unwrap(),
            Some((Address([0x11; 20]), OrderStatus::Matched))
        );
        // Opening again changes nothing.
        drop(open_for_writing(&path).unwrap());
        assert!(reads.order_hash_stored(&hash(0xfe)).unwrap());
    }

    #[test]
    fn a_version_3_stores_prices_learn_which_tokens_their_final_trades_traded() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        let condition = FixedBytes([0x0c; 32]);
        let condition_text = crate::rows::hex_text(&condition.0);
        let store = open_for_writing(&path).unwrap();
        // Final: 1 (No with No), 2 (a MINT, Yes with No), 4 (Yes with Yes); 3 is pending.
        for (index, taker, maker) in [(1, "No", "No"), (2, "Yes", "No"), (4, "Yes", "Yes")] {
            store
                .execute(
                    "INSERT INTO trades VALUES (?1, '0x', '0x', ?4, '0x', '0x', 'MINT', 1, \
                     '0x', '0x', ?2, 'BUY', 1, 2, '0x', '0x', ?3, 'BUY', 1, 1, 0, 1, 1, \
                     'CONFIRMED', 9)",
                    rusqlite::params![index, taker, maker, condition_text],
                )
                .unwrap();
        }
        for index in 1..=4 {
            store
                .execute(
                    "INSERT INTO prices (trade_index, condition_id, time_s, yes_price_ticks, \
                     seq) VALUES (?1, ?2, 60, 5000, 9)",
                    rusqlite::params![index, condition_text],
                )
                .unwrap();
        }
        store
            .execute_batch("ALTER TABLE prices DROP COLUMN outcomes; PRAGMA user_version = 3;")
            .unwrap();
        drop(store);
        // Before the historian migrates it, a price history reads the market's, unfiltered.
        let unmigrated = reader(&path)
            .price_buckets(&condition, ladder_engine::Outcome::No, 0, u64::MAX, 60, 10)
            .unwrap();
        assert_eq!(unmigrated.len(), 1, "read, not refused");
        assert_eq!(unmigrated[0].trade_index, 4);
        let migrated = open_for_writing(&path).unwrap();
        let outcomes: Vec<i64> = migrated
            .prepare("SELECT outcomes FROM prices ORDER BY trade_index")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            outcomes,
            [2, 3, 3, 1],
            "No alone, both, not known: both, Yes alone"
        );
        assert_eq!(schema_version(&migrated).unwrap(), SCHEMA_VERSION);
        drop(migrated);
        // Migrated, the No token's history is its own trades' (1, 2 and the unknown 3).
        let reads = reader(&path);
        let no = reads
            .price_buckets(&condition, ladder_engine::Outcome::No, 0, u64::MAX, 60, 10)
            .unwrap();
        assert_eq!(no[0].trade_index, 3);
    }

    #[test]
    fn a_version_2_store_is_migrated_its_keys_moved_to_the_key_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        let old = Connection::open(&path).unwrap();
        old.execute_batch(concat!(
            "CREATE TABLE orders (",
            orders_columns!(),
            "); CREATE INDEX orders_by_hash_key ON orders (hash_key); PRAGMA user_version = 2;"
        ))
        .unwrap();
        for (id, first) in [(7, 0x01u8), (3, 0xfe)] {
            old.execute(
                "INSERT INTO orders VALUES (?1, ?2, ?3, '0x', '0x', '0x', 'Yes', 'BUY', 1, 1, 0, \
                 'canceled', 'GTC', 1, 0, 9)",
                rusqlite::params![
                    id,
                    &hash(first).0[..HASH_KEY_BYTES],
                    crate::rows::hex_text(&hash(first).0)
                ],
            )
            .unwrap();
        }
        drop(old);
        let migrated = open_for_writing(&path).unwrap();
        let (version, keys, index): (i64, i64, i64) = migrated
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version), \
                 (SELECT count(*) FROM order_keys), \
                 (SELECT count(*) FROM sqlite_master WHERE name = 'orders_by_hash_key')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((version, keys, index), (SCHEMA_VERSION, 2, 0));
        drop(migrated);
        let reads = reader(&path);
        assert!(reads.order_hash_stored(&hash(0x01)).unwrap());
        assert!(reads.order_hash_stored(&hash(0xfe)).unwrap());
        assert!(!reads.order_hash_stored(&hash(0x02)).unwrap());
    }

    #[test]
    fn a_store_of_a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        let newer = Connection::open(&path).unwrap();
        newer
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(newer);
        let refused = open_for_writing(&path).unwrap_err().to_string();
        assert!(refused.contains("newer than this build's"), "{refused}");
        let at_start = refuse_newer_schema(&path).unwrap_err();
        assert!(at_start.contains("newer than this build's"), "{at_start}");
        let current = dir.path().join("current.db");
        drop(open_for_writing(&current).unwrap());
        assert_eq!(refuse_newer_schema(&current), Ok(()));
        assert_eq!(refuse_newer_schema(&dir.path().join("none.db")), Ok(()));
    }

    #[test]
    fn a_file_that_is_not_a_database_is_set_aside_for_a_new_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        std::fs::write(&path, vec![0x5a; 100_000]).unwrap();
        std::fs::write(format!("{}-wal", path.display()), b"garbage").unwrap();
        assert_eq!(refuse_newer_schema(&path), Ok(()));
        assert!(!path.exists(), "set aside");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
            .collect();
        let aside = names
            .iter()
            .find(|n| {
                n.starts_with("history.db.unreadable-")
                    && !n.ends_with("-wal")
                    && !n.ends_with("-shm")
            })
            .unwrap_or_else(|| panic!("{names:?}"));
        assert_eq!(
            std::fs::read(dir.path().join(aside)).unwrap(),
            vec![0x5a; 100_000]
        );
        assert!(names.iter().any(|n| n.ends_with("-wal")), "{names:?}");
        drop(open_for_writing(&path).unwrap());
    }

    #[test]
    fn two_orders_sharing_the_hash_key_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path());
        let writer = open_for_writing(&path).unwrap();
        let stored = hash(0x42);
        let mut twin = stored;
        twin.0[31] ^= 1;
        writer
            .execute(
                "INSERT INTO orders VALUES (1, ?1, ?2, '0x', '0x', '0x', 'Yes', 'BUY', 1, 1, 0, \
                 'canceled', 'GTC', 1, 0, 1)",
                rusqlite::params![
                    &stored.0[..HASH_KEY_BYTES],
                    crate::rows::hex_text(&stored.0)
                ],
            )
            .unwrap();
        writer
            .execute(
                "INSERT INTO recent_order_keys VALUES (?1, 1)",
                [&stored.0[..HASH_KEY_BYTES]],
            )
            .unwrap();
        drop(writer);
        let reads = reader(&path);
        assert!(reads.order_hash_stored(&stored).unwrap());
        assert!(!reads.order_hash_stored(&twin).unwrap());
    }
}
