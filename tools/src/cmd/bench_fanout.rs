//! `ladder bench fanout`: many `/ws/market` subscribers on one busy market of a running
//! service. A maker rests liquidity, a taker sends crossing orders at `--rate`; every taker
//! order makes one `last_trade_price` event. Each subscriber records when it received each
//! one; the delay of event k is the time from sending taker order k to its arrival at the
//! LAST subscriber (so the slowest delivery counts). Prints one JSON line.
//!
//! The subscribers are multiplexed: a few reader threads poll every socket with mio (a
//! thread per subscriber made the bench's own wake-ups, not the service, the limit on 2
//! cores).

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use ladder_client::{HttpClient, Trader, Wallet};
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Address, Side, U256};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::WebSocket;

/// One subscriber's socket.
type Ws = WebSocket<MaybeTlsStream<TcpStream>>;

/// Threads that open the subscribers' connections.
const CONNECT_THREADS: usize = 8;

/// A subscriber and when each `last_trade_price` frame reached it.
struct Subscriber {
    ws: Ws,
    times: Vec<Instant>,
    open: bool,
}

/// `ladder bench fanout`.
#[derive(Args, Debug, Clone)]
pub struct FanoutArgs {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080", value_parser = super::flags::http_url)]
    pub url: String,
    /// Its admin token.
    #[arg(long, env = "LADDER_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// WebSocket subscribers.
    #[arg(long, default_value_t = 1000)]
    pub subscribers: usize,
    /// Taker orders (each one trade event).
    #[arg(long, default_value_t = 500)]
    pub events: usize,
    /// Taker orders per second.
    #[arg(long, default_value_t = 200)]
    pub rate: u64,
    /// Threads that read every subscriber's socket (multiplexed with mio), so that the
    /// bench's own threads do not take the cores the service needs.
    #[arg(long, default_value_t = 2)]
    pub reader_threads: usize,
}

fn admin(http: &mut HttpClient, token: &str, path: &str, body: Value) -> Result<(), String> {
    let headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
    let r = http.request("POST", path, &headers, Some(&body.to_string()))?;
    if r.status != 200 {
        return Err(format!("{path}: HTTP {} {}", r.status, r.body));
    }
    Ok(())
}

fn random_u256() -> U256 {
    let bytes: [u8; 32] = rand::random();
    U256::from_be_bytes(bytes)
}

/// A fresh funded trader on `market` (its own EOA and smart account).
fn trader(
    url: &str,
    http: &mut HttpClient,
    token: &str,
    tokens: [&U256; 2],
) -> Result<Trader, String> {
    let wallet = Wallet::random();
    let account = Address(rand::random());
    admin(
        http,
        token,
        "/admin/accounts",
        json!({ "account": account.to_string(), "owner": wallet.address().to_string() }),
    )?;
    admin(
        http,
        token,
        "/admin/deposits",
        json!({ "address": account.to_string(), "asset": "COLLATERAL", "amount": "1000000000000000" }),
    )?;
    for t in tokens {
        admin(
            http,
            token,
            "/admin/deposits",
            json!({ "address": account.to_string(), "asset": t.to_string(), "amount": "1000000000000000" }),
        )?;
    }
    let mut trader = Trader::new(url, wallet, account)?;
    let r = trader.create_api_key(0)?;
    if r.status != 200 {
        return Err(format!("api key: {}", r.body));
    }
    Ok(trader)
}

/// Runs the benchmark.
pub fn fanout(args: &FanoutArgs) -> Result<(), String> {
    let token = args
        .admin_token
        .clone()
        .ok_or("--admin-token is required (it creates a market and traders)")?;
    let mut http = HttpClient::new(&args.url)?;
    let (yes, no) = (random_u256(), random_u256());
    let condition: [u8; 32] = rand::random();
    let condition = format!("0x{}", hex::encode(condition));
    admin(
        &mut http,
        &token,
        "/admin/markets",
        json!({
            "condition_id": condition, "yes_token_id": yes.to_string(), "no_token_id": no.to_string(),
            "minimum_tick_size": "0.01", "min_order_size": 1, "neg_risk": false, "taker_delay_ms": 0, "fee_rate_bps": 0,
        }),
    )?;
    let mut maker = trader(&args.url, &mut http, &token, [&yes, &no])?;
    let mut taker = trader(&args.url, &mut http, &token, [&yes, &no])?;
    let r = maker.place(
        yes,
        Side::Sell,
        6_000,
        (args.events as u64 + 10).max(10),
        OrderType::Gtc,
    )?;
    if r.status != 200 {
        return Err(format!("maker order: {}", r.body));
    }

    let ws_url = format!("{}/ws/market", args.url.replace("http://", "ws://"));
    let subscribe = json!({ "type": "market", "assets_ids": [yes.to_string()] }).to_string();
    let sockets = connect_all(&ws_url, &subscribe, args.subscribers)?;
    let readers = args.reader_threads.clamp(1, 64);
    let sending_done = Arc::new(AtomicBool::new(false));
    let mut groups: Vec<Vec<Subscriber>> = (0..readers).map(|_| Vec::new()).collect();
    for (i, ws) in sockets.into_iter().enumerate() {
        groups[i % readers].push(Subscriber {
            ws,
            times: Vec::with_capacity(args.events),
            open: true,
        });
    }
    let threads: Vec<_> = groups
        .into_iter()
        .map(|group| {
            let (done, events) = (sending_done.clone(), args.events);
            std::thread::spawn(move || read_all(group, events, &done))
        })
        .collect();
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(1) as f64);
    let started = Instant::now();
    let mut sent = Vec::with_capacity(args.events);
    for k in 0..args.events {
        let planned = started + interval * k as u32;
        if let Some(wait) = planned.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        sent.push(planned.max(started));
        let r = taker.place(yes, Side::Buy, 6_000, 1, OrderType::Fak)?;
        if r.status != 200 || r.json()["success"] != json!(true) {
            sending_done.store(true, Ordering::Release);
            return Err(format!("taker order {k}: {}", r.body));
        }
    }
    sending_done.store(true, Ordering::Release);
    let mut all: Vec<Vec<Instant>> = Vec::with_capacity(args.subscribers);
    for t in threads {
        all.extend(t.join().map_err(|_| "a reader thread panicked")?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let complete = all.iter().filter(|t| t.len() == args.events).count();
    let mut delay =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())?;
    for (k, sent_at) in sent.iter().enumerate() {
        let last = all.iter().filter_map(|t| t.get(k)).max();
        if let Some(last) = last {
            let _ = delay.record(last.saturating_duration_since(*sent_at).as_nanos().max(1) as u64);
        }
    }
    let delivered: usize = all.iter().map(Vec::len).sum();
    crate::cmd::stdout::print_line(json!({
        "subscribers": args.subscribers, "reader_threads": readers, "subscribers_complete": complete, "events": args.events,
        "frames_delivered": delivered, "fanout_frames_per_sec": delivered as f64 / elapsed,
        "delay_to_last_subscriber_p50_us": delay.value_at_quantile(0.5) as f64 / 1e3,
        "delay_to_last_subscriber_p99_us": delay.value_at_quantile(0.99) as f64 / 1e3,
        "delay_to_last_subscriber_max_us": delay.max() as f64 / 1e3,
    }));
    Ok(())
}

