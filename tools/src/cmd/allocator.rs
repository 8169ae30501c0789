//! The allocator's settings for a service that runs for months (glibc malloc).
//!
//! By default glibc raises its mmap threshold each time a large block is freed (up to
//! 32 MiB), so that later large buffers — a batch's events, a bootstrap's copy — come from
//! the heap, where once freed they leave holes that cannot be returned to the system.
//! Measured by `ladder bench soak`: the bytes in use stayed flat while the allocator's free
//! space, and with it the resident memory, grew from one checkpoint to the next. A fixed
//! threshold keeps large blocks in their own mappings (returned to the system when freed).
//!
//! The number of arenas is left alone: two arenas (`M_ARENA_MAX`) kept the free space small
//! too, but a thread preempted while holding an arena's lock stalled the others: loadgen's
//! p99.9 at 4,000 mm requests/s went from 0.14–0.51 s to 0.9–4.4 s (4 interleaved pairs of
//! 60 s, same CPU), while the threshold alone measured within noise of the defaults.

/// Blocks at least this large get mappings of their own.
const MMAP_THRESHOLD_BYTES: i32 = 1 << 20;

/// Applies the settings; call before starting threads. `LADDER_MALLOC_DEFAULTS=1` keeps
/// glibc's defaults (to compare).
pub fn tune_for_a_long_run() {
    if std::env::var_os("LADDER_MALLOC_DEFAULTS").is_some_and(|v| v == "1") {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes the allocator's parameters; it is called before other threads
    // exist and takes only documented parameters with valid values.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}
