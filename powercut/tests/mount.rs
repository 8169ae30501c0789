//! Mounts `ladder-powercut` for real and cuts the power under files written with write(2) and
//! through a shared mapping, synced and not.
//!
//! Skipped (with a note on stderr) only where FUSE cannot be used at all: no `/dev/fuse` or no
//! `fusermount3`. The mapping is written by a child process (this test binary run again with
//! `POWERCUT_MMAP_HELPER` set) that is killed with SIGKILL, as the test harness kills the
//! service: the kernel hands its dirty mapped pages to the filesystem as WRITEs when the
//! mappings close, and the cut must then lose them unless they were msynced.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

const PAGE: usize = 4096;
const HELPER_ENV: &str = "POWERCUT_MMAP_HELPER";
const BINARY: &str = env!("CARGO_BIN_EXE_ladder-powercut");

use ladder_powercut::harness::{fuse_or_skip, lines, signal, wait_line, Mounted};

/// A child process killed (and reaped) when the test ends, passed or not.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn read(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    bytes
}

/// The child side of the mmap case: maps the file named by `POWERCUT_MMAP_HELPER` (4 pages)
/// shared, fills page 0 with `S` and msyncs it, fills page 2 with `U` without msync, says
/// `ready` and waits to be killed. Does nothing in a normal test run.
#[test]
fn mmap_helper() {
    let Some(path) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open the mapped file");
    let len = 4 * PAGE;
    // SAFETY: a fresh shared mapping of an open file of at least `len` bytes.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(
        map,
        libc::MAP_FAILED,
        "mmap: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: the mapping is `len` bytes long, readable and writable, and only used here.
    let bytes = unsafe { std::slice::from_raw_parts_mut(map.cast::<u8>(), len) };
    bytes[..PAGE].fill(b'S');
    // SAFETY: the range is the start of the mapping.
    let synced = unsafe { libc::msync(map, PAGE, libc::MS_SYNC) };
    assert_eq!(synced, 0, "msync: {}", std::io::Error::last_os_error());
    bytes[2 * PAGE..3 * PAGE].fill(b'U');
    // After libtest's "test mmap_helper ... " on the same line.
    println!("ready");
    std::io::stdout().flush().expect("flush");
    thread::sleep(Duration::from_secs(120));
}

