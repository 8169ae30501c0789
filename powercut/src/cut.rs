//! The power cut: what happens to the dirty pages when the power goes.
//!
//! A plain cut ([`CutMode::Drop`]) loses every dirty page. A torn cut ([`CutMode::Torn`]) first
//! lets a random part of the cache reach the disk, as the pages of an interrupted flush would:
//! each dirty page persists with probability 1/2, and in each file one dirty page, chosen at
//! random, persists only a random prefix of its bytes (a torn page). The choice is drawn from
//! the caller's seeded generator, file by file in inode order and page by page in file order,
//! so the same seed and the same cache give the same outcome ([`plan_torn`]).

use std::collections::BTreeMap;
use std::io;

use rand::Rng;

use crate::overlay::{FileOverlay, PageSink, PAGE_SIZE};

/// How a cut treats the dirty pages.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum CutMode {
    /// Every dirty page is lost.
    Drop,
    /// A random subset of the dirty pages persists, one page per file only in part; the rest is
    /// lost.
    Torn,
}

/// What a cut did, in pages.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct CutReport {
    /// Dirty pages of which nothing reached the backing file.
    pub dropped: usize,
    /// Dirty pages of which some or all bytes reached the backing file (a torn page counts here
    /// when its prefix held written bytes).
    pub persisted: usize,
    /// Files whose chosen pages could not be written (they count as dropped).
    pub failed_files: usize,
}

/// One page a torn cut lets through: page `index`, its first `prefix` bytes.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct PagePlan {
    /// The page's index in the file (byte offset / `PAGE_SIZE`).
    pub index: u64,
    /// How many leading bytes of the page persist; `PAGE_SIZE` for the whole page.
    pub prefix: usize,
}

/// Chooses which pages of `file` a torn cut persists: each with probability 1/2, and one page,
/// chosen at random, only up to a random prefix of 1 to `PAGE_SIZE - 1` bytes.
pub fn plan_torn(file: &FileOverlay, rng: &mut impl Rng) -> Vec<PagePlan> {
    let indexes: Vec<u64> = file.pages().keys().copied().collect();
    if indexes.is_empty() {
        return Vec::new();
    }
    let torn = indexes[rng.gen_range(0..indexes.len())];
    let mut plan = Vec::new();
    for index in indexes {
        if index == torn {
            plan.push(PagePlan {
                index,
                prefix: rng.gen_range(1..PAGE_SIZE),
            });
        } else if rng.gen_bool(0.5) {
            plan.push(PagePlan {
                index,
                prefix: PAGE_SIZE,
            });
        }
    }
    plan
}

/// Cuts the power over `files` (every inode's dirty pages, taken out of the overlay): in
/// [`CutMode::Torn`], persists a random subset through the sink that `open` gives for an inode
/// (`None`: the file is gone, its pages are lost) and syncs it; everything else is dropped.
pub fn cut<S: PageSink>(
    files: BTreeMap<u64, FileOverlay>,
    mode: CutMode,
    rng: &mut impl Rng,
    mut open: impl FnMut(u64) -> Option<S>,
) -> CutReport {
    let mut report = CutReport::default();
    for (ino, file) in files {
        let pages = file.pages().len();
        if mode == CutMode::Drop {
            report.dropped += pages;
            continue;
        }
        let plan = plan_torn(&file, rng);
        let persisted = if plan.is_empty() {
            Ok(0)
        } else {
            match open(ino) {
                Some(mut sink) => persist_plan(&file, &plan, &mut sink),
                None => Err(io::ErrorKind::NotFound.into()),
            }
        };
        match persisted {
            Ok(count) => {
                report.persisted += count;
                report.dropped += pages - count;
            }
            Err(_) => {
                report.failed_files += 1;
                report.dropped += pages;
            }
        }
    }
    report
}

