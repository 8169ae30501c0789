//! The volatile write cache: dirty 4 KiB pages per inode that have not reached the backing file.
//!
//! A FUSE WRITE lands here and nowhere else. Each dirty page keeps the bytes that were written
//! and the byte ranges they cover, so a page written in part merges with the backing content on
//! a read ([`Overlay::read_into`]) and only the written bytes are ever persisted
//! ([`FileOverlay::persist`]). The logical size of a file is the larger of the backing file's size
//! and the end of its furthest dirty byte ([`Overlay::logical_size`]): writes past the backing
//! file's end grow the file as seen through the mount, and a truncate cuts the overlay too.
//!
//! This module knows nothing of FUSE or of paths: backing files are reached through
//! [`PageSink`], so it is tested on plain byte vectors.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The page size of the simulated cache, in bytes.
pub const PAGE_SIZE: usize = 4096;

/// Somewhere persisted bytes go: a backing file, or a byte vector in tests.
pub trait PageSink {
    /// Writes all of `data` at byte `offset`, growing the target if needed.
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()>;

    /// Makes what was written durable (a backing file's `fdatasync`); nothing by default.
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl PageSink for File {
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_at(data, offset)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }
}

impl PageSink for Arc<File> {
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_at(data, offset)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }
}

impl PageSink for Vec<u8> {
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let end = start + data.len();
        if self.len() < end {
            self.resize(end, 0);
        }
        self[start..end].copy_from_slice(data);
        Ok(())
    }
}

/// One dirty page: its bytes and the sorted, disjoint, coalesced ranges of it that were written.
#[derive(Clone, Debug)]
pub struct Page {
    data: Box<[u8; PAGE_SIZE]>,
    written: Vec<Range<usize>>,
}

impl Page {
    fn new() -> Self {
        Page {
            data: Box::new([0; PAGE_SIZE]),
            written: Vec::new(),
        }
    }

    /// Copies `bytes` into the page at `start` and records the range as written.
    fn write(&mut self, start: usize, bytes: &[u8]) {
        let end = start + bytes.len();
        self.data[start..end].copy_from_slice(bytes);
        self.mark(start..end);
    }

    fn mark(&mut self, range: Range<usize>) {
        let mut merged = range;
        let mut kept = Vec::with_capacity(self.written.len() + 1);
        for existing in self.written.drain(..) {
            if existing.end < merged.start || existing.start > merged.end {
                kept.push(existing);
            } else {
                merged = merged.start.min(existing.start)..merged.end.max(existing.end);
            }
        }
        kept.push(merged);
        kept.sort_by_key(|r| r.start);
        self.written = kept;
    }

    /// Forgets every written byte at or after `len` (a truncate inside this page).
    fn cut(&mut self, len: usize) {
        self.written.retain(|r| r.start < len);
        if let Some(last) = self.written.last_mut() {
            last.end = last.end.min(len);
        }
        self.data[len..].fill(0);
    }

    /// The written ranges of this page, within the page.
    pub fn written(&self) -> &[Range<usize>] {
        &self.written
    }

    /// The number of written bytes in this page.
    pub fn written_bytes(&self) -> usize {
        self.written.iter().map(|r| r.len()).sum()
    }

    fn is_empty(&self) -> bool {
        self.written.is_empty()
    }
}

/// The dirty pages of one inode, by page index, and the end of its furthest written byte.
#[derive(Clone, Debug, Default)]
pub struct FileOverlay {
    pages: BTreeMap<u64, Page>,
    end: u64,
}

impl FileOverlay {
    /// The dirty pages, by page index, in file order.
    pub fn pages(&self) -> &BTreeMap<u64, Page> {
        &self.pages
    }

    /// The byte just past the furthest written byte.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Writes every dirty byte to `sink` at its file offset.
    pub fn persist(&self, sink: &mut impl PageSink) -> io::Result<()> {
        for &index in self.pages.keys() {
            self.persist_page(sink, index, PAGE_SIZE)?;
        }
        Ok(())
    }

