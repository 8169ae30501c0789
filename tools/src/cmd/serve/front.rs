//! The front of a run: the gateway threads listening (they answer 503 until recovery ends),
//! and the sequencer's rings and sinks, the gateway threads' first and the runtime's own
//! producers after them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Receiver;
use ladder_gateway::app::App;
use ladder_gateway::ws::feed::FeedTarget;
use ladder_gateway::{prepare_with_feed, spawn, ServerLimits, ServerShared};
use ladder_sequencer::{rings, Completion, CompletionSink, Rings, Submitter};

use super::runtime::RuntimeProducers;
use super::{resolve, RunOptions};

/// The gateway threads and every producer's ring and sink.
pub(super) struct Front {
    /// The gateway threads, serving.
    pub(super) threads: Vec<JoinHandle<()>>,
    /// What the gateway threads share (their stop flag, counters).
    pub(super) shared: Arc<ServerShared>,
    /// Each gateway loop's end of the WebSocket feed.
    pub(super) feed_targets: Vec<FeedTarget>,
    /// Where clients reach this node, and its scheme (`http` or `https`).
    pub(super) bound: (SocketAddr, &'static str),
    /// The gateway threads' rings (for the metrics of their fill).
    pub(super) submitters: Vec<Submitter>,
    /// The sequencer's end of every ring.
    pub(super) rings: Rings,
    /// Every producer's completion sink, in ring order.
    pub(super) sinks: Vec<Box<dyn CompletionSink>>,
    /// The runtime's producers.
    pub(super) producers: RuntimeProducers,
    /// Answers to the main loop.
    pub(super) internal_answers: Receiver<Completion>,
    /// Answers to a standby's follower.
    pub(super) follower_answers: Receiver<Completion>,
}

/// Binds `--listen`, makes one ring per gateway thread (capacity `ring_capacity`) and one
/// per runtime producer, and starts the gateway threads serving `app`.
pub(super) fn start_front(
    options: &RunOptions,
    app: Arc<App>,
    ring_capacity: usize,
) -> Result<Front, String> {
    let listen = resolve(&options.listen).map_err(|e| format!("--listen {e}"))?;
    let threads = gateway_threads(options);
    let (loops, gateway_sinks, feed_targets, bound) =
        prepare_with_feed(listen, threads).map_err(|e| format!("listen on {listen}: {e}"))?;
    let (mut submitters, rings) = rings(threads + RuntimeProducers::COUNT, ring_capacity);
    let mut sinks: Vec<Box<dyn CompletionSink>> = gateway_sinks
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn CompletionSink>)
        .collect();
    let (producers, internal_answers, follower_answers) =
        RuntimeProducers::take(&mut submitters, &mut sinks)?;
    let shared = Arc::new(ServerShared {
        process: ladder_sequencer::wall_clock_ns(),
        ..ServerShared::default()
    });
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let limits = ServerLimits {
        tls: options.tls.clone(),
        connections_per_ip_max: options.max_connections_per_ip,
        ws_ping_after: Duration::from_millis(options.ws_ping_ms),
        ..ServerLimits::default()
    };
    // The gateway's loops may do a sleeping sequencer's round themselves (one wake-up fewer
    // per request); the runtime's producers, which wait on their answers, always ring. A loop
    // takes the seat only while its own feed queue has room for the round's frames.
    let loop_submitters: Vec<_> = submitters
        .iter()
        .zip(&feed_targets)
        .map(|(submitter, target)| {
            let target = target.clone();
            submitter
                .clone()
                .taking_seat(Arc::new(move || target.has_room()))
        })
        .collect();
    let threads = spawn(loops, loop_submitters, app, limits, shared.clone())
        .map_err(|e| format!("gateway threads: {e}"))?;
    crate::cmd::stdout::print_notice(format_args!("ladder: listening on {scheme}://{bound}"));
    Ok(Front {
        threads,
        shared,
        feed_targets,
        bound: (bound, scheme),
        submitters,
        rings,
        sinks,
        producers,
        internal_answers,
        follower_answers,
    })
}

/// Gateway threads of this run (`--gateway-threads`, 1 to 64).
pub(super) fn gateway_threads(options: &RunOptions) -> usize {
    options.gateway_threads.clamp(1, 64)
}
