//! `ladder journal ...`: verify, dump, stats, tail, state-hash, repair (API.md §19).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use ladder_engine::EngineLimits;
use ladder_journal::{JournalReader, RecordRef};
use ladder_sequencer::{decode_command, recover_engine};

/// `ladder journal` actions.
#[derive(Subcommand, Debug)]
pub enum JournalCommand {
    /// Check every frame, checksum and sequence (exit 0 only when sound; a torn tail is sound).
    Verify(DataDir),
    /// Print records as JSON lines.
    Dump(DumpArgs),
    /// Records per type, bytes, time span and rate.
    Stats(DataDir),
    /// Print records as they are appended.
    Tail(TailArgs),
    /// Replay to a sequence and print the state hash.
    StateHash(StateHashArgs),
    /// Keep a copy of the damaged segment, then truncate at the first bad frame (or, with
    /// --truncate-after SEQ, quarantine every record after SEQ).
    Repair(RepairArgs),
}

/// `ladder journal repair`.
#[derive(Args, Debug, Clone)]
pub struct RepairArgs {
    #[command(flatten)]
    pub dir: DataDir,
    /// Quarantine the records after SEQ (a record every replay fails on, and those after it):
    /// the journal ends at SEQ, the cut segment is kept as `.bad`, later ones renamed `.bad`.
    #[arg(long, value_name = "SEQ")]
    pub truncate_after: Option<u64>,
}

/// `--data-dir`.
#[derive(Args, Debug, Clone)]
pub struct DataDir {
    /// The service's data directory.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
}

/// `ladder journal dump`.
#[derive(Args, Debug, Clone)]
pub struct DumpArgs {
    #[command(flatten)]
    pub dir: DataDir,
    /// First sequence (inclusive).
    #[arg(long)]
    pub from: Option<u64>,
    /// Last sequence (inclusive).
    #[arg(long)]
    pub to: Option<u64>,
    /// Only records of this type (as `dump` names them, e.g. `place_order`).
    #[arg(long = "type", value_parser = super::flags::record_type)]
    pub record_type: Option<String>,
}

/// `ladder journal tail`.
#[derive(Args, Debug, Clone)]
pub struct TailArgs {
    #[command(flatten)]
    pub dir: DataDir,
    /// Keep following new records.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Records to show before following.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub lines: u64,
}

/// `ladder journal state-hash`.
#[derive(Args, Debug, Clone)]
pub struct StateHashArgs {
    #[command(flatten)]
    pub dir: DataDir,
    /// Replay up to this sequence (inclusive); default the end.
    #[arg(long)]
    pub at: Option<u64>,
}

/// Runs a journal action.
pub fn run(command: JournalCommand) -> Result<(), String> {
    match command {
        JournalCommand::Verify(dir) => verify(&dir.data_dir),
        JournalCommand::Dump(args) => dump(&args),
        JournalCommand::Stats(dir) => stats(&dir.data_dir),
        JournalCommand::Tail(args) => tail(&args),
        JournalCommand::StateHash(args) => state_hash(&args.dir.data_dir, args.at),
        JournalCommand::Repair(args) => match args.truncate_after {
            None => repair(&args.dir.data_dir),
            Some(seq) => quarantine(&args.dir.data_dir, seq),
        },
    }
}

fn require_journal(data_dir: &Path) -> Result<(), String> {
    if ladder_journal::journal_dir(data_dir).is_dir() {
        Ok(())
    } else {
        Err(format!("no journal in {}", data_dir.display()))
    }
}

fn verify(data_dir: &Path) -> Result<(), String> {
    require_journal(data_dir)?;
    let report = ladder_journal::verify(data_dir).map_err(|e| format!("verify failed: {e}"))?;
    let summary = serde_json::json!({
        "ok": true,
        "segments": report.segments,
        "records": report.records,
        "payload_bytes": report.payload_bytes,
        "first_seq": report.first_seq,
        "last_seq": report.last_seq,
        "torn_tail": report.torn_tail.as_ref().map(|t| format!(
            "{} at offset {}: {} ({} bytes would be dropped on start)",
            t.segment.display(), t.offset, t.reason, t.bytes_dropped
        )),
    });
    crate::cmd::stdout::print_line(summary);
    Ok(())
}

