//! A trader's session against a running service: L1 to get credentials, then signed,
//! L2-authenticated requests. Builds on the pure builders of this crate.

use std::time::{SystemTime, UNIX_EPOCH};

use ladder_protocol::wire::responses::ApiCredentials;
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Address, AuthDomain, ExchangeDomain, Side, SignatureType, B256, U256};

use crate::client::auth::{l1_headers, l2_headers, L2Credentials};
use crate::client::cancels::cancel_order_request;
use crate::client::http::{HttpClient, HttpResponse};
use crate::client::orders::{post_order_body, OrderBuilder};
use crate::client::wallet::Wallet;

/// The current Unix time in seconds.
pub fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// How far from the server's time a signed timestamp may be (API.md §18, API.md §7).
pub const CLOCK_SKEW_MAX_S: u64 = 30;

/// Refuses a local clock more than [`CLOCK_SKEW_MAX_S`] from the server's: API.md §18 has
/// clients reject locally beyond that, rather than send requests the server will refuse.
pub fn check_clock_skew(local_s: u64, server_s: u64) -> Result<(), String> {
    let skew_s = local_s.abs_diff(server_s);
    if skew_s > CLOCK_SKEW_MAX_S {
        let direction = if local_s > server_s {
            "ahead of"
        } else {
            "behind"
        };
        return Err(format!(
            "the local clock is {skew_s} s {direction} the server's (GET /time); signed \
             timestamps must be within {CLOCK_SKEW_MAX_S} s of it: set the clock right"
        ));
    }
    Ok(())
}

/// `GET /time` of the service at `http`, in Unix seconds.
pub fn server_time_s(http: &mut HttpClient) -> Result<u64, String> {
    let response = http.request("GET", "/time", &[], None)?;
    if response.status != 200 {
        return Err(format!(
            "GET /time answered {}: {}",
            response.status,
            response.body.trim()
        ));
    }
    response
        .body
        .trim()
        .parse()
        .map_err(|_| format!("GET /time answered {:?}, not Unix seconds", response.body))
}

