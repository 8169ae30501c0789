//! `ladder client ...`: a command-line trader for the README walk-through and for poking a
//! running service: create or derive an API key, place, list and cancel orders, read
//! trades and balances. Credentials are kept in a JSON file between calls.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use ladder_client::{OrderSpec, Trader, Wallet};
use ladder_protocol::wire::responses::ApiCredentials;
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Address, Side, B256, U256};

use super::{demo, flags};

/// `ladder client` flags.
#[derive(Args, Debug)]
pub struct ClientArgs {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080", global = true,
          value_parser = flags::http_url)]
    pub url: String,
    /// Use demo trader 0 or 1 (keys printed by `serve --demo`).
    #[arg(long, global = true,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1))]
    pub trader: Option<usize>,
    /// Private key of the signing EOA (instead of --trader).
    #[arg(
        long,
        env = "LADDER_PRIVATE_KEY",
        hide_env_values = true,
        global = true,
        value_parser = flags::private_key
    )]
    pub private_key: Option<String>,
    /// The trading account (a smart account the key controls); default the key's address.
    #[arg(long, global = true, value_parser = flags::address)]
    pub account: Option<String>,
    /// Where API credentials are kept between calls.
    #[arg(long, global = true)]
    pub credentials: Option<PathBuf>,
    /// The service's `--exchange-address` (the EIP-712 `verifyingContract` of orders and
    /// cancels, and the contract a redemption calls): give it for a service on a chain.
    #[arg(
        long,
        env = "LADDER_EXCHANGE_ADDRESS",
        global = true,
        default_value = "0x000000000000000000000000000000000000C10b",
        value_parser = flags::address
    )]
    pub exchange_address: String,
    #[command(subcommand)]
    pub action: ClientAction,
}

/// What to do.
#[derive(Subcommand, Debug)]
pub enum ClientAction {
    /// POST /auth/api-key (L1) and keep the credentials.
    CreateKey {
        /// The ClobAuth nonce.
        #[arg(long, default_value_t = 0)]
        nonce: u64,
    },
    /// GET /auth/derive-api-key (L1) and keep the credentials.
    DeriveKey {
        /// The ClobAuth nonce.
        #[arg(long, default_value_t = 0)]
        nonce: u64,
    },
    /// POST /order: a signed order.
    Order {
        /// `yes`, `no` (the demo market's tokens) or a token id.
        #[arg(long, value_parser = flags::token)]
        token: String,
        /// buy or sell.
        #[arg(long, value_parser = flags::side)]
        side: Side,
        /// Price, e.g. 0.55.
        #[arg(long, value_parser = flags::price_ticks)]
        price: u32,
        /// Whole shares.
        #[arg(long)]
        size: u64,
        /// GTC, GTD, FOK or FAK.
        #[arg(long = "type", default_value = "GTC", value_parser = flags::order_type)]
        order_type: OrderType,
        /// Unix seconds (GTD).
        #[arg(long, default_value_t = 0)]
        expiration: u64,
        /// Rest only, never take.
        #[arg(long)]
        post_only: bool,
    },
    /// GET /orders: the caller's open orders.
    Orders,
    /// DELETE /order: cancel one order (signed CancelOrder).
    Cancel {
        /// The order id.
        #[arg(long)]
        id: u64,
        /// The market's condition id (default the demo market).
        #[arg(long, default_value = demo::CONDITION_ID, value_parser = flags::condition_id)]
        market: B256,
    },
    /// DELETE /cancel-all.
    CancelAll,
    /// POST /heartbeats every --every seconds until stopped (Ctrl-C) or --count beats: the
    /// dead-man switch (the service cancels the account's orders once beats stop).
    Heartbeat {
        /// Seconds between beats (below the service's --heartbeat-timeout-ms).
        #[arg(long, default_value_t = 5.0)]
        every: f64,
        /// Stop after this many beats (default: until Ctrl-C).
        #[arg(long)]
        count: Option<u64>,
    },
    /// DELETE /heartbeats: stop the heartbeats without cancelling anything.
    StopHeartbeats,
    /// Redeem the account's claimable positions in a resolved market through the service's
    /// bundler (POST /bundler, an ERC-4337 user operation signed by the owner), then print
    /// its receipt.
    Redeem {
        /// The market's condition id (default the demo market).
        #[arg(long, default_value = demo::CONDITION_ID, value_parser = flags::condition_id)]
        market: B256,
    },
    /// GET /trades.
    Trades,
    /// GET /balance-allowance for collateral (or a token with --token).
    Balance {
        /// `yes`, `no` or a token id; collateral when absent.
        #[arg(long, value_parser = flags::token)]
        token: Option<String>,
    },
    /// Any L2-authenticated request: METHOD PATH [BODY].
    Raw {
        /// GET, POST, DELETE.
        method: String,
        /// Path with query.
        path: String,
        /// JSON body.
        body: Option<String>,
    },
}

fn token_id(text: &str) -> Result<U256, String> {
    let id = match text.to_ascii_lowercase().as_str() {
        "yes" => demo::YES_TOKEN,
        "no" => demo::NO_TOKEN,
        _ => text,
    };
    U256::from_dec_str(id).map_err(|e| format!("--token: {e}"))
}

