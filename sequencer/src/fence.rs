//! The acknowledgement fence of a node that leads through a coordinator (CONTRACT 22): a
//! batch's writes are answered only before the deadline the coordinator last set from its
//! lease. Past it, another node may soon lead, so an applied write is answered as
//! [`LEADERSHIP_LOST`] instead of acknowledged: the client learns nothing was promised.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Why an applied write was not acknowledged: this node's lease ran out before its answer
/// could leave (API.md §19). It may or may not survive on the next leader.
pub const LEADERSHIP_LOST: &str =
    "leadership lost: applied on this node, not acknowledged; the next leader may not hold it";

/// Until when this node may acknowledge writes.
#[derive(Debug)]
pub struct AckFence {
    base: Instant,
    /// Nanoseconds after `base`; `u64::MAX`: no deadline (not coordinated); 0: closed.
    until_ns: AtomicU64,
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
        }
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
}
