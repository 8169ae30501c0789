//! The allocator's settings for a service that runs for months (glibc malloc).
//!
//! By default glibc raises its mmap threshold each time a large block is freed (up to
//! 32 MiB), so that later large buffers — a batch's events, a bootstrap's copy — come from
//! the heap, where once freed they leave holes that cannot be returned to the system; and it
//! gives every busy thread an arena of its own, each keeping its own free space. Measured by
//! `ladder bench soak`: the bytes in use stayed flat while the allocator's free space, and
//! with it the resident memory, grew from one checkpoint to the next. A fixed threshold keeps
//! large blocks in their own mappings (returned to the system when freed), and two arenas
//! suffice on the machines this runs on (two cores).

/// Blocks at least this large get mappings of their own.
const MMAP_THRESHOLD_BYTES: i32 = 1 << 20;
/// Arenas at most.
const ARENAS_MAX: i32 = 2;

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
        libc::mallopt(libc::M_ARENA_MAX, ARENAS_MAX);
    }
}