/// Opens `count` subscriptions (from a few threads), each past its book snapshot, then
/// switched to non-blocking reads.
fn connect_all(ws_url: &str, subscribe: &str, count: usize) -> Result<Vec<Ws>, String> {
    let per_thread = count.div_ceil(CONNECT_THREADS).max(1);
    let results: Vec<Result<Vec<Ws>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..count)
            .step_by(per_thread)
            .map(|first| {
                let n = per_thread.min(count - first);
                scope.spawn(move || (0..n).map(|_| connect_one(ws_url, subscribe)).collect())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("connect thread panicked".into()))
            })
            .collect()
    });
    let mut sockets = Vec::with_capacity(count);
    for batch in results {
        sockets.extend(batch?);
    }
    Ok(sockets)
}

fn connect_one(ws_url: &str, subscribe: &str) -> Result<Ws, String> {
    let mut ws = crate::cmd::ws_client::connect(ws_url).map_err(|e| format!("connect: {e}"))?;
    ws.send(tungstenite::Message::text(subscribe))
        .map_err(|e| format!("subscribe: {e}"))?;
    // The book snapshot first: deltas counted after it.
    loop {
        let m = ws.read().map_err(|e| format!("snapshot: {e}"))?;
        if m.to_text().is_ok_and(|t| t.contains("\"book\"")) {
            break;
        }
    }
    match ws.get_mut() {
        MaybeTlsStream::Plain(stream) => stream
            .set_nonblocking(true)
            .map_err(|e| format!("non-blocking: {e}"))?,
        _ => return Err("only ws:// is supported".into()),
    }
    Ok(ws)
}

/// Reads `group` until each subscriber has `events` frames or is closed, or nothing has
/// arrived for 10 s after the last taker order.
fn read_all(
    mut group: Vec<Subscriber>,
    events: usize,
    sending_done: &AtomicBool,
) -> Vec<Vec<Instant>> {
    let registered = Poll::new().and_then(|poll| {
        for (i, sub) in group.iter().enumerate() {
            if let MaybeTlsStream::Plain(stream) = sub.ws.get_ref() {
                poll.registry().register(
                    &mut SourceFd(&stream.as_raw_fd()),
                    Token(i),
                    Interest::READABLE,
                )?;
            }
        }
        Ok(poll)
    });
    let Ok(mut poll) = registered else {
        return group.into_iter().map(|s| s.times).collect();
    };
    // Frames may already wait in a socket or in tungstenite's buffer.
    for sub in group.iter_mut() {
        drain(sub, events);
    }
    let mut pending = group
        .iter()
        .filter(|s| s.open && s.times.len() < events)
        .count();
    let mut mio_events = Events::with_capacity(1024);
    let mut quiet_since = Instant::now();
    while pending > 0 {
        if poll
            .poll(&mut mio_events, Some(Duration::from_millis(100)))
            .is_err()
        {
            break;
        }
        if mio_events.is_empty() {
            if sending_done.load(Ordering::Acquire)
                && quiet_since.elapsed() > Duration::from_secs(10)
            {
                break;
            }
            continue;
        }
        quiet_since = Instant::now();
        for event in mio_events.iter() {
            if let Some(sub) = group.get_mut(event.token().0) {
                let before = sub.open && sub.times.len() < events;
                drain(sub, events);
                if before && !(sub.open && sub.times.len() < events) {
                    pending -= 1;
                }
            }
        }
    }
    group.into_iter().map(|s| s.times).collect()
}

/// Reads what the socket holds (edge-triggered: until it would block), then flushes any
/// pong tungstenite queued for a ping (a full send buffer is retried on the next read).
fn drain(sub: &mut Subscriber, events: usize) {
    while sub.open && sub.times.len() < events {
        match sub.ws.read() {
            Ok(m) => {
                if m.to_text().is_ok_and(|t| t.contains("last_trade_price")) {
                    sub.times.push(Instant::now());
                }
            }
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(_) => sub.open = false,
        }
    }
    if sub.open {
        match sub.ws.flush() {
            Ok(()) => {}
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => sub.open = false,
        }
    }
}