/// The name `dump` and `stats` give a record this build cannot decode: `unknown_<type>`.
pub fn undecodable_type_name(record_type: u16) -> String {
    format!("unknown_{record_type}")
}

/// One record as a JSON object: `seq`, `timestamp` (Unix ms, as every timestamp the service
/// shows), `timestamp_ns` (the sequencer's exact stamp), `type` and the command.
fn record_json(record: &RecordRef<'_>) -> serde_json::Value {
    let (kind, key, value) = match decode_command(record.record_type, record.payload) {
        Ok(command) => (
            command.type_name().to_string(),
            "command",
            serde_json::json!(command),
        ),
        Err(error) => (
            undecodable_type_name(record.record_type),
            "error",
            serde_json::json!(error),
        ),
    };
    let mut json = serde_json::json!({
        "seq": record.seq,
        "timestamp": unix_ms(record.timestamp_ns),
        "timestamp_ns": record.timestamp_ns,
        "type": kind,
    });
    json[key] = value;
    json
}

/// A record's stamp (ns since the Unix epoch) as the Unix ms every other timestamp uses.
fn unix_ms(timestamp_ns: u64) -> u64 {
    timestamp_ns / 1_000_000
}

/// The journal's first sequence: later than 1 once retention trimmed it.
fn first_seq(data_dir: &Path) -> Result<u64, String> {
    Ok(ladder_journal::journal_first_seq(data_dir)
        .map_err(|e| e.to_string())?
        .unwrap_or(1))
}

