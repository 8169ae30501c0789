//! Everything a run needs on the service, made fresh through the admin surface so that runs
//! never collide and never depend on the demo: a market with random ids, EOAs linked to
//! random smart-account addresses, generous deposits, and API keys minted with L1.

use std::collections::BTreeMap;

use ladder_client::{HttpClient, L2Credentials, Trader, Wallet};
use ladder_protocol::{Address, B256, U256};
use serde_json::json;

/// Collateral deposited per account: 10 million USDC in base units.
pub const COLLATERAL_UNITS: u64 = 10_000_000 * 1_000_000;
/// Shares of each token deposited per account: 10 million, in base units.
pub const SHARES_UNITS: u64 = 10_000_000 * 1_000_000;
/// Threads that create accounts at once.
pub const SETUP_THREADS_MAX: usize = 8;

/// The run's market.
#[derive(Clone, Copy, Debug)]
pub struct Market {
    /// Condition id.
    pub condition_id: B256,
    /// Yes token id.
    pub yes: U256,
    /// No token id.
    pub no: U256,
}

impl Market {
    /// The Yes token (`true`) or the No token.
    pub const fn token(&self, yes: bool) -> U256 {
        if yes {
            self.yes
        } else {
            self.no
        }
    }
}

/// A funded trading account: the smart account, the EOA that signs for it, its API key.
#[derive(Clone, Debug)]
pub struct Account {
    /// The EOA.
    pub wallet: Wallet,
    /// The smart account the EOA controls (the orders' maker and the key's address).
    pub address: Address,
    /// Its API credentials.
    pub credentials: L2Credentials,
}

/// Admin requests with the bearer token.
pub struct Admin {
    url: String,
    headers: Vec<(String, String)>,
}

impl Admin {
    /// An admin client of `url`.
    pub fn new(url: &str, token: &str) -> Admin {
        Admin {
            url: url.to_string(),
            headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        }
    }

    /// `POST path` with a JSON body; fails unless the answer is 200.
    pub fn post(
        &self,
        http: &mut HttpClient,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(), String> {
        let text = body.to_string();
        let response = http.request("POST", path, &self.headers, Some(&text))?;
        if response.status != 200 {
            return Err(format!(
                "POST {path} answered {}: {}",
                response.status,
                response.body.trim()
            ));
        }
        Ok(())
    }

    /// A client of the service.
    pub fn http(&self) -> Result<HttpClient, String> {
        HttpClient::new(&self.url)
    }
}

/// Creates a market with a random condition id and random token ids (tick 0.01, min size 1).
pub fn create_market(admin: &Admin) -> Result<Market, String> {
    let market = Market {
        condition_id: B256::from(rand::random::<[u8; 32]>()),
        yes: U256::from_be_bytes(rand::random::<[u8; 32]>()),
        no: U256::from_be_bytes(rand::random::<[u8; 32]>()),
    };
    let body = json!({
        "condition_id": market.condition_id.to_string(),
        "yes_token_id": market.yes.to_string(),
        "no_token_id": market.no.to_string(),
        "minimum_tick_size": "0.01",
        "min_order_size": 1,
        "neg_risk": false,
        "taker_delay_ms": 0,
        "fee_rate_bps": 0,
    });
    admin.post(&mut admin.http()?, "/admin/markets", &body)?;
    Ok(market)
}

/// Creates `count` funded accounts with API keys, several at a time.
pub fn create_accounts(
    admin: &Admin,
    market: &Market,
    count: usize,
) -> Result<Vec<Account>, String> {
    let threads = count.clamp(1, SETUP_THREADS_MAX);
    let results: Vec<Result<Vec<Account>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine = (t..count).step_by(threads).count();
                scope.spawn(move || {
                    (0..mine)
                        .map(|_| create_account(admin, market))
                        .collect::<Result<Vec<Account>, String>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("account set-up panicked".into()))
            })
            .collect()
    });
    let mut accounts = Vec::with_capacity(count);
    for result in results {
        accounts.extend(result?);
    }
    Ok(accounts)
}

