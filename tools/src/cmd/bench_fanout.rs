//! `ladder bench fanout`: many `/ws/market` subscribers on one busy market of a running
//! service. A maker rests liquidity, a taker sends crossing orders at `--rate`; every taker
//! order makes one `last_trade_price` event. Each subscriber records when it received each
//! one; the delay of event k is the time from sending taker order k to its arrival at the
//! LAST subscriber (so the slowest delivery counts). Prints one JSON line.

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use ladder_client::{HttpClient, Trader, Wallet};
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Address, Side, U256};
use serde_json::{json, Value};

/// `ladder bench fanout`.
#[derive(Args, Debug, Clone)]
pub struct FanoutArgs {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
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
    let ready = Arc::new(Barrier::new(args.subscribers + 1));
    let receipts: Arc<Mutex<Vec<Vec<Instant>>>> = Arc::new(Mutex::new(Vec::new()));
    let subscribe = json!({ "type": "market", "assets_ids": [yes.to_string()] }).to_string();
    let mut threads = Vec::new();
    for _ in 0..args.subscribers {
        let (ws_url, ready, receipts, subscribe) = (
            ws_url.clone(),
            ready.clone(),
            receipts.clone(),
            subscribe.clone(),
        );
        let events = args.events;
        let spawned = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let mut times = Vec::with_capacity(events);
                let connected = tungstenite::connect(&ws_url);
                let mut ws = match connected {
                    Ok((ws, _)) => Some(ws),
                    Err(_) => None,
                };
                if let Some(ws) = ws.as_mut() {
                    let _ = ws.send(tungstenite::Message::text(subscribe));
                    // Wait for the book snapshot before counting.
                    while let Ok(m) = ws.read() {
                        if m.to_text().is_ok_and(|t| t.contains("\"book\"")) {
                            break;
                        }
                    }
                }
                ready.wait();
                if let Some(ws) = ws.as_mut() {
                    while times.len() < events {
                        match ws.read() {
                            Ok(m) => {
                                if m.to_text().is_ok_and(|t| t.contains("last_trade_price")) {
                                    times.push(Instant::now());
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
                if let Ok(mut all) = receipts.lock() {
                    all.push(times);
                }
            });
        threads.push(spawned.map_err(|e| format!("subscriber thread: {e}"))?);
    }
    ready.wait();
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
            return Err(format!("taker order {k}: {}", r.body));
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let all = receipts.lock().map_err(|_| "receipts lock")?;
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
    println!(
        "{}",
        json!({
            "subscribers": args.subscribers, "subscribers_complete": complete, "events": args.events,
            "frames_delivered": delivered, "fanout_frames_per_sec": delivered as f64 / elapsed,
            "delay_to_last_subscriber_p50_us": delay.value_at_quantile(0.5) as f64 / 1e3,
            "delay_to_last_subscriber_p99_us": delay.value_at_quantile(0.99) as f64 / 1e3,
            "delay_to_last_subscriber_max_us": delay.max() as f64 / 1e3,
        })
    );
    Ok(())
}
