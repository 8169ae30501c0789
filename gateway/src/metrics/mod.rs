//! `GET /metrics` in the Prometheus text format (0.0.4) through the `prometheus` crate:
//! requests by route and status and their latency, counted as they are answered; the
//! sequencer's, server's, rings' and process's figures read at each scrape ([`pulled`]).

mod pulled;

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use ladder_sequencer::{SequencerStats, Submitter, FLUSH_BUCKETS_NS};
use prometheus::core::Collector;
use prometheus::proto::MetricType;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

pub use pulled::{HistogramSample, Pulled, Sample};

use crate::app::ServiceState;
use crate::server::ServerShared;
pub use pulled::one;

/// Upper bounds of the latency buckets, in seconds.
const LATENCY_BUCKETS_S: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];

/// What the scrape reads, attached as the service starts.
#[derive(Default)]
struct Sources {
    sequencer: OnceLock<Arc<SequencerStats>>,
    server: OnceLock<Arc<ServerShared>>,
    rings: OnceLock<Vec<Submitter>>,
    state: OnceLock<Arc<ServiceState>>,
}

/// What `/metrics` reports.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    durations: HistogramVec,
    sources: Arc<Sources>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "ladder_http_requests_total",
                "Requests answered, by route label and status.",
            ),
            &["route", "status"],
        )
        .expect("ladder_http_requests_total");
        let durations = HistogramVec::new(
            HistogramOpts::new(
                "ladder_http_request_duration_seconds",
                "Time from a request's last byte read to its answer.",
            )
            .buckets(LATENCY_BUCKETS_S.to_vec()),
            &["route"],
        )
        .expect("ladder_http_request_duration_seconds");
        let sources = Arc::new(Sources::default());
        let counted: Vec<Box<dyn Collector>> =
            vec![Box::new(requests.clone()), Box::new(durations.clone())];
        let collectors: Vec<Box<dyn Collector>> = counted
            .into_iter()
            .chain(pulled_families(&sources))
            .chain(crate::process_stats::families())
            .collect();
        for collector in collectors {
            // Every family is the service's own, registered once: a clash is a bug.
            registry
                .register(collector)
                .unwrap_or_else(|e| panic!("metrics registry: {e}"));
        }
        Metrics {
            registry,
            requests,
            durations,
            sources,
        }
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
        let _ = self.sources.sequencer.set(sequencer);
        let _ = self.sources.server.set(server);
        let _ = self.sources.rings.set(rings);
    }

    /// Connects the service's state: the history store's progress and the replication hub.
    pub fn attach_state(&self, state: Arc<ServiceState>) {
        let _ = self.sources.state.set(state);
    }

    /// Records the answer to a request that could not be read (malformed, too large, not
    /// received in time), under the route label `unread`; no duration.
    pub fn observe_unread(&self, status: u16) {
        let mut digits = itoa::Buffer::new();
        self.requests
            .with_label_values(&["unread", digits.format(status)])
            .inc();
    }

    /// Records one answered request.
    pub fn observe(&self, path: &str, status: u16, started: Instant) {
        let route = crate::routes::label(path);
        let mut digits = itoa::Buffer::new();
        self.requests
            .with_label_values(&[route, digits.format(status)])
            .inc();
        self.durations
            .with_label_values(&[route])
            .observe(started.elapsed().as_secs_f64());
    }

    /// The Prometheus text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Encoding into a String fails only on a family the collectors built wrongly.
        if let Err(e) =
            prometheus::TextEncoder::new().encode_utf8(&self.registry.gather(), &mut out)
        {
            tracing::error!(error = %e, "metrics: encoding failed");
        }
        out
    }
}

/// A unlabelled family read from the sequencer's figures.
fn from_sequencer(
    sources: &Arc<Sources>,
    kind: MetricType,
    name: &str,
    help: &str,
    read: fn(&SequencerStats) -> f64,
) -> Pulled {
    let sources = sources.clone();
    Pulled::values(
        kind,
        name,
        help,
        &[],
        Box::new(move || one(sources.sequencer.get().map(|s| read(s)))),
    )
}

