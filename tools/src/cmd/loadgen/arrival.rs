//! When an answer reached this machine's socket, from the kernel's receive timestamp
//! (`SO_TIMESTAMPNS`, Linux): the service's latency without the load generator's own delay
//! in waking up to read it. On a machine whose cores the load generator shares with the
//! service, that wake-up is tens of µs; the headline latency still counts it (it is what a
//! client on this machine sees), the arrival latency beside it does not.
//!
//! For TCP the kernel reports, with each read, the arrival time of the last segment that read
//! took: an answer completed by that read arrived then or a little earlier, so the arrival
//! latency never flatters the service.

use std::io;
use std::net::TcpStream;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Maps the kernel's timestamps (the wall clock) onto the run's clock (ns since its start).
#[derive(Clone, Copy, Debug)]
pub struct ArrivalClock {
    /// The wall clock's ns at the run's start.
    wall_at_start_ns: u64,
}

impl ArrivalClock {
    /// The clock of a run that starts (or started) at `start`.
    pub fn new(start: Instant) -> ArrivalClock {
        let (wall_now, now) = (wall_ns(), Instant::now());
        // A run is often planned to start a little after it is set up.
        let wall_at_start_ns = if start >= now {
            wall_now.saturating_add((start - now).as_nanos() as u64)
        } else {
            wall_now.saturating_sub((now - start).as_nanos() as u64)
        };
        ArrivalClock { wall_at_start_ns }
    }

    /// A kernel timestamp (wall clock ns) as ns since the run's start.
    pub fn since_start(&self, wall_ns: u64) -> u64 {
        wall_ns.saturating_sub(self.wall_at_start_ns)
    }
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Asks the kernel to timestamp what `stream` receives; whether it will.
#[cfg(target_os = "linux")]
pub fn enable(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is open while `stream` lives, and the option's value is a
    // c_int that outlives the call, passed with its size.
    let status = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    status == 0
}

/// Elsewhere there are no receive timestamps.
#[cfg(not(target_os = "linux"))]
pub fn enable(_stream: &TcpStream) -> bool {
    false
}

/// Reads into `buf` like `Read::read`, with the kernel's receive timestamp (wall clock ns)
/// of what was read, when the socket has them on.
#[cfg(target_os = "linux")]
pub fn read_stamped(stream: &TcpStream, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    use std::os::fd::AsRawFd;
    // Room for one control message holding a timespec (CMSG_SPACE, 8-byte aligned).
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid (null name, no iovecs); the fields set below point at
    // `iov` and `control`, which outlive the call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the descriptor is open while `stream` lives; `message` describes `buf` and
    // `control` with their true sizes.
    let read = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut message, 0) };
    if read < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within the length
    // it set in `message`; a timestamp's data is a timespec, read unaligned.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET
                && (*header).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let time: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast());
                stamp = Some(time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64);
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    Ok((read as usize, stamp))
}

/// Elsewhere: a plain read, without a timestamp.
#[cfg(not(target_os = "linux"))]
pub fn read_stamped(stream: &TcpStream, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    use std::io::Read;
    let mut stream = stream;
    stream.read(buf).map(|n| (n, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    #[cfg(target_os = "linux")]
    fn a_read_carries_the_time_its_bytes_arrived() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert!(enable(&client));
        // The kernel turns its receive timestamps on a moment after the first socket asks
        // (deferred work): what arrives before that has none. Wait for one.
        let mut buf = [0u8; 16];
        let warm_up = Instant::now();
        loop {
            server.write_all(b".").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
            if read_stamped(&client, &mut buf).unwrap().1.is_some() {
                break;
            }
            assert!(warm_up.elapsed().as_secs() < 5, "no receive timestamp ever");
        }
        let start = Instant::now();
        let clock = ArrivalClock::new(start);
        let sent_ns = start.elapsed().as_nanos() as u64;
        server.write_all(b"hello").unwrap();
        // Read well after the bytes arrived: the stamp is their arrival, not this read.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (n, stamp) = read_stamped(&client, &mut buf).unwrap();
        let read_ns = start.elapsed().as_nanos() as u64;
        assert_eq!(&buf[..n], b"hello");
        let arrived_ns = clock.since_start(stamp.expect("a receive timestamp"));
        assert!(
            arrived_ns + 2_000_000 >= sent_ns,
            "{arrived_ns} vs {sent_ns}"
        );
        assert!(
            arrived_ns + 40_000_000 <= read_ns,
            "arrival {arrived_ns} ns is the send, not the read at {read_ns} ns"
        );
    }

    #[test]
    fn a_run_that_starts_later_maps_the_wall_clock_onto_its_own() {
        let now = Instant::now();
        let later = ArrivalClock::new(now + std::time::Duration::from_millis(50));
        let earlier = ArrivalClock::new(now - std::time::Duration::from_millis(50));
        let wall = wall_ns() + 60_000_000;
        let (from_later, from_earlier) = (later.since_start(wall), earlier.since_start(wall));
        // 100 ms apart, give or take the microseconds between the readings.
        let apart = from_earlier - from_later;
        assert!((99_000_000..=101_000_000).contains(&apart), "{apart}");
        assert!(
            (8_000_000..=12_000_000).contains(&from_later),
            "{from_later}"
        );
    }

    #[test]
    fn without_timestamps_a_read_has_none() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.write_all(b"hi").unwrap();
        let mut buf = [0u8; 4];
        let (n, stamp) = read_stamped(&client, &mut buf).unwrap();
        assert_eq!((&buf[..n], stamp), (&b"hi"[..], None));
    }
}
