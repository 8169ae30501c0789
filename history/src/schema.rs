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
pub const SCHEMA_VERSION: i64 = 1;

/// How long a statement waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Every table and index, created when missing.
const SCHEMA: &str = "
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
    order_hash TEXT PRIMARY KEY,
    order_id INTEGER NOT NULL,
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
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS orders_by_id ON orders (order_id);

CREATE TABLE IF NOT EXISTS prices (
    trade_index INTEGER PRIMARY KEY,
    condition_id TEXT NOT NULL,
    time_s INTEGER NOT NULL,
    yes_price_ticks INTEGER NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS prices_by_market ON prices (condition_id, time_s);
";

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
    connection.execute_batch(SCHEMA)?;
    connection.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    Ok(connection)
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
