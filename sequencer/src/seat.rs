//! The sequencer's seat: its state, held by the sequencer thread except while that thread
//! sleeps, so that a producer that finds it asleep can do its round itself instead of
//! waking it.
//!
//! Why: waking a sleeping thread on another core costs tens of microseconds on a virtual
//! machine (the idle core halts, and the wake-up goes through the hypervisor), and the woken
//! thread then often waits for a core behind the very thread that woke it. A gateway thread
//! that has just put a command in its ring is running already: when the sequencer sleeps,
//! it takes the seat, drains the rings, journals, applies and releases the batch, and the
//! sequencer thread sleeps through it. There is still one writer at a time (the seat is a
//! lock), so the sequence, the journal and the engine are exactly what the sequencer thread
//! alone would have made.
//!
//! The seat is offered only where a round never waits on anything but memory: `async`
//! durability (no flush) and no standby to wait for. A pinned sequencer keeps its work on its
//! core, so the seat is closed then too.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use crate::bell::Bell;

/// What one round of the sequencer did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    /// It applied a batch (or fired timers): there may be more.
    Worked,
    /// Nothing was waiting: sleep for at most this long (the next timer, or the idle wait).
    Idle(Duration),
    /// Nothing was waiting and the sequencer was asked to stop.
    Stop,
}

/// The sequencer's state as the seat needs it.
pub(crate) trait Rounds: Send {
    /// Drains the rings, applies and releases one batch, fires due timers.
    fn round(&mut self) -> Round;

    /// How long the sequencer may sleep from now: until its next timer, or the idle wait.
    fn idle_wait(&self) -> Duration;

    /// A round panicked and may have left the state half-changed: stops the process.
    fn stop_after_panic(&self, panic: &(dyn std::any::Any + Send)) -> !;

    /// Counts a round done by a producer in the seat.
    fn count_round_in_seat(&mut self);
}

/// The seat of a sequencer whose state is `W`: empty until the sequencer starts, and after it
/// ended.
pub(crate) struct Seat<W> {
    state: Mutex<Option<W>>,
    /// Whether producers may take the seat at all (see the module's comment).
    open: AtomicBool,
    /// When the sequencer thread marked itself asleep (ns of [`clock_ns`]); 0 while it runs.
    asleep_since_ns: AtomicU64,
    /// When the sleeping thread wakes by itself (ns of [`clock_ns`]).
    wakes_at_ns: AtomicU64,
}

impl<W: Rounds> Seat<W> {
    /// An empty, closed seat.
    pub(crate) fn new() -> Seat<W> {
        Seat {
            state: Mutex::new(None),
            open: AtomicBool::new(false),
            asleep_since_ns: AtomicU64::new(0),
            wakes_at_ns: AtomicU64::new(0),
        }
    }

    /// Puts the sequencer's state in the seat; producers may take it when `open`.
    pub(crate) fn fill(&self, state: W, open: bool) {
        *self.state.lock() = Some(state);
        self.open.store(open, Ordering::Release);
    }

    /// Opens or closes the seat to producers.
    pub(crate) fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::Release);
    }

    /// Takes the state out: the seat is empty (and closed) from here.
    pub(crate) fn empty(&self) -> Option<W> {
        self.open.store(false, Ordering::Release);
        self.state.lock().take()
    }

    /// Locks the state (the sequencer thread's hold, or a reader's after it stopped).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<W>> {
        self.state.lock()
    }

    /// The sequencer thread's loop: rounds while there is work, and between them a sleep on
    /// `bell` with the seat free. Returns when a round says stop or the seat is empty.
    pub(crate) fn run(&self, bell: &Bell) {
        let mut held = self.state.lock();
        loop {
            let Some(state) = held.as_mut() else {
                return;
            };
            match state.round() {
                Round::Worked => {}
                Round::Stop => return,
                Round::Idle(wait) => {
                    let now = clock_ns();
                    self.wakes_at_ns.store(
                        now.saturating_add(wait.as_nanos() as u64),
                        Ordering::Relaxed,
                    );
                    // After the round's last look at the rings: a producer that queues from
                    // here either sees this mark (and takes the seat once it is free, or rings)
                    // or rang before it, and the wait below returns at once.
                    self.asleep_since_ns.store(now.max(1), Ordering::SeqCst);
                    MutexGuard::unlocked(&mut held, || {
                        bell.wait(wait);
                        // Awake before taking the seat back: producers ring from here
                        // instead of trying a seat it is about to take.
                        self.asleep_since_ns.store(0, Ordering::SeqCst);
                    });
                }
            }
        }
    }

    /// Called by a producer right after it queued work: does one round on the calling thread
    /// if the sequencer thread sleeps, the seat is free and `gate` (asked with the seat held)
    /// allows, and says whether it did. When it did not, the producer rings the bell as usual.
    pub(crate) fn round_here(&self, bell: &Bell, gate: &dyn Fn() -> bool) -> bool {
        if !self.open.load(Ordering::Acquire) || self.asleep_since_ns.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let Some(mut held) = self.state.try_lock() else {
            return false;
        };
        let Some(state) = held.as_mut() else {
            return false;
        };
        if !gate() {
            return false;
        }
        let round = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| state.round())) {
            Ok(round) => round,
            // As on the sequencer thread: the process stops.
            Err(panic) => state.stop_after_panic(&*panic),
        };
        state.count_round_in_seat();
        let wake_by = clock_ns().saturating_add(state.idle_wait().as_nanos() as u64);
        drop(held);
        // The round may have set an earlier timer than the sleeping thread knows of (a taker
        // delay, an expiry), or found the sequencer asked to stop: the thread must look.
        if round == Round::Stop || wake_by < self.wakes_at_ns.load(Ordering::Relaxed) {
            bell.ring();
        }
        true
    }
}

