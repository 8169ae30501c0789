//! A reader of the link that waits through its socket's short read timeouts (so that the
//! thread notices a stop within one of them) without ever dropping a partial read, but not
//! past a longest stall without a byte, nor once it is asked to stop.

use std::io::{self, ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Reads from `inner`, retrying read timeouts until a byte comes, `stop` is set, or
/// `stall_max` passes without a byte (both end the read with `ErrorKind::TimedOut`).
pub struct PatientReader<'a, R> {
    inner: R,
    stop: &'a AtomicBool,
    stall_max: Duration,
}

impl<'a, R: Read> PatientReader<'a, R> {
    /// Wraps `inner`.
    pub fn new(inner: R, stop: &'a AtomicBool, stall_max: Duration) -> Self {
        PatientReader {
            inner,
            stop,
            stall_max,
        }
    }
}

/// Whether a read error only means that nothing arrived yet: the socket's read timeout, or
/// a read cut short by a signal (a read with a timeout is not restarted after the process
/// was stopped and continued, as a debugger or a frozen VM does).
pub fn nothing_yet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

impl<R: Read> Read for PatientReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let started = Instant::now();
        loop {
            match self.inner.read(buf) {
                Err(e) if nothing_yet(&e) => {
                    if self.stop.load(Ordering::Acquire) {
                        return Err(io::Error::new(ErrorKind::TimedOut, "stopped"));
                    }
                    if started.elapsed() >= self.stall_max {
                        return Err(io::Error::new(
                            ErrorKind::TimedOut,
                            format!(
                                "the primary sent nothing for {} s",
                                self.stall_max.as_secs()
                            ),
                        ));
                    }
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Times out `timeouts` times, then yields its bytes.
    struct Slow {
        timeouts: usize,
        bytes: &'static [u8],
    }

    impl Read for Slow {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.timeouts > 0 {
                self.timeouts -= 1;
                return Err(ErrorKind::WouldBlock.into());
            }
            self.bytes.read(buf)
        }
    }

    #[test]
    fn it_waits_through_timeouts_and_stops_when_asked() {
        let go = AtomicBool::new(false);
        let mut reader = PatientReader::new(
            Slow {
                timeouts: 3,
                bytes: b"abc",
            },
            &go,
            Duration::from_secs(60),
        );
        let mut out = [0u8; 3];
        reader.read_exact(&mut out).unwrap();
        assert_eq!(&out, b"abc");
        let stop = AtomicBool::new(true);
        let mut stopped = PatientReader::new(
            Slow {
                timeouts: 1,
                bytes: b"x",
            },
            &stop,
            Duration::from_secs(60),
        );
        assert_eq!(
            stopped.read(&mut out).unwrap_err().kind(),
            ErrorKind::TimedOut
        );
        let mut stalled = PatientReader::new(
            Slow {
                timeouts: usize::MAX,
                bytes: b"",
            },
            &go,
            Duration::ZERO,
        );
        let error = stalled.read(&mut out).unwrap_err();
        assert!(error.to_string().contains("sent nothing"), "{error}");
    }
}
