//! A consistent copy of the store, for a standby that bootstraps from its primary: SQLite's
//! `VACUUM INTO` writes what one read transaction sees (the writer goes on meanwhile), and
//! the copy's progress row says how far it reaches.

use std::path::Path;

use rusqlite::Connection;

use crate::schema::{history_path, open_for_reading};

/// Writes a consistent copy of the store of `data_dir` to `to` (which must not exist) and
/// returns the last sequence the copy holds.
pub fn copy_store(data_dir: &Path, to: &Path) -> Result<u64, String> {
    let from = history_path(data_dir);
    let described = |e: rusqlite::Error| format!("copy of {}: {e}", from.display());
    let connection = open_for_reading(&from).map_err(described)?;
    let target = to
        .to_str()
        .ok_or_else(|| format!("{}: not a UTF-8 path", to.display()))?;
    connection
        .execute("VACUUM INTO ?1", [target])
        .map_err(described)?;
    drop(connection);
    let copy = Connection::open(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let applied: i64 = copy
        .query_row("SELECT applied_seq FROM progress WHERE id = 0", [], |r| {
            r.get(0)
        })
        .map_err(|e| format!("{}: {e}", to.display()))?;
    u64::try_from(applied).map_err(|_| format!("{}: progress {applied}", to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HistoryWriter;

    #[test]
    fn a_copy_holds_what_was_committed_and_says_how_far() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = HistoryWriter::open(&history_path(dir.path())).unwrap();
        writer.apply(5, &[]).unwrap();
        writer.commit().unwrap();
        writer.apply(6, &[]).unwrap();
        // Applied, not committed: a copy made now reaches 5.
        let to = dir.path().join("copy.db");
        assert_eq!(copy_store(dir.path(), &to), Ok(5));
        let again = copy_store(dir.path(), &to).unwrap_err();
        assert!(again.contains("copy of"), "{again}");
        writer.commit().unwrap();
        let to = dir.path().join("copy2.db");
        assert_eq!(copy_store(dir.path(), &to), Ok(6));
        let reopened = HistoryWriter::open(&to).unwrap();
        assert_eq!(reopened.applied_seq(), 6);
    }
}
