//! Mapped journal pages let go behind a writer or a reader that moves on.
//!
//! A segment is mapped whole (64 MiB by default), and every page the writer or a reader has
//! touched stays in the process's resident set (`RssFile`) until the segment is unmapped:
//! up to a segment per mapping, which made resident memory swing by a hundred MB with where
//! the writer, the historian and the standbys' feeds stood in their segments (measured by
//! `ladder bench soak`). Behind the position, the pages are dropped from the mapping
//! (`MADV_DONTNEED`) a chunk at a time. The mappings are shared and file-backed: the bytes stay
//! in the page cache (written back as usual, and synced by `msync` of their range all the
//! same), and a later access maps them again with the same content.

use memmap2::{MmapRaw, UncheckedAdvice};

/// Bytes kept mapped behind the position; also the step by which pages are let go.
pub(crate) const KEPT_BEHIND_BYTES: usize = 8 << 20;

/// The part of a mapping already let go.
#[derive(Debug, Default)]
pub(crate) struct Released {
    /// Pages before this offset are let go.
    until: usize,
}

impl Released {
    /// Lets go of the pages of `map` more than [`KEPT_BEHIND_BYTES`] behind `position`, a
    /// chunk at a time. Best effort: where the advice fails, the pages stay.
    pub fn behind(&mut self, map: &MmapRaw, position: usize) {
        let Some(target) = position.checked_sub(KEPT_BEHIND_BYTES) else {
            return;
        };
        let target = page_floor(target.min(map.len()));
        if target < self.until + KEPT_BEHIND_BYTES {
            return;
        }
        // SAFETY: MADV_DONTNEED on a shared, file-backed mapping only unmaps the pages: their
        // content stays in the page cache (dirty pages included) and reading or writing them
        // again maps the same bytes back, so no reference into the mapping sees a change. The
        // range is inside the mapping (`target` is at most its length).
        let advised = unsafe {
            map.unchecked_advise_range(UncheckedAdvice::DontNeed, self.until, target - self.until)
        };
        if advised.is_ok() {
            self.until = target;
        }
    }
}

/// `offset` rounded down to a page boundary (the advice needs an aligned start).
fn page_floor(offset: usize) -> usize {
    // SAFETY: sysconf reads a configuration value and has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page).unwrap_or(4096).max(1);
    offset - offset % page
}
