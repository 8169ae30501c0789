//! Helpers shared by the black-box end-to-end tests (on top of `support`): public and raw
//! requests, signed orders built by hand, new markets and traders through the admin surface,
//! and a small SHA-1 for the book hash.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ladder_client::{post_order_body, sign_order, HttpResponse, OrderBuilder, Trader, Wallet};
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Address, ExchangeDomain, Order, Side, SignedOrder, B256, U256};
use serde_json::{json, Value};

use crate::support::Service;

/// POST /heartbeats with `id` (None: a start); (status, body).
pub fn beat(trader: &mut Trader, id: Option<&str>) -> (u16, Value) {
    let body = json!({ "heartbeat_id": id }).to_string();
    let r = trader.send("POST", "/heartbeats", Some(&body)).unwrap();
    (r.status, r.json())
}

/// A public (unauthenticated) request.
pub fn public(service: &Service, method: &str, path: &str, body: Option<&str>) -> HttpResponse {
    service
        .http()
        .request(method, path, &[], body)
        .expect("public request")
}

/// `GET path` without credentials: (status, JSON body).
pub fn get(service: &Service, path: &str) -> (u16, Value) {
    let r = public(service, "GET", path, None);
    (r.status, r.json())
}

/// Asserts `{"error": text}` with `status`.
pub fn assert_error(r: &HttpResponse, status: u16, text: &str) {
    assert_eq!(
        (r.status, r.json()),
        (status, json!({ "error": text })),
        "body: {}",
        r.body
    );
}

/// Asserts `status` and a body that is exactly `{"error": <string>}`; returns the text.
pub fn error_text(r: &HttpResponse, status: u16) -> String {
    assert_eq!(r.status, status, "body: {}", r.body);
    let v = r.json();
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not a JSON object: {}", r.body));
    assert_eq!(obj.len(), 1, "only `error`: {}", r.body);
    obj["error"]
        .as_str()
        .unwrap_or_else(|| panic!("error is a string: {}", r.body))
        .to_string()
}

/// An order builder for `trader`'s account (signature type 3).
pub fn builder(
    trader: &Trader,
    token: U256,
    side: Side,
    price_ticks: u32,
    shares: u64,
) -> OrderBuilder {
    OrderBuilder::new(token, side, price_ticks, shares).maker(trader.account)
}

/// `builder` signed by the trader's wallet.
pub fn signed(trader: &Trader, b: OrderBuilder) -> SignedOrder {
    b.sign(&trader.wallet, &trader.exchange)
        .expect("valid order")
}

/// An unsigned order for `trader` (to alter before [`sign_raw`]).
pub fn unsigned(trader: &Trader, token: U256, side: Side, price_ticks: u32, shares: u64) -> Order {
    builder(trader, token, side, price_ticks, shares)
        .build(trader.wallet.address())
        .expect("valid order")
}

/// Signs an order as it is.
pub fn sign_raw(trader: &Trader, order: Order) -> SignedOrder {
    sign_order(order, &trader.wallet, &trader.exchange)
}

/// The order hash (EIP-712 digest) as `0x` lowercase hex.
pub fn hash_of(order: &SignedOrder) -> String {
    B256::from(order.digest(&ExchangeDomain::default())).to_string()
}

/// The POST /order body.
pub fn body_of(order: &SignedOrder, order_type: OrderType) -> String {
    post_order_body(order, order_type, false)
}

/// POST /order with an L2-signed request: (status, JSON).
pub fn post(trader: &mut Trader, body: &str) -> (u16, Value) {
    let r = trader
        .send("POST", "/order", Some(body))
        .expect("POST /order");
    (r.status, r.json())
}

/// Places an order and returns the 200 placement result.
pub fn place(
    trader: &mut Trader,
    token: U256,
    side: Side,
    price_ticks: u32,
    shares: u64,
    order_type: OrderType,
) -> Value {
    let r = trader
        .place(token, side, price_ticks, shares, order_type)
        .expect("POST /order");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Places a GTC order that must rest, returning its order hash.
pub fn rest(trader: &mut Trader, token: U256, side: Side, price_ticks: u32, shares: u64) -> String {
    let p = place(trader, token, side, price_ticks, shares, OrderType::Gtc);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("live"), "{p}");
    p["orderID"].as_str().expect("orderID").to_string()
}

