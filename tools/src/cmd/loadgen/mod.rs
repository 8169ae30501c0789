//! `ladder loadgen` (API.md §19): drives a running service with signed orders and measures it.
//!
//! A run, in order:
//! 1. the ceiling probe ([`ceiling`]): signature recoveries per second on the gateway's thread
//!    count (read from `/metrics`, else 2), the most orders per second this machine could verify;
//! 2. set-up through the admin surface ([`setup`]): a fresh market and fresh funded accounts
//!    with API keys, so runs never collide and never rely on the demo;
//! 3. the plan ([`plan`]) and its signing on all cores ([`presign`]), before the clock starts;
//!    the pre-built book of `mm` and `burst` is placed then too;
//! 4. `/ws/user` listeners ([`feed`]) for the ids of quotes to cancel and fill notifications;
//! 5. the measured loop ([`driver`]): open loop at `--rate` or closed loop, `--connections`
//!    keep-alive connections, a progress line on stderr every second;
//! 6. the result ([`report`]): one JSON line last on stdout, and `result.json` plus
//!    `latency.svg` in `--out`.
//!
//! Requests in flight per connection come from `--pipeline` (default 1, at most
//! 64): HTTP/1.1 pipelining. Orders are signed for the default exchange address.

mod arrival;
mod ceiling;
mod driver;
mod feed;
mod heartbeats;
mod lanes;
mod plan;
mod presign;
mod report;
pub(crate) mod setup;
mod stats;
mod waiter;
mod wire;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladder_protocol::ExchangeDomain;

use super::LoadgenArgs;
pub use driver::PIPELINE_MAX;
use feed::{CancelQueue, FeedRole, FeedShared, SendTimes};
pub use plan::Scenario;
pub(crate) use setup::service_use;
use stats::{ConnStats, FeedStats};

/// How long the ceiling probe runs.
pub const CEILING_PROBE: Duration = Duration::from_secs(2);
/// The gateway's thread count when `/metrics` does not say (`ladder serve`'s default).
pub const GATEWAY_THREADS_DEFAULT: usize = 2;
/// Fewest orders signed for a closed-loop run.
pub const CLOSED_LOOP_REQUESTS_MIN: u64 = 10_000;
/// Most orders signed for a closed-loop run (about 120 MB of bodies).
pub const CLOSED_LOOP_REQUESTS_MAX: u64 = 150_000;
/// Most requests of an open-loop run (`--rate` times `--duration`).
pub const OPEN_LOOP_REQUESTS_MAX: u64 = 1_000_000;
/// Most connections.
pub const CONNECTIONS_MAX: usize = 1_024;
/// Time between setting the start and the first planned request (threads get ready).
pub const START_DELAY: Duration = Duration::from_millis(50);
/// How long the feeds keep listening after the last answer (late trade events).
pub const FEED_DRAIN: Duration = Duration::from_millis(500);

