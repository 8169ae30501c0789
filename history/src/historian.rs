//! The historian: a thread that follows the journal with its own engine, as a standby does,
//! writes every record's events into `history.db`, and writes the periodic snapshots, so
//! that neither history nor snapshots cost the sequencer thread anything (API.md §19, "History and bounded state").
//!
//! It reads only records the sequencer has released (journaled, synced in `sync` mode, and
//! answered), so the store never holds what a restart would not find in the journal. After
//! each commit it publishes how far the store holds (`stored_through`): the runtime then
//! journals a `ForgetHistory` so that the engine drops what the store now holds.
//!
//! At start it takes the newest snapshot at or before the store's last applied sequence and
//! replays the journal from there: the records the store already holds are applied to its
//! engine only, the others are written too. A restart after a kill at any point thus leaves
//! every row in the store exactly once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ladder_engine::{Command, Engine, EngineLimits};
use ladder_journal::{latest_valid_snapshot_through, JournalReader};
use ladder_sequencer::decode_command;

use crate::reader::HistoryReader;
use crate::schema::history_path;
use crate::writer::HistoryWriter;

/// Records applied between two commits at most (a commit syncs the database).
const COMMIT_EVERY_RECORDS: u64 = 16_384;
/// The longest time between two commits while records come in. Nothing waits for the store
/// but the engine's forgetting (reads find what it has not forgotten yet in the engine), and a
/// commit costs the same whatever it holds (the pages it dirtied written to the WAL, synced):
/// at a market maker's pace a commit every 50 ms was half the historian's time.
const COMMIT_INTERVAL: Duration = Duration::from_millis(500);
/// How long the historian sleeps when it has caught up. Nothing waits for the store within
/// milliseconds (reads merge the engine's tail, the engine forgets after commits, which come
/// every `COMMIT_INTERVAL`); at 2 ms it woke ~450 times a second at 3,000 orders/s.
const IDLE_SLEEP: Duration = Duration::from_millis(10);
/// How long it waits before trying again after the store or the journal failed.
const FAILURE_PAUSE: Duration = Duration::from_millis(500);

/// What the historian needs.
#[derive(Clone)]
pub struct HistorianConfig {
    /// The data directory: journal, snapshots and `history.db`.
    pub data_dir: PathBuf,
    /// The engine's limits (as the sequencer's engine).
    pub limits: EngineLimits,
    /// The last sequence the sequencer released; the historian reads no further.
    pub released: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// A snapshot every this many records (0: none).
    pub snapshot_every: u64,
    /// Snapshots kept.
    pub keep_snapshots: usize,
    /// The journal's last sequence at start: a store past it is set back to it.
    pub journal_last_seq: u64,
    /// Whether the journal is full now: no snapshot is written then (it would take the room
    /// the journal waits for); it is written once there is room again.
    pub journal_full: Arc<dyn Fn() -> bool + Send + Sync>,
    /// The lowest sequence every connected standby has acknowledged (`u64::MAX` without
    /// one): the journal keeps the records after it.
    pub standby_floor: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Where retired journal segments go (`--journal-archive`); removed without one.
    pub journal_archive: Option<PathBuf>,
    /// Told after each commit that the store holds the price of every trade below this
    /// index (the read side then lets those go).
    pub prices_stored_below: Arc<dyn Fn(u64) + Send + Sync>,
}

/// A running historian.
#[derive(Debug)]
pub struct Historian {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    stored_through: Arc<AtomicU64>,
    /// Whether where the store stands is known: it opened, or was read without writing.
    known: Arc<AtomicBool>,
    reader: Arc<HistoryReader>,
}

