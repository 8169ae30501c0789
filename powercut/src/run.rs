//! Mounting and the signal loop: what the `ladder-powercut` binary does once its arguments are
//! parsed.
//!
//! The filesystem is mounted in a background `fuser` session; this thread then waits for
//! signals. SIGUSR1 cuts the power (torn if `--torn`), SIGUSR2 always cuts torn; each cut prints
//! `powercut: cut <n> dirty pages dropped, <m> persisted` on stdout and serving goes on.
//! SIGINT or SIGTERM unmounts: a clean shutdown, so the dirty pages are written back first, as a
//! kernel syncs on unmount. If the mount goes away by itself (`fusermount3 -u`), the loop ends.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::Duration;

use fuser::{Config, MountOption, SessionACL};
use rand::rngs::StdRng;
use rand::SeedableRng;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;

use crate::cut::CutMode;
use crate::fs::{Control, PowercutFs};

/// How often the signal loop looks for signals and for a mount that went away.
const POLL: Duration = Duration::from_millis(10);

/// What to mount and how to cut.
#[derive(Clone, Debug)]
pub struct Options {
    /// The directory whose files the mount shows: the simulated disk.
    pub backing: PathBuf,
    /// Where to mount.
    pub mount: PathBuf,
    /// The seed of the torn cuts' choices; `None` draws one (printed on stderr).
    pub seed: Option<u64>,
    /// Whether SIGUSR1 cuts torn, as SIGUSR2 does.
    pub torn: bool,
}

/// Mounts, serves until SIGINT/SIGTERM or an outside unmount, and unmounts.
pub fn run(options: &Options) -> io::Result<()> {
    // Modes from the kernel are already masked by the caller's umask; apply them as they are.
    // SAFETY: umask only sets this process's file mode creation mask.
    unsafe { libc::umask(0) };
    let seed = options.seed.unwrap_or_else(rand::random);
    eprintln!("powercut: seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);

    let backing = options.backing.canonicalize()?;
    let filesystem = PowercutFs::new(&backing)?;
    let control = filesystem.control();
    // Registered before mounting: SIGUSR1's default action would end the process.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGUSR2])?;

    let session = mount(filesystem, options)?;
    println!("powercut: mounted {}", options.mount.display());
    io::stdout().flush()?;

    'serve: loop {
        for signal in signals.pending() {
            match signal {
                SIGUSR1 if !options.torn => cut(&control, CutMode::Drop, &mut rng)?,
                SIGUSR1 | SIGUSR2 => cut(&control, CutMode::Torn, &mut rng)?,
                _ => break 'serve,
            }
        }
        if session.guard.is_finished() {
            eprintln!("powercut: the mount went away");
            return session.join();
        }
        thread::sleep(POLL);
    }

    let unmounted = match session.umount_and_join() {
        Ok(()) => Ok(()),
        Err(error) => {
            eprintln!("powercut: unmount failed ({error}); detaching lazily");
            lazy_unmount(&options.mount)
        }
    };
    let synced = control.sync_all();
    println!("powercut: unmounted, {synced} dirty pages written back");
    io::stdout().flush()?;
    unmounted
}

/// Detaches a busy mount: it disappears now and is gone once its last user lets go.
fn lazy_unmount(mount: &Path) -> io::Result<()> {
    let path = CString::new(mount.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    let status = Command::new("fusermount3")
        .args(["-u", "-z", "--"])
        .arg(mount)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("fusermount3 -u -z: {status}")))
    }
}

/// Mounts `filesystem` at `options.mount`: by root for root, and for another user with root
/// allowed in too when the FUSE configuration permits it (`user_allow_other`).
fn mount(filesystem: PowercutFs, options: &Options) -> io::Result<fuser::BackgroundSession> {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("powercut".into()),
        MountOption::DefaultPermissions,
    ];
    config.n_threads = Some(2);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        return fuser::spawn_mount(filesystem, &options.mount, &config);
    }
    let control = filesystem.control();
    config.acl = SessionACL::RootAndOwner;
    match fuser::spawn_mount(filesystem, &options.mount, &config) {
        Ok(session) => Ok(session),
        Err(error) => {
            eprintln!(
                "powercut: mount with allow_root failed ({error}); mounting for the owner only"
            );
            config.acl = SessionACL::Owner;
            fuser::spawn_mount(control.filesystem(), &options.mount, &config)
        }
    }
}

/// Cuts the power and reports it on stdout (counters on stderr).
fn cut(control: &Control, mode: CutMode, rng: &mut StdRng) -> io::Result<()> {
    let report = control.cut(mode, rng);
    println!(
        "powercut: cut {} dirty pages dropped, {} persisted",
        report.dropped, report.persisted
    );
    io::stdout().flush()?;
    let counters = control.counters();
    eprintln!(
        "powercut: {} cuts, {} writes ({} bytes), {} fsyncs ({} pages synced){}",
        counters.cuts,
        counters.writes,
        counters.written_bytes,
        counters.fsyncs,
        counters.synced_pages,
        if report.failed_files > 0 {
            format!(
                ", {} files could not be written in the cut",
                report.failed_files
            )
        } else {
            String::new()
        }
    );
    Ok(())
}
