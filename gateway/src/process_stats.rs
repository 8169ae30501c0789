//! The standard Prometheus `process_*` metrics (CPU seconds, resident and virtual memory,
//! open descriptors, start time) read from `/proc/self`, the allocator's own count of
//! the heap (`ladder_heap_*`, glibc's `mallinfo2`): resident memory that grows while the
//! bytes in use do not is the allocator's free space, not state the service holds; and each
//! thread's CPU time and the time it waited for a core (`ladder_thread_*`, from
//! `/proc/self/task/*/schedstat`): a sequencer that waits for a core is a machine too busy
//! for its load, whatever the service's own code does. (The
//! `prometheus` crate's process collector counts CPU time in whole seconds: too coarse for
//! the CPU per order that `ladder loadgen` derives from it.)

use prometheus::core::Collector;

use crate::metrics::{one, Pulled};

/// The process's families; a figure the system does not give is left out.
pub fn families() -> Vec<Box<dyn Collector>> {
    let stat = |read: fn(&ProcStat) -> Option<f64>| {
        Box::new(move || one(ProcStat::read().as_ref().and_then(read)))
    };
    let heap =
        |read: fn(&HeapStats) -> f64| Box::new(move || one(HeapStats::read().as_ref().map(read)));
    let families = [
        Pulled::counter(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            &[],
            stat(|s| Some(s.cpu_seconds)),
        ),
        Pulled::gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            &[],
            stat(|s| Some(s.virtual_bytes as f64)),
        ),
        Pulled::gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            &[],
            stat(|s| Some(s.resident_bytes as f64)),
        ),
        Pulled::gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            &[],
            stat(|s| s.start_time_seconds),
        ),
        Pulled::gauge(
            "process_open_fds",
            "Number of open file descriptors.",
            &[],
            Box::new(|| {
                one(std::fs::read_dir("/proc/self/fd")
                    .ok()
                    .map(|d| d.count() as f64))
            }),
        ),
        Pulled::counter(
            "ladder_thread_cpu_seconds_total",
            "CPU time of the service's threads, by thread name.",
            &["thread"],
            Box::new(|| thread_samples(|t| t.cpu_seconds)),
        ),
        Pulled::counter(
            "ladder_thread_wait_seconds_total",
            "Time the service's threads were ready to run but waited for a core, by thread name.",
            &["thread"],
            Box::new(|| thread_samples(|t| t.wait_seconds)),
        ),
        Pulled::gauge(
            "ladder_heap_in_use_bytes",
            "Heap bytes allocated and not yet freed (the allocator's count).",
            &[],
            heap(|h| h.in_use as f64),
        ),
        Pulled::gauge(
            "ladder_heap_free_bytes",
            "Heap bytes freed but kept by the allocator.",
            &[],
            heap(|h| h.free as f64),
        ),
    ];
    families
        .into_iter()
        .map(|f| Box::new(f) as Box<dyn Collector>)
        .collect()
}

/// What `/proc/self/stat` says of the process.
struct ProcStat {
    cpu_seconds: f64,
    virtual_bytes: u64,
    resident_bytes: u64,
    start_time_seconds: Option<f64>,
}

impl ProcStat {
    fn read() -> Option<ProcStat> {
        let text = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name is in parentheses and may hold spaces: fields count from after it.
        let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
        // After the name, field 3 (state) is index 0: utime is field 14, stime 15,
        // starttime 22, vsize 23, rss 24 (proc(5)).
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        // SAFETY: sysconf reads a configuration value and has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        // SAFETY: as above.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if ticks <= 0 || page <= 0 {
            return None;
        }
        let ticks = ticks as f64;
        Some(ProcStat {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)?.saturating_mul(page as u64),
            start_time_seconds: boot_time_seconds()
                .zip(field(22))
                .map(|(boot, start)| boot + start as f64 / ticks),
        })
    }
}

/// What the scheduler says of the threads of one name.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct ThreadTimes {
    /// Seconds on a core.
    cpu_seconds: f64,
    /// Seconds ready to run, waiting for a core.
    wait_seconds: f64,
}

