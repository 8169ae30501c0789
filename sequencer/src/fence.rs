//! The acknowledgement fence of a node that leads through a coordinator (CONTRACT 22): a
//! batch's writes are answered only before the deadline the coordinator last set from its
//! lease. Past it, another node may soon lead, so an applied write is answered as
//! [`LEADERSHIP_LOST`] instead of acknowledged: the client learns nothing was promised.
//! With a witness, a batch held by the required standbys is also answered only once the
//! witness (etcd's `acknowledged` key) holds how far it goes; one it does not take is
//! answered as [`LEADERSHIP_LOST`] too, and while it takes nothing the writes are refused
//! before they are applied.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Something outside the node that must hold how far its writes are held by standbys before
/// they are answered: the coordinator's `acknowledged` position in etcd, which keeps a node
/// that missed them from leading.
pub trait AckWitness: Send + Sync {
    /// The required standbys hold every record through `seq`: returns once the witness
    /// holds that (true), or false as soon as it cannot or `give_up()` says so.
    fn witness(&self, seq: u64, give_up: &dyn Fn() -> bool) -> bool;

    /// Whether the witness holds every record through `seq` now (without waiting; it is
    /// asked to when not).
    fn holds(&self, seq: u64) -> bool;

    /// Whether the witness cannot take positions now (its last attempt failed): writes that
    /// would wait for it are refused before they are applied.
    fn failing(&self) -> bool;
}

/// Why an applied write was not acknowledged: this node's lease ran out before its answer
/// could leave (API.md §19). It may or may not survive on the next leader.
pub const LEADERSHIP_LOST: &str =
    "leadership lost: applied on this node, not acknowledged; the next leader may not hold it";

/// Until when this node may acknowledge writes, and who must hold them first.
pub struct AckFence {
    base: Instant,
    /// Nanoseconds after `base`; `u64::MAX`: no deadline (not coordinated); 0: closed.
    until_ns: AtomicU64,
    witness: Option<Arc<dyn AckWitness>>,
}

impl std::fmt::Debug for AckFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckFence")
            .field("until_ns", &self.until_ns)
            .field("witnessed", &self.witness.is_some())
            .finish()
    }
}

impl Default for AckFence {
    fn default() -> Self {
        AckFence::open()
    }
}

impl AckFence {
    /// A fence that never closes (a node without a coordinator).
    pub fn open() -> AckFence {
        AckFence {
            base: Instant::now(),
            until_ns: AtomicU64::new(u64::MAX),
            witness: None,
        }
    }

    /// This fence, with `witness` to hold replicated writes before they are answered.
    pub fn witnessed_by(mut self, witness: Arc<dyn AckWitness>) -> AckFence {
        self.witness = Some(witness);
        self
    }

    /// A closed fence: nothing is acknowledged until a deadline is set.
    pub fn closed() -> AckFence {
        let fence = AckFence::open();
        fence.allow_until(None);
        fence
    }

    /// Acknowledgements may leave until `deadline`; none at all for `None`.
    pub fn allow_until(&self, deadline: Option<Instant>) {
        let until = deadline.map_or(0, |d| {
            (d.saturating_duration_since(self.base).as_nanos() as u64).clamp(1, u64::MAX - 1)
        });
        self.until_ns.store(until, Ordering::Release);
    }

    /// Whether an acknowledgement may leave now.
    pub fn may_acknowledge(&self) -> bool {
        let until = self.until_ns.load(Ordering::Acquire);
        until == u64::MAX || (self.base.elapsed().as_nanos() as u64) < until
    }

    /// The required standbys hold every record through `seq`: whether the witness holds that
    /// too before the deadline (always, without a witness).
    pub fn witnessed(&self, seq: u64) -> bool {
        self.witness
            .as_ref()
            .is_none_or(|witness| witness.witness(seq, &|| !self.may_acknowledge()))
    }

    /// Whether the witness holds every record through `seq` now (always, without one).
    pub fn witness_holds(&self, seq: u64) -> bool {
        self.witness
            .as_ref()
            .is_none_or(|witness| witness.holds(seq))
    }

    /// Whether the witness cannot take positions now (never, without one).
    pub fn witness_failing(&self) -> bool {
        self.witness
            .as_ref()
            .is_some_and(|witness| witness.failing())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_fence_allows_until_its_deadline_and_not_after() {
        assert!(AckFence::open().may_acknowledge());
        assert!(!AckFence::closed().may_acknowledge());
        let fence = AckFence::closed();
        fence.allow_until(Some(Instant::now() + Duration::from_secs(60)));
        assert!(fence.may_acknowledge());
        fence.allow_until(Some(Instant::now() - Duration::from_millis(1)));
        assert!(!fence.may_acknowledge());
        fence.allow_until(None);
        assert!(!fence.may_acknowledge());
    }

    /// A witness that holds what it is told, up to a bound.
    struct HoldsUpTo(u64);

    impl AckWitness for HoldsUpTo {
        fn witness(&self, seq: u64, give_up: &dyn Fn() -> bool) -> bool {
            seq <= self.0 && !give_up()
        }

        fn holds(&self, seq: u64) -> bool {
            seq <= self.0
        }

        fn failing(&self) -> bool {
            false
        }
    }

    #[test]
    fn a_witness_is_asked_while_the_deadline_holds() {
        assert!(AckFence::closed().witnessed(u64::MAX), "no witness");
        let fence = AckFence::closed().witnessed_by(Arc::new(HoldsUpTo(10)));
        assert!(!fence.witnessed(5), "past the deadline: it gives up");
        fence.allow_until(Some(Instant::now() + Duration::from_secs(60)));
        assert!(fence.witnessed(10));
        assert!(!fence.witnessed(11));
        assert!(fence.witness_holds(10) && !fence.witness_holds(11));
        assert!(!fence.witness_failing());
        assert!(AckFence::open().witness_holds(u64::MAX));
    }
}
