//! Status changes on their way into the sequencer, in order: a change the ring has no room
//! for waits here and goes first next time, and one the sequencer refused without writing it
//! (for want of journal space, a full disk whose cancel reserve is spent; or while the node's
//! lease lapses) is sent again a little later, before any change not sent yet. A change sent
//! before that refusal came back may land first (a batch's FAILED before its refused
//! RETRYING, which the engine then refuses as a step back): the batch's final status is
//! still the one journaled last.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use ladder_engine::{Command, Hash32, TradeStatus};
use ladder_sequencer::{
    Completion, Submission, SubmitError, Submitter, Ticket, Work, JOURNAL_FULL, STANDBY_REFUSAL,
};

/// How long a change refused unwritten waits before it is sent again (the journal looks for
/// space about twice a second; a lease is renewed several times a lease).
pub const RETRY_AFTER_FULL: Duration = Duration::from_millis(200);

/// Tickets of every outbox of the process: a settlement thread started again (a promotion)
/// never takes an answer meant for the thread before it for one of its own.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Settlement's way into the sequencer: its ring, the sink its answers are delivered to, and
/// the channel that sink feeds.
pub struct SettlementRing {
    /// The ring.
    pub submitter: Submitter,
    /// The sink of its answers.
    pub sink: u16,
    /// Its answers (a change refused for want of journal space is sent again).
    pub answers: Receiver<Completion>,
}

/// One status change of a batch.
type Change = (Hash32, TradeStatus);

/// The settlement thread's ring into the sequencer and what it still has to send.
pub(crate) struct Outbox {
    ring: SettlementRing,
    /// Never sent yet, in order.
    waiting: VecDeque<Change>,
    /// Sent, not answered yet, by ticket token.
    in_flight: HashMap<u64, Change>,
    /// Refused for want of journal space, by the token they were sent with: sent again
    /// first, in that order.
    refused: BTreeMap<u64, Change>,
    /// Nothing is sent before this (the journal had no room).
    resend_at: Option<Instant>,
}

/// The sequencer stopped: the thread should end.
#[derive(Debug)]
pub(crate) struct Stopped;

impl Outbox {
    /// Sends through `ring`.
    pub(crate) fn new(ring: SettlementRing) -> Outbox {
        Outbox {
            ring,
            waiting: VecDeque::new(),
            in_flight: HashMap::new(),
            refused: BTreeMap::new(),
            resend_at: None,
        }
    }

    /// Queues `status` for batch `tx` behind earlier changes and sends what the ring takes.
    pub(crate) fn send(&mut self, tx: Hash32, status: TradeStatus) -> Result<(), Stopped> {
        self.waiting.push_back((tx, status));
        self.flush()
    }

    /// Takes the answers that came back, then sends changes (refused ones first) until the
    /// ring is full, unless the journal lately had no room.
    pub(crate) fn flush(&mut self) -> Result<(), Stopped> {
        self.take_answers();
        if self.resend_at.is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        self.resend_at = None;
        loop {
            let (refused_token, change) = match self.refused.first_key_value() {
                Some((&token, &change)) => (Some(token), change),
                None => match self.waiting.front() {
                    Some(&change) => (None, change),
                    None => return Ok(()),
                },
            };
            let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
            let submission = Submission {
                ticket: Ticket {
                    sink: self.ring.sink,
                    token,
                },
                work: Work::Command(Command::SettlementUpdate {
                    transaction_hash: change.0,
                    status: change.1,
                }),
            };
            match self.ring.submitter.try_submit(submission) {
                Ok(()) => {
                    match refused_token {
                        Some(old) => self.refused.remove(&old),
                        None => self.waiting.pop_front(),
                    };
                    self.in_flight.insert(token, change);
                }
                Err(SubmitError::Full(_)) => return Ok(()),
                Err(SubmitError::Stopped(_)) => return Err(Stopped),
            }
        }
    }

    /// Whether changes wait to be sent (for room in the ring, or for journal space).
    pub(crate) fn is_backed_up(&self) -> bool {
        !self.waiting.is_empty() || !self.refused.is_empty()
    }