fn for_each_record(
    data_dir: &Path,
    from: u64,
    mut visit: impl FnMut(&RecordRef<'_>) -> bool,
) -> Result<(), String> {
    require_journal(data_dir)?;
    // Say so when asked for records retention removed.
    let first = first_seq(data_dir)?;
    if from < first && first > 1 {
        crate::cmd::stdout::print_error(format_args!(
            "ladder: the journal starts at sequence {first} (retention removed the records before it)"
        ));
    }
    let mut reader = JournalReader::open(data_dir).map_err(|e| e.to_string())?;
    // From before the start: from the first record left.
    if from > first {
        reader.seek(from).map_err(|e| e.to_string())?;
    }
    while let Some(record) = reader.poll().map_err(|e| e.to_string())? {
        if !visit(&record) {
            break;
        }
    }
    Ok(())
}

fn dump(args: &DumpArgs) -> Result<(), String> {
    let from = args.from.unwrap_or(1);
    for_each_record(&args.dir.data_dir, from, |record| {
        if args.to.is_some_and(|to| record.seq > to) {
            return false;
        }
        let json = record_json(record);
        if args
            .record_type
            .as_deref()
            .is_none_or(|t| json["type"] == t)
        {
            crate::cmd::stdout::print_line(json);
        }
        true
    })
}

fn stats(data_dir: &Path) -> Result<(), String> {
    let mut by_type: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let (mut first, mut last, mut records, mut bytes) = (None, None, 0u64, 0u64);
    for_each_record(data_dir, 1, |record| {
        let name = decode_command(record.record_type, record.payload)
            .map(|c| c.type_name().to_string())
            .unwrap_or_else(|_| undecodable_type_name(record.record_type));
        let entry = by_type.entry(name).or_default();
        entry.0 += 1;
        entry.1 += record.payload.len() as u64;
        first.get_or_insert((record.seq, record.timestamp_ns));
        last = Some((record.seq, record.timestamp_ns));
        records += 1;
        bytes += record.payload.len() as u64;
        true
    })?;
    let span_ns = match (first, last) {
        (Some((_, a)), Some((_, b))) => b.saturating_sub(a),
        _ => 0,
    };
    let rate = if span_ns > 0 {
        records as f64 / (span_ns as f64 / 1e9)
    } else {
        0.0
    };
    let types: serde_json::Map<String, serde_json::Value> = by_type
        .into_iter()
        .map(|(k, (n, b))| (k, serde_json::json!({ "records": n, "payload_bytes": b })))
        .collect();
    crate::cmd::stdout::print_line(serde_json::json!({
        "records": records,
        "payload_bytes": bytes,
        "first_seq": first.map(|f| f.0),
        "last_seq": last.map(|l| l.0),
        "first_timestamp": first.map(|f| unix_ms(f.1)),
        "last_timestamp": last.map(|l| unix_ms(l.1)),
        "span_s": span_ns as f64 / 1e9,
        "records_per_s": rate,
        "by_type": types,
    }));
    Ok(())
}

fn tail(args: &TailArgs) -> Result<(), String> {
    let data_dir = &args.dir.data_dir;
    require_journal(data_dir)?;
    let last = ladder_journal::verify(data_dir)
        .map_err(|e| e.to_string())?
        .last_seq
        .unwrap_or(0);
    let first = first_seq(data_dir)?;
    let from = last.saturating_sub(args.lines.saturating_sub(1)).max(first);
    let mut reader = JournalReader::open(data_dir).map_err(|e| e.to_string())?;
    reader.seek(from).map_err(|e| e.to_string())?;
    loop {
        while let Some(record) = reader.poll().map_err(|e| e.to_string())? {
            // The last N of those there at the start (none for `-n 0`), then every new one.
            if record.seq.saturating_add(args.lines) > last {
                crate::cmd::stdout::print_line(record_json(&record));
            }
        }
        if !args.follow {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn state_hash(data_dir: &Path, at: Option<u64>) -> Result<(), String> {
    require_journal(data_dir)?;
    let (engine, recovered) = recover_engine(data_dir, EngineLimits::default(), at)?;
    if let Some(at) = at {
        if recovered.last_seq < at {
            return Err(format!(
                "the journal ends at sequence {}, before {at}",
                recovered.last_seq
            ));
        }
    }
    crate::cmd::stdout::print_line(format_args!("{:?}", engine.state_hash()));
    Ok(())
}

/// Paths as the text JSON reports show.
fn paths(paths: &[std::path::PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

fn quarantine(data_dir: &Path, seq: u64) -> Result<(), String> {
    require_journal(data_dir)?;
    let kept = ladder_journal::quarantine_after(data_dir, seq)
        .map_err(|e| format!("repair --truncate-after {seq} failed: {e}"))?;
    crate::cmd::stdout::print_line(
        serde_json::json!({ "truncated_after": seq, "kept": paths(&kept) }),
    );
    Ok(())
}

fn repair(data_dir: &Path) -> Result<(), String> {
    require_journal(data_dir)?;
    let report = ladder_journal::repair(data_dir).map_err(|e| format!("repair failed: {e}"))?;
    match report.repaired {
        None => crate::cmd::stdout::print_line(serde_json::json!({
            "repaired": false,
            "last_seq": report.last_seq,
            "snapshots_set_aside": paths(&report.snapshots_set_aside),
        })),
        Some(damage) => crate::cmd::stdout::print_line(serde_json::json!({
            "repaired": true,
            "segment": damage.segment.display().to_string(),
            "offset": damage.offset,
            "reason": damage.reason.to_string(),
            "valid_records_dropped": damage.valid_records_dropped,
            "bytes_dropped": damage.bytes_dropped,
            "backups": paths(&damage.backups),
            "last_seq": report.last_seq,
            "snapshots_set_aside": paths(&report.snapshots_set_aside),
        })),
    }
    Ok(())
}
