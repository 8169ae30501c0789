//! The result: one JSON line on stdout (the API.md §19 fields first, extras after), and with
//! `--out DIR` the full result (`result.json`) and a percentile plot (`latency.svg`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::ceiling::Ceiling;
use super::plan::Scenario;
use super::setup::{ServiceUse, ThreadUse};
use super::stats::{histogram, lock, ConnStats, FeedStats};

/// Most "nines" a percentile curve reaches (99.999 %).
pub const NINES_MAX: f64 = 5.0;
/// Points per nine on a percentile curve.
const POINTS_PER_NINE: u32 = 20;

/// How the run was made.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// The scenario.
    pub scenario: Scenario,
    /// Offered rate (open loop) or none.
    pub rate: Option<u64>,
    /// `--duration`.
    pub duration_s: u64,
    /// `--connections`.
    pub connections: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// The signature-recovery ceiling.
    pub ceiling: Ceiling,
    /// Whether the gateway's thread count was read from `/metrics` (else assumed).
    pub gateway_threads_from_metrics: bool,
    /// Seconds spent creating the market and accounts.
    pub setup_s: f64,
    /// Seconds spent signing.
    pub presign_s: f64,
    /// Orders signed (slots, spares and book).
    pub orders_presigned: u64,
    /// Pre-built book orders.
    pub book_orders: u64,
    /// The run's market (condition id).
    pub market: String,
    /// What the service used over the run (`/metrics` before and after), when `/metrics`
    /// answered.
    pub service_use: Option<ServiceUse>,
}

/// The stdout line: API.md §19's fields in order, then extras.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Offered requests per second; `null` in closed loop.
    pub offered_rate: Option<u64>,
    /// Successful requests per second over the run.
    pub achieved_rate: f64,
    /// Requests answered as intended (business rejections included).
    pub ok: u64,
    /// Requests that failed (see `errors_by_kind`).
    pub errors: u64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Worst, µs.
    pub max_us: u64,
    /// `resting`, `mm` or `burst`.
    pub scenario: &'static str,
    /// `open` or `closed`.
    pub mode: &'static str,
    /// Connections.
    pub connections: usize,
    /// Seconds from the start to the last answer.
    pub elapsed_s: f64,
    /// Requests sent.
    pub sent: u64,
    /// Of `ok`, business rejections (see `rejections_by_reason` in result.json).
    pub business_rejections: u64,
    /// Failures by kind.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Signature recoveries per second on `ceiling_threads` threads.
    pub ceiling_recoveries_per_s: u64,
    /// The gateway's thread count the ceiling was measured with.
    pub ceiling_threads: usize,
    /// `achieved_rate / ceiling_recoveries_per_s`.
    pub fraction_of_ceiling: f64,
    /// Taker orders whose fill notification was timed.
    pub fill_notify_count: u64,
    /// Median time from sending a taker order to its trade event on /ws/user, µs.
    pub fill_notify_p50_us: Option<u64>,
    /// 99th percentile of the same, µs.
    pub fill_notify_p99_us: Option<u64>,
    /// 99th percentile of how late requests left against their plan, µs (open loop).
    pub send_lag_p99_us: Option<u64>,
    /// Median latency to the answer's arrival at this machine's socket (the kernel's receive
    /// timestamp, Linux), µs: `p50_us` without loadgen's own delay in reading the answer.
    pub arrival_p50_us: Option<u64>,
    /// 99th percentile of the same, µs.
    pub arrival_p99_us: Option<u64>,
    /// 99.9th percentile of the same, µs.
    pub arrival_p999_us: Option<u64>,
    /// The service's CPU over the run (all its threads, user and system), seconds.
    pub service_cpu_s: Option<f64>,
    /// That CPU per request answered `ok`, µs (in `resting`, each request is one signed order).
    pub service_cpu_us_per_request: Option<f64>,
    /// The CPU one signature recovery takes in the ceiling probe, µs: the part of a signed
    /// order no service can avoid.
    pub recovery_cpu_us: f64,
    /// `service_cpu_us_per_request / recovery_cpu_us`.
    pub cpu_per_request_over_recovery: Option<f64>,
    /// Per thread name of the service, over the run: CPU seconds (`cpu_s`) and seconds it
    /// was ready to run but waited for a core (`wait_s`); a long wait on the sequencer or a
    /// gateway thread means the machine, not the service's code, held requests up.
    pub service_threads: BTreeMap<String, ThreadUse>,
}

