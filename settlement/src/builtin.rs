//! The built-in backend (API.md §12): confirms batches against Ladder's own ledger after a
//! delay: MINED `delay` after the match and CONFIRMED `delay` after that; a configured share
//! of batches, chosen from the transaction hash so a replay agrees, goes to RETRYING after
//! the delay and FAILED one delay later.

use ladder_engine::{Hash32, TimestampNs, TradeStatus, NANOS_PER_MILLI};

use crate::backend::{Backend, Step};

/// The built-in backend.
#[derive(Clone, Debug)]
pub struct BuiltIn {
    delay_ns: u64,
    fail_percent: u8,
}

impl BuiltIn {
    /// Steps `delay_ms` apart; `fail_percent` of batches fail.
    pub fn new(delay_ms: u64, fail_percent: u8) -> BuiltIn {
        BuiltIn {
            delay_ns: delay_ms.saturating_mul(NANOS_PER_MILLI),
            fail_percent: fail_percent.min(100),
        }
    }
}

/// Whether the batch `transaction_hash` fails when `fail_percent` of batches do: the hash's
/// four words, folded and mixed (transaction hashes are part of a taker's order hash and a
/// batch number, so not uniform), modulo 100, below the percentage.
pub fn fails(transaction_hash: &Hash32, fail_percent: u8) -> bool {
    let folded = transaction_hash.0.chunks_exact(8).fold(0u64, |acc, word| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        (acc ^ u64::from_be_bytes(bytes)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    });
    mix(folded) % 100 < u64::from(fail_percent)
}

/// The murmur3 finaliser: every input bit affects every output bit.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl Backend for BuiltIn {
    fn next_step(
        &mut self,
        transaction_hash: &Hash32,
        status: TradeStatus,
        at_ns: TimestampNs,
    ) -> Option<Step> {
        let due_ns = at_ns.saturating_add(self.delay_ns);
        let failing = fails(transaction_hash, self.fail_percent);
        let status = match (status, failing) {
            (TradeStatus::Matched, false) => TradeStatus::Mined,
            // A mined batch is confirmed whatever the percentage says now: it can be MINED
            // and failing only when the service restarted with another percentage.
            (TradeStatus::Mined, _) => TradeStatus::Confirmed,
            (TradeStatus::Matched, true) => TradeStatus::Retrying,
            (TradeStatus::Retrying, _) => TradeStatus::Failed,
            _ => return None,
        };
        Some(Step { due_ns, status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_engine::Bytes32;
    use ladder_engine::FixedBytes;

    #[test]
    fn a_healthy_batch_is_mined_then_confirmed_one_delay_apart() {
        let mut b = BuiltIn::new(100, 0);
        let tx = FixedBytes([7; 32]);
        assert_eq!(
            b.next_step(&tx, TradeStatus::Matched, 1_000),
            Some(Step {
                due_ns: 100_001_000,
                status: TradeStatus::Mined
            })
        );
        assert_eq!(
            b.next_step(&tx, TradeStatus::Mined, 5),
            Some(Step {
                due_ns: 100_000_005,
                status: TradeStatus::Confirmed
            })
        );
        assert_eq!(b.next_step(&tx, TradeStatus::Confirmed, 5), None);
    }

    #[test]
    fn a_failing_batch_retries_then_fails_and_the_choice_follows_the_hash() {
        let mut b = BuiltIn::new(10, 100);
        let tx = FixedBytes([9; 32]);
        assert_eq!(
            b.next_step(&tx, TradeStatus::Matched, 0).map(|s| s.status),
            Some(TradeStatus::Retrying)
        );
        assert_eq!(
            b.next_step(&tx, TradeStatus::Retrying, 0).map(|s| s.status),
            Some(TradeStatus::Failed)
        );
        assert_eq!(b.next_step(&tx, TradeStatus::Failed, 0), None);
        // Mined under a percentage that spared it, then restarted under one that fails it.
        assert_eq!(
            b.next_step(&tx, TradeStatus::Mined, 0).map(|s| s.status),
            Some(TradeStatus::Confirmed)
        );
        let hashes: Vec<Bytes32> = (0..1000u64)
            .map(|n| ladder_engine::batch_hash(n, &FixedBytes([7; 32])))
            .collect();
        let failing = hashes.iter().filter(|h| fails(h, 30)).count();
        assert!((200..400).contains(&failing), "about 30% fail: {failing}");
        assert!(hashes.iter().all(|h| fails(h, 30) == fails(h, 30)));
        assert!(!hashes.iter().any(|h| fails(h, 0)));
    }
}
