//! `ladder bench sequencer | replay | snapshot | standby`: the write path's measures (issue: the
//! sequencer and the journal). Each prints one JSON line. Data goes to a temporary
//! directory under `--dir` (default the system's temporary directory), removed afterwards.

use std::path::PathBuf;

use clap::Args;
use ladder_benches::pipeline_bench;
use ladder_journal::Durability;
use ladder_sequencer::CorePin;

/// `ladder bench sequencer`.
#[derive(Args, Debug, Clone)]
pub struct SequencerBenchArgs {
    /// Commands to drive through.
    #[arg(long, default_value_t = 1_000_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=20_000_000))]
    pub commands: usize,
    /// Producer threads (as gateway threads), 1 to 64.
    #[arg(long, default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub producers: usize,
    /// `sync` or `async`.
    #[arg(long, default_value = "sync")]
    pub durability: Durability,
    /// Submissions in flight per producer, 1 to 1,048,576.
    #[arg(long, default_value_t = 4096, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 20))]
    pub window: usize,
    /// Parent directory of the temporary data directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The sequencer thread's core: `auto` (the last allowed core, as `serve` does), `none`
    /// or a core number.
    #[arg(long, default_value = "auto")]
    pub sequencer_core: CorePin,
    /// API keys beating their heartbeats once a second each beside the stream (at most
    /// 1,000,000); the run is then made twice, without them and with them, and both results
    /// printed.
    #[arg(long, default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1_000_000))]
    pub heartbeats: usize,
    /// The history store's writer follows the journal into `history.db`, as in `ladder
    /// serve`; the run is then made without it and with it, and both results printed.
    #[arg(long)]
    pub history: bool,
}

/// `ladder bench replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayBenchArgs {
    /// Measured commands in the journal (after the set-up).
    #[arg(long, default_value_t = 1_000_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=20_000_000))]
    pub commands: usize,
    /// Parent directory of the temporary data directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `ladder bench snapshot`.
#[derive(Args, Debug, Clone)]
pub struct SnapshotBenchArgs {
    /// Open orders in the engine, 8 to 10,000,000.
    #[arg(long, default_value_t = 100_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(8..=10_000_000))]
    pub open_orders: usize,
    /// Parent directory of the temporary data directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `ladder bench standby`.
#[derive(Args, Debug, Clone)]
pub struct StandbyBenchArgs {
    /// Commands offered to the primary.
    #[arg(long, default_value_t = 200_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=20_000_000))]
    pub commands: usize,
    /// Offered rate, commands/s (open loop).
    #[arg(long, default_value_t = 50_000.0, value_parser = positive)]
    pub rate: f64,
    /// Standbys the primary waits for before answering (0 or 1).
    #[arg(long, default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1))]
    pub replicas: usize,
    /// Parent directory of the temporary data directories.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `ladder bench flush`.
#[derive(Args, Debug, Clone)]
pub struct FlushBenchArgs {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 5.0, value_parser = positive)]
    pub seconds: f64,
    /// Synced commits asked for per second.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub rate: u64,
    /// Busy threads beside the writer (one per other core shows the host's pauses), at most
    /// 64.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=64))]
    pub spinners: usize,
    /// Bytes per record, 1 to 65,536.
    #[arg(long, default_value_t = 300, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64 * 1024))]
    pub record_bytes: usize,
    /// Parent directory of the temporary data directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// A finite number above zero (bad usage otherwise).
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 => Ok(value),
        _ => Err(format!("{text:?} is not a positive number")),
    }
}

fn temp_dir(parent: &Option<PathBuf>) -> Result<tempfile::TempDir, String> {
    match parent {
        Some(p) => tempfile::tempdir_in(p),
        None => tempfile::tempdir(),
    }
    .map_err(|e| format!("temporary directory: {e}"))
}

fn print<T: serde::Serialize>(result: &T) -> Result<(), String> {
    crate::cmd::stdout::print_line(serde_json::to_string(result).map_err(|e| e.to_string())?);
    Ok(())
}

/// Runs the sequencer bench.
pub fn sequencer(args: &SequencerBenchArgs) -> Result<(), String> {
    let durability = args.durability;
    let producers = args.producers;
    let run =
        |heartbeat_keys: usize, history: bool| -> Result<pipeline_bench::SequencerResult, String> {
            let dir = temp_dir(&args.dir)?;
            Ok(pipeline_bench::sequencer(
                dir.path(),
                pipeline_bench::SequencerRun {
                    commands: args.commands,
                    producers,
                    durability,
                    window: args.window,
                    pin: args.sequencer_core,
                    heartbeat_keys,
                    history,
                },
            ))
        };
    if args.heartbeats == 0 && !args.history {
        return print(&run(0, false)?);
    }
    // Without and with the heartbeats (or the history store's writer) in the same run, in
    // the order without, with, with, without (a later run on this machine tends to be
    // faster): their cost is the ratio of the two pairs' throughputs.
    let what = if args.history {
        "history"
    } else {
        "heartbeats"
    };
    let first = run(0, false)?;
    let with = [
        run(args.heartbeats, args.history)?,
        run(args.heartbeats, args.history)?,
    ];
    let last = run(0, false)?;
    let ratio =
        (with[0].ops_per_sec + with[1].ops_per_sec) / (first.ops_per_sec + last.ops_per_sec);
    let mut paired = serde_json::Map::new();
    paired.insert(format!("without_{what}"), serde_json::json!([first, last]));
    paired.insert(format!("with_{what}"), serde_json::json!(with));
    paired.insert("throughput_ratio".into(), serde_json::json!(ratio));
    print(&serde_json::Value::Object(paired))
}

/// Runs the replay bench.
pub fn replay(args: &ReplayBenchArgs) -> Result<(), String> {
    let dir = temp_dir(&args.dir)?;
    print(&pipeline_bench::replay(dir.path(), args.commands))
}

/// Runs the snapshot bench.
pub fn snapshot(args: &SnapshotBenchArgs) -> Result<(), String> {
    let dir = temp_dir(&args.dir)?;
    print(&pipeline_bench::snapshot(dir.path(), args.open_orders))
}

/// Runs the flush bench.
pub fn flush(args: &FlushBenchArgs) -> Result<(), String> {
    let dir = temp_dir(&args.dir)?;
    let rate = args.rate;
    print(&ladder_benches::flush_bench::flush(
        dir.path(),
        (args.seconds * rate as f64).ceil().max(1.0) as u64,
        rate,
        args.spinners,
        args.record_bytes,
    ))
}

/// Runs the standby-lag bench.
pub fn standby(args: &StandbyBenchArgs) -> Result<(), String> {
    let dir = temp_dir(&args.dir)?;
    print(&pipeline_bench::standby_lag(
        dir.path(),
        args.commands,
        args.rate,
        args.replicas,
    ))
}