fn create_account(admin: &Admin, market: &Market) -> Result<Account, String> {
    let wallet = Wallet::random();
    let address = Address::from(rand::random::<[u8; 20]>());
    let mut http = admin.http()?;
    let account = address.to_string();
    admin.post(
        &mut http,
        "/admin/accounts",
        &json!({ "account": account, "owner": wallet.address().to_string() }),
    )?;
    let deposits = [
        ("COLLATERAL".to_string(), COLLATERAL_UNITS),
        (market.yes.to_string(), SHARES_UNITS),
        (market.no.to_string(), SHARES_UNITS),
    ];
    for (asset, amount) in deposits {
        admin.post(
            &mut http,
            "/admin/deposits",
            &json!({ "address": account, "asset": asset, "amount": amount.to_string() }),
        )?;
    }
    let mut trader = Trader::new(&admin.url, wallet.clone(), address)?;
    let response = trader.create_api_key(0)?;
    let credentials = trader.credentials.as_ref().ok_or_else(|| {
        format!(
            "POST /auth/api-key answered {}: {}",
            response.status,
            response.body.trim()
        )
    })?;
    let credentials =
        L2Credentials::from_api_credentials(credentials).map_err(|e| e.to_string())?;
    Ok(Account {
        wallet,
        address,
        credentials,
    })
}

/// The gateway's thread count, read from `/metrics` (it lists one `ladder_ring_depth` per
/// gateway thread's ring); `None` when `/metrics` is not readable from here.
pub fn gateway_threads(url: &str) -> Option<usize> {
    let mut http = HttpClient::new(url).ok()?;
    let response = http.request("GET", "/metrics", &[], None).ok()?;
    if response.status != 200 {
        return None;
    }
    let rings = response
        .body
        .lines()
        .filter(|l| l.starts_with("ladder_ring_depth{"))
        .count();
    (rings > 0).then_some(rings)
}

/// What `/metrics` says the service has used so far: its CPU seconds
/// (`process_cpu_seconds_total`) and, by thread name, CPU seconds and seconds spent waiting
/// for a core (`ladder_thread_*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceUse {
    /// The process's CPU seconds.
    pub cpu_s: f64,
    /// Per thread name: CPU seconds and seconds waiting for a core.
    pub threads: BTreeMap<String, ThreadUse>,
}

/// One thread name's use of the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ThreadUse {
    /// CPU seconds.
    pub cpu_s: f64,
    /// Seconds ready to run, waiting for a core.
    pub wait_s: f64,
}

impl ServiceUse {
    /// What the service used from `before` to `self`, per thread name (names that came up
    /// in between count from zero).
    pub fn since(&self, before: &ServiceUse) -> ServiceUse {
        let threads = self
            .threads
            .iter()
            .map(|(name, now)| {
                let then = before.threads.get(name).copied().unwrap_or_default();
                let used = ThreadUse {
                    cpu_s: (now.cpu_s - then.cpu_s).max(0.0),
                    wait_s: (now.wait_s - then.wait_s).max(0.0),
                };
                (name.clone(), used)
            })
            .collect();
        ServiceUse {
            cpu_s: (self.cpu_s - before.cpu_s).max(0.0),
            threads,
        }
    }

    /// Parses the Prometheus text of `/metrics`; `None` without `process_cpu_seconds_total`.
    pub fn parse(metrics: &str) -> Option<ServiceUse> {
        let mut found = ServiceUse::default();
        let mut cpu = None;
        for line in metrics.lines() {
            if let Some(value) = line.strip_prefix("process_cpu_seconds_total ") {
                cpu = value.trim().parse().ok();
            } else if let Some((name, value)) =
                thread_sample(line, "ladder_thread_cpu_seconds_total")
            {
                found.threads.entry(name).or_default().cpu_s = value;
            } else if let Some((name, value)) =
                thread_sample(line, "ladder_thread_wait_seconds_total")
            {
                found.threads.entry(name).or_default().wait_s = value;
            }
        }
        found.cpu_s = cpu?;
        Some(found)
    }
}

