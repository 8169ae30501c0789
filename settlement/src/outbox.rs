//! Status changes on their way into the sequencer, in order: a change the ring has no room
//! for waits here and goes first next time.

use std::collections::VecDeque;

use ladder_engine::{Command, Hash32, TradeStatus};
use ladder_sequencer::{Submission, SubmitError, Submitter, Ticket, Work};

/// The settlement thread's ring into the sequencer and what it still has to send.
pub(crate) struct Outbox {
    submitter: Submitter,
    sink: u16,
    next_token: u64,
    waiting: VecDeque<(Hash32, TradeStatus)>,
}

/// The sequencer stopped: the thread should end.
#[derive(Debug)]
pub(crate) struct Stopped;

impl Outbox {
    /// Sends through `submitter`; completions go to sink `sink`.
    pub(crate) fn new(submitter: Submitter, sink: u16) -> Outbox {
        Outbox {
            submitter,
            sink,
            next_token: 0,
            waiting: VecDeque::new(),
        }
    }

    /// Queues `status` for batch `tx` behind earlier changes and sends what the ring takes.
    pub(crate) fn send(&mut self, tx: Hash32, status: TradeStatus) -> Result<(), Stopped> {
        self.waiting.push_back((tx, status));
        self.flush()
    }

    /// Sends waiting changes until the ring is full.
    pub(crate) fn flush(&mut self) -> Result<(), Stopped> {
        while let Some(&(transaction_hash, status)) = self.waiting.front() {
            self.next_token += 1;
            let submission = Submission {
                ticket: Ticket {
                    sink: self.sink,
                    token: self.next_token,
                },
                work: Work::Command(Command::SettlementUpdate {
                    transaction_hash,
                    status,
                }),
            };
            match self.submitter.try_submit(submission) {
                Ok(()) => {
                    self.waiting.pop_front();
                }
                Err(SubmitError::Full(_)) => return Ok(()),
                Err(SubmitError::Stopped(_)) => return Err(Stopped),
            }
        }
        Ok(())
    }

    /// Whether changes are waiting for room.
    pub(crate) fn is_backed_up(&self) -> bool {
        !self.waiting.is_empty()
    }
}
