//! `GET /metrics` in Prometheus text format: requests by route and status, latency
//! histograms, ring depths, sequencer batches, connections.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ladder_sequencer::{FlushTimes, SequencerStats, Submitter, FLUSH_BUCKETS_NS};
use parking_lot::Mutex;

use crate::server::ServerShared;

/// Upper bounds of the latency buckets, in seconds.
const LATENCY_BUCKETS_S: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];

#[derive(Default)]
struct Series {
    by_status: BTreeMap<u16, u64>,
    buckets: [u64; LATENCY_BUCKETS_S.len()],
    count: u64,
    sum_s: f64,
}

/// The journal's flush times as a Prometheus histogram (seconds).
fn render_flushes(out: &mut String, flushes: &FlushTimes) {
    out.push_str("# TYPE ladder_journal_flush_duration_seconds histogram\n");
    let mut cumulative = 0;
    for (bound_ns, bucket) in FLUSH_BUCKETS_NS.iter().zip(&flushes.buckets) {
        cumulative += bucket.load(Ordering::Relaxed);
        let bound_s = *bound_ns as f64 / 1e9;
        let _ = writeln!(
            out,
            "ladder_journal_flush_duration_seconds_bucket{{le=\"{bound_s}\"}} {cumulative}"
        );
    }
    let count = flushes.count();
    let _ = writeln!(
        out,
        "ladder_journal_flush_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n\
         ladder_journal_flush_duration_seconds_sum {}\n\
         ladder_journal_flush_duration_seconds_count {count}",
        flushes.sum_ns.load(Ordering::Relaxed) as f64 / 1e9
    );
}

/// What `/metrics` reports.
#[derive(Default)]
pub struct Metrics {
    routes: Mutex<BTreeMap<&'static str, Series>>,
    sequencer: Mutex<Option<Arc<SequencerStats>>>,
    server: Mutex<Option<Arc<ServerShared>>>,
    rings: Mutex<Vec<Submitter>>,
    history: Mutex<Option<Arc<dyn ladder_sequencer::HistoryReads>>>,
}

/// Every path Ladder serves (besides `/markets/{id}`, `/trades/{id}` and `/admin/...`):
/// the labels of `/metrics` and what tells 405 from 404.
pub const ROUTES: &[&str] = &[
    "/time",
    "/markets",
    "/sampling-markets",
    "/book",
    "/books",
    "/price",
    "/midpoint",
    "/spread",
    "/tick-size",
    "/neg-risk",
    "/fee-rate",
    "/prices-history",
    "/last-trades-prices",
    "/claimable",
    "/auth/api-key",
    "/auth/derive-api-key",
    "/auth/api-keys",
    "/order",
    "/orders",
    "/heartbeats",
    "/bundler",
    "/cancel-market-orders",
    "/cancel-all",
    "/trades",
    "/data/trades",
    "/balance-allowance",
    "/metrics",
    "/ws/user",
    "/ws/market",
];

/// A bounded label for a request path.
pub fn route_label(path: &str) -> &'static str {
    let path = path.trim_end_matches('/');
    if let Some(known) = ROUTES.iter().find(|r| **r == path) {
        return known;
    }
    if path.starts_with("/markets/") {
        "/markets/{condition_id}"
    } else if path.starts_with("/trades/") {
        "/trades/{id}"
    } else if path.starts_with("/admin") {
        "/admin"
    } else {
        "other"
    }
}

impl Metrics {
    /// Connects the sources read at render time.
    pub fn attach(
        &self,
        sequencer: Arc<SequencerStats>,
        server: Arc<ServerShared>,
        rings: Vec<Submitter>,
    ) {
        *self.sequencer.lock() = Some(sequencer);
        *self.server.lock() = Some(server);
        *self.rings.lock() = rings;
    }

    /// Connects the history store, whose progress is a gauge.
    pub fn attach_history(&self, history: Arc<dyn ladder_sequencer::HistoryReads>) {
        *self.history.lock() = Some(history);
    }

    /// Records one answered request.
    pub fn observe(&self, path: &str, status: u16, started: Instant) {
        let elapsed_s = started.elapsed().as_secs_f64();
        let mut routes = self.routes.lock();
        let series = routes.entry(route_label(path)).or_default();
        *series.by_status.entry(status).or_default() += 1;
        series.count += 1;
        series.sum_s += elapsed_s;
        if let Some(i) = LATENCY_BUCKETS_S.iter().position(|b| elapsed_s <= *b) {
            series.buckets[i] += 1;
        }
    }

