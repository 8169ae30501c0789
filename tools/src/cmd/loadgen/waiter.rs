//! Waiting for sockets with a nanosecond timeout. On Linux, an epoll set waited on with
//! `epoll_pwait2`: the driver looks at its sockets many times between two sends, and an epoll
//! wait costs the same for 2 sockets or 20 where `ppoll` walked every one of them each time.
//! Elsewhere, `poll` over the sockets, its timeout rounded up to a millisecond.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// What is watched under a token: the socket, which of its connections it is, and whether
/// writing is watched too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Watched {
    fd: RawFd,
    serial: u64,
    writable: bool,
}

/// A set of sockets, each under a token (a small index), to wait on.
pub struct Waiter {
    watched: Vec<Option<Watched>>,
    #[cfg(target_os = "linux")]
    epoll: std::os::fd::OwnedFd,
    #[cfg(target_os = "linux")]
    events: Vec<libc::epoll_event>,
    #[cfg(not(target_os = "linux"))]
    fds: Vec<libc::pollfd>,
}

impl Waiter {
    /// An empty set for tokens below `tokens`.
    pub fn new(tokens: usize) -> io::Result<Waiter> {
        Ok(Waiter {
            watched: vec![None; tokens],
            #[cfg(target_os = "linux")]
            epoll: linux::create()?,
            #[cfg(target_os = "linux")]
            events: vec![libc::epoll_event { events: 0, u64: 0 }; tokens.max(1)],
            #[cfg(not(target_os = "linux"))]
            fds: Vec::with_capacity(tokens),
        })
    }

    /// Watches socket `fd` under `token` for reading, and for writing when `writable`.
    /// `serial` tells connections apart: a socket with a new serial is a new connection, even
    /// if the system gave it the number of one closed before.
    pub fn watch(
        &mut self,
        token: usize,
        fd: RawFd,
        serial: u64,
        writable: bool,
    ) -> io::Result<()> {
        let wanted = Watched {
            fd,
            serial,
            writable,
        };
        let old = self.watched[token];
        if old == Some(wanted) {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            let same_socket = old.is_some_and(|o| o.fd == fd && o.serial == serial);
            linux::control(&self.epoll, token, wanted, same_socket)?;
        }
        self.watched[token] = Some(wanted);
        Ok(())
    }

    /// Forgets the socket under `token`, which has been closed (the kernel has dropped it from
    /// the set already).
    pub fn closed(&mut self, token: usize) {
        self.watched[token] = None;
    }

    /// Stops watching the socket under `token`, which stays open.
    pub fn unwatch(&mut self, token: usize) {
        #[cfg(target_os = "linux")]
        if let Some(watched) = self.watched[token] {
            linux::remove(&self.epoll, watched.fd);
        }
        self.watched[token] = None;
    }