/// Cancel outcomes.
#[derive(Clone, Debug, Serialize)]
pub struct Cancels {
    /// DELETE /order requests sent.
    pub sent: u64,
    /// Orders they cancelled.
    pub canceled: u64,
    /// Cancel slots that placed a spare quote (no order id known yet).
    pub substituted: u64,
    /// `notCanceled` reasons.
    pub not_canceled_by_reason: BTreeMap<String, u64>,
    /// Cancels signed by the maker feeds.
    pub signed_by_feeds: u64,
}

/// One point of a percentile curve.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Point {
    /// Percentile, 0..100.
    pub percentile: f64,
    /// Latency at it, µs.
    pub latency_us: f64,
}

/// result.json.
#[derive(Clone, Debug, Serialize)]
pub struct Full {
    /// The stdout line's fields.
    #[serde(flatten)]
    pub summary: Summary,
    /// Business rejections by reason.
    pub rejections_by_reason: BTreeMap<String, u64>,
    /// Open loop: requests not sent because their connection fell too far behind.
    pub unsent: u64,
    /// Closed loop: some connection used up its pre-signed orders before the end.
    pub pool_exhausted: bool,
    /// Cancel outcomes.
    pub cancels: Cancels,
    /// Requests in flight per connection.
    pub pipeline_depth: usize,
    /// `--duration`.
    pub duration_s: u64,
    /// Whether `ceiling_threads` was read from the service's `/metrics`.
    pub gateway_threads_from_metrics: bool,
    /// Seconds of set-up (market, accounts, keys).
    pub setup_s: f64,
    /// Seconds of signing.
    pub presign_s: f64,
    /// Orders signed before the clock started.
    pub orders_presigned: u64,
    /// Orders of the pre-built book.
    pub book_orders: u64,
    /// The run's market.
    pub market: String,
    /// Events received on /ws/user.
    pub feed_events: u64,
    /// Feed problems (not request errors).
    pub feed_errors: BTreeMap<String, u64>,
    /// Request latency curve.
    pub latency_percentiles: Vec<Point>,
    /// Fill-notification curve.
    pub fill_notify_percentiles: Vec<Point>,
    /// Send-lag curve (open loop).
    pub send_lag_percentiles: Vec<Point>,
}

fn us(ns: u64) -> u64 {
    (ns + 500) / 1_000
}

fn quantile_us(h: &Histogram<u64>, q: f64) -> Option<u64> {
    (!h.is_empty()).then(|| us(h.value_at_quantile(q)))
}

/// Points at 0, 0.05, 0.1, ... nines, up to what the sample count supports, then the max.
pub fn curve(h: &Histogram<u64>) -> Vec<Point> {
    if h.is_empty() {
        return Vec::new();
    }
    let nines_max = (h.len() as f64).log10().clamp(1.0, NINES_MAX);
    let mut out = Vec::new();
    let steps = (nines_max * f64::from(POINTS_PER_NINE)) as u32;
    for step in 0..=steps {
        let nines = f64::from(step) / f64::from(POINTS_PER_NINE);
        let q = 1.0 - 10f64.powf(-nines);
        out.push(Point {
            percentile: q * 100.0,
            latency_us: h.value_at_quantile(q) as f64 / 1e3,
        });
    }
    out.push(Point {
        percentile: 100.0,
        latency_us: h.max() as f64 / 1e3,
    });
    out
}