/// Each thread name's times, threads of one name added up (`schedstat`: ns on a core, ns
/// waiting on a run queue, time slices); empty where the system does not say.
fn thread_times() -> std::collections::BTreeMap<String, ThreadTimes> {
    let mut by_name = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let (Ok(name), Ok(stats)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("schedstat")),
        ) else {
            continue;
        };
        let mut fields = stats.split_whitespace().map(|f| f.parse::<u64>().ok());
        let (Some(Some(cpu_ns)), Some(Some(wait_ns))) = (fields.next(), fields.next()) else {
            continue;
        };
        let times: &mut ThreadTimes = by_name.entry(name.trim().to_string()).or_default();
        times.cpu_seconds += cpu_ns as f64 / 1e9;
        times.wait_seconds += wait_ns as f64 / 1e9;
    }
    by_name
}

/// One sample per thread name of what `read` takes from its times.
fn thread_samples(read: fn(&ThreadTimes) -> f64) -> Vec<crate::metrics::Sample> {
    thread_times()
        .into_iter()
        .map(|(name, times)| (vec![name], read(&times)))
        .collect()
}

/// The machine's boot time, seconds since the epoch (`btime` of `/proc/stat`).
fn boot_time_seconds() -> Option<f64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The allocator's account of the heap, all arenas together.
struct HeapStats {
    in_use: u64,
    free: u64,
}

impl HeapStats {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn read() -> Option<HeapStats> {
        // SAFETY: mallinfo2 only reads the allocator's counters (under its own locks).
        let info = unsafe { libc::mallinfo2() };
        Some(HeapStats {
            // Chunks in use in the arenas, plus blocks mapped on their own.
            in_use: (info.uordblks + info.hblkhd) as u64,
            free: info.fordblks as u64,
        })
    }

    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    fn read() -> Option<HeapStats> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The families' text, as `/metrics` gives it.
    fn render() -> String {
        let registry = prometheus::Registry::new();
        for family in families() {
            registry.register(family).unwrap();
        }
        let mut out = String::new();
        prometheus::TextEncoder::new()
            .encode_utf8(&registry.gather(), &mut out)
            .unwrap();
        out
    }

    /// A metric's value in `out`.
    fn value(out: &str, name: &str) -> f64 {
        out.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{name} missing from:\n{out}"))
            .parse()
            .unwrap()
    }

    /// Every figure is there and plausible for a running test process.
    #[test]
    fn renders_the_process_figures() {
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {}
        let out = render();
        assert!(value(&out, "process_resident_memory_bytes") > 1_000_000.0);
        assert!(
            value(&out, "process_virtual_memory_bytes")
                >= value(&out, "process_resident_memory_bytes")
        );
        assert!(value(&out, "process_open_fds") >= 3.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value(&out, "process_start_time_seconds");
        assert!(
            start > now - 3_600.0 && start <= now + 2.0,
            "{start} vs {now}"
        );
        assert!(value(&out, "process_cpu_seconds_total") > 0.0);
        // Allocate and hold 64 MiB: the allocator counts it as in use (other tests of the
        // process allocate and free beside it, far less than the 8 MiB of margin).
        let before = value(&out, "ladder_heap_in_use_bytes");
        // black_box: an optimized build would otherwise leave the unused allocation out.
        let held = std::hint::black_box(vec![1u8; 64 << 20]);
        let again = render();
        assert!(value(&again, "ladder_heap_in_use_bytes") >= before + 56.0 * 1024.0 * 1024.0);
        drop(held);
    }

    /// A named thread that spent CPU time is listed with it, under its name.
    #[cfg(target_os = "linux")]
    #[test]
    fn each_thread_name_has_its_cpu_and_wait_time() {
        let busy = std::thread::Builder::new()
            .name("busy-metrics".into())
            .spawn(|| {
                let spin = std::time::Instant::now();
                while spin.elapsed() < std::time::Duration::from_millis(30) {}
                let out = render();
                let cpu = value(
                    &out,
                    r#"ladder_thread_cpu_seconds_total{thread="busy-metrics"}"#,
                );
                let wait = value(
                    &out,
                    r#"ladder_thread_wait_seconds_total{thread="busy-metrics"}"#,
                );
                (cpu, wait)
            })
            .unwrap();
        let (cpu, wait) = busy.join().unwrap();
        assert!(cpu > 0.001, "{cpu}");
        assert!(wait >= 0.0, "{wait}");
    }
}