impl Historian {
    /// Starts the thread, which opens (or creates) `history.db` and follows the journal. A
    /// store that cannot be opened (a full disk, say) never keeps the service from starting:
    /// the thread tries again twice a second, and nothing is forgotten meanwhile. A store of a
    /// newer schema than this build's is refused here.
    pub fn start(config: HistorianConfig) -> Result<Historian, String> {
        let path = history_path(&config.data_dir);
        crate::schema::refuse_newer_schema(&path)?;
        let stored_through = Arc::new(AtomicU64::new(0));
        let reader = Arc::new(HistoryReader::new(
            &path,
            stored_through.clone(),
            config.released.clone(),
        ));
        let stranded = reader.stranded_flag();
        let stop = Arc::new(AtomicBool::new(false));
        // Opened here when it can be, so that the store is there for reads at once.
        let opened = Run::open(&config).map_err(|e| {
            tracing::warn!(error = %e, "history store cannot be opened; trying again");
        });
        // Whether where the store stands is known (opened, or read without writing).
        let known = Arc::new(AtomicBool::new(false));
        match &opened {
            Ok((writer, engine, _)) => {
                known.store(true, Ordering::Release);
                stored_through.store(writer.applied_seq(), Ordering::Release);
                // Known before the first read: a store the journal cannot bring up to date.
                stranded.store(
                    journal_starts_after(&config.data_dir, engine.last_seq()),
                    Ordering::Release,
                );
            }
            // Not writable (a full disk), but what it holds is there to read: reads of
            // records the engine forgot answer from it while the writer waits for room.
            Err(()) => {
                if let Some(held) = crate::schema::stored_through_read_only(&path) {
                    known.store(true, Ordering::Release);
                    stored_through.store(held.min(config.journal_last_seq), Ordering::Release);
                }
            }
        }
        let (flag, stored, opened_later) = (stop.clone(), stored_through.clone(), known.clone());
        let thread = std::thread::Builder::new()
            .name("historian".into())
            .spawn(move || {
                let run = match opened {
                    Ok(parts) => Some(Run::new(config, parts, flag, stored, stranded)),
                    Err(()) => {
                        let run = Run::open_until_stopped(config, flag, stored, stranded);
                        opened_later.store(run.is_some(), Ordering::Release);
                        run
                    }
                };
                if let Some(mut run) = run {
                    run.follow();
                }
            })
            .map_err(|e| format!("historian thread: {e}"))?;
        Ok(Historian {
            stop,
            thread: Some(thread),
            stored_through,
            known,
            reader,
        })
    }

    /// The last sequence whose history is committed.
    pub fn stored_through(&self) -> u64 {
        self.stored_through.load(Ordering::Acquire)
    }

    /// Where snapshot pruning must keep a snapshot for the store: at or before what it
    /// committed; `None` while the store is stranded (lost or replaced after retention), or
    /// while where it stands is not known (it could not be opened nor read), when the
    /// snapshot it needs is unknown and none may go.
    pub fn snapshot_needed_through(&self) -> Option<u64> {
        (self.known.load(Ordering::Acquire) && !self.reader.is_stranded())
            .then(|| self.stored_through())
    }

    /// Reads of the store.
    pub fn reader(&self) -> Arc<HistoryReader> {
        self.reader.clone()
    }

    /// Waits until the store holds `seq` or `timeout` passes; whether it does.
    pub fn wait_stored(&self, seq: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.stored_through() < seq {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(IDLE_SLEEP);
        }
        true
    }

