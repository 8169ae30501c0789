//! Token buckets per API key and per client IP (API.md §19–18): N tokens, refilled at N/10
//! per second; a request that finds no token is refused with `Retry-After` and spends
//! nothing. Buckets live in sharded maps shared by the gateway threads, bounded in size.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::time::Instant;

use parking_lot::Mutex;

const SHARDS: usize = 16;
/// Most buckets kept per shard; past it, full (idle) buckets are dropped.
pub const BUCKETS_PER_SHARD_MAX: usize = 16_384;
/// The window the limit is stated over (API.md §19: requests per 10 s).
pub const WINDOW_S: f64 = 10.0;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// A set of token buckets keyed by `K`.
pub struct RateLimiter<K> {
    capacity: f64,
    refill_per_s: f64,
    shards: Vec<Mutex<HashMap<K, Bucket>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl<K: Hash + Eq + Clone> RateLimiter<K> {
    /// `per_window` requests per 10 s for each key; `0` turns the limit off.
    pub fn new(per_window: u32) -> RateLimiter<K> {
        RateLimiter {
            capacity: f64::from(per_window),
            refill_per_s: f64::from(per_window) / WINDOW_S,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
        }
    }

    /// Whether the limit is on.
    pub fn enabled(&self) -> bool {
        self.capacity > 0.0
    }

    /// Tokens a full bucket holds.
    pub fn capacity_tokens(&self) -> u32 {
        self.capacity as u32
    }

    /// Takes a token for `key` at `now`, or says in how many whole seconds one will be there.
    pub fn take(&self, key: &K, now: Instant) -> Result<(), u64> {
        self.take_n(key, 1, now)
    }

    /// Takes `n` tokens for `key` at `now` (at most the bucket's capacity, so that any
    /// request can pass once the bucket is full), or none and says in how many whole seconds
    /// they will be there.
    pub fn take_n(&self, key: &K, n: u32, now: Instant) -> Result<(), u64> {
        if !self.enabled() || n == 0 {
            return Ok(());
        }
        let n = f64::from(n).min(self.capacity);
        let mut map = self.shard(key).lock();
        if map.len() >= BUCKETS_PER_SHARD_MAX && !map.contains_key(key) {
            let (capacity, refill) = (self.capacity, self.refill_per_s);
            map.retain(|_, b| refilled(b, now, capacity, refill) < capacity);
        }
        let bucket = map.entry(key.clone()).or_insert(Bucket {
            tokens: self.capacity,
            updated: now,
        });
        bucket.tokens = refilled(bucket, now, self.capacity, self.refill_per_s);
        bucket.updated = now;
        if bucket.tokens >= n {
            bucket.tokens -= n;
            Ok(())
        } else {
            let wait_s = (n - bucket.tokens) / self.refill_per_s;
            Err(wait_s.ceil().max(1.0) as u64)
        }
    }
}

impl<K: Hash + Eq + Clone> RateLimiter<K> {
    /// The shard holding `key`'s bucket.
    fn shard(&self, key: &K) -> &Mutex<HashMap<K, Bucket>> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }

    /// Returns the token a request took from `key`'s bucket, when another limit refused
    /// that request after all (never above the bucket's capacity).
    pub fn give_back(&self, key: &K) {
        if !self.enabled() {
            return;
        }
        if let Some(bucket) = self.shard(key).lock().get_mut(key) {
            bucket.tokens = (bucket.tokens + 1.0).min(self.capacity);
        }
    }
}

fn refilled(bucket: &Bucket, now: Instant, capacity: f64, refill_per_s: f64) -> f64 {
    let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
    (bucket.tokens + elapsed * refill_per_s).min(capacity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_request_of_n_units_takes_n_tokens_or_none() {
        let limiter: RateLimiter<u8> = RateLimiter::new(100);
        let now = Instant::now();
        assert_eq!(limiter.take_n(&1, 60, now), Ok(()));
        // 40 left: 60 more are refused and take nothing; 40 pass.
        assert!(limiter.take_n(&1, 60, now).is_err());
        assert_eq!(limiter.take_n(&1, 40, now), Ok(()));
        assert!(limiter.take(&1, now).is_err());
        // More than the capacity costs the capacity: it passes once the bucket is full.
        let later = now + Duration::from_secs(10);
        assert_eq!(limiter.take_n(&1, 1_000, later), Ok(()));
        assert!(limiter.take(&1, later).is_err());
        assert_eq!(limiter.take_n(&2, 0, now), Ok(()), "nothing to take");
    }

    #[test]
    fn a_bucket_allows_n_then_refuses_then_refills() {
        let limiter = RateLimiter::new(10);
        let t0 = Instant::now();
        for _ in 0..10 {
            assert_eq!(limiter.take(&"k", t0), Ok(()));
        }
        assert_eq!(limiter.take(&"k", t0), Err(1));
        assert_eq!(limiter.take(&"other", t0), Ok(()), "buckets are per key");
        assert_eq!(
            limiter.take(&"k", t0 + Duration::from_millis(1_000)),
            Ok(()),
            "1 token per second"
        );
        assert!(limiter
            .take(&"k", t0 + Duration::from_millis(1_000))
            .is_err());
    }

    #[test]
    fn a_refused_request_spends_nothing_and_zero_means_off() {
        let limiter = RateLimiter::new(1);
        let t0 = Instant::now();
        assert_eq!(limiter.take(&1, t0), Ok(()));
        for _ in 0..5 {
            assert_eq!(limiter.take(&1, t0), Err(10));
        }
        assert_eq!(limiter.take(&1, t0 + Duration::from_secs(10)), Ok(()));
        // A token given back (another limit refused the request) can be taken again.
        limiter.give_back(&1);
        assert_eq!(limiter.take(&1, t0 + Duration::from_secs(10)), Ok(()));
        assert!(limiter.take(&1, t0 + Duration::from_secs(10)).is_err());
        limiter.give_back(&1);
        limiter.give_back(&1);
        assert_eq!(limiter.take(&1, t0 + Duration::from_secs(10)), Ok(()));
        assert!(
            limiter.take(&1, t0 + Duration::from_secs(10)).is_err(),
            "never above the capacity"
        );
        let off = RateLimiter::new(0);
        for _ in 0..100 {
            assert_eq!(off.take(&1, t0), Ok(()));
        }
    }
}