/// Sums the connections' measurements into the result.
pub fn build(info: &RunInfo, conns: &[Arc<ConnStats>], feed: &FeedStats) -> Full {
    let (mut latency, mut lag, mut arrival) = (histogram(), histogram(), histogram());
    let mut errors_by_kind = BTreeMap::new();
    let mut rejections = BTreeMap::new();
    let mut not_canceled = BTreeMap::new();
    let sum = |f: fn(&ConnStats) -> u64| conns.iter().map(|c| f(c)).sum::<u64>();
    let mut last_done_ns = 0;
    for c in conns {
        let h = lock(&c.histograms);
        let _ = latency.add(&h.latency);
        let _ = lag.add(&h.send_lag);
        let _ = arrival.add(&h.arrival);
        let kinds = lock(&c.kinds);
        merge(&mut errors_by_kind, &kinds.errors);
        merge(&mut rejections, &kinds.rejections);
        merge(&mut not_canceled, &kinds.not_canceled);
        last_done_ns = last_done_ns.max(c.last_done_ns.load(Ordering::Relaxed));
    }
    let ok = sum(|c| c.ok.load(Ordering::Relaxed));
    let elapsed_s = if last_done_ns > 0 {
        last_done_ns as f64 / 1e9
    } else {
        info.duration_s as f64
    };
    let achieved_rate = ok as f64 / elapsed_s.max(1e-9);
    let fill = lock(&feed.fill_notify).clone();
    let recovery_cpu_us =
        info.ceiling.threads as f64 * 1e6 / info.ceiling.recoveries_per_s.max(1.0);
    let service_cpu_s = info.service_use.as_ref().map(|u| u.cpu_s);
    let service_cpu_us_per_request = service_cpu_s
        .filter(|_| ok > 0)
        .map(|cpu| (cpu * 1e6 / ok as f64 * 10.0).round() / 10.0);
    let summary = Summary {
        offered_rate: info.rate,
        achieved_rate: (achieved_rate * 10.0).round() / 10.0,
        ok,
        errors: sum(|c| c.errors.load(Ordering::Relaxed)),
        p50_us: quantile_us(&latency, 0.5).unwrap_or(0),
        p90_us: quantile_us(&latency, 0.9).unwrap_or(0),
        p99_us: quantile_us(&latency, 0.99).unwrap_or(0),
        p999_us: quantile_us(&latency, 0.999).unwrap_or(0),
        max_us: if latency.is_empty() {
            0
        } else {
            us(latency.max())
        },
        scenario: info.scenario.name(),
        mode: if info.rate.is_some() {
            "open"
        } else {
            "closed"
        },
        connections: info.connections,
        elapsed_s: (elapsed_s * 1e3).round() / 1e3,
        sent: sum(|c| c.sent.load(Ordering::Relaxed)),
        business_rejections: sum(|c| c.rejected.load(Ordering::Relaxed)),
        errors_by_kind,
        ceiling_recoveries_per_s: info.ceiling.recoveries_per_s.round() as u64,
        ceiling_threads: info.ceiling.threads,
        fraction_of_ceiling: (achieved_rate / info.ceiling.recoveries_per_s.max(1.0) * 1e4).round()
            / 1e4,
        fill_notify_count: fill.len(),
        fill_notify_p50_us: quantile_us(&fill, 0.5),
        fill_notify_p99_us: quantile_us(&fill, 0.99),
        send_lag_p99_us: quantile_us(&lag, 0.99),
        arrival_p50_us: quantile_us(&arrival, 0.5),
        arrival_p99_us: quantile_us(&arrival, 0.99),
        arrival_p999_us: quantile_us(&arrival, 0.999),
        service_cpu_s: service_cpu_s.map(|s| (s * 1e3).round() / 1e3),
        service_cpu_us_per_request,
        recovery_cpu_us: (recovery_cpu_us * 100.0).round() / 100.0,
        cpu_per_request_over_recovery: service_cpu_us_per_request
            .map(|cpu| (cpu / recovery_cpu_us.max(f64::MIN_POSITIVE) * 100.0).round() / 100.0),
        service_threads: info
            .service_use
            .iter()
            .flat_map(|u| &u.threads)
            .map(|(name, used)| {
                let round = |s: f64| (s * 1e3).round() / 1e3;
                let rounded = ThreadUse {
                    cpu_s: round(used.cpu_s),
                    wait_s: round(used.wait_s),
                };
                (name.clone(), rounded)
            })
            .collect(),
    };
    Full {
        summary,
        rejections_by_reason: rejections,
        unsent: sum(|c| c.unsent.load(Ordering::Relaxed)),
        pool_exhausted: conns
            .iter()
            .any(|c| c.pool_exhausted.load(Ordering::Relaxed)),
        cancels: Cancels {
            sent: sum(|c| c.cancels_sent.load(Ordering::Relaxed)),
            canceled: sum(|c| c.canceled.load(Ordering::Relaxed)),
            substituted: sum(|c| c.cancels_substituted.load(Ordering::Relaxed)),
            not_canceled_by_reason: not_canceled,
            signed_by_feeds: feed.cancels_signed.load(Ordering::Relaxed),
        },
        pipeline_depth: info.pipeline,
        duration_s: info.duration_s,
        gateway_threads_from_metrics: info.gateway_threads_from_metrics,
        setup_s: (info.setup_s * 1e3).round() / 1e3,
        presign_s: (info.presign_s * 1e3).round() / 1e3,
        orders_presigned: info.orders_presigned,
        book_orders: info.book_orders,
        market: info.market.clone(),
        feed_events: feed.events.load(Ordering::Relaxed),
        feed_errors: lock(&feed.errors).clone(),
        latency_percentiles: curve(&latency),
        fill_notify_percentiles: curve(&fill),
        send_lag_percentiles: curve(&lag),
    }
}