fn trader(args: &ClientArgs) -> Result<(Trader, PathBuf), String> {
    let (key, default_account) = match (&args.private_key, args.trader) {
        (Some(key), _) => (key.clone(), None),
        (None, Some(i)) => {
            let t = demo::TRADERS.get(i).ok_or("--trader: 0 or 1")?;
            (t.private_key.to_string(), Some(t.account.to_string()))
        }
        (None, None) => return Err("give --trader 0|1 (demo) or --private-key".into()),
    };
    let wallet = Wallet::from_hex(&key).map_err(|e| format!("private key: {e}"))?;
    let account = match args.account.clone().or(default_account) {
        Some(a) => Address::parse(&a).map_err(|e| format!("--account: {e}"))?,
        None => wallet.address(),
    };
    let path = args.credentials.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "ladder-credentials-{}.json",
            account.to_lowercase_hex()
        ))
    });
    let mut trader = Trader::new(&args.url, wallet, account)?;
    let exchange = Address::parse_ignoring_checksum(&args.exchange_address)
        .map_err(|e| format!("--exchange-address: {e}"))?;
    trader.exchange = ladder_protocol::ExchangeDomain::new(ladder_protocol::CHAIN_ID, exchange);
    trader.check_clock()?;
    if let Ok(text) = std::fs::read_to_string(&path) {
        trader.credentials = serde_json::from_str::<ApiCredentials>(&text).ok();
    }
    Ok((trader, path))
}

/// `ladder client heartbeat`: beats until Ctrl-C (or `count` beats), one line per answer.
fn heartbeat(trader: &mut Trader, every_s: f64, count: Option<u64>) -> Result<(), String> {
    if !(every_s.is_finite() && every_s > 0.0) {
        return Err("--every: a positive number of seconds".into());
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).map_err(|e| e.to_string())?;
    }
    trader.keep_beating(
        std::time::Duration::from_secs_f64(every_s),
        count,
        &stop,
        |response| crate::cmd::stdout::print_line(&response.body),
    )
}

/// Runs a client action and prints the answer.
pub fn run(args: ClientArgs) -> Result<(), String> {
    let (mut trader, path) = trader(&args)?;
    let response = match &args.action {
        ClientAction::CreateKey { nonce } => trader.create_api_key(*nonce)?,
        ClientAction::DeriveKey { nonce } => trader.derive_api_key(*nonce)?,
        ClientAction::Order {
            token,
            side,
            price,
            size,
            order_type,
            expiration,
            post_only,
        } => {
            let spec = OrderSpec {
                order_type: *order_type,
                post_only: *post_only,
                expiration_s: *expiration,
                ..OrderSpec::gtc(token_id(token)?, *side, *price, *size)
            };
            let body = trader.order_body(&spec)?;
            trader.send("POST", "/order", Some(&body))?
        }
        ClientAction::Orders => trader.send("GET", "/orders", None)?,
        ClientAction::Cancel { id, market } => trader.cancel(*id, *market)?,
        ClientAction::CancelAll => trader.send("DELETE", "/cancel-all", None)?,
        ClientAction::Heartbeat { every, count } => return heartbeat(&mut trader, *every, *count),
        ClientAction::StopHeartbeats => trader.send("DELETE", "/heartbeats", None)?,
        ClientAction::Redeem { market } => {
            let receipt = trader.redeem(market)?;
            crate::cmd::stdout::print_line(
                serde_json::to_string_pretty(&receipt).unwrap_or_default(),
            );
            return Ok(());
        }
        ClientAction::Trades => trader.send("GET", "/trades", None)?,
        ClientAction::Balance { token } => {
            let path = match token {
                None => "/balance-allowance?asset_type=COLLATERAL".to_string(),
                Some(t) => format!(
                    "/balance-allowance?asset_type=CONDITIONAL&token_id={}",
                    token_id(t)?
                ),
            };
            trader.send("GET", &path, None)?
        }
        ClientAction::Raw { method, path, body } => {
            trader.send(&method.to_ascii_uppercase(), path, body.as_deref())?
        }
    };
    if matches!(
        args.action,
        ClientAction::CreateKey { .. } | ClientAction::DeriveKey { .. }
    ) && response.status == 200
    {
        std::fs::write(&path, &response.body).map_err(|e| format!("{}: {e}", path.display()))?;
        crate::cmd::stdout::print_error(format_args!("credentials saved to {}", path.display()));
    }
    let json = response.json();
    let shown = if json.is_null() {
        response.body.clone()
    } else {
        serde_json::to_string_pretty(&json).unwrap_or_default()
    };
    crate::cmd::stdout::print_line(shown);
    if response.status != 200 {
        return Err(http_failure(response.status, &json, &response.body));
    }
    Ok(())
}

/// The one-line reason of a refused request: its status and the service's error text (the
/// body's `error`, else the body itself), on one line, cut at 200 characters.
fn http_failure(status: u16, json: &serde_json::Value, body: &str) -> String {
    let text = json.get("error").and_then(|e| e.as_str()).unwrap_or(body);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text: String = text.chars().take(200).collect();
    if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }
}