#[test]
fn a_cut_keeps_synced_data_and_loses_the_rest() {
    if !fuse_or_skip("mount") {
        return;
    }
    let fs = Mounted::start(BINARY.as_ref(), &["--seed", "1"]);
    fs::write(fs.on_backing("old.dat"), vec![b'o'; PAGE]).expect("seed a backing file");

    // write(2) + fsync, then more without fsync.
    let synced = vec![b's'; 3 * PAGE + 100];
    {
        let mut file = File::create(fs.on_mount("synced.dat")).expect("create");
        file.write_all(&synced).expect("write");
        file.sync_all().expect("fsync");
        file.write_all(b"tail that is never synced")
            .expect("write tail");
    }
    // write(2) and close: a close is not a sync.
    fs::write(fs.on_mount("unsynced.dat"), vec![b'u'; 2 * PAGE]).expect("write unsynced");
    // Overwrite part of an existing file, unsynced.
    OpenOptions::new()
        .write(true)
        .open(fs.on_mount("old.dat"))
        .and_then(|file| file.write_all_at(b"NEW", 10))
        .expect("overwrite");
    // Written under a temporary name, renamed, then synced under the new name.
    fs::write(fs.on_mount("renamed.tmp"), b"renamed then synced").expect("write tmp");
    fs::rename(fs.on_mount("renamed.tmp"), fs.on_mount("renamed.dat")).expect("rename");
    File::open(fs.on_mount("renamed.dat"))
        .and_then(|file| file.sync_data())
        .expect("fdatasync");

    // Before the cut the mount shows every write; the backing only what was synced.
    assert_eq!(read(&fs.on_mount("unsynced.dat")), vec![b'u'; 2 * PAGE]);
    assert_eq!(
        fs::metadata(fs.on_backing("unsynced.dat"))
            .expect("stat")
            .len(),
        0
    );
    assert_eq!(&read(&fs.on_mount("old.dat"))[8..15], b"ooNEWoo");
    assert_eq!(read(&fs.on_backing("old.dat")), vec![b'o'; PAGE]);
    assert_eq!(read(&fs.on_backing("synced.dat")), synced);
    assert_eq!(read(&fs.on_backing("renamed.dat")), b"renamed then synced");

    // A shared mapping written by a process that is then killed.
    let mapped = fs.on_mount("mapped.dat");
    File::create(&mapped)
        .and_then(|file| file.set_len(4 * PAGE as u64))
        .expect("create the mapped file");
    let mut writer = KillOnDrop(
        Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", "mmap_helper", "--nocapture", "--test-threads=1"])
            .env(HELPER_ENV, &mapped)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the mmap writer"),
    );
    let writer_lines = lines(writer.0.stdout.take().expect("stdout"));
    wait_line(&writer_lines, "ready");
    signal(&writer.0, libc::SIGKILL);
    writer.0.wait().expect("reap the writer");

    // The msynced page is on the backing; the other one is not.
    let backing_map = read(&fs.on_backing("mapped.dat"));
    assert!(backing_map[..PAGE].iter().all(|&b| b == b'S'));
    assert!(backing_map[2 * PAGE..3 * PAGE].iter().all(|&b| b == 0));

    // Cut before anything touches mapped.dat through the mount again (an open would make the
    // kernel write back dirty cached pages): the dirty pages are synced.dat's tail page,
    // unsynced.dat's 2 pages, old.dat's page, and mapped.dat's page 2, which the kernel must
    // have sent as a WRITE by the time the killed writer was reaped.
    let (dropped, persisted) = fs.cut(libc::SIGUSR1);
    assert_eq!(
        (dropped, persisted),
        (5, 0),
        "4 pages written with write(2) and the killed writer's mapped page"
    );

    // After the cut, through the mount (reopened) and on the backing alike.
    for root in [fs.mount(), fs.backing()] {
        assert_eq!(read(&root.join("synced.dat")), synced);
        assert_eq!(
            read(&root.join("unsynced.dat")),
            b"",
            "created (metadata) but empty"
        );
        assert_eq!(read(&root.join("old.dat")), vec![b'o'; PAGE]);
        assert_eq!(read(&root.join("renamed.dat")), b"renamed then synced");
        assert!(!root.join("renamed.tmp").exists());
        let map = read(&root.join("mapped.dat"));
        assert_eq!(map.len(), 4 * PAGE);
        assert!(map[..PAGE].iter().all(|&b| b == b'S'));
        assert!(map[PAGE..].iter().all(|&b| b == 0));
    }

    // The mount keeps serving after a cut, and a second cut has nothing left to drop.
    fs::write(fs.on_mount("after.dat"), b"x").expect("write after the cut");
    assert_eq!(read(&fs.on_mount("after.dat")), b"x");
    assert_eq!(fs.cut(libc::SIGUSR1), (1, 0));
    assert_eq!(fs.cut(libc::SIGUSR1), (0, 0));
}

#[test]
fn a_torn_cut_persists_whole_pages_and_one_torn_prefix() {
    if !fuse_or_skip("mount") {
        return;
    }
    let fs = Mounted::start(BINARY.as_ref(), &["--seed", "42"]);
    let pages = 32;
    fs::write(fs.on_mount("torn.dat"), vec![b't'; pages * PAGE]).expect("write");
    fs::write(fs.on_mount("small.dat"), b"one page").expect("write");
    let (dropped, persisted) = fs.cut(libc::SIGUSR2);
    assert_eq!(dropped + persisted, pages + 1);
    assert!(
        persisted > 0 && dropped > 0,
        "{dropped} dropped, {persisted} persisted"
    );

    let survived = read(&fs.on_mount("torn.dat"));
    assert_eq!(survived, read(&fs.on_backing("torn.dat")));
    let mut whole = 0;
    let mut torn = 0;
    for page in survived.chunks(PAGE) {
        let written = page.iter().take_while(|&&b| b == b't').count();
        assert!(
            page[written..].iter().all(|&b| b == 0),
            "bytes after a prefix"
        );
        match written {
            0 => {}
            PAGE => whole += 1,
            _ => torn += 1,
        }
    }
    assert!(torn <= 1, "{torn} torn pages");
    assert!(whole > 0, "no whole page persisted of {pages}");
    // small.dat's single dirty page is the torn one of its file: a prefix of it, maybe empty.
    let small = read(&fs.on_mount("small.dat"));
    assert!(b"one page".starts_with(&small), "{small:?}");
}
