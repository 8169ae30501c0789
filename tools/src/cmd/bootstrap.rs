//! A standby's start when its primary's journal no longer holds the record it needs next
//! (retention retired it): it takes the primary's state instead (its snapshot, history store
//! and master key; see `ladder_sequencer::replication::bootstrap`), sets what it held aside
//! in the data directory, and then follows the journal from the record after the snapshot.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

use ladder_gateway::keys::MasterKey;
use ladder_history::HISTORY_FILE_NAME;
use ladder_journal::{Journal, JournalOptions, JOURNAL_DIR_NAME};
use ladder_sequencer::replication::bootstrap::{self, BootstrapRequest, Fetched, Received};
use ladder_sequencer::replication::{LinkSecret, RecordMark};

/// The file that names the mark of the snapshot a standby started from (its journal does not
/// hold that record, and the standby names it to the primary when it follows).
pub const BOOTSTRAP_MARK_FILE: &str = "bootstrap.mark";
/// Where a standby receives the primary's state before it takes its place.
const INCOMING_DIR: &str = "bootstrap.incoming";
/// What the state taken replaces, each kind of it.
const REPLACED: [&str; 6] = [
    JOURNAL_DIR_NAME,
    ladder_journal::snapshot::SNAPSHOT_DIR_NAME,
    HISTORY_FILE_NAME,
    "history.db-wal",
    "history.db-shm",
    BOOTSTRAP_MARK_FILE,
];

/// Where a standby stands and whom it asks.
pub struct Asking<'a> {
    /// Its data directory.
    pub data_dir: &'a Path,
    /// Its node id.
    pub node_id: &'a str,
    /// The primary's replication address.
    pub primary: &'a str,
    /// The link's secret.
    pub secret: &'a LinkSecret,
    /// Its journal's options (a new journal is started with them).
    pub journal: JournalOptions,
    /// Set when the process stops.
    pub stop: &'a AtomicBool,
}

/// Asks the primary whether its journal holds this standby's next record; when it does not,
/// takes the primary's state. Returns the snapshot's sequence when it did.
pub fn when_behind(asking: &Asking<'_>) -> Result<Option<u64>, String> {
    let data_dir = asking.data_dir;
    let last_seq = last_seq_held(data_dir, asking.journal)?;
    let incoming = data_dir.join(INCOMING_DIR);
    remove_if_there(&incoming)?;
    fs::create_dir(&incoming).map_err(|e| format!("{}: {e}", incoming.display()))?;
    let request = BootstrapRequest {
        from_seq: last_seq + 1,
        node_id: asking.node_id.to_string(),
    };
    let history = incoming.join(HISTORY_FILE_NAME);
    let fetched = bootstrap::fetch(
        asking.primary,
        asking.secret,
        &request,
        &history,
        asking.stop,
    );
    let received = match fetched {
        Ok(Fetched::State(received)) => received,
        Ok(Fetched::Current) => return remove_if_there(&incoming).map(|()| None),
        Err(why) => {
            let _ = remove_if_there(&incoming);
            return Err(why);
        }
    };
    let seq = received.seq;
    install(asking, &incoming, received, last_seq)?;
    Ok(Some(seq))
}

