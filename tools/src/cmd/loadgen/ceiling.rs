//! The raw ceiling: how many signature recoveries per second this machine does on the
//! gateway's thread count. Every order and every cancel costs the gateway one recovery, so no
//! run can place orders faster than this; a run's achieved rate as a fraction of it says how
//! much of the machine the rest of the service (HTTP, JSON, journal, engine) takes.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ladder_client::Wallet;
use ladder_protocol::Signature;

/// Distinct pre-signed digests the probe cycles through.
pub const PROBE_DIGESTS: usize = 1_024;
/// Recoveries between two looks at the clock.
const CHECK_EVERY: u64 = 64;

/// What the probe measured.
#[derive(Clone, Copy, Debug)]
pub struct Ceiling {
    /// Recoveries per second over all threads.
    pub recoveries_per_s: f64,
    /// Threads used (the gateway's thread count).
    pub threads: usize,
}

/// Recovers pre-signed digests on `threads` threads for about `duration`.
pub fn probe(threads: usize, duration: Duration) -> Result<Ceiling, String> {
    let threads = threads.max(1);
    let wallet = Wallet::random();
    let samples: Vec<([u8; 32], Signature)> = (0..PROBE_DIGESTS)
        .map(|_| {
            let digest: [u8; 32] = rand::random();
            (digest, wallet.sign_digest(&digest))
        })
        .collect();
    let (digest, signature) = &samples[0];
    if signature.recover_address(digest) != Ok(wallet.address()) {
        return Err("ceiling probe: a signature does not recover to its signer".into());
    }
    let total = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (samples, total, stop) = (&samples, &total, &stop);
            scope.spawn(move || {
                let mut done = 0u64;
                let mut i = t * 97;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..CHECK_EVERY {
                        let (digest, signature) = &samples[i % PROBE_DIGESTS];
                        let _ = black_box(signature.recover_address(black_box(digest)));
                        i += 1;
                    }
                    done += CHECK_EVERY;
                    if started.elapsed() >= duration {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                total.fetch_add(done, Ordering::Relaxed);
            });
        }
    });
    let elapsed_s = started.elapsed().as_secs_f64().max(1e-9);
    Ok(Ceiling {
        recoveries_per_s: total.load(Ordering::Relaxed) as f64 / elapsed_s,
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_counts_recoveries_on_each_thread() {
        let ceiling = probe(2, Duration::from_millis(50)).unwrap();
        assert_eq!(ceiling.threads, 2);
        assert!(ceiling.recoveries_per_s > 100.0, "{ceiling:?}");
    }
}
