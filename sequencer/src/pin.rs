//! Pinning the sequencer thread to one core, where the machine allows it: the single writer
//! then keeps its caches warm and is never migrated between cores by the scheduler. Other
//! threads may still run on that core; only the sequencer is kept to it.
//!
//! By default (`auto`) only on machines with [`AUTO_PIN_CORES_MIN`] cores or more: on fewer,
//! every other thread of the service (and whatever else runs there) shares the pinned core,
//! and the sequencer waits behind them when it could have run on the other core.

/// The fewest cores this process may use for `auto` to pin the sequencer. Measured on a
/// 2-core VM (`ladder loadgen --scenario mm --rate 4000 --duration 30`, `serve --durability
/// async`, 3 interleaved pairs): pinned, p99 2.7-2.8 ms, p99.9 7.9-22.5 ms, max 29-35 ms,
/// and 3.5-4.1 s of the sequencer's 30 s spent waiting for its core (`schedstat`); not
/// pinned, p99 1.9-2.4 ms, p99.9 5.3-6.3 ms, max 12-16 ms, 3.1-3.8 s waiting. `ladder bench
/// sequencer` did 1.27-1.30 M commands/s pinned and 1.04-1.26 M not pinned: the pin is kept
/// where cores are many enough for it to cost the others little (not measured here).
pub const AUTO_PIN_CORES_MIN: usize = 4;

/// Which core the sequencer runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CorePin {
    /// The last core this process may use, when it may use [`AUTO_PIN_CORES_MIN`] or more
    /// (the first cores are where interrupts and other work usually land); no pinning on
    /// fewer.
    #[default]
    Auto,
    /// Not pinned.
    None,
    /// This core.
    Core(usize),
}

impl std::str::FromStr for CorePin {
    type Err = String;

    fn from_str(text: &str) -> Result<CorePin, String> {
        match text {
            "auto" => Ok(CorePin::Auto),
            "none" => Ok(CorePin::None),
            number => number
                .parse()
                .map(CorePin::Core)
                .map_err(|_| format!("expected auto, none or a core number, found {number:?}")),
        }
    }
}

impl CorePin {
    /// The core to pin to, if any, given the cores this process may use.
    pub fn choose(self, allowed: &[usize]) -> Option<usize> {
        match self {
            CorePin::Auto if allowed.len() >= AUTO_PIN_CORES_MIN => allowed.last().copied(),
            CorePin::Auto | CorePin::None => None,
            CorePin::Core(core) => Some(core),
        }
    }
}

/// Pins the calling thread as `pin` says; returns the core, or why it could not be pinned.
pub fn pin_current_thread(pin: CorePin) -> Result<Option<usize>, String> {
    let allowed = allowed_cores().map_err(|e| format!("reading the allowed cores: {e}"))?;
    let Some(core) = pin.choose(&allowed) else {
        return Ok(None);
    };
    if !allowed.contains(&core) {
        return Err(format!(
            "core {core} is not among those this process may use ({allowed:?})"
        ));
    }
    set_affinity(core).map_err(|e| format!("pinning to core {core}: {e}"))?;
    Ok(Some(core))
}

#[cfg(target_os = "linux")]
fn allowed_cores() -> std::io::Result<Vec<usize>> {
    // SAFETY: `cpu_set_t` is plain data (all zeros is the empty set); sched_getaffinity
    // writes at most `size_of::<cpu_set_t>()` bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pid 0 is the calling thread; `set` is valid for `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads the set for indices below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&core| unsafe { libc::CPU_ISSET(core, &set) })
        .collect())
}

#[cfg(target_os = "linux")]
fn set_affinity(core: usize) -> std::io::Result<()> {
    // SAFETY: as above; CPU_SET writes the bit of `core`, which is below CPU_SETSIZE since
    // it came from the allowed set or was checked against it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(core, &mut set) };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pid 0 is the calling thread; `set` is valid for `size` bytes.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn allowed_cores() -> std::io::Result<Vec<usize>> {
    Ok(Vec::new())
}

#[cfg(not(target_os = "linux"))]
fn set_affinity(_core: usize) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_the_last_allowed_core_only_when_there_are_enough() {
        assert_eq!(CorePin::Auto.choose(&[0, 1, 2, 3]), Some(3));
        assert_eq!(CorePin::Auto.choose(&[0, 1, 2]), None);
        assert_eq!(CorePin::Auto.choose(&[2, 5]), None);
        assert_eq!(CorePin::Auto.choose(&[5]), None);
        assert_eq!(CorePin::None.choose(&[0, 1]), None);
        assert_eq!(CorePin::Core(0).choose(&[0, 1]), Some(0));
        assert_eq!("auto".parse(), Ok(CorePin::Auto));
        assert_eq!("none".parse(), Ok(CorePin::None));
        assert_eq!("1".parse(), Ok(CorePin::Core(1)));
        assert!("first".parse::<CorePin>().is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_is_pinned_to_an_allowed_core_and_refused_another() {
        let allowed = allowed_cores().unwrap();
        let first = allowed[0];
        let pinned = std::thread::spawn(move || {
            let got = pin_current_thread(CorePin::Core(first));
            (got, allowed_cores().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(pinned.0, Ok(Some(first)));
        assert_eq!(
            pinned.1,
            vec![first],
            "the thread may now use that core only"
        );
        let outside = libc::CPU_SETSIZE as usize - 1;
        assert!(
            std::thread::spawn(move || pin_current_thread(CorePin::Core(outside)))
                .join()
                .unwrap()
                .is_err()
        );
    }
}