    /// The Prometheus text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# TYPE ladder_http_requests_total counter\n");
        let routes = self.routes.lock();
        for (route, series) in routes.iter() {
            for (status, n) in &series.by_status {
                let _ = writeln!(
                    out,
                    "ladder_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
                );
            }
        }
        out.push_str("# TYPE ladder_http_request_duration_seconds histogram\n");
        for (route, series) in routes.iter() {
            let mut cumulative = 0;
            for (bound, n) in LATENCY_BUCKETS_S.iter().zip(series.buckets) {
                cumulative += n;
                let _ = writeln!(out, "ladder_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {cumulative}");
            }
            let _ = writeln!(
                out,
                "ladder_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                series.count
            );
            let _ = writeln!(
                out,
                "ladder_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                series.sum_s
            );
            let _ = writeln!(
                out,
                "ladder_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                series.count
            );
        }
        drop(routes);
        if let Some(stats) = self.sequencer.lock().as_ref() {
            let commands = stats.commands.load(Ordering::Relaxed);
            let batches = stats.batches.load(Ordering::Relaxed);
            let _ = writeln!(out, "# TYPE ladder_sequencer_commands_total counter\nladder_sequencer_commands_total {commands}");
            let _ = writeln!(
                out,
                "# TYPE ladder_sequencer_queries_total counter\nladder_sequencer_queries_total {}",
                stats.queries.load(Ordering::Relaxed)
            );
            let _ = writeln!(out, "# TYPE ladder_journal_batches_total counter\nladder_journal_batches_total {batches}");
            let avg = if batches > 0 {
                commands as f64 / batches as f64
            } else {
                0.0
            };
            let _ = writeln!(out, "# TYPE ladder_journal_batch_commands_avg gauge\nladder_journal_batch_commands_avg {avg}");
            let _ = writeln!(
                out,
                "# TYPE ladder_last_seq gauge\nladder_last_seq {}",
                stats.last_seq.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_unjournaled_cancels_total counter\nladder_unjournaled_cancels_total {}",
                stats.unjournaled_cancels.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_journal_full gauge\nladder_journal_full {}",
                u8::from(stats.journal_full.load(Ordering::Relaxed))
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_heartbeat_expiries_total counter\nladder_heartbeat_expiries_total {}\n\
                 # TYPE ladder_heartbeats_running gauge\nladder_heartbeats_running {}",
                stats.heartbeat_expiries.load(Ordering::Relaxed),
                stats.heartbeats_running.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_engine_trades_held gauge\nladder_engine_trades_held {}\n\
                 # TYPE ladder_engine_orders_held gauge\nladder_engine_orders_held {}",
                stats.trades_held.load(Ordering::Relaxed),
                stats.orders_held.load(Ordering::Relaxed)
            );
            render_flushes(&mut out, &stats.flushes);
        }
        if let Some(history) = self.history.lock().as_ref() {
            let _ = writeln!(
                out,
                "# TYPE ladder_history_stored_seq gauge\nladder_history_stored_seq {}",
                history.stored_through()
            );
        }
        crate::process_stats::render(&mut out);
        out.push_str("# TYPE ladder_ring_depth gauge\n");
        for (i, ring) in self.rings.lock().iter().enumerate() {
            let _ = writeln!(out, "ladder_ring_depth{{ring=\"{i}\"}} {}", ring.depth());
        }
        if let Some(server) = self.server.lock().as_ref() {
            let _ = writeln!(
                out,
                "# TYPE ladder_http_connections gauge\nladder_http_connections {}",
                server.connections.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_ws_connections gauge\nladder_ws_connections {}",
                server.websockets.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_ws_channel_connections gauge\n\
                 ladder_ws_channel_connections{{channel=\"user\"}} {}\n\
                 ladder_ws_channel_connections{{channel=\"market\"}} {}",
                server.ws_user.load(Ordering::Relaxed),
                server.ws_market.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_ws_slow_consumer_closes_total counter\n\
                 ladder_ws_slow_consumer_closes_total {}",
                server.ws_slow_consumer_closes.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_connections_refused_total counter\n\
                 ladder_connections_refused_total{{reason=\"per_ip\"}} {}\n\
                 ladder_connections_refused_total{{reason=\"full\"}} {}",
                server.refused_per_ip.load(Ordering::Relaxed),
                server.refused_full.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_connection_first_bytes_timeouts_total counter\n\
                 ladder_connection_first_bytes_timeouts_total {}",
                server.first_bytes_timeouts.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_cancel_on_disconnect_total counter\n\
                 ladder_cancel_on_disconnect_total {}",
                server.cancels_on_disconnect.load(Ordering::Relaxed)
            );
            let _ = writeln!(
                out,
                "# TYPE ladder_connection_addresses gauge\nladder_connection_addresses {}",
                server.peers.addresses()
            );
        }
        out
    }
}