/// Asserts a rejection's shape (API.md §8) and returns its `errorMsg`.
pub fn rejection(p: &Value) -> String {
    assert_eq!(p["success"], json!(false), "{p}");
    assert_eq!(p["makingAmount"], json!("0"), "{p}");
    assert_eq!(p["takingAmount"], json!("0"), "{p}");
    assert_eq!(p["status"], json!("delayed"), "{p}");
    assert_eq!(p["transactionsHashes"], json!([]), "{p}");
    assert_eq!(p["tradeIds"], json!([]), "{p}");
    let msg = p["errorMsg"]
        .as_str()
        .unwrap_or_else(|| panic!("errorMsg: {p}"));
    assert!(!msg.is_empty(), "{p}");
    msg.to_string()
}

/// The caller's open orders (first page of up to 500).
pub fn open_orders(trader: &mut Trader) -> Vec<Value> {
    let r = trader
        .send("GET", "/orders?limit=500", None)
        .expect("GET /orders");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["data"].as_array().expect("data").clone()
}

/// Ids of the caller's open orders, oldest first.
pub fn open_ids(trader: &mut Trader) -> Vec<u64> {
    open_orders(trader)
        .iter()
        .map(|o| o["id"].as_str().expect("id").parse().expect("numeric id"))
        .collect()
}

