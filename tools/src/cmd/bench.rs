//! `ladder bench engine`: the engine alone on an exchange-core-style stream.

use ladder_benches::engine_replay::{closed_loop, open_loop, open_loop_baseline};
use ladder_benches::engine_stream::{generate, StreamSpec};

use super::EngineBenchArgs;

/// Generates the stream, replays it and prints one JSON line.
pub fn engine(args: &EngineBenchArgs) -> Result<(), String> {
    let spec = StreamSpec {
        commands: args.commands as usize,
        stable_books: !args.growing_books,
        ..StreamSpec::default()
    };
    tracing::info!(?spec, "generating the stream");
    let stream = generate(&spec);
    let line = match args.rate {
        Some(rate) => {
            let engine = open_loop(&stream, rate);
            // The same schedule with the engine's median as a busy wait: the machine's floor.
            let work_ns = closed_loop(&stream).p50_ns;
            let baseline = open_loop_baseline(stream.measured.len(), rate, work_ns);
            // API.md §19's keys at the top level; the floor beside them.
            let mut line = serde_json::json!(engine);
            if let Some(fields) = line.as_object_mut() {
                fields.insert("baseline".into(), serde_json::json!(baseline));
                fields.insert("baseline_work_ns".into(), serde_json::json!(work_ns));
            }
            line
        }
        None => serde_json::json!(closed_loop(&stream)),
    };
    crate::cmd::stdout::print_line(line);
    Ok(())
}