/// Puts the state received in `incoming` in place of what the data directory held (moved
/// into a `set-aside-…` directory beside it), the journal last: until it is in place, the
/// directory starts as an empty standby, which bootstraps again.
fn install(
    asking: &Asking<'_>,
    incoming: &Path,
    received: Received,
    last_seq: u64,
) -> Result<(), String> {
    let data_dir = asking.data_dir;
    ladder_journal::write_snapshot(incoming, received.seq, &received.snapshot)
        .map_err(|e| e.to_string())?;
    ladder_journal::start_journal_after(incoming, received.seq, asking.journal)
        .map_err(|e| e.to_string())?;
    ladder_journal::write_file_durably(
        &incoming.join(BOOTSTRAP_MARK_FILE),
        format!("{}\n", received.mark).as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    if let Some(aside) = set_aside_state(data_dir, last_seq)? {
        tracing::warn!(set_aside = %aside.display(), last_seq, "this standby's journal is behind the primary's: what it held is set aside");
    }
    for name in REPLACED.into_iter().filter(|n| *n != JOURNAL_DIR_NAME) {
        let from = incoming.join(name);
        if from.exists() {
            rename(&from, &data_dir.join(name))?;
        }
    }
    ladder_journal::sync_dir(data_dir).map_err(|e| e.to_string())?;
    MasterKey::from_bytes(received.master_key)
        .store(data_dir)
        .map_err(|e| format!("master key: {e}"))?;
    rename(
        &incoming.join(JOURNAL_DIR_NAME),
        &data_dir.join(JOURNAL_DIR_NAME),
    )?;
    ladder_journal::sync_dir(data_dir).map_err(|e| e.to_string())?;
    remove_if_there(incoming)?;
    tracing::info!(
        snapshot_seq = received.seq,
        "took the primary's state; following its journal from the next record"
    );
    Ok(())
}

/// Moves the state `data_dir` holds (journal, snapshots, history store, bootstrap mark) into a
/// new `set-aside-…` directory inside it, and returns that directory (`None`: there was
/// nothing to move). A journal never written (opened once: its lock file) is removed instead.
/// The directory then starts as an empty standby, which takes its primary's state.
pub fn set_aside_state(data_dir: &Path, last_seq: u64) -> Result<Option<PathBuf>, String> {
    let mut held = Vec::new();
    for name in REPLACED {
        let path = data_dir.join(name);
        if name == JOURNAL_DIR_NAME && last_seq == 0 && no_segment(data_dir)? {
            remove_if_there(&path)?;
            continue;
        }
        if path.exists() {
            held.push(name);
        }
    }
    if held.is_empty() {
        return Ok(None);
    }
    let aside = set_aside_dir(data_dir, last_seq);
    fs::create_dir(&aside).map_err(|e| format!("{}: {e}", aside.display()))?;
    for name in &held {
        rename(&data_dir.join(name), &aside.join(name))?;
    }
    ladder_journal::sync_dir(data_dir).map_err(|e| e.to_string())?;
    Ok(Some(aside))
}

/// The last sequence the journal of `data_dir` holds (its torn tail cut first, as a start
/// would).
pub fn last_seq_held(data_dir: &Path, options: JournalOptions) -> Result<u64, String> {
    let (journal, _) = Journal::open(data_dir, options).map_err(|e| e.to_string())?;
    Ok(journal.last_seq())
}

/// The mark of record `seq` a bootstrap left, when it is the snapshot this standby started
/// from.
pub fn mark_of_start(data_dir: &Path, seq: u64) -> Result<Option<RecordMark>, String> {
    let path = data_dir.join(BOOTSTRAP_MARK_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let mark = RecordMark::parse(text.trim())
                .ok_or_else(|| format!("{}: not a record mark", path.display()))?;
            Ok((mark.seq == seq).then_some(mark))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// A directory name inside `data_dir` not taken yet, for what a standby at `last_seq` held.
fn set_aside_dir(data_dir: &Path, last_seq: u64) -> PathBuf {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut n = 0u32;
    loop {
        let name = match n {
            0 => format!("set-aside-{last_seq}-{now}"),
            n => format!("set-aside-{last_seq}-{now}-{n}"),
        };
        let path = data_dir.join(name);
        if !path.exists() {
            return path;
        }
        n += 1;
    }
}

fn no_segment(data_dir: &Path) -> Result<bool, String> {
    let first = ladder_journal::journal_first_seq(data_dir).map_err(|e| e.to_string())?;
    Ok(first.is_none())
}

fn rename(from: &Path, to: &Path) -> Result<(), String> {
    fs::rename(from, to).map_err(|e| format!("move {} to {}: {e}", from.display(), to.display()))
}

fn remove_if_there(dir: &Path) -> Result<(), String> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}