    /// Stops the thread after its current commit.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The engine the historian starts from: the newest snapshot the store has caught up with,
/// or an empty engine (the journal then replays from its first record); and that snapshot's
/// sequence.
fn starting_engine(
    data_dir: &Path,
    limits: EngineLimits,
    writer: &HistoryWriter,
) -> Result<(Engine, u64), String> {
    let snapshot =
        latest_valid_snapshot_through(data_dir, writer.applied_seq()).map_err(|e| e.to_string())?;
    if let Some(snapshot) = snapshot {
        match Engine::from_snapshot_bytes(&snapshot.payload) {
            Ok(engine) => return Ok((engine, snapshot.seq)),
            Err(e) => {
                tracing::warn!(seq = snapshot.seq, error = %e, "historian: snapshot not usable; replaying the journal")
            }
        }
    }
    Ok((Engine::new(limits), 0))
}

impl Run {
    /// Retires the journal segments whose records the oldest kept snapshot, the store and
    /// every connected standby all hold (API.md §19).
    fn retire_segments(&self) {
        let data_dir = &self.config.data_dir;
        let oldest_snapshot = match ladder_journal::oldest_valid_snapshot_seq(data_dir) {
            Ok(Some(seq)) => seq,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "retention: snapshots not listed");
                return;
            }
        };
        let bound = oldest_snapshot
            .min(self.writer.applied_seq())
            .min((self.config.standby_floor)());
        let archive = self.config.journal_archive.as_deref();
        match ladder_journal::retire_segments_through(data_dir, bound, archive) {
            Ok(retired) if !retired.is_empty() => {
                tracing::info!(
                    segments = retired.len(),
                    through_seq = bound,
                    archived = archive.is_some(),
                    "journal segments retired"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "retention: segments not retired"),
        }
    }
}

/// Whether the journal of `data_dir` starts after the record that follows `last_seq` (the
/// one the store needs next): retention removed it, and only the snapshots and journal of an
/// older backup can bring the store back.
fn journal_starts_after(data_dir: &Path, last_seq: u64) -> bool {
    ladder_journal::journal_first_seq(data_dir)
        .ok()
        .flatten()
        .is_some_and(|first| first > last_seq + 1)
}

/// The thread's state.
struct Run {
    config: HistorianConfig,
    writer: HistoryWriter,
    engine: Engine,
    last_snapshot: u64,
    /// Records applied since the last commit.
    uncommitted: u64,
    /// When the last commit was.
    last_commit: Instant,
    stop: Arc<AtomicBool>,
    stored_through: Arc<AtomicU64>,
    /// Set while the journal no longer holds the records the store needs next (the store
    /// was lost, or replaced by an older copy, after retention): reads that need it fail.
    stranded: Arc<AtomicBool>,
}

/// A record read and decoded, not yet applied (it was not released yet).
struct Pending {
    seq: u64,
    timestamp_ns: u64,
    command: Command,
}

impl Run {
    /// The thread's state over an opened store and the engine to follow with.
    fn new(
        config: HistorianConfig,
        (writer, engine, last_snapshot): (HistoryWriter, Engine, u64),
        stop: Arc<AtomicBool>,
        stored_through: Arc<AtomicU64>,
        stranded: Arc<AtomicBool>,
    ) -> Run {
        Run {
            config,
            writer,
            engine,
            last_snapshot,
            uncommitted: 0,
            last_commit: Instant::now(),
            stop,
            stranded,
            stored_through,
        }
    }

    /// Opens the store and the engine to follow with (after a first try failed, with a
    /// warning), trying again until it works or the historian is stopped (`None`).
    fn open_until_stopped(
        config: HistorianConfig,
        stop: Arc<AtomicBool>,
        stored_through: Arc<AtomicU64>,
        stranded: Arc<AtomicBool>,
    ) -> Option<Run> {
        while !stop.load(Ordering::Acquire) {
            if let Ok(parts) = Run::open(&config) {
                tracing::info!("history store open");
                stored_through.store(parts.0.applied_seq(), Ordering::Release);
                return Some(Run::new(config, parts, stop, stored_through, stranded));
            }
            std::thread::sleep(FAILURE_PAUSE);
        }
        None
    }