/// Runs `ladder loadgen`: measures the recovery ceiling, sets up a market and accounts,
/// signs every order ahead, connects the feeds, drives the load and reports.
pub fn run(args: &LoadgenArgs) -> Result<(), String> {
    let host = wire::authority(&args.url)?;
    setup::check_reachable(&args.url)?;
    let threads = setup::gateway_threads(&args.url);
    let ceiling = ceiling::probe(threads.unwrap_or(GATEWAY_THREADS_DEFAULT), CEILING_PROBE)?;
    crate::cmd::stdout::print_error(format_args!(
        "loadgen: ceiling {:.0} signature recoveries/s on {} threads",
        ceiling.recoveries_per_s, ceiling.threads
    ));
    // Bounded by OPEN_LOOP_REQUESTS_MAX for an open loop (checked as a usage problem).
    let total = match args.rate {
        Some(rate) => rate.saturating_mul(args.duration),
        None => ((ceiling.recoveries_per_s * args.duration as f64) as u64)
            .clamp(CLOSED_LOOP_REQUESTS_MIN, CLOSED_LOOP_REQUESTS_MAX),
    };
    let Prepared {
        market,
        accounts,
        presigned,
        setup_s,
        presign_s,
        orders_presigned,
        book_orders,
    } = prepare(args, total)?;
    let n = args.connections;
    let takers = args.scenario.has_takers();
    let sent: Vec<Arc<SendTimes>> = presigned
        .conns
        .iter()
        .map(|w| Arc::new(SendTimes::new(w.slots.len())))
        .collect();
    let shared = Arc::new(FeedShared {
        takers: presigned.takers,
        sent: sent.clone(),
        stats: FeedStats::default(),
    });
    let (feeds, cancels) = connect_feeds(args, &host, &accounts, &market)?;
    let stats: Vec<Arc<ConnStats>> = (0..n).map(|_| Arc::new(ConnStats::default())).collect();
    let conns: Vec<driver::Conn> = presigned
        .conns
        .into_iter()
        .enumerate()
        .map(|(c, work)| driver::Conn {
            index: c,
            work,
            maker: wire::Auth::new(&accounts[c]),
            taker: takers.then(|| wire::Auth::new(&accounts[n + c])),
            cancels: cancels[c].clone(),
            sent: sent[c].clone(),
            stats: stats[c].clone(),
        })
        .collect();
    let config = driver::DriveConfig {
        host: host.clone(),
        rate: args.rate,
        connections: n,
        duration: Duration::from_secs(args.duration),
        pipeline: args.pipeline,
    };
    let start = Instant::now() + START_DELAY;
    // Market makers beat their dead-man switch all along (`mm`).
    let heartbeats = (args.scenario == Scenario::Mm).then(|| {
        let auths = (0..n).map(|c| wire::Auth::new(&accounts[c])).collect();
        heartbeats::Heartbeats::start(&host, auths)
    });
    let use_before = setup::service_use(&args.url);
    let driven = driver::drive(&config, conns, feeds, &shared, FEED_DRAIN, start);
    let used = setup::service_use(&args.url)
        .zip(use_before)
        .map(|(after, before)| after.since(&before));
    if let Some(heartbeats) = heartbeats {
        let counts = heartbeats.finish(args.leave_heartbeats);
        crate::cmd::stdout::print_error(format_args!(
            "loadgen: heartbeats of {n} makers every {} s: {} beats, {} refused or lost",
            heartbeats::BEAT_EVERY.as_secs(),
            counts.ok.load(Ordering::Relaxed),
            counts.failed.load(Ordering::Relaxed)
        ));
    }
    driven?;

    let info = report::RunInfo {
        scenario: args.scenario,
        rate: args.rate,
        duration_s: args.duration,
        connections: n,
        pipeline: args.pipeline,
        ceiling,
        gateway_threads_from_metrics: threads.is_some(),
        setup_s,
        presign_s,
        orders_presigned: orders_presigned as u64,
        book_orders: book_orders as u64,
        market: market.condition_id.to_string(),
        service_use: used,
    };
    let full = report::build(&info, &stats, &shared.stats);
    if let Some(dir) = &args.out {
        report::write_out(dir, &full)?;
    }
    hints(&full);
    let line = serde_json::to_string(&full.summary).map_err(|e| e.to_string())?;
    crate::cmd::stdout::print_line(line);
    Ok(())
}

/// What a run sets up before its load: the market, the accounts and every order signed.
struct Prepared {
    market: setup::Market,
    accounts: Vec<setup::Account>,
    presigned: presign::Presigned,
    /// Seconds spent making the market and the accounts.
    setup_s: f64,
    /// Seconds spent signing.
    presign_s: f64,
    /// Orders signed (the book's included).
    orders_presigned: usize,
    /// Orders of the pre-built book.
    book_orders: usize,
}

