//! Replays the `ladder bench engine` stream through the engine once, untimed, for a
//! profiler: with `PERF_CTL=<fifo>` it writes `enable` to that fifo just before the replay
//! and `disable` just after, so that `perf record --control=fifo:<fifo> -D -1` samples the
//! replay alone, not the stream's generation or the engine's set-up.
//!
//! ```sh
//! mkfifo /tmp/perf.ctl
//! perf record -D -1 --control=fifo:/tmp/perf.ctl -o /tmp/perf.data \
//!     env PERF_CTL=/tmp/perf.ctl target/release/examples/profile_engine 4000000
//! ```

use std::io::Write;

use ladder_benches::engine_replay::{prepared_engine, replay};
use ladder_benches::engine_stream::{generate, StreamSpec};

fn main() {
    let commands = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000_000);
    let stream = generate(&StreamSpec {
        commands,
        ..StreamSpec::default()
    });
    let (mut engine, first_seq) = prepared_engine(&stream);
    let control = std::env::var("PERF_CTL").ok().map(|path| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("the perf control fifo opens")
    });
    let say = |word: &str| {
        if let Some(mut fifo) = control.as_ref() {
            fifo.write_all(format!("{word}\n").as_bytes())
                .expect("perf reads its control fifo");
        }
    };
    say("enable");
    let started = std::time::Instant::now();
    replay(&mut engine, first_seq, &stream.measured);
    let elapsed = started.elapsed();
    say("disable");
    eprintln!(
        "{} commands, {:.2} M/s",
        stream.measured.len(),
        stream.measured.len() as f64 / elapsed.as_secs_f64() / 1e6
    );
}
