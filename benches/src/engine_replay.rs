//! Replaying a stream through the engine alone: closed loop (as fast as it goes) or open
//! loop at an offered rate, where each command has a planned time and its latency counts
//! from that time, so queueing is never hidden (no coordinated omission).

use std::time::Instant;

use hdrhistogram::Histogram;
use ladder_engine::{Command, Engine, EngineLimits};

use crate::engine_stream::Stream;

/// What a replay measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplayResult {
    /// Commands measured.
    pub commands: u64,
    /// Commands per second over the measured part.
    pub ops_per_sec: f64,
    /// Median latency per command.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Worst.
    pub max_ns: u64,
    /// Open loop only: the time from each command's start to its end, without the wait
    /// behind the commands before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceTimes>,
}

/// Service times of an open-loop run (start of a command to its end).
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServiceTimes {
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Commands that took 10 µs or more.
    pub over_10us: u64,
    /// Worst.
    pub max_ns: u64,
}

/// Limits sized for `stream`, as a deployment sized for its load would set them: room for
/// every order it places and for about one trade per eight measured commands (the default
/// stream makes one per fourteen) made at start-up, and prefaulted, so that the measured
/// part does not pay the operating system's first touch of each page.
pub fn bench_limits(stream: &Stream) -> EngineLimits {
    let orders = stream
        .setup
        .iter()
        .chain(&stream.measured)
        .filter(|command| matches!(command, Command::PlaceOrder(_)))
        .count();
    EngineLimits {
        open_orders_preallocated: orders.min(1 << 20),
        orders_preallocated: orders,
        trades_preallocated: stream.measured.len() / 8,
        prefault: true,
        ..EngineLimits::default()
    }
}

/// An engine with the stream's set-up applied; returns it and the next sequence number.
pub fn prepared_engine(stream: &Stream) -> (Engine, u64) {
    let mut engine = Engine::new(bench_limits(stream));
    let mut seq = 0;
    for command in &stream.setup {
        seq += 1;
        engine.apply(seq, seq * 1_000, command);
    }
    (engine, seq + 1)
}

/// Replays as fast as possible: throughput from a pass with no per-command timing, then
/// latencies from a second pass on a fresh engine that times each command.
pub fn closed_loop(stream: &Stream) -> ReplayResult {
    let (mut engine, first_seq) = prepared_engine(stream);
    let started = Instant::now();
    replay(&mut engine, first_seq, &stream.measured);
    let elapsed = started.elapsed();
    let (mut engine, first_seq) = prepared_engine(stream);
    let mut histogram = new_histogram();
    for (i, command) in stream.measured.iter().enumerate() {
        let seq = first_seq + i as u64;
        let t0 = Instant::now();
        prefetch_next(&engine, &stream.measured, i);
        std::hint::black_box(engine.apply(seq, seq * 1_000, command));
        let _ = histogram.record(t0.elapsed().as_nanos() as u64);
    }
    result(
        stream.measured.len() as u64,
        elapsed.as_secs_f64(),
        &histogram,
    )
}

/// Applies `commands` numbered from `first_seq`, hinted ahead as the sequencer hints them,
/// untimed. A function of its own (never inlined) so that profilers can single it out
/// (`valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*replay*'`).
#[inline(never)]
pub fn replay(engine: &mut Engine, first_seq: u64, commands: &[Command]) {
    for (i, command) in commands.iter().enumerate() {
        let seq = first_seq + i as u64;
        prefetch_next(engine, commands, i);
        std::hint::black_box(engine.apply(seq, seq * 1_000, command));
    }
}

/// Replays at `rate` commands per second: command `i` is planned at `i / rate` after the
/// start and waits for that time; its latency runs from the planned time to its end.
pub fn open_loop(stream: &Stream, rate: u64) -> ReplayResult {
    let (mut engine, first_seq) = prepared_engine(stream);
    let commands = &stream.measured;
    on_schedule(commands.len(), rate, |i| {
        let seq = first_seq + i as u64;
        prefetch_next(&engine, commands, i);
        std::hint::black_box(engine.apply(seq, seq * 1_000, &commands[i]));
    })
}

/// The machine's own floor for `open_loop`: the same schedule of `commands` at `rate`, each
/// "command" a busy wait of `work_ns` (say the engine's median) instead of the engine. On a
/// shared virtual machine the scheduler's and hypervisor's pauses alone put the tail here;
/// the engine's tail is only meaningful against it, measured in the same run.
pub fn open_loop_baseline(commands: usize, rate: u64, work_ns: u64) -> ReplayResult {
    let mut floor = on_schedule(commands, rate, |_| {
        let work_started = Instant::now();
        while (work_started.elapsed().as_nanos() as u64) < work_ns {
            std::hint::spin_loop();
        }
    });
    // Its service time is the busy wait itself: nothing to report.
    floor.service = None;
    floor
}

/// Runs `work(i)` for `i` in `0..count`, each planned at `i / rate` after the start and
/// started no earlier: latency from the planned time to the end, and service time from the
/// start to the end.
fn on_schedule(count: usize, rate: u64, mut work: impl FnMut(usize)) -> ReplayResult {
    let mut histogram = new_histogram();
    let mut service = new_histogram();
    let interval_ns = 1e9 / rate.max(1) as f64;
    let started = Instant::now();
    for i in 0..count {
        let planned_ns = (i as f64 * interval_ns) as u64;
        let mut began_ns = started.elapsed().as_nanos() as u64;
        while began_ns < planned_ns {
            std::hint::spin_loop();
            began_ns = started.elapsed().as_nanos() as u64;
        }
        work(i);
        let done_ns = started.elapsed().as_nanos() as u64;
        let _ = histogram.record(done_ns.saturating_sub(planned_ns).max(1));
        let _ = service.record(done_ns.saturating_sub(began_ns).max(1));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut measured = result(count as u64, elapsed, &histogram);
    measured.service = Some(ServiceTimes {
        p99_ns: service.value_at_quantile(0.99),
        p999_ns: service.value_at_quantile(0.999),
        over_10us: service.count_between(10_000, u64::MAX),
        max_ns: service.max(),
    });
    measured
}

/// Hints the engine about the command after `i`, as the sequencer does within a batch (in
/// the open loop that command may not have "arrived" yet; the hint only loads memory).
#[inline]
fn prefetch_next(engine: &Engine, commands: &[Command], i: usize) {
    engine.prefetch_ahead(i, |j| commands.get(j));
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

fn result(commands: u64, elapsed_s: f64, h: &Histogram<u64>) -> ReplayResult {
    ReplayResult {
        commands,
        ops_per_sec: commands as f64 / elapsed_s.max(1e-9),
        p50_ns: h.value_at_quantile(0.50),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
        service: None,
    }
}