/// Makes a market and the accounts (a maker per connection, a taker too where the scenario
/// has takers, and one for the pre-built book), signs the `total` requests' orders ahead and
/// places the book.
fn prepare(args: &LoadgenArgs, total: u64) -> Result<Prepared, String> {
    let setup_started = Instant::now();
    let admin = setup::Admin::new(&args.url, args.admin_token.as_str());
    let market = setup::create_market(&admin)?;
    let n = args.connections;
    let takers = args.scenario.has_takers();
    let book = plan::book(args.scenario, total);
    let count = n * (1 + usize::from(takers)) + usize::from(!book.is_empty());
    let accounts = setup::create_accounts(&admin, &market, count)?;
    let setup_s = setup_started.elapsed().as_secs_f64();

    let presign_started = Instant::now();
    let plans = plan::plan(args.scenario, n, total, rand::random());
    let signers = presign::Signers {
        conns: (0..n).map(|c| (c, takers.then_some(n + c))).collect(),
        book: (!book.is_empty()).then_some(count - 1),
    };
    let domain = ExchangeDomain::default();
    let presigned = presign::presign(&plans, &book, &signers, &accounts, &market, &domain)?;
    let presign_s = presign_started.elapsed().as_secs_f64();
    let orders_presigned = plans
        .iter()
        .map(|p| p.slots.iter().filter(|s| **s != plan::Slot::Cancel).count() + p.spares.len())
        .sum::<usize>()
        + book.len();
    crate::cmd::stdout::print_error(format_args!(
        "loadgen: market {}, {count} accounts, {orders_presigned} orders signed in {presign_s:.1} s",
        market.condition_id
    ));
    if let Some(b) = signers.book {
        setup::seed_book(&args.url, &accounts[b], &presigned.book)?;
    }
    Ok(Prepared {
        market,
        accounts,
        presigned,
        setup_s,
        presign_s,
        orders_presigned,
        book_orders: book.len(),
    })
}

/// Each connection's queue of orders to cancel (`mm` only).
type CancelQueues = Vec<Option<Arc<CancelQueue>>>;

/// Connects each maker's `/ws/user` feed (`mm`: it cancels what fills) and each taker's
/// (to time fill notifications); returns the feeds and each connection's cancel queue.
fn connect_feeds(
    args: &LoadgenArgs,
    host: &str,
    accounts: &[setup::Account],
    market: &setup::Market,
) -> Result<(Vec<feed::Feed>, CancelQueues), String> {
    let n = args.connections;
    let domain = ExchangeDomain::default();
    let connect = |account, role| feed::connect(host, account, market.condition_id, role, domain);
    let mut feeds = Vec::new();
    let mut cancels = Vec::with_capacity(n);
    for c in 0..n {
        let queue = (args.scenario == Scenario::Mm).then(|| Arc::new(CancelQueue::default()));
        if let Some(queue) = &queue {
            let role = FeedRole::Maker {
                wallet: accounts[c].wallet.clone(),
                cancels: queue.clone(),
            };
            feeds.push(connect(&accounts[c], role)?);
        }
        if args.scenario.has_takers() {
            feeds.push(connect(&accounts[n + c], FeedRole::Taker)?);
        }
        cancels.push(queue);
    }
    Ok((feeds, cancels))
}

/// Explains results that come from the service's configuration rather than its speed.
fn hints(full: &report::Full) {
    let limited: u64 = full
        .summary
        .errors_by_kind
        .iter()
        .filter(|(k, _)| k.starts_with("http 429"))
        .map(|(_, v)| v)
        .sum();
    if limited > 0 {
        crate::cmd::stdout::print_error(format_args!(
            "loadgen: {limited} requests were refused by the service's rate limits (429); \
             to measure capacity, run `ladder serve --rate-limit-key 0 --rate-limit-ip 0`"
        ));
    }
    if full.pool_exhausted {
        crate::cmd::stdout::print_error(format_args!(
            "loadgen: a connection used up its pre-signed orders before --duration ended"
        ));
    }
}
