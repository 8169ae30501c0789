//! Counters and HDR histograms, one set per connection (and one for the user feeds), written
//! by the driver's thread and read once a second by the progress line.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use hdrhistogram::Histogram;

/// Largest latency a histogram holds: two minutes, in ns (larger values are clamped).
pub const LATENCY_NS_MAX: u64 = 120_000_000_000;
/// Most distinct error or rejection kinds kept per connection; the rest count as `other`.
pub const KINDS_MAX: usize = 64;

/// A histogram of nanoseconds, 1 ns to two minutes, three significant digits.
pub fn histogram() -> Histogram<u64> {
    // These bounds are valid constants: low >= 1, high >= 2 * low, sigfig <= 5.
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3)
        .unwrap_or_else(|_| unreachable!("valid histogram bounds"))
}

/// Records `ns` (clamped into the histogram's range).
pub fn record(h: &mut Histogram<u64>, ns: u64) {
    h.saturating_record(ns.clamp(1, LATENCY_NS_MAX));
}

/// Locks a mutex, also when another thread panicked while holding it (counters stay usable).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Counts `kind` in `map`, keeping at most [`KINDS_MAX`] distinct kinds.
pub fn count_kind(map: &mut BTreeMap<String, u64>, kind: &str) {
    if map.len() >= KINDS_MAX && !map.contains_key(kind) {
        *map.entry("other".into()).or_default() += 1;
    } else {
        *map.entry(kind.to_string()).or_default() += 1;
    }
}

/// The histograms of a connection.
pub struct Histograms {
    /// Request latency: from the planned send time (open loop) or the send (closed loop) to
    /// the whole response, for requests that did not fail.
    pub latency: Histogram<u64>,
    /// The same since the last progress line.
    pub interval: Histogram<u64>,
    /// How late each request left against its plan (open loop only).
    pub send_lag: Histogram<u64>,
    /// As `latency`, but to the answer's arrival at the socket (the kernel's receive
    /// timestamp): without the load generator's own delay in reading it.
    pub arrival: Histogram<u64>,
}

/// Outcomes by kind.
#[derive(Default)]
pub struct Kinds {
    /// Failures: transport errors, non-200 answers, rejections a correct run never gets.
    pub errors: BTreeMap<String, u64>,
    /// Business rejections the scenario can get (a FAK that found nothing): counted in `ok`.
    pub rejections: BTreeMap<String, u64>,
    /// Reasons in cancel results' `notCanceled` (the order filled first): counted in `ok`.
    pub not_canceled: BTreeMap<String, u64>,
}

/// One connection's measurements.
pub struct ConnStats {
    /// Requests written.
    pub sent: AtomicU64,
    /// Answered as intended (business rejections included).
    pub ok: AtomicU64,
    /// Failed.
    pub errors: AtomicU64,
    /// Of `ok`, business rejections.
    pub rejected: AtomicU64,
    /// Open loop: requests never sent because the connection fell too far behind.
    pub unsent: AtomicU64,
    /// DELETE /order requests sent.
    pub cancels_sent: AtomicU64,
    /// Orders the cancels cancelled.
    pub canceled: AtomicU64,
    /// Cancel slots that placed a spare quote because no order was known to cancel.
    pub cancels_substituted: AtomicU64,
    /// Closed loop: the connection used up its pre-signed orders before the end.
    pub pool_exhausted: AtomicBool,
    /// When the last answer arrived (a success or not), in ns since the start.
    pub last_done_ns: AtomicU64,
    /// The histograms.
    pub histograms: Mutex<Histograms>,
    /// Outcomes by kind.
    pub kinds: Mutex<Kinds>,
}

impl Default for ConnStats {
    fn default() -> Self {
        ConnStats {
            sent: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            unsent: AtomicU64::new(0),
            cancels_sent: AtomicU64::new(0),
            canceled: AtomicU64::new(0),
            cancels_substituted: AtomicU64::new(0),
            pool_exhausted: AtomicBool::new(false),
            last_done_ns: AtomicU64::new(0),
            histograms: Mutex::new(Histograms {
                latency: histogram(),
                interval: histogram(),
                send_lag: histogram(),
                arrival: histogram(),
            }),
            kinds: Mutex::new(Kinds::default()),
        }
    }
}

impl ConnStats {
    /// A success that took `latency_ns` (`arrival_ns` to reach the socket, where the kernel
    /// timestamps), sent `lag_ns` late (open loop).
    pub fn ok(&self, latency_ns: u64, lag_ns: Option<u64>, arrival_ns: Option<u64>) {
        self.ok.fetch_add(1, Ordering::Relaxed);
        let mut h = lock(&self.histograms);
        record(&mut h.latency, latency_ns);
        record(&mut h.interval, latency_ns);
        if let Some(lag) = lag_ns {
            record(&mut h.send_lag, lag);
        }
        if let Some(arrival) = arrival_ns {
            record(&mut h.arrival, arrival);
        }
    }

    /// A failure of `kind`.
    pub fn error(&self, kind: &str) {
        self.errors_n(kind, 1);
    }

    /// `n` failures of `kind`.
    pub fn errors_n(&self, kind: &str, n: u64) {
        self.errors.fetch_add(n, Ordering::Relaxed);
        let mut kinds = lock(&self.kinds);
        let map = &mut kinds.errors;
        let key = if map.len() >= KINDS_MAX && !map.contains_key(kind) {
            "other"
        } else {
            kind
        };
        *map.entry(key.to_string()).or_default() += n;
    }

    /// A business rejection (already counted as ok).
    pub fn rejection(&self, reason: &str) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        count_kind(&mut lock(&self.kinds).rejections, reason);
    }

    /// A `notCanceled` reason of a cancel result.
    pub fn not_canceled(&self, reason: &str) {
        count_kind(&mut lock(&self.kinds).not_canceled, reason);
    }
}

/// What the `/ws/user` listeners measured.
pub struct FeedStats {
    /// Time from sending a taker order to its first `trade` event (MATCHED, TAKER side).
    pub fill_notify: Mutex<Histogram<u64>>,
    /// Events received.
    pub events: AtomicU64,
    /// Cancels signed from PLACEMENT events.
    pub cancels_signed: AtomicU64,
    /// Problems with the feeds (they do not count as request errors).
    pub errors: Mutex<BTreeMap<String, u64>>,
}

impl Default for FeedStats {
    fn default() -> Self {
        FeedStats {
            fill_notify: Mutex::new(histogram()),
            events: AtomicU64::new(0),
            cancels_signed: AtomicU64::new(0),
            errors: Mutex::new(BTreeMap::new()),
        }
    }
}

impl FeedStats {
    /// A feed problem of `kind`.
    pub fn error(&self, kind: &str) {
        count_kind(&mut lock(&self.errors), kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_bounded() {
        let mut map = BTreeMap::new();
        for i in 0..KINDS_MAX + 10 {
            count_kind(&mut map, &format!("k{i}"));
        }
        assert_eq!(map.len(), KINDS_MAX + 1);
        assert_eq!(map["other"], 10);
    }

    #[test]
    fn out_of_range_latencies_are_clamped() {
        let mut h = histogram();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
        assert!(h.max() >= LATENCY_NS_MAX);
    }
}