/// A family read from the server's figures.
fn from_server(
    sources: &Arc<Sources>,
    kind: MetricType,
    name: &str,
    help: &str,
    labels: &[&str],
    read: fn(&ServerShared) -> Vec<Sample>,
) -> Pulled {
    let sources = sources.clone();
    Pulled::values(
        kind,
        name,
        help,
        labels,
        Box::new(move || sources.server.get().map(|s| read(s)).unwrap_or_default()),
    )
}

/// An unlabelled family read from the service's state (left out while it has no value).
fn from_state(
    sources: &Arc<Sources>,
    kind: MetricType,
    name: &str,
    help: &str,
    read: fn(&ServiceState) -> Option<f64>,
) -> Pulled {
    let sources = sources.clone();
    Pulled::values(
        kind,
        name,
        help,
        &[],
        Box::new(move || one(sources.state.get().and_then(|s| read(s)))),
    )
}

fn unlabelled(value: f64) -> Vec<Sample> {
    vec![(Vec::new(), value)]
}

fn count(counter: &std::sync::atomic::AtomicU64) -> f64 {
    counter.load(Ordering::Relaxed) as f64
}

fn level(gauge: &std::sync::atomic::AtomicUsize) -> f64 {
    gauge.load(Ordering::Relaxed) as f64
}