/// Writes the planned pages of `file` to `sink`, syncs it, and returns how many pages had bytes
/// written.
fn persist_plan(
    file: &FileOverlay,
    plan: &[PagePlan],
    sink: &mut impl PageSink,
) -> io::Result<usize> {
    let mut count = 0;
    for page in plan {
        if file.persist_page(sink, page.index, page.prefix)? {
            count += 1;
        }
    }
    sink.sync()?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overlay::Overlay;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn dirty(files: u64, pages: usize) -> Overlay {
        let mut overlay = Overlay::new();
        for ino in 1..=files {
            overlay.write(ino, 0, &vec![ino as u8; PAGE_SIZE * pages]);
        }
        overlay
    }

    fn torn_outcome(seed: u64) -> (CutReport, BTreeMap<u64, Vec<u8>>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let files = dirty(3, 16).take_all();
        let written = Rc::new(RefCell::new(BTreeMap::new()));
        let report = cut(files, CutMode::Torn, &mut rng, |ino| {
            Some(Recorder {
                ino,
                bytes: Vec::new(),
                out: Rc::clone(&written),
            })
        });
        let written = written.borrow().clone();
        (report, written)
    }

    /// A sink that hands its bytes back to the test when dropped.
    struct Recorder {
        ino: u64,
        bytes: Vec<u8>,
        out: Rc<RefCell<BTreeMap<u64, Vec<u8>>>>,
    }

    impl PageSink for Recorder {
        fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
            self.bytes.write_at(data, offset)
        }
    }

    impl Drop for Recorder {
        fn drop(&mut self) {
            let bytes = std::mem::take(&mut self.bytes);
            self.out.borrow_mut().insert(self.ino, bytes);
        }
    }

    #[test]
    fn a_plain_cut_drops_every_page() {
        let mut rng = StdRng::seed_from_u64(1);
        let files = dirty(2, 3).take_all();
        let report = cut(files, CutMode::Drop, &mut rng, |_| -> Option<Vec<u8>> {
            panic!("a plain cut writes nothing")
        });
        assert_eq!(
            report,
            CutReport {
                dropped: 6,
                persisted: 0,
                failed_files: 0
            }
        );
    }

    #[test]
    fn a_torn_cut_is_the_same_for_the_same_seed() {
        let (first, first_bytes) = torn_outcome(42);
        let (again, again_bytes) = torn_outcome(42);
        assert_eq!(first, again);
        assert_eq!(first_bytes, again_bytes);
        assert_eq!(first.dropped + first.persisted, 48);
        assert!(first.persisted > 0 && first.dropped > 0, "{first:?}");
        let differs = (0..8).any(|seed| torn_outcome(1000 + seed).1 != first_bytes);
        assert!(differs, "other seeds choose other pages");
    }

    #[test]
    fn a_torn_cut_tears_exactly_one_page_per_file() {
        let file = dirty(1, 32).take_all().remove(&1).expect("dirty");
        for seed in 0..20 {
            let plan = plan_torn(&file, &mut StdRng::seed_from_u64(seed));
            let torn: Vec<_> = plan.iter().filter(|p| p.prefix < PAGE_SIZE).collect();
            assert_eq!(torn.len(), 1, "{plan:?}");
            assert!(torn[0].prefix >= 1);
        }
    }

    #[test]
    fn persisted_bytes_are_whole_pages_but_one_torn_prefix() {
        let (_, written) = torn_outcome(7);
        for (ino, bytes) in written {
            let mut partial = 0;
            for page in bytes.chunks(PAGE_SIZE) {
                let set = page.iter().filter(|&&b| b == ino as u8).count();
                if set == 0 {
                    continue;
                }
                // Bytes of a persisted page are a prefix of it: written bytes, then nothing.
                assert!(page[..set].iter().all(|&b| b == ino as u8));
                if set < PAGE_SIZE {
                    partial += 1;
                }
            }
            assert!(partial <= 1, "file {ino}: {partial} torn pages");
        }
    }

    #[test]
    fn pages_of_a_file_that_cannot_be_opened_are_dropped() {
        let mut rng = StdRng::seed_from_u64(3);
        let files = dirty(1, 4).take_all();
        let report = cut(files, CutMode::Torn, &mut rng, |_| -> Option<Vec<u8>> {
            None
        });
        assert_eq!(report.persisted, 0);
        assert_eq!(report.dropped, 4);
        assert_eq!(report.failed_files, 1);
    }
}
