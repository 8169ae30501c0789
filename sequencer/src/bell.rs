//! A consumer thread's bell: producers ring it after they put work in its channels, and the
//! thread, finding them empty, sleeps until a ring or a deadline.
//!
//! Why not the channels' own blocking receive: crossbeam spins and then calls
//! `sched_yield` a few times before it sleeps. On a machine with two cores and more busy
//! threads than cores, each yield is a system call and usually a context switch: measured at
//! 3,000 orders/s, 1.8 `sched_yield` calls and 7 involuntary context switches per request
//! across the sequencer, feed and settlement threads. A bell costs the producer one atomic
//! swap (`Thread::unpark`), and a futex wake only when the consumer sleeps.

use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};
use parking_lot::Mutex;

/// Wakes the thread that waits on it (one at a time: a thread that starts waiting takes the
/// bell over, as a standby's drain hands its channel to the settlement thread).
#[derive(Debug, Default)]
pub struct Bell {
    /// The thread that waits: the last one that called [`Bell::wait`].
    waiter: Mutex<Option<Thread>>,
}

impl Bell {
    /// A bell nobody waits on yet.
    pub fn new() -> Arc<Bell> {
        Arc::new(Bell::default())
    }

    /// Wakes the waiting thread, or makes its next wait return at once.
    #[inline]
    pub fn ring(&self) {
        if let Some(thread) = &*self.waiter.lock() {
            thread.unpark();
        }
    }

    /// Sleeps until a ring or `timeout`; may return early. The caller looks at its channels
    /// before each wait, and again after it.
    pub fn wait(&self, timeout: Duration) {
        let me = std::thread::current();
        {
            let mut waiter = self.waiter.lock();
            if waiter.as_ref().map(Thread::id) != Some(me.id()) {
                // A ring before this registration went elsewhere: look again at once. (The
                // lock orders the two: a producer that rang before it had put its item where
                // the caller's next look finds it.)
                *waiter = Some(me);
                return;
            }
        }
        std::thread::park_timeout(timeout);
    }
}

/// A bounded channel whose receiver sleeps on a [`Bell`] instead of spinning.
pub fn channel<T>(capacity: usize) -> (BellSender<T>, BellReceiver<T>) {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let bell = Bell::new();
    (
        BellSender {
            tx: Some(tx),
            bell: bell.clone(),
        },
        BellReceiver { rx, bell },
    )
}

/// The sending end of a [`channel`]: each send rings the receiver's bell, and so does
/// dropping a sender (the receiver learns when the last one is gone).
pub struct BellSender<T> {
    /// Always `Some` but while dropping: the channel's end is let go before the ring, so
    /// that the woken receiver finds it gone.
    tx: Option<crossbeam_channel::Sender<T>>,
    bell: Arc<Bell>,
}

impl<T> Clone for BellSender<T> {
    fn clone(&self) -> Self {
        BellSender {
            tx: self.tx.clone(),
            bell: self.bell.clone(),
        }
    }
}

impl<T> Drop for BellSender<T> {
    fn drop(&mut self) {
        drop(self.tx.take());
        self.bell.ring();
    }
}

impl<T> BellSender<T> {
    /// Sends `value`, waiting while the channel is full.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let Some(tx) = &self.tx else {
            return Err(SendError(value));
        };
        let sent = tx.send(value);
        self.bell.ring();
        sent
    }

    /// Sends `value` if there is room.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let Some(tx) = &self.tx else {
            return Err(TrySendError::Disconnected(value));
        };
        let sent = tx.try_send(value);
        if sent.is_ok() {
            self.bell.ring();
        }
        sent
    }
}

/// The receiving end of a [`channel`]; clones may be used by one thread at a time.
pub struct BellReceiver<T> {
    rx: crossbeam_channel::Receiver<T>,
    bell: Arc<Bell>,
}

impl<T> Clone for BellReceiver<T> {
    fn clone(&self) -> Self {
        BellReceiver {
            rx: self.rx.clone(),
            bell: self.bell.clone(),
        }
    }
}

impl<T> BellReceiver<T> {
    /// Whether the channel has room for one more value (a sender would not wait).
    pub fn has_room(&self) -> bool {
        self.rx
            .capacity()
            .is_none_or(|capacity| self.rx.len() < capacity)
    }

    /// The next value if one is waiting.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.rx.try_recv()
    }

    /// The next value, waiting for it; `Err` once every sender is gone and nothing is left.
    pub fn recv(&self) -> Result<T, RecvError> {
        loop {
            match self.rx.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => self.bell.wait(Duration::from_secs(3600)),
            }
        }
    }

    /// The next value, waiting at most `timeout` for it.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            match self.rx.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            let left = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return Err(RecvTimeoutError::Timeout);
            }
            self.bell.wait(left);
        }
    }

    /// Values as they come, until every sender is gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }

    /// Values waiting now.
    pub fn try_iter(&self) -> impl Iterator<Item = T> + '_ {
        self.rx.try_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_channel_has_no_room_until_a_value_is_taken() {
        let (tx, rx) = channel::<u8>(2);
        assert!(rx.has_room());
        tx.send(1).unwrap();
        assert!(rx.has_room());
        tx.send(2).unwrap();
        assert!(!rx.has_room());
        assert_eq!(rx.try_recv(), Ok(1));
        assert!(rx.has_room());
    }

    #[test]
    fn a_value_sent_from_another_thread_wakes_the_receiver() {
        let (tx, rx) = channel::<u64>(4);
        let sender = std::thread::spawn(move || {
            for i in 0..1000 {
                std::thread::sleep(Duration::from_micros(if i % 100 == 0 { 200 } else { 0 }));
                tx.send(i).expect("receiver alive");
            }
        });
        let got: Vec<u64> = rx.iter().collect();
        sender.join().expect("sender ran");
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn a_receive_with_nothing_sent_times_out_and_one_with_no_sender_ends() {
        let (tx, rx) = channel::<u8>(1);
        let started = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(30)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(started.elapsed() >= Duration::from_millis(30));
        let waiting = Instant::now();
        let dropper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(tx);
        });
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(30)),
            Err(RecvTimeoutError::Disconnected)
        );
        assert!(
            waiting.elapsed() < Duration::from_secs(10),
            "the drop woke it"
        );
        dropper.join().expect("dropper ran");
    }
}