fn merge(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Writes `result.json` and `latency.svg` into `dir` (created if missing).
pub fn write_out(dir: &Path, full: &Full) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--out {}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(full).map_err(|e| e.to_string())?;
    let path = dir.join("result.json");
    std::fs::write(&path, json + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    let s = &full.summary;
    let title = format!(
        "ladder loadgen {} ({}, {}, {} connections): ok {}, errors {}, {:.0}/s",
        s.scenario,
        s.mode,
        s.offered_rate
            .map_or("closed loop".to_string(), |r| format!("offered {r}/s")),
        s.connections,
        s.ok,
        s.errors,
        s.achieved_rate
    );
    let mut series = vec![("request latency", "#1f77b4", &full.latency_percentiles)];
    if !full.fill_notify_percentiles.is_empty() {
        series.push((
            "fill notification (/ws/user)",
            "#d62728",
            &full.fill_notify_percentiles,
        ));
    }
    let path = dir.join("latency.svg");
    std::fs::write(&path, percentile_svg(&title, &series))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Plot geometry.
const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// A percentile plot: x in "nines" (0 %, 90 %, 99 %, ...), y latency on a log scale (decades),
/// so that the median and the tail are both readable.
pub fn percentile_svg(title: &str, series: &[(&str, &str, &Vec<Point>)]) -> String {
    let nines_of = |p: &Point| {
        if p.percentile >= 100.0 {
            f64::NAN
        } else {
            -(1.0 - p.percentile / 100.0).log10()
        }
    };
    let mut x_max: f64 = 1.0;
    let (mut y_min, mut y_max) = (f64::MAX, 1.0f64);
    for (_, _, points) in series {
        for p in points.iter() {
            let n = nines_of(p);
            if n.is_finite() {
                x_max = x_max.max(n.ceil());
            }
            y_max = y_max.max(p.latency_us);
            y_min = y_min.min(p.latency_us);
        }
    }
    let decade_low = y_min.clamp(1.0, y_max).log10().floor();
    let decade_high = y_max.log10().ceil().max(decade_low + 1.0);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x_of = |n: f64| LEFT + n / x_max * plot_w;
    let y_of = |v: f64| {
        let d = (v.max(1.0).log10() - decade_low) / (decade_high - decade_low);
        TOP + plot_h - d.clamp(0.0, 1.0) * plot_h
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="25" text-anchor="middle" font-size="14">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    for i in 0..=(x_max as u32) {
        let x = x_of(f64::from(i));
        let label = match i {
            0 => "0%".to_string(),
            n => format!("{}%", trim(100.0 - 100.0 * 10f64.powi(-(n as i32)))),
        };
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 18.0
        );
    }
    for decade in (decade_low as i32)..=(decade_high as i32) {
        let v = 10f64.powi(decade);
        let y = y_of(v);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            format_us(v)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text><text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">latency</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 15.0,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (i, (name, color, points)) in series.iter().enumerate() {
        let path: Vec<String> = points
            .iter()
            .filter(|p| nines_of(p).is_finite())
            .map(|p| format!("{:.1},{:.1}", x_of(nines_of(p)), y_of(p.latency_us)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        let y = TOP + 16.0 + 18.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + 12.0,
            LEFT + 36.0,
            LEFT + 42.0,
            y + 4.0,
            escape(name)
        );
    }
    out.push_str("</svg>\n");
    out
}

fn format_us(v: f64) -> String {
    if v >= 1_000.0 {
        format!("{} ms", trim(v / 1_000.0))
    } else {
        format!("{} µs", trim(v))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::loadgen::stats::record;

    #[test]
    fn the_curve_ends_at_the_max_and_rises() {
        let mut h = histogram();
        for v in 1..=10_000u64 {
            record(&mut h, v * 1_000);
        }
        let points = curve(&h);
        assert_eq!(points.last().map(|p| p.percentile), Some(100.0));
        assert!(points
            .windows(2)
            .all(|w| w[0].latency_us <= w[1].latency_us));
        let svg = percentile_svg("t <1>", &[("a", "#000", &points)]);
        assert!(svg.starts_with("<svg") && svg.contains("polyline") && svg.contains("t &lt;1&gt;"));
        assert!(svg.contains("99.99%"), "{svg}");
        assert!(svg.contains(">1 ms<") && svg.contains(">10 ms<"), "{svg}");
    }
}