/// The id of the open order with this hash.
pub fn id_of(trader: &mut Trader, order_hash: &str) -> u64 {
    open_orders(trader)
        .iter()
        .find(|o| o["order_hash"] == json!(order_hash))
        .unwrap_or_else(|| panic!("order {order_hash} is not open"))["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("numeric id")
}

/// GET /balance-allowance with `query` (e.g. `asset_type=COLLATERAL`).
pub fn balance(trader: &mut Trader, query: &str) -> Value {
    let r = trader
        .send("GET", &format!("/balance-allowance?{query}"), None)
        .expect("balance");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// An admin call that must succeed.
pub fn admin_ok(service: &Service, method: &str, path: &str, body: Value) -> Value {
    let r = service.admin(method, path, Some(&body.to_string()));
    assert_eq!(r.status, 200, "{method} {path} {body}: {}", r.body);
    r.json()
}

/// A market created through the admin surface.
pub struct NewMarket {
    /// Condition id.
    pub condition_id: String,
    /// Yes token.
    pub yes: String,
    /// No token.
    pub no: String,
}

impl NewMarket {
    pub fn yes(&self) -> U256 {
        U256::from_dec_str(&self.yes).expect("token")
    }
    pub fn no(&self) -> U256 {
        U256::from_dec_str(&self.no).expect("token")
    }
    pub fn market(&self) -> B256 {
        self.condition_id.parse().expect("condition id")
    }
}

/// Creates market number `n` (condition id `0x` + the byte `n` 32 times) with `extra` fields.
pub fn create_market(service: &Service, n: u8, extra: Value) -> NewMarket {
    let condition_id = format!("0x{}", format!("{n:02x}").repeat(32));
    let yes = format!("{}", 7_000_000_000u64 + u64::from(n) * 10 + 1);
    let no = format!("{}", 7_000_000_000u64 + u64::from(n) * 10 + 2);
    let mut body = json!({
        "condition_id": condition_id,
        "yes_token_id": yes,
        "no_token_id": no,
        "minimum_tick_size": 0.01,
        "min_order_size": 1,
        "neg_risk": false,
        "taker_delay_ms": 0,
        "fee_rate_bps": 0
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    admin_ok(service, "POST", "/admin/markets", body);
    NewMarket {
        condition_id,
        yes,
        no,
    }
}

/// Credits `amount` base units of `asset` (`COLLATERAL` or a token id) to `address`.
pub fn deposit(service: &Service, address: &Address, asset: &str, amount: u64) {
    admin_ok(
        service,
        "POST",
        "/admin/deposits",
        json!({ "address": address.to_string(), "asset": asset, "amount": amount }),
    );
}

/// A new trader: a random EOA owning a new smart account, linked by the admin, funded with
/// `collateral` base units, with API credentials (nonce 0).
pub fn new_trader(service: &Service, collateral: u64) -> Trader {
    let wallet = Wallet::random();
    let account = Wallet::random().address();
    admin_ok(
        service,
        "POST",
        "/admin/accounts",
        json!({ "account": account.to_string(), "owner": wallet.address().to_string() }),
    );
    if collateral > 0 {
        deposit(service, &account, "COLLATERAL", collateral);
    }
    let mut t = Trader::new(&service.url, wallet, account).expect("trader");
    let r = t.create_api_key(0).expect("create key");
    assert_eq!(r.status, 200, "{}", r.body);
    t
}

/// A response read off a raw socket.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The `host:port` of a service.
pub fn authority(service: &Service) -> String {
    service
        .url
        .strip_prefix("http://")
        .expect("http url")
        .to_string()
}

/// Opens a connection with a read timeout.
pub fn connect(service: &Service) -> TcpStream {
    let s = TcpStream::connect(authority(service)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).ok();
    s.set_nodelay(true).ok();
    s
}

/// Reads one response (headers, then `Content-Length` bytes) from `stream`, keeping any
/// bytes after it in `buf`.
pub fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<RawResponse> {
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
    buf.drain(..head_end + length);
    Some(RawResponse {
        status,
        headers,
        body,
    })
}

/// Writes `bytes` on a new connection (ignoring write errors: the server may answer and
/// close early) and reads one response.
pub fn raw_exchange(service: &Service, bytes: &[u8]) -> Option<RawResponse> {
    let mut stream = connect(service);
    for chunk in bytes.chunks(16 * 1024) {
        if stream.write_all(chunk).is_err() {
            break;
        }
    }
    read_response(&mut stream, &mut Vec::new())
}

/// A request with arbitrary body bytes on a new connection.
pub fn raw_request(
    service: &Service,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> RawResponse {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
        authority(service),
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    raw_exchange(service, &bytes).expect("a response")
}

/// L2 headers for a request with a raw byte body.
pub fn l2_for_bytes(
    trader: &Trader,
    method: &str,
    path: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    let creds = trader.credentials.as_ref().expect("credentials");
    let secret = ladder_protocol::L2Secret::from_base64(&creds.secret).expect("secret");
    let ts = ladder_client::unix_now_s().to_string();
    let signature = secret.sign(&ts, method, path, body);
    vec![
        ("SVC_ADDRESS".into(), trader.account.to_string()),
        ("SVC_API_KEY".into(), creds.api_key.to_string()),
        ("SVC_TIMESTAMP".into(), ts),
        ("SVC_PASSPHRASE".into(), creds.passphrase.clone()),
        ("SVC_SIGNATURE".into(), signature),
    ]
}

/// Replaces header `name` in `headers`.
pub fn with_header(headers: &[(String, String)], name: &str, value: &str) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            if n.eq_ignore_ascii_case(name) {
                (n.clone(), value.to_string())
            } else {
                (n.clone(), v.clone())
            }
        })
        .collect()
}

/// Drops header `name` from `headers`.
pub fn without_header(headers: &[(String, String)], name: &str) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case(name))
        .cloned()
        .collect()
}

/// SHA-1 of `data` as lowercase hex (the `sha1` crate: no home-made crypto).
pub fn sha1_hex(data: &[u8]) -> String {
    use sha1::{Digest, Sha1};
    hex::encode(Sha1::digest(data))
}

/// The value of the metric `name` (with its labels) in GET /metrics; panics when absent.
pub fn metric(service: &Service, name: &str) -> String {
    let r = public(service, "GET", "/metrics", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let prefix = format!("{name} ");
    r.body
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{}", r.body))
        .to_string()
}

/// `ladder client --url URL --trader 0 --credentials FILE ARGS…`: demo trader 0 against the
/// service at `url`, its credentials kept in `credentials`.
pub fn ladder_client_as_trader_0(
    url: &str,
    credentials: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["client", "--url", url, "--trader", "0", "--credentials"])
        .arg(credentials)
        .args(args)
        .output()
        .expect("run ladder client")
}
