//! Driving `ladder-powercut` from a test: mount it over a temporary backing directory, cut the
//! power, and unmount whatever happens (a guard that detaches the mount on drop). Shared by
//! this crate's mount test and the service's power-loss test.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// The signal of a plain cut: every unsynced page is lost.
pub const PLAIN_CUT: libc::c_int = libc::SIGUSR1;
/// The signal of a torn cut: a random subset of the unsynced pages reaches the disk first, one
/// page per file torn.
pub const TORN_CUT: libc::c_int = libc::SIGUSR2;

/// How long a line from `ladder-powercut` may take.
const LINE_WAIT: Duration = Duration::from_secs(30);
/// Set to `1` (as CI does), a missing FUSE fails the tests instead of skipping them.
pub const REQUIRE_FUSE_ENV: &str = "LADDER_REQUIRE_FUSE";

/// Why FUSE cannot be used here (`None`: it can): no `/dev/fuse`, or no `fusermount3`
/// (Debian package `fuse3`).
pub fn fuse_unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    let helper = Command::new("fusermount3")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if helper.is_err() {
        return Some("fusermount3 is missing (Debian package fuse3)".into());
    }
    None
}

/// Whether a test that needs FUSE can run: `false` (with a note on stderr) where FUSE cannot
/// be used, unless [`REQUIRE_FUSE_ENV`] is `1`, when that is a failure.
pub fn fuse_or_skip(test: &str) -> bool {
    let Some(why) = fuse_unavailable() else {
        return true;
    };
    if std::env::var(REQUIRE_FUSE_ENV).as_deref() == Ok("1") {
        panic!("{test}: {why}, and {REQUIRE_FUSE_ENV}=1 requires FUSE");
    }
    eprintln!("{test}: skipped: {why}");
    false
}

/// Lines of a child's stdout, read by a thread.
pub fn lines(stdout: ChildStdout) -> Receiver<String> {
    let (send, receive) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Waits for a line holding `marker` and returns it from the marker on.
pub fn wait_line(lines: &Receiver<String>, marker: &str) -> String {
    let deadline = Instant::now() + LINE_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if let Some(at) = line.find(marker) {
                    return line[at..].to_string();
                }
            }
            Err(error) => panic!("no line with {marker:?}: {error}"),
        }
    }
}

/// Sends `signal` to `child`.
pub fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: kill has no memory preconditions.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill");
}

/// A mounted `ladder-powercut` over a temporary backing directory; unmounted on drop, whatever
/// happened.
pub struct Mounted {
    child: Child,
    lines: Receiver<String>,
    backing: PathBuf,
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mounted {
    /// Mounts the `ladder-powercut` binary at `binary` with `extra` arguments and waits until
    /// the mount can be used.
    pub fn start(binary: &Path, extra: &[&str]) -> Mounted {
        let dir = tempfile::tempdir().expect("tempdir");
        let backing = dir.path().join("backing");
        let mount = dir.path().join("mount");
        fs::create_dir(&backing).expect("backing");
        fs::create_dir(&mount).expect("mount point");
        let mut child = Command::new(binary)
            .arg("--backing")
            .arg(&backing)
            .arg("--mount")
            .arg(&mount)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let lines = lines(child.stdout.take().expect("stdout"));
        let mounted = Mounted {
            child,
            lines,
            backing,
            mount,
            _dir: dir,
        };
        wait_line(&mounted.lines, "powercut: mounted ");
        mounted
    }

    /// The mount point.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// The backing directory (what the disk holds).
    pub fn backing(&self) -> &Path {
        &self.backing
    }

    /// `name` on the mount.
    pub fn on_mount(&self, name: &str) -> PathBuf {
        self.mount.join(name)
    }

    /// `name` in the backing directory.
    pub fn on_backing(&self, name: &str) -> PathBuf {
        self.backing.join(name)
    }

    /// Cuts the power with `sig` ([`PLAIN_CUT`] or [`TORN_CUT`]) and returns
    /// the `(dropped, persisted)` pages of the cut.
    pub fn cut(&self, sig: libc::c_int) -> (usize, usize) {
        signal(&self.child, sig);
        let line = wait_line(&self.lines, "powercut: cut ");
        let words: Vec<&str> = line.split_whitespace().collect();
        // powercut: cut <n> dirty pages dropped, <m> persisted
        let dropped = words[2].parse().expect("dropped count");
        let persisted = words[6].parse().expect("persisted count");
        (dropped, persisted)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // A clean stop unmounts; if it does not come in time, detach and kill.
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("fusermount3")
            .args(["-u", "-z", "-q", "--"])
            .arg(&self.mount)
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