/// Every family read at scrape time (the help texts are API.md §15's).
fn pulled_families(sources: &Arc<Sources>) -> Vec<Box<dyn Collector>> {
    let (counter, gauge) = (MetricType::COUNTER, MetricType::GAUGE);
    let mut families = vec![
        from_sequencer(sources, counter, "ladder_sequencer_commands_total", "Commands applied.", |s| count(&s.commands)),
        from_sequencer(sources, counter, "ladder_sequencer_queries_total", "Reads run on the sequencer.", |s| count(&s.queries)),
        from_sequencer(sources, counter, "ladder_journal_batches_total", "Journal group commits.", |s| count(&s.batches)),
        from_sequencer(sources, gauge, "ladder_journal_batch_commands_avg", "Commands per journal batch, on average.", |s| {
            let batches = s.batches.load(Ordering::Relaxed);
            if batches == 0 { 0.0 } else { s.batched_commands.load(Ordering::Relaxed) as f64 / batches as f64 }
        }),
        from_sequencer(sources, gauge, "ladder_last_seq", "Last journal sequence.", |s| count(&s.last_seq)),
        from_sequencer(sources, counter, "ladder_unjournaled_cancels_total", "Cancels answered without a journal record (they changed nothing).", |s| count(&s.unjournaled_cancels)),
        from_sequencer(sources, counter, "ladder_sequencer_rounds_in_seat_total", "Sequencer rounds (drain, journal, apply, release) a gateway loop or the settlement thread did itself while the sequencer thread slept, which was not woken for them.", |s| count(&s.rounds_in_seat)),
        from_sequencer(sources, gauge, "ladder_journal_full", "1 while the journal cannot reserve its next segment and refuses ordinary writes.", |s| f64::from(u8::from(s.journal_full.load(Ordering::Relaxed)))),
        from_sequencer(sources, counter, "ladder_heartbeat_expiries_total", "Keys whose heartbeats ran out (each cancelled its address's open orders).", |s| count(&s.heartbeat_expiries)),
        from_sequencer(sources, gauge, "ladder_heartbeats_running", "Keys with heartbeats running.", |s| count(&s.heartbeats_running)),
        from_sequencer(sources, gauge, "ladder_engine_trades_held", "Trades the engine holds: not yet final, or final and not yet in history.db.", |s| count(&s.trades_held)),
        from_sequencer(sources, gauge, "ladder_engine_orders_held", "Orders the engine holds: open, or closed and not yet in history.db.", |s| count(&s.orders_held)),
        from_sequencer(sources, gauge, "ladder_engine_order_hashes_held", "Order hashes the engine holds to refuse duplicates: open and unforgotten orders', and a forgotten order's for 262,144 records more.", |s| count(&s.order_hashes_held)),
        from_server(sources, gauge, "ladder_http_connections", "Open connections (HTTP and WebSocket).", &[], |s| unlabelled(level(&s.connections))),
        from_server(sources, gauge, "ladder_ws_connections", "Open WebSocket connections.", &[], |s| unlabelled(level(&s.websockets))),
        from_server(sources, gauge, "ladder_ws_channel_connections", "Open WebSocket connections per channel.", &["channel"], |s| vec![
            (vec!["user".into()], level(&s.ws_user)),
            (vec!["market".into()], level(&s.ws_market)),
        ]),
        from_server(sources, counter, "ladder_ws_slow_consumer_closes_total", "WebSocket connections closed for falling behind.", &[], |s| unlabelled(count(&s.ws_slow_consumer_closes))),
        from_server(sources, counter, "ladder_connections_refused_total", "Connections closed at once: their address had its cap open (per_ip), or every slot was taken (full).", &["reason"], |s| vec![
            (vec!["per_ip".into()], count(&s.refused_per_ip)),
            (vec!["full".into()], count(&s.refused_full)),
        ]),
        from_server(sources, counter, "ladder_connection_first_bytes_timeouts_total", "Connections closed for finishing no TLS handshake or sending no request byte in time.", &[], |s| unlabelled(count(&s.first_bytes_timeouts))),
        from_server(sources, counter, "ladder_cancel_on_disconnect_total", "Cancels carried out for /ws/user connections with cancel_on_disconnect that ended (one per connection, counted when journaled and applied).", &[], |s| unlabelled(count(&s.cancels_on_disconnect))),
        from_server(sources, counter, "ladder_answers_in_seat_total", "Completions a releasing thread carried out for a sleeping gateway loop, which was not woken for them.", &[], |s| unlabelled(count(&s.answered_while_asleep))),
        from_server(sources, gauge, "ladder_connection_addresses", "Client addresses with an open connection.", &[], |s| unlabelled(s.peers.addresses() as f64)),
    ];
    let rings = sources.clone();
    families.push(Pulled::gauge(
        "ladder_ring_depth",
        "Submissions waiting per ring to the sequencer.",
        &["ring"],
        Box::new(move || {
            rings
                .rings
                .get()
                .map(|rings| {
                    rings
                        .iter()
                        .enumerate()
                        .map(|(i, ring)| (vec![i.to_string()], ring.depth() as f64))
                        .collect()
                })
                .unwrap_or_default()
        }),
    ));
    let flushes = sources.clone();
    families.push(Pulled::histogram(
        "ladder_journal_flush_duration_seconds",
        "Journal flush time.",
        Box::new(move || {
            let flushes = &flushes.sequencer.get()?.flushes;
            let mut cumulative = 0;
            let bounds = FLUSH_BUCKETS_NS
                .iter()
                .zip(&flushes.buckets)
                .map(|(bound_ns, bucket)| {
                    cumulative += bucket.load(Ordering::Relaxed);
                    (*bound_ns as f64 / 1e9, cumulative)
                })
                .collect();
            Some(HistogramSample {
                cumulative: bounds,
                sum: flushes.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
                count: flushes.count(),
            })
        }),
    ));
    families.extend([
        from_state(sources, gauge, "ladder_history_stored_seq", "The last journal sequence history.db holds.", |s| {
            s.history.read().as_ref().map(|h| h.stored_through() as f64)
        }),
        from_state(sources, gauge, "ladder_replication_standbys", "Standbys connected (a primary with --replication-listen).", |s| {
            s.replication.read().as_ref().map(|h| h.connected() as f64)
        }),
        from_state(sources, counter, "ladder_replication_refused_links_total", "Connections to the replication port closed unanswered (no secret, or past the handshake limits).", |s| {
            s.replication.read().as_ref().map(|h| h.refused_links() as f64)
        }),
        from_state(sources, gauge, "ladder_is_leader", "1 while this node leads (takes writes), else 0.", |s| {
            Some(if s.leader_status().leading { 1.0 } else { 0.0 })
        }),
        from_state(sources, gauge, "ladder_term", "The newest leader term this node knows (0 before any).", |s| {
            Some(s.leader_status().term as f64)
        }),
    ]);
    families
        .into_iter()
        .map(|f| Box::new(f) as Box<dyn Collector>)
        .collect()
}
