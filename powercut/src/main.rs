//! `ladder-powercut --backing DIR --mount DIR [--seed N] [--torn]`: mounts the power-cut
//! filesystem in the foreground (see the library's docs and `powercut/README.md`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ladder_powercut::run::{run, Options};

/// A passthrough FUSE filesystem with a volatile write cache: writes stay in memory until
/// fsync; SIGUSR1 cuts the power (unsynced writes are lost), SIGUSR2 cuts it torn.
#[derive(Debug, Parser)]
#[command(name = "ladder-powercut")]
struct Args {
    /// The directory that plays the disk.
    #[arg(long)]
    backing: PathBuf,
    /// The (empty) directory to mount on.
    #[arg(long)]
    mount: PathBuf,
    /// Seed of the torn cuts' random choices (drawn and printed on stderr if absent).
    #[arg(long)]
    seed: Option<u64>,
    /// SIGUSR1 cuts torn too: a random subset of dirty pages persists, one page per file torn.
    #[arg(long)]
    torn: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = Options {
        backing: args.backing,
        mount: args.mount,
        seed: args.seed,
        torn: args.torn,
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("powercut: {error}");
            ExitCode::FAILURE
        }
    }
}