/// `(thread, value)` of a `family{thread="..."} value` line.
fn thread_sample(line: &str, family: &str) -> Option<(String, f64)> {
    let rest = line.strip_prefix(family)?.strip_prefix("{thread=\"")?;
    let (name, rest) = rest.split_once("\"}")?;
    Some((name.to_string(), rest.trim().parse().ok()?))
}

/// What the service has used so far, when `/metrics` answers (loopback, or
/// `--admin-public`).
pub fn service_use(url: &str) -> Option<ServiceUse> {
    let mut http = HttpClient::new(url).ok()?;
    let response = http.request("GET", "/metrics", &[], None).ok()?;
    if response.status != 200 {
        return None;
    }
    ServiceUse::parse(&response.body)
}

/// Fails unless `GET /time` answers, with a time the local clock (which signs every
/// request) is within 30 s of.
pub fn check_reachable(url: &str) -> Result<(), String> {
    let mut http = HttpClient::new(url)?;
    let server_s = ladder_client::server_time_s(&mut http).map_err(|e| format!("{url}: {e}"))?;
    ladder_client::check_clock_skew(ladder_client::unix_now_s(), server_s)
}

/// Most orders in one `POST /orders` (API.md §8: a batch holds at most 15).
pub const BATCH_ORDERS_MAX: usize = 15;

/// Places the pre-built book (untimed, before the clock starts) with `POST /orders` batches
/// of already signed POST /order bodies; fails if any order is not accepted.
pub fn seed_book(url: &str, account: &Account, bodies: &[String]) -> Result<(), String> {
    let mut http = HttpClient::new(url)?;
    for batch in bodies.chunks(BATCH_ORDERS_MAX) {
        let body = format!("[{}]", batch.join(","));
        let headers: Vec<(String, String)> = ladder_client::l2_headers(
            &account.credentials,
            account.address,
            ladder_client::unix_now_s(),
            "POST",
            "/orders",
            &body,
        )
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let response = http.request("POST", "/orders", &headers, Some(&body))?;
        let results = response.json();
        let accepted = results
            .as_array()
            .is_some_and(|a| a.len() == batch.len() && a.iter().all(|r| r["success"] == true));
        if response.status != 200 || !accepted {
            return Err(format!(
                "placing the pre-built book: POST /orders answered {}: {}",
                response.status,
                response.body.trim()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_use_is_read_from_metrics_and_counted_between_two_reads() {
        let before = ServiceUse::parse(
            "process_cpu_seconds_total 1.5\n\
             ladder_thread_cpu_seconds_total{thread=\"sequencer\"} 0.5\n\
             ladder_thread_wait_seconds_total{thread=\"sequencer\"} 0.25\n",
        )
        .unwrap();
        let after = ServiceUse::parse(
            "# HELP x\nprocess_cpu_seconds_total 4\n\
             ladder_thread_cpu_seconds_total{thread=\"sequencer\"} 1.5\n\
             ladder_thread_wait_seconds_total{thread=\"sequencer\"} 0.75\n\
             ladder_thread_cpu_seconds_total{thread=\"gateway-0\"} 2\n",
        )
        .unwrap();
        let used = after.since(&before);
        assert_eq!(used.cpu_s, 2.5);
        let times = |name: &str| (used.threads[name].cpu_s, used.threads[name].wait_s);
        assert_eq!(times("sequencer"), (1.0, 0.5));
        assert_eq!(times("gateway-0"), (2.0, 0.0));
        assert_eq!(ServiceUse::parse("ladder_last_seq 3\n"), None);
    }
}