    /// Writes the dirty bytes of page `index` that lie in its first `prefix` bytes to `sink`
    /// (`PAGE_SIZE` for the whole page; less models a torn page). Returns whether anything was
    /// written.
    pub fn persist_page(
        &self,
        sink: &mut impl PageSink,
        index: u64,
        prefix: usize,
    ) -> io::Result<bool> {
        let Some(page) = self.pages.get(&index) else {
            return Ok(false);
        };
        let base = index * PAGE_SIZE as u64;
        let mut any = false;
        for range in &page.written {
            let end = range.end.min(prefix);
            if range.start >= end {
                continue;
            }
            sink.write_at(&page.data[range.start..end], base + range.start as u64)?;
            any = true;
        }
        Ok(any)
    }
}

/// The dirty pages of every inode, by inode number.
#[derive(Debug, Default)]
pub struct Overlay {
    files: BTreeMap<u64, FileOverlay>,
}

impl Overlay {
    /// An empty overlay: nothing dirty.
    pub fn new() -> Self {
        Overlay::default()
    }

    /// Records a write of `data` at byte `offset` of inode `ino`.
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let file = self.files.entry(ino).or_default();
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let index = at / PAGE_SIZE as u64;
            let start = (at % PAGE_SIZE as u64) as usize;
            let take = (PAGE_SIZE - start).min(data.len() - done);
            file.pages
                .entry(index)
                .or_insert_with(Page::new)
                .write(start, &data[done..done + take]);
            done += take;
        }
        file.end = file.end.max(offset + data.len() as u64);
    }

    /// Lays the dirty bytes of inode `ino` that fall in `[offset, offset + buf.len())` over
    /// `buf`, which the caller filled with the backing file's bytes (zeros past its end).
    pub fn read_into(&self, ino: u64, offset: u64, buf: &mut [u8]) {
        let Some(file) = self.files.get(&ino) else {
            return;
        };
        if buf.is_empty() {
            return;
        }
        let last = offset + buf.len() as u64;
        let first_page = offset / PAGE_SIZE as u64;
        let last_page = (last - 1) / PAGE_SIZE as u64;
        for (&index, page) in file.pages.range(first_page..=last_page) {
            let base = index * PAGE_SIZE as u64;
            for range in &page.written {
                let from = (base + range.start as u64).max(offset);
                let to = (base + range.end as u64).min(last);
                if from >= to {
                    continue;
                }
                let src = (from - base) as usize..(to - base) as usize;
                let dst = (from - offset) as usize..(to - offset) as usize;
                buf[dst].copy_from_slice(&page.data[src]);
            }
        }
    }

    /// The size of inode `ino` as seen through the mount, given its backing file's size.
    pub fn logical_size(&self, ino: u64, backing_size: u64) -> u64 {
        self.files
            .get(&ino)
            .map_or(backing_size, |file| file.end.max(backing_size))
    }

    /// Cuts inode `ino`'s dirty bytes at `size` (the file was truncated to `size`).
    pub fn truncate(&mut self, ino: u64, size: u64) {
        let Some(file) = self.files.get_mut(&ino) else {
            return;
        };
        let keep_pages = size.div_ceil(PAGE_SIZE as u64);
        file.pages.split_off(&keep_pages);
        let partial = (size % PAGE_SIZE as u64) as usize;
        if partial != 0 {
            if let Some(page) = file.pages.get_mut(&(size / PAGE_SIZE as u64)) {
                page.cut(partial);
            }
        }
        file.pages.retain(|_, page| !page.is_empty());
        file.end = file.end.min(size);
        if file.pages.is_empty() {
            self.files.remove(&ino);
        }
    }

    /// Removes and returns inode `ino`'s dirty pages (to persist them, or to drop them).
    pub fn take(&mut self, ino: u64) -> Option<FileOverlay> {
        self.files.remove(&ino)
    }

    /// Puts back dirty pages taken with [`Overlay::take`] that could not be persisted. Writes
    /// made since the take win over the restored bytes.
    pub fn restore(&mut self, ino: u64, file: FileOverlay) {
        match self.files.remove(&ino) {
            None => {
                self.files.insert(ino, file);
            }
            Some(newer) => {
                self.files.insert(ino, file);
                for (index, page) in newer.pages {
                    let base = index * PAGE_SIZE as u64;
                    for range in &page.written {
                        self.write(ino, base + range.start as u64, &page.data[range.clone()]);
                    }
                }
            }
        }
    }

    /// Removes and returns every inode's dirty pages, by inode number.
    pub fn take_all(&mut self) -> BTreeMap<u64, FileOverlay> {
        std::mem::take(&mut self.files)
    }

    /// The number of dirty pages of inode `ino`.
    pub fn dirty_pages_of(&self, ino: u64) -> usize {
        self.files.get(&ino).map_or(0, |file| file.pages.len())
    }

    /// The number of dirty pages over all inodes.
    pub fn dirty_pages(&self) -> usize {
        self.files.values().map(|file| file.pages.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INO: u64 = 7;

    /// What a read through the mount returns: backing bytes, zeros past them, dirty bytes on top.
    fn read(overlay: &Overlay, backing: &[u8], offset: u64, len: usize) -> Vec<u8> {
        let size = overlay.logical_size(INO, backing.len() as u64);
        let len = len.min(size.saturating_sub(offset) as usize);
        let mut buf = vec![0u8; len];
        let start = (offset as usize).min(backing.len());
        let end = (offset as usize + len).min(backing.len());
        buf[..end - start].copy_from_slice(&backing[start..end]);
        overlay.read_into(INO, offset, &mut buf);
        buf
    }

    #[test]
    fn a_partial_write_merges_with_the_backing_page() {
        let backing = vec![b'b'; PAGE_SIZE * 2];
        let mut overlay = Overlay::new();
        overlay.write(INO, 10, b"xyz");
        overlay.write(INO, 20, b"uv");
        let got = read(&overlay, &backing, 0, PAGE_SIZE * 2);
        let mut want = backing.clone();
        want[10..13].copy_from_slice(b"xyz");
        want[20..22].copy_from_slice(b"uv");
        assert_eq!(got, want);
        assert_eq!(overlay.dirty_pages(), 1);
        // A read that starts inside a written range sees only its tail.
        assert_eq!(read(&overlay, &backing, 11, 4), b"yzbb");
    }

    #[test]
    fn a_write_across_pages_dirties_each_page_it_touches() {
        let mut overlay = Overlay::new();
        let data = vec![b'w'; PAGE_SIZE + 2];
        overlay.write(INO, PAGE_SIZE as u64 - 1, &data);
        assert_eq!(overlay.dirty_pages_of(INO), 3);
        let got = read(&overlay, &[], 0, PAGE_SIZE * 3);
        assert_eq!(got.len(), PAGE_SIZE * 2 + 1);
        assert!(got[..PAGE_SIZE - 1].iter().all(|&b| b == 0));
        assert!(got[PAGE_SIZE - 1..].iter().all(|&b| b == b'w'));
    }

    #[test]
    fn overlapping_writes_coalesce_and_the_last_one_wins() {
        let mut overlay = Overlay::new();
        overlay.write(INO, 0, b"aaaa");
        overlay.write(INO, 6, b"cc");
        overlay.write(INO, 2, b"bbbbb");
        let file = overlay.take(INO).expect("dirty");
        let page = &file.pages()[&0];
        assert_eq!(page.written().len(), 1);
        assert_eq!(page.written()[0], 0..8);
        assert_eq!(page.written_bytes(), 8);
        let mut sink = Vec::new();
        file.persist(&mut sink).expect("persist");
        assert_eq!(sink, b"aabbbbbc");
    }

    #[test]
    fn the_logical_size_counts_writes_past_the_backing_end() {
        let mut overlay = Overlay::new();
        assert_eq!(overlay.logical_size(INO, 100), 100);
        overlay.write(INO, 50, b"12345");
        assert_eq!(overlay.logical_size(INO, 100), 100);
        overlay.write(INO, 10_000, b"z");
        assert_eq!(overlay.logical_size(INO, 100), 10_001);
        assert_eq!(overlay.logical_size(INO + 1, 3), 3);
        let got = read(&overlay, &[b'b'; 100], 0, 20_000);
        assert_eq!(got.len(), 10_001);
        assert_eq!(&got[50..55], b"12345");
        assert!(got[100..10_000].iter().all(|&b| b == 0));
        assert_eq!(got[10_000], b'z');
    }

    #[test]
    fn truncate_cuts_dirty_pages_and_the_logical_size() {
        let mut overlay = Overlay::new();
        overlay.write(INO, 0, &vec![b'a'; PAGE_SIZE * 3]);
        overlay.truncate(INO, PAGE_SIZE as u64 + 100);
        assert_eq!(overlay.dirty_pages_of(INO), 2);
        assert_eq!(overlay.logical_size(INO, 0), PAGE_SIZE as u64 + 100);
        // Growing again reads zeros where the cut bytes were, not the old bytes.
        overlay.write(INO, PAGE_SIZE as u64 + 200, b"z");
        let got = read(&overlay, &[], PAGE_SIZE as u64, PAGE_SIZE);
        assert!(got[..100].iter().all(|&b| b == b'a'));
        assert!(got[100..200].iter().all(|&b| b == 0));
        assert_eq!(got[200], b'z');
        overlay.truncate(INO, 0);
        assert_eq!(overlay.dirty_pages(), 0);
        assert_eq!(overlay.logical_size(INO, 0), 0);
    }

    #[test]
    fn truncate_at_a_page_boundary_keeps_the_pages_before_it() {
        let mut overlay = Overlay::new();
        overlay.write(INO, 0, &vec![b'a'; PAGE_SIZE * 2]);
        overlay.truncate(INO, PAGE_SIZE as u64);
        assert_eq!(overlay.dirty_pages_of(INO), 1);
        assert_eq!(overlay.logical_size(INO, 0), PAGE_SIZE as u64);
    }

    #[test]
    fn persist_writes_exactly_the_dirty_bytes_over_the_backing() {
        let mut backing = vec![b'b'; 10];
        let mut overlay = Overlay::new();
        overlay.write(INO, 2, b"xx");
        overlay.write(INO, PAGE_SIZE as u64 + 1, b"yy");
        let seen = read(&overlay, &backing, 0, PAGE_SIZE * 2);
        let file = overlay.take(INO).expect("dirty");
        file.persist(&mut backing).expect("persist");
        assert_eq!(overlay.dirty_pages(), 0);
        assert_eq!(backing, seen);
        assert_eq!(read(&overlay, &backing, 0, PAGE_SIZE * 2), seen);
    }

    #[test]
    fn a_torn_page_persists_only_its_prefix() {
        let mut overlay = Overlay::new();
        overlay.write(INO, 0, &[b'a'; 100]);
        let file = overlay.take(INO).expect("dirty");
        let mut sink = Vec::new();
        assert!(file.persist_page(&mut sink, 0, 40).expect("persist"));
        assert_eq!(sink, vec![b'a'; 40]);
        let mut none = Vec::new();
        assert!(!file.persist_page(&mut none, 0, 0).expect("persist"));
        assert!(none.is_empty());
    }

    #[test]
    fn discarding_drops_everything_unsynced() {
        let backing = vec![b'b'; 8];
        let mut overlay = Overlay::new();
        overlay.write(INO, 0, b"new");
        overlay.write(INO + 1, 0, b"other");
        assert_eq!(overlay.dirty_pages(), 2);
        let dropped = overlay.take_all();
        assert_eq!(dropped.len(), 2);
        assert_eq!(overlay.dirty_pages(), 0);
        assert_eq!(read(&overlay, &backing, 0, 8), backing);
    }
}