/// A monotonic clock in ns from its first reading in this process (the sequencer's seat and
/// the gateway loops' seats mark when their threads went to sleep with it).
pub fn clock_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// A sequencer stand-in: a queue of numbers, applied in order, counting which thread did.
    struct Counter {
        queue: Arc<Mutex<Vec<u64>>>,
        applied: Vec<u64>,
        in_seat: u64,
        on_thread: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
        wait: Duration,
    }

    impl Rounds for Counter {
        fn round(&mut self) -> Round {
            let taken: Vec<u64> = std::mem::take(&mut *self.queue.lock());
            if taken.is_empty() {
                return if self.stop.load(Ordering::Acquire) {
                    Round::Stop
                } else {
                    Round::Idle(self.wait)
                };
            }
            if std::thread::current().name() == Some("stand-in") {
                self.on_thread.fetch_add(taken.len(), Ordering::Relaxed);
            }
            self.applied.extend(taken);
            Round::Worked
        }

        fn idle_wait(&self) -> Duration {
            self.wait
        }

        fn stop_after_panic(&self, _panic: &(dyn std::any::Any + Send)) -> ! {
            panic!("the stand-in does not panic");
        }

        fn count_round_in_seat(&mut self) {
            self.in_seat += 1;
        }
    }

    /// A running stand-in sequencer and what its tests reach it by.
    struct StandIn {
        seat: Arc<Seat<Counter>>,
        bell: Arc<Bell>,
        queue: Arc<Mutex<Vec<u64>>>,
        on_thread: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
        thread: std::thread::JoinHandle<()>,
    }

    impl StandIn {
        /// Rings the thread and waits until it has applied something itself.
        fn until_the_thread_applies(&self) {
            self.bell.ring();
            let started = Instant::now();
            while self.on_thread.load(Ordering::Relaxed) == 0 {
                assert!(started.elapsed() < Duration::from_secs(5), "never applied");
                std::thread::yield_now();
            }
        }

        /// Asks the thread to stop and waits for it; returns its state.
        fn stopped(self) -> Counter {
            self.stop.store(true, Ordering::Release);
            self.bell.ring();
            self.thread.join().expect("stand-in ends");
            self.seat.empty().expect("state still there")
        }
    }

    fn started(open: bool) -> StandIn {
        let seat = Arc::new(Seat::new());
        let bell = Bell::new();
        let queue = Arc::new(Mutex::new(Vec::new()));
        let on_thread = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        seat.fill(
            Counter {
                queue: queue.clone(),
                applied: Vec::new(),
                in_seat: 0,
                on_thread: on_thread.clone(),
                stop: stop.clone(),
                wait: Duration::from_secs(5),
            },
            open,
        );
        let thread = {
            let (seat, bell) = (seat.clone(), bell.clone());
            std::thread::Builder::new()
                .name("stand-in".into())
                .spawn(move || seat.run(&bell))
                .expect("thread starts")
        };
        StandIn {
            seat,
            bell,
            queue,
            on_thread,
            stop,
            thread,
        }
    }

    /// Waits until the stand-in thread sleeps for good: marked asleep, its seat free, and the
    /// same mark a moment later (its first wait may return at once, as a bell's first does).
    fn until_asleep(seat: &Seat<Counter>) {
        let started = Instant::now();
        loop {
            assert!(started.elapsed() < Duration::from_secs(5), "never slept");
            let mark = seat.asleep_since_ns.load(Ordering::SeqCst);
            if mark != 0 && seat.state.try_lock().is_some() {
                std::thread::sleep(Duration::from_millis(2));
                if seat.asleep_since_ns.load(Ordering::SeqCst) == mark {
                    return;
                }
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_producer_finding_the_thread_asleep_does_the_round_and_the_thread_sleeps_on() {
        let stand_in = started(true);
        for n in 1..=20u64 {
            until_asleep(&stand_in.seat);
            stand_in.queue.lock().push(n);
            assert!(
                stand_in.seat.round_here(&stand_in.bell, &|| true),
                "round {n} done in the seat"
            );
        }
        let on_thread = stand_in.on_thread.clone();
        let state = stand_in.stopped();
        assert_eq!(on_thread.load(Ordering::Relaxed), 0, "the thread never ran");
        assert_eq!(state.in_seat, 20);
        assert_eq!(state.applied, (1..=20).collect::<Vec<_>>());
    }

    #[test]
    fn a_closed_seat_leaves_the_work_to_the_thread() {
        let stand_in = started(false);
        until_asleep(&stand_in.seat);
        stand_in.queue.lock().push(7);
        assert!(!stand_in.seat.round_here(&stand_in.bell, &|| true));
        stand_in.until_the_thread_applies();
        let state = stand_in.stopped();
        assert_eq!(state.in_seat, 0);
        assert_eq!(state.applied, vec![7]);
    }

    #[test]
    fn a_gate_that_says_no_leaves_the_round_to_the_thread() {
        let stand_in = started(true);
        until_asleep(&stand_in.seat);
        stand_in.queue.lock().push(3);
        let asked = AtomicUsize::new(0);
        let gate = || {
            // Asked with the seat held: the state cannot be locked from here.
            assert!(stand_in.seat.state.try_lock().is_none());
            asked.fetch_add(1, Ordering::Relaxed);
            false
        };
        assert!(!stand_in.seat.round_here(&stand_in.bell, &gate));
        assert_eq!(asked.load(Ordering::Relaxed), 1);
        stand_in.until_the_thread_applies();
        let state = stand_in.stopped();
        assert_eq!((state.in_seat, state.applied), (0, vec![3]));
    }

    #[test]
    fn many_producers_racing_the_thread_lose_nothing_and_apply_each_item_once() {
        let stand_in = started(true);
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let seat = stand_in.seat.clone();
                let (bell, queue) = (stand_in.bell.clone(), stand_in.queue.clone());
                std::thread::spawn(move || {
                    for i in 0..2_000u64 {
                        queue.lock().push(p * 1_000_000 + i);
                        if !seat.round_here(&bell, &|| true) {
                            bell.ring();
                        }
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.join().expect("producer ends");
        }
        let mut applied = stand_in.stopped().applied;
        // Each producer's items in its own order, every item once.
        for p in 0..4u64 {
            let mine: Vec<u64> = applied
                .iter()
                .copied()
                .filter(|n| n / 1_000_000 == p)
                .collect();
            assert_eq!(
                mine,
                (0..2_000).map(|i| p * 1_000_000 + i).collect::<Vec<_>>()
            );
        }
        applied.sort_unstable();
        applied.dedup();
        assert_eq!(applied.len(), 8_000);
    }

    #[test]
    fn a_round_that_sets_an_earlier_timer_wakes_the_thread() {
        let stand_in = started(true);
        let seat = &stand_in.seat;
        until_asleep(seat);
        // The thread sleeps for 5 s; a round in the seat now wants it back in 1 ms.
        if let Some(counter) = seat.lock().as_mut() {
            counter.wait = Duration::from_millis(1);
        }
        stand_in.queue.lock().push(1);
        assert!(seat.round_here(&stand_in.bell, &|| true));
        // Rung: the thread wakes, finds nothing, and sleeps again (a new mark).
        let first_mark = seat.asleep_since_ns.load(Ordering::SeqCst);
        let started = Instant::now();
        loop {
            let mark = seat.asleep_since_ns.load(Ordering::SeqCst);
            if mark != 0 && mark != first_mark {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(2), "not woken");
            std::thread::yield_now();
        }
        assert_eq!(stand_in.on_thread.load(Ordering::Relaxed), 0);
        stand_in.stopped();
    }
}
