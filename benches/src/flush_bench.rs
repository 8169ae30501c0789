//! What one durable commit costs on this machine, and what it costs the rest of it.
//!
//! A writer appends one small record to a journal and commits it with `sync` durability (an
//! msync of its bytes) at a fixed pace, as a service answering one order at a time does,
//! while `spinners` threads keep the other cores busy and note every stretch in which they
//! did not run. On a virtual machine whose host charges its disk emulation to the machine's
//! CPU budget, the flushes plus busy cores exceed that budget and the host pauses the whole
//! machine (counted as steal in `/proc/stat`): the pauses show in the spinners' stalls, in the
//! steal and in the flush tail at once. Run it with `--spinners 0` for the disk alone.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ladder_journal::{Durability, Journal, JournalOptions};

/// A spinner's gap longer than this is a stall (the thread did not run).
const STALL_NS: u64 = 1_000_000;
/// Kernel clock ticks per second in `/proc/stat` (USER_HZ, 100 on Linux).
const PROC_STAT_TICKS_PER_S: u64 = 100;

/// What a flush run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FlushResult {
    /// Synced commits made.
    pub flushes: u64,
    /// Commits asked for per second.
    pub offered_per_s: u64,
    /// Busy threads beside the writer.
    pub spinners: usize,
    /// Time of one synced commit: median, in µs.
    pub flush_p50_us: f64,
    /// 99th percentile.
    pub flush_p99_us: f64,
    /// 99.9th percentile.
    pub flush_p999_us: f64,
    /// Longest.
    pub flush_max_us: f64,
    /// Stretches of over 1 ms in which a spinner did not run, all spinners together.
    pub spinner_stalls: u64,
    /// Their total length, in ms.
    pub spinner_stalled_ms: f64,
    /// The longest, in µs.
    pub spinner_stall_max_us: f64,
    /// Time the host took from this machine's CPUs during the run (`/proc/stat` steal, all
    /// CPUs), in ms; `None` where it cannot be read.
    pub steal_ms: Option<u64>,
}

/// What one spinner saw.
#[derive(Default)]
struct Stalls {
    count: u64,
    total_ns: u64,
    max_ns: u64,
}

/// Makes `commits` synced commits of one `record_bytes`-byte record each, `per_second` apart
/// (a late commit is made at once), on a journal in `dir`, with `spinners` busy threads beside
/// the writer.
pub fn flush(
    dir: &Path,
    commits: u64,
    per_second: u64,
    spinners: usize,
    record_bytes: usize,
) -> FlushResult {
    let options = JournalOptions {
        segment_size_bytes: 256 << 20,
    };
    let (mut journal, _) = Journal::open(dir, options).expect("open journal");
    let stop = Arc::new(AtomicBool::new(false));
    let spinning: Vec<_> = (0..spinners)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || spin(&stop))
        })
        .collect();
    let steal_before = steal_ticks();
    let mut times = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let payload = vec![0x5a_u8; record_bytes];
    let interval = Duration::from_secs_f64(1.0 / per_second.max(1) as f64);
    let mut next = Instant::now();
    let mut seq = journal.last_seq();
    for _ in 0..commits {
        next += interval;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        seq += 1;
        let t0 = Instant::now();
        journal.append(seq, seq, 1, &payload).expect("append");
        journal.commit(Durability::Sync).expect("commit");
        let _ = times.record(t0.elapsed().as_nanos().max(1) as u64);
    }
    let steal_after = steal_ticks();
    stop.store(true, Ordering::Release);
    let mut stalls = Stalls::default();
    for spinner in spinning {
        let seen = spinner.join().expect("spinner");
        stalls.count += seen.count;
        stalls.total_ns += seen.total_ns;
        stalls.max_ns = stalls.max_ns.max(seen.max_ns);
    }
    let us = |ns: u64| ns as f64 / 1e3;
    FlushResult {
        flushes: times.len(),
        offered_per_s: per_second,
        spinners,
        flush_p50_us: us(times.value_at_quantile(0.5)),
        flush_p99_us: us(times.value_at_quantile(0.99)),
        flush_p999_us: us(times.value_at_quantile(0.999)),
        flush_max_us: us(times.max()),
        spinner_stalls: stalls.count,
        spinner_stalled_ms: stalls.total_ns as f64 / 1e6,
        spinner_stall_max_us: us(stalls.max_ns),
        steal_ms: steal_before
            .zip(steal_after)
            .map(|(before, after)| after.saturating_sub(before) * 1_000 / PROC_STAT_TICKS_PER_S),
    }
}

/// Reads the clock in a loop until `stop`, noting every gap of over [`STALL_NS`].
fn spin(stop: &AtomicBool) -> Stalls {
    let mut stalls = Stalls::default();
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let gap = now.duration_since(last).as_nanos() as u64;
        if gap > STALL_NS {
            stalls.count += 1;
            stalls.total_ns += gap;
            stalls.max_ns = stalls.max_ns.max(gap);
        }
        last = now;
    }
    stalls
}

/// The steal column of `/proc/stat`'s `cpu` line (all CPUs), in clock ticks.
fn steal_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_steal(&text)
}

/// The 8th number of the `cpu ` line: user nice system idle iowait irq softirq steal.
fn parse_steal(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let text = "cpu  674 0 218 581 3 0 66 54 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(parse_steal(text), Some(54));
        assert_eq!(parse_steal("cpu0 1 2 3\n"), None);
    }

    #[test]
    fn a_short_run_commits_and_times_every_record() {
        let dir = std::env::temp_dir().join(format!("ladder-flush-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let result = flush(&dir, 20, 200, 1, 64);
        let options = JournalOptions {
            segment_size_bytes: 256 << 20,
        };
        let (journal, _) = Journal::open(&dir, options).unwrap();
        let held = journal.last_seq();
        drop(journal);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(result.flushes, 20, "{result:?}");
        assert_eq!(held, 20, "one record per timed commit");
        assert!(result.flush_p50_us > 0.0 && result.flush_p50_us <= result.flush_max_us);
    }
}
