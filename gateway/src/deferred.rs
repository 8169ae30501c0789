//! Slow work kept off the event loops: a handler that must wait on something outside the
//! service (an ERC-1271 `eth_call`, say) returns [`Outcome::Defer`]; a small pool of workers
//! runs the job and hands the resulting outcome back to the loop that owns the connection,
//! which then answers or submits it as if the handler had returned it. Responses still leave
//! in request order.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use mio::Waker;

use crate::handler::Outcome;
use crate::http::Status;

/// A deferred job: runs on a pool worker and says what the loop does next.
pub type Job = Box<dyn FnOnce() -> Outcome + Send>;

/// Pool workers (the jobs wait on the network, not the CPU).
pub const DEFER_WORKERS: usize = 8;
/// Jobs queued before new ones are refused with 503.
pub const DEFER_QUEUE_MAX: usize = 4096;

/// Where a job's outcome goes: its loop's channel and waker, with the loop's token.
pub struct Return {
    /// The loop's channel of finished jobs.
    pub tx: Sender<(u64, Outcome)>,
    /// Wakes the loop.
    pub waker: Arc<Waker>,
    /// The loop's token for this job.
    pub token: u64,
}

struct Task {
    job: Job,
    back: Return,
}

/// The workers; they stop when the pool is dropped.
pub struct DeferPool {
    tx: Sender<Task>,
    _workers: Vec<JoinHandle<()>>,
}

impl DeferPool {
    /// Starts `workers` threads.
    pub fn start(workers: usize) -> std::io::Result<DeferPool> {
        let (tx, rx) = bounded::<Task>(DEFER_QUEUE_MAX);
        let mut handles = Vec::with_capacity(workers);
        for n in 0..workers.max(1) {
            let rx: Receiver<Task> = rx.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("gateway-defer-{n}"))
                    .spawn(move || {
                        for task in rx {
                            let outcome =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(task.job))
                                    .unwrap_or_else(|_| {
                                        tracing::error!("deferred job panicked");
                                        Outcome::error(Status::Internal, "internal error")
                                    });
                            let _ = task.back.tx.send((task.back.token, outcome));
                            let _ = task.back.waker.wake();
                        }
                    })?,
            );
        }
        Ok(DeferPool {
            tx,
            _workers: handles,
        })
    }

    /// Queues `job`; `false` when the queue is full (the caller answers 503).
    pub fn run(&self, job: Job, back: Return) -> bool {
        match self.tx.try_send(Task { job, back }) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        }
    }
}