    /// Reads the answers: a change refused unwritten (no journal space, or a lapsing lease;
    /// a node that no longer leads stops this thread when its run ends) goes back to be sent
    /// again. Any other answer ends its change's journey (one applied and answered as not
    /// confirmed by a standby was journaled all the same).
    fn take_answers(&mut self) {
        while let Ok(completion) = self.ring.answers.try_recv() {
            let token = completion.ticket().token;
            let Some(change) = self.in_flight.remove(&token) else {
                continue;
            };
            if let Completion::Refused {
                reason: JOURNAL_FULL | STANDBY_REFUSAL,
                ..
            } = completion
            {
                self.refused.insert(token, change);
                self.resend_at = Some(Instant::now() + RETRY_AFTER_FULL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::{unbounded, Sender};

    fn change(n: u8, status: TradeStatus) -> Change {
        (Hash32::from([n; 32]), status)
    }

    /// Batch `n`'s transaction hash.
    fn tx(n: u8) -> Hash32 {
        change(n, TradeStatus::Mined).0
    }

    /// The sequencer's refusal of the submission with `token`.
    fn refused(token: u64, reason: &'static str) -> Completion {
        Completion::Refused {
            ticket: Ticket { sink: 7, token },
            reason,
        }
    }

    /// An outbox on a one-ring sequencer that is never started: the test reads the ring's
    /// submissions through the sequencer's own `Rings` and answers them by hand.
    fn outbox() -> (Outbox, ladder_sequencer::Rings, Sender<Completion>) {
        let (mut submitters, rings) = ladder_sequencer::rings(1, 16);
        let (answer, answers) = unbounded();
        let ring = SettlementRing {
            submitter: submitters.remove(0),
            sink: 7,
            answers,
        };
        (Outbox::new(ring), rings, answer)
    }

    fn sent(rings: &ladder_sequencer::Rings) -> Vec<(u64, Change)> {
        rings
            .take_waiting()
            .into_iter()
            .map(|s| match s.work {
                Work::Command(Command::SettlementUpdate {
                    transaction_hash,
                    status,
                }) => (s.ticket.token, (transaction_hash, status)),
                _ => panic!("not a settlement update"),
            })
            .collect()
    }

    #[test]
    fn a_change_refused_for_want_of_journal_space_is_sent_again_before_later_ones() {
        let (mut outbox, rings, answer) = outbox();
        outbox.send(tx(1), TradeStatus::Mined).unwrap();
        outbox.send(tx(2), TradeStatus::Mined).unwrap();
        let first = sent(&rings);
        assert_eq!(first.len(), 2);
        // The first is refused (the reserve spent), the second applied.
        answer.send(refused(first[0].0, JOURNAL_FULL)).unwrap();
        answer
            .send(Completion::Applied {
                ticket: Ticket {
                    sink: 7,
                    token: first[1].0,
                },
                seq: 9,
                reply: ladder_engine::Reply::Ok,
            })
            .unwrap();
        outbox.send(tx(3), TradeStatus::Mined).unwrap();
        assert!(outbox.is_backed_up());
        assert!(sent(&rings).is_empty(), "nothing before the retry delay");
        std::thread::sleep(RETRY_AFTER_FULL + Duration::from_millis(20));
        outbox.flush().unwrap();
        let again: Vec<Change> = sent(&rings).into_iter().map(|(_, c)| c).collect();
        assert_eq!(
            again,
            vec![change(1, TradeStatus::Mined), change(3, TradeStatus::Mined)]
        );
        assert!(!outbox.is_backed_up());
    }

    #[test]
    fn a_change_applied_but_answered_as_lost_is_not_sent_again() {
        let (mut outbox, rings, answer) = outbox();
        outbox.send(tx(1), TradeStatus::Mined).unwrap();
        let first = sent(&rings);
        answer
            .send(refused(first[0].0, ladder_sequencer::REPLICA_LOST))
            .unwrap();
        outbox.flush().unwrap();
        assert!(!outbox.is_backed_up());
        assert!(sent(&rings).is_empty());
    }
}
