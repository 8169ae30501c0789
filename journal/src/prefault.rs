//! Pages of the active segment made ready ahead of the writer, on a helper thread.
//!
//! A segment file is preallocated sparse: the first write to each of its pages faults, and
//! the kernel then finds a page, zeroes it and reserves its blocks, on the writer's thread
//! (a sixth of the sequencer's time under load, measured). The helper asks the kernel to do
//! that work in advance (`MADV_POPULATE_WRITE`, Linux 5.14+), a chunk at a time, at most
//! `AHEAD_BYTES` past where the writer is (populating a whole segment at once would spend
//! memory and time on pages a quiet journal reaches only much later). It touches no byte of
//! the mapping itself, so it never races the writer. Where the advice is not supported, the
//! helper stops and the writer faults as before. The helper runs at idle priority (see
//! `yield_to_everything_else`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use memmap2::MmapRaw;

/// Bytes populated per request to the kernel: small enough that a newer segment is picked
/// up soon, large enough that the calls are few.
const CHUNK_BYTES: usize = 2 << 20;

/// How far past the writer's offset pages are made ready.
const AHEAD_BYTES: usize = 16 << 20;

/// How long the helper rests when it is far enough ahead (a new segment's job wakes it at
/// once). A writer at 170 MB/s (1 M records/s) uses a fifth of `AHEAD_BYTES` meanwhile.
const REST: Duration = Duration::from_millis(20);

/// A segment to populate, from `from` to its end.
struct Job {
    map: Arc<MmapRaw>,
    from: usize,
}

/// The helper thread; it ends on its own once this is dropped. It is not waited for: at
/// idle priority on a busy machine it may take long to notice, and it never changes a byte
/// of the mappings it holds (a populate past a truncated end fails and ends it).
#[derive(Debug)]
pub(crate) struct Prefaulter {
    jobs: Option<Sender<Job>>,
    /// The writer's offset in the segment of the last job.
    written: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("from", &self.from).finish()
    }
}

impl Prefaulter {
    /// Starts the helper (none if the thread cannot be made: the writer then faults itself).
    pub fn start() -> Prefaulter {
        let (jobs, inbox) = channel();
        let written = Arc::new(AtomicUsize::new(0));
        let writer_offset = Arc::clone(&written);
        let started = std::thread::Builder::new()
            .name("journal-prefault".into())
            .spawn(move || run(&inbox, &writer_offset))
            .map_err(|error| tracing::warn!(%error, "no journal prefault thread"))
            .is_ok();
        Prefaulter {
            jobs: started.then_some(jobs),
            written,
        }
    }

    /// Populates `map` from offset `from` on, keeping ahead of the writer, instead of what it
    /// was doing; `from` is where the writer is in it.
    pub fn populate(&self, map: &Arc<MmapRaw>, from: usize) {
        self.written.store(from, Ordering::Relaxed);
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(Job {
                map: Arc::clone(map),
                from,
            });
        }
    }

    /// The writer has reached `offset` in the segment of the last `populate`.
    #[inline]
    pub fn advance(&self, offset: usize) {
        self.written.store(offset, Ordering::Relaxed);
    }
}

fn run(inbox: &Receiver<Job>, written: &AtomicUsize) {
    yield_to_everything_else();
    let Ok(mut job) = inbox.recv() else {
        return;
    };
    loop {
        let writer_at = written.load(Ordering::Relaxed);
        // Never behind the writer: those pages are written already, and the writer lets go
        // of them once far behind (`release`); populating them again would only bring them
        // back into the resident set.
        job.from = job.from.max(writer_at);
        let target = job.map.len().min(writer_at.saturating_add(AHEAD_BYTES));
        if job.from >= target {
            match inbox.recv_timeout(REST) {
                Ok(newer) => job = newer,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            continue;
        }
        let len = CHUNK_BYTES.min(target - job.from);
        if let Err(error) = populate(&job.map, job.from, len) {
            tracing::debug!(%error, "journal prefault unsupported; the writer faults pages in");
            return;
        }
        job.from += len;
        if let Ok(newer) = inbox.try_recv() {
            job = newer;
        }
    }
}

/// Runs this thread only when a core would otherwise idle (`SCHED_IDLE`). A populate call is
/// milliseconds of kernel work on page ranges fresh to this VM, and at normal priority it
/// held the core from the sequencer, committer and replication threads sharing it: standby
/// lag p99.9 12.7 ms with it vs 5.8 ms at idle priority (medians of 6 interleaved runs of
/// `bench standby --rate 20000`), `bench sequencer` throughput unchanged (2.04 vs 2.09 M
/// cmds/s, medians of 5). Starved under full load, the helper falls behind and the writer
/// faults its own pages, as without it.
#[cfg(target_os = "linux")]
fn yield_to_everything_else() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sets the calling thread's own policy from a valid parameter; no memory is shared.
    let status = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if status != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "journal prefault thread keeps the normal priority"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn yield_to_everything_else() {}

#[cfg(target_os = "linux")]
fn populate(map: &MmapRaw, from: usize, len: usize) -> std::io::Result<()> {
    map.advise_range(memmap2::Advice::PopulateWrite, from, len)
}

#[cfg(not(target_os = "linux"))]
fn populate(_map: &MmapRaw, _from: usize, _len: usize) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn populating_a_segment_leaves_its_bytes_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(5 * CHUNK_BYTES as u64 / 2).unwrap();
        let map = Arc::new(MmapRaw::map_raw(&file).unwrap());
        // SAFETY: the mapping is this test's own and outlives every access.
        unsafe { map.as_mut_ptr().add(100).write(7) };
        #[cfg(target_os = "linux")]
        populate(&map, 0, map.len()).expect("MADV_POPULATE_WRITE on this kernel");
        let prefaulter = Prefaulter::start();
        prefaulter.populate(&map, 0);
        drop(prefaulter);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 5 * CHUNK_BYTES / 2);
        assert_eq!(bytes[100], 7);
        assert_eq!(bytes.iter().filter(|&&b| b != 0).count(), 1);
    }
}
