//! A full disk, for real: the journal on a small tmpfs (mounted by the test, which needs
//! root; skipped with a message otherwise). Segments are allocated ahead, so an append never
//! meets the full disk through its mapping (that would be SIGBUS): the journal refuses ahead,
//! ordinary writes first, cancels when the reserve is spent, and admits writes again once
//! space returns.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ladder_journal::{Journal, JournalOptions, JournalReader, WriteClass};

/// A tmpfs of `size_kib` KiB mounted on a fresh directory, unmounted on drop.
struct SmallDisk {
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size_kib: u64) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let mount = dir.path().join("disk");
        std::fs::create_dir(&mount).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kib}k"), "tmpfs"])
            .arg(&mount)
            .output()
            .ok()?;
        if !mounted.status.success() {
            eprintln!(
                "skipped: cannot mount a tmpfs here ({}); the full-disk tests need root",
                String::from_utf8_lossy(&mounted.stderr).trim()
            );
            return None;
        }
        Some(SmallDisk { mount, _dir: dir })
    }

    fn path(&self) -> &Path {
        &self.mount
    }

    /// Fills what is left with a file; returns its path (remove it to free the space).
    fn fill(&self) -> PathBuf {
        let filler = self.mount.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5u8; 64 << 10];
        while std::io::Write::write_all(&mut file, &chunk).is_ok() {}
        let _ = std::io::Write::write_all(&mut file, &[0xa5]);
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}

const SEGMENT_BYTES: u64 = 256 << 10;
const PAYLOAD: [u8; 200] = [7; 200];
/// A frame of PAYLOAD with its header, rounded up (what `admits` is asked for).
const FRAME_BYTES: usize = 256;

fn append(journal: &mut Journal) {
    let seq = journal.last_seq() + 1;
    journal.append(seq, seq, 1, &PAYLOAD).unwrap();
}

#[test]
fn a_full_disk_refuses_ordinary_writes_ahead_keeps_cancels_and_resumes_by_itself() {
    let Some(disk) = SmallDisk::mount(1024) else {
        return;
    };
    let data_dir = disk.path().join("data");
    let options = JournalOptions {
        segment_size_bytes: SEGMENT_BYTES,
    };
    let (mut journal, _) = Journal::open(&data_dir, options).unwrap();
    assert!(journal.admits(FRAME_BYTES, WriteClass::Ordinary));
    append(&mut journal);
    let filler = disk.fill();

    // Ordinary writes go on until only the cancel reserve is left in the segment and no
    // next segment can be reserved; nothing faults.
    let mut ordinary = 0u64;
    while journal.admits(FRAME_BYTES, WriteClass::Ordinary) {
        append(&mut journal);
        ordinary += 1;
        assert!(ordinary < 100_000, "never refused");
    }
    assert!(journal.is_full());
    journal.commit(ladder_journal::Durability::Sync).unwrap();
    // Cancels use the reserve, to the last byte of the segment.
    let mut reserved = 0u64;
    while journal.admits(FRAME_BYTES, WriteClass::Reserved) {
        append(&mut journal);
        reserved += 1;
    }
    let reserve_frames = journal.cancel_reserve_bytes() / FRAME_BYTES;
    assert!(
        reserved + 1 >= reserve_frames as u64,
        "{reserved} cancels from a reserve of {reserve_frames} frames"
    );
    journal.commit(ladder_journal::Durability::Sync).unwrap();
    let last = journal.last_seq();

    // Space returns: within a second, writes are admitted again and roll over.
    std::fs::remove_file(filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !journal.admits(FRAME_BYTES, WriteClass::Ordinary) {
        journal.retry_space();
        assert!(Instant::now() < deadline, "writes did not resume");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!journal.is_full());
    append(&mut journal);
    journal.commit(ladder_journal::Durability::Sync).unwrap();
    drop(journal);

    // Everything written is there, in order.
    let mut reader = JournalReader::open(&data_dir).unwrap();
    let mut seen = 0;
    while let Some(record) = reader.poll().unwrap() {
        seen += 1;
        assert_eq!(record.seq, seen);
    }
    assert_eq!(seen, last + 1);
}

#[test]
fn a_journal_opened_on_a_full_disk_recovers_and_refuses() {
    let Some(disk) = SmallDisk::mount(1024) else {
        return;
    };
    let data_dir = disk.path().join("data");
    let options = JournalOptions {
        segment_size_bytes: SEGMENT_BYTES,
    };
    let (mut journal, _) = Journal::open(&data_dir, options).unwrap();
    for _ in 0..100 {
        append(&mut journal);
    }
    journal.commit(ladder_journal::Durability::Sync).unwrap();
    drop(journal);
    let filler = disk.fill();
    let (mut journal, _) = Journal::open(&data_dir, options).unwrap();
    assert_eq!(journal.last_seq(), 100);
    // The open segment has room: ordinary writes go on until the reserve.
    while journal.admits(FRAME_BYTES, WriteClass::Ordinary) {
        append(&mut journal);
    }
    assert!(journal.is_full());
    assert!(ladder_journal::verify(&data_dir).is_ok());
    std::fs::remove_file(filler).unwrap();
}