    /// Waits up to `timeout` for a watched socket to be ready; puts the tokens of those that
    /// are in `ready` (none after a timeout or a signal).
    pub fn wait(&mut self, timeout: Duration, ready: &mut Vec<usize>) {
        ready.clear();
        #[cfg(target_os = "linux")]
        linux::wait(&self.epoll, &mut self.events, timeout, ready);
        #[cfg(not(target_os = "linux"))]
        portable::wait(&self.watched, &mut self.fds, timeout, ready);
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::time::Duration;

    use super::Watched;

    /// A new epoll set.
    pub fn create() -> io::Result<OwnedFd> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor just opened and owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Adds `wanted` to the set under `token`, or changes what is watched of the same socket.
    pub fn control(
        epoll: &OwnedFd,
        token: usize,
        wanted: Watched,
        same_socket: bool,
    ) -> io::Result<()> {
        let flags = if wanted.writable {
            libc::EPOLLIN | libc::EPOLLOUT
        } else {
            libc::EPOLLIN
        };
        let mut event = libc::epoll_event {
            events: flags as u32,
            u64: token as u64,
        };
        let op = if same_socket {
            libc::EPOLL_CTL_MOD
        } else {
            libc::EPOLL_CTL_ADD
        };
        // SAFETY: `event` is a valid epoll_event for the call; both descriptors are open.
        let status = unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, wanted.fd, &mut event) };
        if status == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if op == libc::EPOLL_CTL_ADD && error.raw_os_error() == Some(libc::EEXIST) {
            // SAFETY: as above.
            let status = unsafe {
                libc::epoll_ctl(
                    epoll.as_raw_fd(),
                    libc::EPOLL_CTL_MOD,
                    wanted.fd,
                    &mut event,
                )
            };
            if status == 0 {
                return Ok(());
            }
            return Err(io::Error::last_os_error());
        }
        Err(error)
    }

    /// Removes open socket `fd` from the set (an error, such as its not being there, changes
    /// nothing).
    pub fn remove(epoll: &OwnedFd, fd: RawFd) {
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL since Linux 2.6.9.
        unsafe {
            libc::epoll_ctl(
                epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            );
        }
    }

    /// Waits up to `timeout`; the tokens of the ready sockets go to `ready`.
    pub fn wait(
        epoll: &OwnedFd,
        events: &mut [libc::epoll_event],
        timeout: Duration,
        ready: &mut Vec<usize>,
    ) {
        let timeout = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `events` is an exclusively borrowed array of `events.len()` epoll_event
        // structs, `timeout` lives on the stack for the call, and a null mask keeps the mask.
        let count = unsafe {
            libc::epoll_pwait2(
                epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                &timeout,
                std::ptr::null(),
            )
        };
        let count = usize::try_from(count).unwrap_or(0);
        ready.extend(events[..count].iter().map(|event| event.u64 as usize));
    }
}

#[cfg(not(target_os = "linux"))]
mod portable {
    use std::time::Duration;

    use super::Watched;

    /// Polls the watched sockets up to `timeout` (rounded up to a millisecond).
    pub fn wait(
        watched: &[Option<Watched>],
        fds: &mut Vec<libc::pollfd>,
        timeout: Duration,
        ready: &mut Vec<usize>,
    ) {
        fds.clear();
        fds.extend(watched.iter().map(|w| libc::pollfd {
            // A negative descriptor is skipped by poll.
            fd: w.map_or(-1, |w| w.fd),
            events: match w {
                Some(w) if w.writable => libc::POLLIN | libc::POLLOUT,
                _ => libc::POLLIN,
            },
            revents: 0,
        }));
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is an exclusively borrowed array of `fds.len()` pollfd structs.
        let count = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if count > 0 {
            ready.extend(
                fds.iter()
                    .enumerate()
                    .filter(|(_, fd)| fd.revents != 0)
                    .map(|(token, _)| token),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_socket_with_something_to_read_is_ready_and_a_quiet_one_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (quiet, talking) = (
            TcpStream::connect(address).unwrap(),
            TcpStream::connect(address).unwrap(),
        );
        let (_quiet_peer, _) = listener.accept().unwrap();
        let (mut talking_peer, _) = listener.accept().unwrap();
        let mut waiter = Waiter::new(3).unwrap();
        waiter.watch(0, quiet.as_raw_fd(), 0, false).unwrap();
        waiter.watch(2, talking.as_raw_fd(), 0, false).unwrap();
        let mut ready = Vec::new();
        waiter.wait(Duration::from_millis(1), &mut ready);
        assert!(ready.is_empty());
        talking_peer.write_all(b"x").unwrap();
        waiter.wait(Duration::from_secs(5), &mut ready);
        assert_eq!(ready, vec![2]);
        // Watching for writing too: a connected socket with room is writable at once.
        waiter.watch(0, quiet.as_raw_fd(), 0, true).unwrap();
        waiter.unwatch(2);
        waiter.wait(Duration::from_secs(5), &mut ready);
        assert_eq!(ready, vec![0]);
        // A closed socket leaves the set; a new one under the same token is watched.
        drop(quiet);
        waiter.closed(0);
        let newer = TcpStream::connect(address).unwrap();
        let (mut newer_peer, _) = listener.accept().unwrap();
        waiter.watch(0, newer.as_raw_fd(), 1, false).unwrap();
        newer_peer.write_all(b"y").unwrap();
        waiter.wait(Duration::from_secs(5), &mut ready);
        assert_eq!(ready, vec![0]);
    }
}