fn owned(headers: Vec<(&'static str, String)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// What to order.
#[derive(Clone, Copy, Debug)]
pub struct OrderSpec {
    /// The token.
    pub token: U256,
    /// BUY or SELL.
    pub side: Side,
    /// Limit price in ticks of 0.0001.
    pub price_ticks: u32,
    /// Whole shares.
    pub shares: u64,
    /// GTC, GTD, FOK or FAK.
    pub order_type: OrderType,
    /// Rest only.
    pub post_only: bool,
    /// Unix seconds (GTD); 0 = none.
    pub expiration_s: u64,
}

impl OrderSpec {
    /// A GTC order.
    pub fn gtc(token: U256, side: Side, price_ticks: u32, shares: u64) -> OrderSpec {
        OrderSpec {
            token,
            side,
            price_ticks,
            shares,
            order_type: OrderType::Gtc,
            post_only: false,
            expiration_s: 0,
        }
    }
}

/// A trader: the EOA that signs, the account it trades for, and (once created) API credentials.
pub struct Trader {
    /// The connection.
    pub http: HttpClient,
    /// The signing key.
    pub wallet: Wallet,
    /// The trading account (a smart account the wallet controls, or the wallet itself).
    pub account: Address,
    /// The exchange's EIP-712 domain.
    pub exchange: ExchangeDomain,
    /// The ClobAuth domain.
    pub auth: AuthDomain,
    /// API credentials, once created or derived.
    pub credentials: Option<ApiCredentials>,
}

impl Trader {
    /// A trader of `account` signing with `wallet`, talking to `base_url`.
    pub fn new(base_url: &str, wallet: Wallet, account: Address) -> Result<Trader, String> {
        Ok(Trader {
            http: HttpClient::new(base_url)?,
            wallet,
            account,
            exchange: ExchangeDomain::default(),
            auth: AuthDomain::default(),
            credentials: None,
        })
    }

    /// Checks that the local clock, which signs L1 and L2 timestamps, is within
    /// [`CLOCK_SKEW_MAX_S`] of the server's.
    pub fn check_clock(&mut self) -> Result<(), String> {
        let server_s = server_time_s(&mut self.http)?;
        check_clock_skew(unix_now_s(), server_s)
    }

    /// The L1 headers for `nonce`.
    pub fn l1(&self, nonce: u64) -> Vec<(String, String)> {
        owned(l1_headers(
            &self.wallet,
            &self.auth,
            self.account,
            unix_now_s(),
            U256::from_u64(nonce),
        ))
    }

    /// `POST /auth/api-key` with L1; keeps the credentials on success.
    pub fn create_api_key(&mut self, nonce: u64) -> Result<HttpResponse, String> {
        let headers = self.l1(nonce);
        let response = self.http.request("POST", "/auth/api-key", &headers, None)?;
        self.keep_credentials(&response);
        Ok(response)
    }

    /// `GET /auth/derive-api-key` with L1; keeps the credentials on success.
    pub fn derive_api_key(&mut self, nonce: u64) -> Result<HttpResponse, String> {
        let headers = self.l1(nonce);
        let response = self
            .http
            .request("GET", "/auth/derive-api-key", &headers, None)?;
        self.keep_credentials(&response);
        Ok(response)
    }

    fn keep_credentials(&mut self, response: &HttpResponse) {
        if response.status == 200 {
            if let Ok(c) = serde_json::from_str::<ApiCredentials>(&response.body) {
                self.credentials = Some(c);
            }
        }
    }

    /// The L2 headers of a request.
    pub fn l2(
        &self,
        method: &str,
        path: &str,
        body: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let credentials = self
            .credentials
            .as_ref()
            .ok_or("no API credentials: create or derive a key first")?;
        let l2 = L2Credentials::from_api_credentials(credentials).map_err(|e| e.to_string())?;
        Ok(owned(l2_headers(
            &l2,
            self.account,
            unix_now_s(),
            method,
            path,
            body,
        )))
    }

    /// An L2-authenticated request.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<HttpResponse, String> {
        let headers = self.l2(method, path, body.unwrap_or(""))?;
        self.http.request(method, path, &headers, body)
    }

    /// POST /heartbeats: starts the key's heartbeats (`id` None) or beats with the id of the
    /// last answer; the answer carries the next id (API.md §16).
    pub fn heartbeat(&mut self, id: Option<&str>) -> Result<HttpResponse, String> {
        let body = serde_json::json!({ "heartbeat_id": id }).to_string();
        self.send("POST", "/heartbeats", Some(&body))
    }

    /// Beats every `every` until `stop` is set (or after `beats` beats, when given), from a
    /// fresh start, resynchronising on the id a 400 returns; calls `each` with every answer.
    /// A market maker's dead-man switch: while this runs its orders stay, and once it stops
    /// (the process dies, the network goes) the service cancels them after its timeout.
    pub fn keep_beating(
        &mut self,
        every: std::time::Duration,
        beats: Option<u64>,
        stop: &std::sync::atomic::AtomicBool,
        mut each: impl FnMut(&HttpResponse),
    ) -> Result<(), String> {
        let mut id: Option<String> = None;
        let mut sent = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Acquire) && beats.is_none_or(|n| sent < n) {
            let response = self.heartbeat(id.as_deref())?;
            each(&response);
            sent += 1;
            let next = response.json()["heartbeat_id"].as_str().map(str::to_string);
            match response.status {
                200 => id = next,
                // The current id, or none (expired or never started): start again with it.
                400 => id = next,
                status => {
                    return Err(format!(
                        "POST /heartbeats: HTTP {status}: {}",
                        response.body
                    ))
                }
            }
            if beats.is_none_or(|n| sent < n) {
                std::thread::sleep(every);
            }
        }
        Ok(())
    }

    /// A signed order body for `spec`.
    pub fn order_body(&self, spec: &OrderSpec) -> Result<String, String> {
        let order = OrderBuilder::new(spec.token, spec.side, spec.price_ticks, spec.shares)
            .maker(self.account)
            .signature_type(SignatureType::SmartAccount)
            .expiration_s(spec.expiration_s)
            .sign(&self.wallet, &self.exchange)
            .map_err(|e| e.to_string())?;
        Ok(post_order_body(&order, spec.order_type, spec.post_only))
    }

    /// `POST /order`.
    pub fn place(
        &mut self,
        token: U256,
        side: Side,
        price_ticks: u32,
        shares: u64,
        order_type: OrderType,
    ) -> Result<HttpResponse, String> {
        let spec = OrderSpec {
            order_type,
            ..OrderSpec::gtc(token, side, price_ticks, shares)
        };
        let body = self.order_body(&spec)?;
        self.send("POST", "/order", Some(&body))
    }

    /// `DELETE /order`, signed as CancelOrder by the wallet (signature type 3).
    pub fn cancel(&mut self, order_id: u64, market: B256) -> Result<HttpResponse, String> {
        let request = cancel_order_request(
            &self.wallet,
            &self.exchange,
            order_id,
            market,
            SignatureType::SmartAccount,
        );
        let body = request.to_json();
        self.send("DELETE", "/order", Some(&body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_more_than_30_s_off_the_servers_is_refused_locally() {
        assert_eq!(check_clock_skew(1_000, 1_000), Ok(()));
        assert_eq!(check_clock_skew(1_030, 1_000), Ok(()));
        assert_eq!(check_clock_skew(970, 1_000), Ok(()));
        let ahead = check_clock_skew(1_031, 1_000).unwrap_err();
        assert!(ahead.contains("31 s ahead of"), "{ahead}");
        let behind = check_clock_skew(900, 1_000).unwrap_err();
        assert!(behind.contains("100 s behind"), "{behind}");
    }
}