    /// The store, set back to the journal's end at start if it is past it, and the engine it
    /// has caught up with (and that engine's snapshot sequence). Only the first open of a
    /// service's life compares with the journal's end at start: later the journal has grown.
    fn open(config: &HistorianConfig) -> Result<(HistoryWriter, Engine, u64), String> {
        let path = history_path(&config.data_dir);
        let mut writer =
            HistoryWriter::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if writer.applied_seq() > config.journal_last_seq {
            // The journal lost its unsynced tail (an `async` journal and a power loss), or
            // a standby took the primary's store and snapshot and follows on from there: the
            // rows of records the journal does not hold are written again as it does.
            tracing::warn!(
                stored = writer.applied_seq(),
                journal_end = config.journal_last_seq,
                "history store past the journal's end: set back to it"
            );
            writer
                .rewind_to(config.journal_last_seq)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let (engine, last_snapshot) = starting_engine(&config.data_dir, config.limits, &writer)?;
        Ok((writer, engine, last_snapshot))
    }

    fn follow(&mut self) {
        let mut journal: Option<JournalReader> = None;
        let mut pending: Option<Pending> = None;
        // Failures in a row: the first is logged, then only the recovery, once a commit got
        // past where the store stood at the first (records applied in memory and refused at
        // their commit are no recovery: the log would alternate twice a second).
        let mut failures = 0u64;
        let mut failed_at = 0u64;
        // After a failure nothing is followed until the engine and the store agree again.
        let mut broken = false;
        while !self.stop.load(Ordering::Acquire) {
            if broken {
                match self.restart() {
                    Ok(()) => broken = false,
                    Err(e) => {
                        tracing::debug!(error = %e, "historian: cannot restart yet");
                        std::thread::sleep(FAILURE_PAUSE);
                        continue;
                    }
                }
            }
            let reader = match journal.as_mut() {
                Some(reader) => reader,
                None => match self.open_journal() {
                    Ok(reader) => {
                        self.stranded.store(false, Ordering::Release);
                        journal.insert(reader)
                    }
                    Err(e) => {
                        self.stranded.store(
                            journal_starts_after(&self.config.data_dir, self.engine.last_seq()),
                            Ordering::Release,
                        );
                        if failures == 0 {
                            tracing::error!(error = %e, from_seq = self.engine.last_seq() + 1, store_at = self.writer.applied_seq(), "historian: cannot read the journal from where the store stands (no snapshot at or before it, and the journal starts later); history is not written until it can");
                        }
                        failures += 1;
                        std::thread::sleep(FAILURE_PAUSE);
                        continue;
                    }
                },
            };
            match self.step(reader, &mut pending) {
                Ok(applied) => {
                    let stored = self.stored_through.load(Ordering::Acquire);
                    if failures > 0 && applied > 0 && stored > failed_at {
                        tracing::info!(failures, "historian: writing again");
                        failures = 0;
                    }
                    if applied == 0 {
                        std::thread::sleep(IDLE_SLEEP);
                    }
                }
                Err(e) => {
                    if failures == 0 {
                        failed_at = self.stored_through.load(Ordering::Acquire);
                        tracing::warn!(error = %e, "historian: paused; trying again twice a second");
                    }
                    failures += 1;
                    // Back to what is committed: the store's transaction is rolled back, and
                    // the engine and the reader restart from there.
                    self.writer.abandon();
                    broken = true;
                    journal = None;
                    pending = None;
                    std::thread::sleep(FAILURE_PAUSE);
                }
            }
        }
        if let Err(e) = self.writer.commit() {
            tracing::warn!(error = %e, "historian: last commit failed");
        }
    }

    fn open_journal(&self) -> Result<JournalReader, String> {
        let mut reader = JournalReader::open(&self.config.data_dir).map_err(|e| e.to_string())?;
        reader
            .seek(self.engine.last_seq() + 1)
            .map_err(|e| e.to_string())?;
        Ok(reader)
    }

    /// Rebuilds the engine from what the store has committed (after a failed write), on the
    /// same connection (a second one would wait for the first's locks).
    fn restart(&mut self) -> Result<(), String> {
        self.writer
            .reload()
            .map_err(|e| format!("history store: {e}"))?;
        let (engine, last_snapshot) =
            starting_engine(&self.config.data_dir, self.config.limits, &self.writer)?;
        self.engine = engine;
        self.last_snapshot = last_snapshot;
        self.uncommitted = 0;
        self.stored_through
            .store(self.writer.applied_seq(), Ordering::Release);
        Ok(())
    }

    /// Applies what is released, commits, snapshots when due: the records applied.
    fn step(
        &mut self,
        reader: &mut JournalReader,
        pending: &mut Option<Pending>,
    ) -> Result<u64, String> {
        let released = (self.config.released)();
        let mut applied = 0;
        let mut commit_now = false;
        while applied < COMMIT_EVERY_RECORDS {
            if pending.is_none() {
                let Some(record) = reader.poll().map_err(|e| e.to_string())? else {
                    break;
                };
                let command = decode_command(record.record_type, record.payload)
                    .map_err(|e| format!("journal record {}: {e}", record.seq))?;
                *pending = Some(Pending {
                    seq: record.seq,
                    timestamp_ns: record.timestamp_ns,
                    command,
                });
            }
            let Some(next) = pending.take_if(|p| p.seq <= released) else {
                break;
            };
            self.engine
                .apply(next.seq, next.timestamp_ns, &next.command);
            self.writer
                .apply(next.seq, self.engine.events())
                .map_err(|e| format!("history store: {e}"))?;
            applied += 1;
            self.uncommitted += 1;
            // The engine this journal feeds has let go of what the record names: a read of it
            // now finds it only here (on a standby, whose primary's store allowed the
            // forgetting, this store may not have committed it yet). Committed at once.
            if matches!(next.command, Command::ForgetHistory { .. }) {
                commit_now = true;
                break;
            }
            // A snapshot falls due at this record: committed here, so that the snapshot is
            // taken at it (every `snapshot_every` records, not at the next commit).
            if self.snapshot_due_at(next.seq) {
                commit_now = true;
                break;
            }
        }
        let commit_due = commit_now
            || self.uncommitted >= COMMIT_EVERY_RECORDS
            || self.last_commit.elapsed() >= COMMIT_INTERVAL;
        if self.writer.has_uncommitted() && commit_due {
            self.writer
                .commit()
                .map_err(|e| format!("history store: {e}"))?;
            self.uncommitted = 0;
            self.last_commit = Instant::now();
            self.stored_through
                .store(self.writer.applied_seq(), Ordering::Release);
            (self.config.prices_stored_below)(self.engine.trade_count());
        }
        self.snapshot_when_due();
        Ok(applied)
    }

    /// Whether `snapshot_every` records passed at `seq` since the last snapshot (never while
    /// the journal is full: no snapshot is written then, and the store commits as usual).
    fn snapshot_due_at(&self, seq: u64) -> bool {
        let every = self.config.snapshot_every;
        every > 0
            && seq >= self.last_snapshot.saturating_add(every)
            && !(self.config.journal_full)()
    }

    /// Writes a snapshot of the historian's engine when `snapshot_every` records passed
    /// since the last one (the store holds every record it covers).
    fn snapshot_when_due(&mut self) {
        let seq = self.engine.last_seq();
        // Only at a sequence the store has committed: a restart starts from a snapshot at or
        // before what it committed.
        if !self.snapshot_due_at(seq)
            || self.writer.has_uncommitted()
            || seq > self.writer.applied_seq()
        {
            return;
        }
        let data_dir = &self.config.data_dir;
        match ladder_journal::write_snapshot(data_dir, seq, &self.engine.snapshot_bytes()) {
            Ok(path) => {
                tracing::info!(seq, path = %path.display(), "snapshot written");
                let _ = ladder_journal::prune_snapshots(
                    data_dir,
                    self.config.keep_snapshots,
                    self.writer.applied_seq(),
                );
                self.retire_segments();
            }
            Err(e) => tracing::warn!(error = %e, "snapshot failed"),
        }
        // Whether it failed or not (a full disk, typically): the next try comes after as many
        // records again, so a failing disk gets no stream of tries.
        self.last_snapshot = seq;
    }
}
