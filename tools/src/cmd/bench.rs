//! `ladder bench engine`: the engine alone on an exchange-core-style stream.

use ladder_benches::engine_replay::{closed_loop, open_loop};
use ladder_benches::engine_stream::{generate, StreamSpec};

use super::EngineBenchArgs;

/// Generates the stream, replays it and prints one JSON line.
pub fn engine(args: &EngineBenchArgs) -> Result<(), String> {
    if args.commands == 0 {
        return Err("--commands must be at least 1".into());
    }
    let spec = StreamSpec {
        commands: args.commands as usize,
        stable_books: !args.growing_books,
        ..StreamSpec::default()
    };
    tracing::info!(?spec, "generating the stream");
    let stream = generate(&spec);
    let result = match args.rate {
        Some(0) => return Err("--rate must be at least 1".into()),
        Some(rate) => open_loop(&stream, rate),
        None => closed_loop(&stream),
    };
    println!(
        "{}",
        serde_json::to_string(&result).map_err(|e| e.to_string())?
    );
    Ok(())
}
