//! The application behind the HTTP layer: routing, authentication, and turning engine
//! replies and views into the wire shapes of docs/API.md.

mod admin;
mod allow;
pub mod bundler;
mod credentials;
mod heartbeats;
mod orders;
pub(crate) mod present;
mod public;
mod query;
pub mod refusals;
mod trades;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ladder_engine::{Command, Engine, Reply};
use ladder_protocol::{AuthDomain, ExchangeDomain};
use ladder_sequencer::{Completion, Work};
use serde::Serialize;
use uuid::Uuid;

use crate::auth::{authenticate_l2, L2Principal};
use crate::handler::{unexpected, Outcome};
use crate::http::{Method, Request, Response, Status};
use crate::keys::KeyTable;
use crate::metrics::Metrics;
use crate::rate_limit::RateLimiter;
use crate::routes::{self, Serves};

pub use query::QueryString;

/// Settings of the application.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// The exchange's EIP-712 domain (orders and cancels).
    pub exchange: ExchangeDomain,
    /// The ClobAuth domain.
    pub auth: AuthDomain,
    /// Bearer token of the admin surface; without one, admin calls are refused.
    pub admin_token: Option<String>,
    /// Serve admin and metrics to non-loopback clients too.
    pub admin_public: bool,
    /// API keys per address.
    pub max_keys_per_user: u32,
    /// Requests per 10 s per API key (0: off).
    pub rate_limit_key: u32,
    /// Requests per 10 s per client IP (0: off).
    pub rate_limit_ip: u32,
    /// Smart-account control checked on the chain (`--rpc-url`), besides the registry.
    pub smart_accounts: crate::smart::SmartAccounts,
    /// The ERC-4337 EntryPoint the bundler serves (`--entry-point`).
    pub entry_point: ladder_protocol::Address,
    /// With `--rpc-url`: the chain's bundler (operations go there instead of the ledger).
    pub chain_bundler: Option<std::sync::Arc<bundler::ChainBundler>>,
}

/// Chain calls (ERC-1271 `eth_call`) one client address may cause per 10 s before its request
/// is authenticated.
pub const CHAIN_CALLS_BEFORE_AUTH_PER_IP: u32 = 50;

/// The application.
pub struct App {
    config: AppConfig,
    keys: Arc<KeyTable>,
    key_limiter: RateLimiter<Uuid>,
    ip_limiter: Arc<RateLimiter<IpAddr>>,
    /// Chain calls made for requests not yet authenticated, per client address.
    chain_call_limiter: RateLimiter<IpAddr>,
    metrics: Arc<Metrics>,
    state: Arc<ServiceState>,
    promote_hook: Option<PromoteHook>,
    snapshot_hook: Option<SnapshotHook>,
}

/// Whether the service is ready and whether it is a standby; shared with the runtime.
#[derive(Debug, Default)]
pub struct ServiceState {
    /// Set once recovery is done: before, every request is 503 `service not ready`.
    pub ready: AtomicBool,
    /// Set while this is a standby: writes are 503 `standby: not primary`.
    pub standby: AtomicBool,
    /// With `--replicas N`: writes are 503 `replica unavailable` while fewer are connected.
    pub replication:
        parking_lot::RwLock<Option<Arc<ladder_sequencer::replication::ReplicationHub>>>,
    /// The read side of the books: book and price reads are answered from it, never through
    /// the sequencer. Filled once recovery is done, then kept by every release.
    pub board: Arc<ladder_sequencer::BookBoard>,
    /// The history store: what the engine has forgotten (final trades), read after the
    /// engine (API.md §19, "History and bounded state"). Set once the store is open; `None` for an engine that forgets
    /// nothing (tests that run no historian).
    pub history: parking_lot::RwLock<Option<Arc<dyn ladder_sequencer::HistoryReads>>>,
    /// The cluster's leader as this node sees it (`GET /admin/leader`, the 503 of a write
    /// on a standby, the `ladder_is_leader` and `ladder_term` gauges). Set by the runtime.
    pub leader: parking_lot::RwLock<Option<LeaderLookup>>,
}

/// The cluster's leader as a node sees it (CONTRACT 22).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderStatus {
    /// The leader's node id (`None`: no leader known).
    pub node_id: Option<String>,
    /// The leader's client URL.
    pub url: Option<String>,
    /// The newest term known.
    pub term: u64,
    /// Whether this node leads.
    pub leading: bool,
    /// Whether a coordinator decides who leads: a standby's refusals then name the leader.
    pub coordinated: bool,
}

/// Reads the leader as this node sees it now.
#[derive(Clone)]
pub struct LeaderLookup(pub Arc<dyn Fn() -> LeaderStatus + Send + Sync>);

impl std::fmt::Debug for LeaderLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LeaderLookup").field(&(self.0)()).finish()
    }
}

impl ServiceState {
    /// The leader as this node sees it now (the default without a runtime that says).
    pub fn leader_status(&self) -> LeaderStatus {
        self.leader
            .read()
            .as_ref()
            .map(|lookup| (lookup.0)())
            .unwrap_or_default()
    }
}

/// Turns a standby into a primary; called by `POST /admin/promote`.
pub type PromoteHook = Arc<dyn Fn() -> Result<(), PromoteError> + Send + Sync>;

/// Why a promotion did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromoteError {
    /// Another node holds the coordinator's lease (409).
    Conflict(String),
    /// The promotion failed (500; the reason goes to the log).
    Failed(String),
}

/// A snapshot written on command: the sequence it holds and its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotTaken {
    /// The last sequence the snapshot holds.
    pub seq: u64,
    /// Its file.
    pub path: String,
}

/// Writes a snapshot of the engine now; called by `POST /admin/snapshot` (off the event
/// loop: it waits for the sequencer and the disk).
pub type SnapshotHook = Arc<dyn Fn() -> Result<SnapshotTaken, String> + Send + Sync>;

/// The text of a write refused by a standby (API.md §19), the sequencer's own.
pub use ladder_sequencer::STANDBY_REFUSAL;

impl App {
    /// An application over `keys`, reporting into `metrics`, answering as `state` says.
    pub fn new(
        config: AppConfig,
        keys: Arc<KeyTable>,
        metrics: Arc<Metrics>,
        state: Arc<ServiceState>,
    ) -> App {
        metrics.attach_state(state.clone());
        App {
            key_limiter: RateLimiter::new(config.rate_limit_key),
            ip_limiter: Arc::new(RateLimiter::new(config.rate_limit_ip)),
            chain_call_limiter: RateLimiter::new(CHAIN_CALLS_BEFORE_AUTH_PER_IP),
            config,
            keys,
            metrics,
            state,
            promote_hook: None,
            snapshot_hook: None,
        }
    }

    /// Sets what `POST /admin/snapshot` does.
    pub fn with_snapshot_hook(mut self, hook: SnapshotHook) -> App {
        self.snapshot_hook = Some(hook);
        self
    }

    /// Sets what `POST /admin/promote` does on a standby.
    pub fn with_promote_hook(mut self, hook: PromoteHook) -> App {
        self.promote_hook = Some(hook);
        self
    }

    fn route(&self, request: &Request, peer: SocketAddr) -> Outcome {
        let path = request.path().trim_end_matches('/');
        let path = if path.is_empty() { "/" } else { path };
        if path == "/admin/leader" {
            return self.leader_route(request);
        }
        if let Some(rest) = path.strip_prefix("/admin") {
            if rest.is_empty() || rest.starts_with('/') {
                return self.admin(request, peer, rest);
            }
        }
        let Some(route) = routes::route_of(path) else {
            return Outcome::error(Status::NotFound, "not found");
        };
        let method = match request.method {
            Method::Head => Method::Get,
            other => other,
        };
        let served = match route.serves {
            Serves::Metrics => return self.metrics_route(request, peer),
            // An upgrade never gets here (the server takes it first): a plain GET of a
            // WebSocket endpoint is a bad request, not a method the route refuses.
            Serves::WebSocket => (method == Method::Get).then(|| {
                Outcome::error(
                    Status::BadRequest,
                    "upgrade: a WebSocket endpoint; send Upgrade: websocket",
                )
            }),
            Serves::Public => public::route(self, method, path, request),
            Serves::Credentials => credentials::route(self, method, path, request),
            Serves::Orders => orders::route(self, method, path, request),
            Serves::Heartbeats => heartbeats::route(self, method, path, request),
            Serves::Bundler => bundler::route(self, method, path, request),
            Serves::Trades => trades::route(self, method, path, request),
        };
        served.unwrap_or_else(|| allow::method_not_allowed(route.allow))
    }

    fn admin(&self, request: &Request, peer: SocketAddr, rest: &str) -> Outcome {
        if !self.config.admin_public && !is_loopback(peer.ip()) {
            return Outcome::error(
                Status::Forbidden,
                "the admin surface is served to loopback only",
            );
        }
        let Some(token) = &self.config.admin_token else {
            return Outcome::error(
                Status::Unauthorized,
                "admin surface disabled: no admin token configured",
            );
        };
        let presented = request
            .header("authorization")
            .and_then(bearer_token)
            .unwrap_or("");
        if !ladder_protocol::constant_time_eq(presented.as_bytes(), token.as_bytes()) {
            return Outcome::error(
                Status::Unauthorized,
                "admin token required: Authorization: Bearer <token>",
            );
        }
        admin::route(self, request, rest.trim_end_matches('/'))
    }

    /// `GET /admin/leader` (public, CONTRACT 22): the leader as this node sees it.
    fn leader_route(&self, request: &Request) -> Outcome {
        if request.method != Method::Get && request.method != Method::Head {
            return allow::method_not_allowed("GET, HEAD");
        }
        let leader = self.state.leader_status();
        Outcome::Respond(ok_json(&serde_json::json!({
            "leader": leader.node_id,
            "url": leader.url,
            "term": leader.term,
        })))
    }

    fn metrics_route(&self, request: &Request, peer: SocketAddr) -> Outcome {
        if !self.config.admin_public && !is_loopback(peer.ip()) {
            return Outcome::error(Status::Forbidden, "metrics are served to loopback only");
        }
        if request.method != Method::Get && request.method != Method::Head {
            return allow::method_not_allowed("GET, HEAD");
        }
        let text = self.metrics.render();
        Outcome::Respond(Response::text(text))
    }

    /// Checks L2 and the key's rate limit.
    /// The history store, once open.
    pub(crate) fn history(&self) -> Option<Arc<dyn ladder_sequencer::HistoryReads>> {
        self.state.history.read().clone()
    }

    fn l2(&self, request: &Request) -> Result<L2Principal, Outcome> {
        let principal = authenticate_l2(&self.keys, request, now_s())
            .map_err(|e| Outcome::error(Status::Unauthorized, &e.0))?;
        self.key_limiter
            .take(&principal.key_id, Instant::now())
            .map_err(too_many)?;
        Ok(principal)
    }

    /// Charges a request for `units` units of work (signatures to recover, books to build),
    /// so that a large batch costs what as many requests would: beside the token it took
    /// already, `units - 1` more from its key's bucket (an L2 request, `key`) or from its
    /// client's (a public one). Refused, it spends nothing: 429 with `Retry-After`.
    pub(super) fn charge(
        &self,
        request: &Request,
        key: Option<&Uuid>,
        units: usize,
    ) -> Result<(), Outcome> {
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        // A request of more units than a bucket holds costs the whole bucket: it passes
        // once the bucket is full (the one token it took already counts).
        let extra = |limiter_capacity: u32| units.min(limiter_capacity).saturating_sub(1);
        let now = Instant::now();
        let taken = match (key, request.peer) {
            (Some(key), _) => self
                .key_limiter
                .take_n(key, extra(self.key_limiter.capacity_tokens()), now)
                .inspect_err(|_| self.key_limiter.give_back(key)),
            (None, Some(ip)) => {
                let extra = extra(self.ip_limiter.capacity_tokens());
                self.ip_limiter.take_n(&ip, extra, now)
            }
            (None, None) => Ok(()),
        };
        taken.map_err(too_many)
    }

    /// Takes a token of the client's chain-call bucket for an `eth_call` made before its
    /// request is authenticated (an L1 signature a smart account must judge): random
    /// signatures for smart accounts cannot make the node work, or flush the verifier's
    /// cache, faster than [`CHAIN_CALLS_BEFORE_AUTH_PER_IP`] per 10 s per address. Past it,
    /// the seconds until a token comes back.
    pub(super) fn charge_chain_call(&self, request: &Request) -> Result<(), u64> {
        match request.peer {
            Some(ip) => self.chain_call_limiter.take(&ip, Instant::now()),
            None => Ok(()),
        }
    }

    /// `POST /admin/promote`: a standby becomes a primary (API.md §19).
    fn promote(&self) -> Outcome {
        if !self.state.standby.load(Ordering::Acquire) {
            return Outcome::error(
                Status::BadRequest,
                "not a standby: this service is already the primary",
            );
        }
        match &self.promote_hook {
            Some(hook) => match hook() {
                Ok(()) => Outcome::Respond(ok_json(&serde_json::json!({ "promoted": true }))),
                Err(PromoteError::Conflict(why)) => Outcome::error(Status::Conflict, &why),
                Err(PromoteError::Failed(e)) => {
                    // The reason goes to the operator's log; a 500 never leaks internals.
                    tracing::error!(error = %e, "promotion failed");
                    Outcome::error(Status::Internal, "promotion failed; see the service log")
                }
            },
            None => Outcome::error(Status::Internal, "promotion is not available"),
        }
    }

    /// `POST /admin/snapshot`: a snapshot of the engine now (issue 4: "periodically and on
    /// command"), on a primary or a standby. Not a state change, so nothing is journaled.
    fn snapshot(&self) -> Outcome {
        let Some(hook) = self.snapshot_hook.clone() else {
            return Outcome::error(Status::Internal, "snapshots are not available");
        };
        Outcome::defer(move || match hook() {
            Ok(taken) => Outcome::Respond(ok_json(&serde_json::json!({
                "seq": taken.seq,
                "path": taken.path,
            }))),
            // A full disk is a fault of the machine, not a bug: 503, as for a full journal.
            Err(e) if e.contains("os error 28") => {
                tracing::warn!(error = %e, "snapshot not written: the disk is full");
                Outcome::error(
                    Status::Unavailable,
                    "snapshot failed: no space left on device",
                )
            }
            Err(e) => {
                tracing::error!(error = %e, "snapshot failed");
                Outcome::error(Status::Internal, "snapshot failed; see the service log")
            }
        })
    }

    /// A standby's 503: `standby: not primary`, naming the leader when a coordinator decides
    /// who leads (CONTRACT 22).
    fn standby_refusal(&self) -> Response {
        let leader = self.state.leader_status();
        let response = match leader.coordinated {
            false => Response::error(Status::Unavailable, STANDBY_REFUSAL),
            true => Response::json(
                Status::Unavailable,
                serde_json::to_vec(
                    &serde_json::json!({ "error": STANDBY_REFUSAL, "leader": leader.url }),
                )
                .unwrap_or_default(),
            ),
        };
        response.retry_after(1)
    }

    /// Refuses writes on a standby, and on a primary with fewer standbys than `--replicas`.
    fn writable(&self) -> Result<(), Outcome> {
        self.admits(Replicated::Needed)
    }

    /// Refuses what only a primary takes: on a standby, and (when `replicated` says the
    /// request journals something) on a primary with fewer standbys than `--replicas`.
    fn admits(&self, replicated: Replicated) -> Result<(), Outcome> {
        if self.state.standby.load(Ordering::Acquire) {
            return Err(Outcome::Respond(self.standby_refusal()));
        }
        if let Some(hub) = self.state.replication.read().as_ref() {
            if hub.connected() < hub.required() {
                // A leader whose lease lapses lost its standbys to the next leader: it is one
                // of them now, not a primary short of replicas.
                let leader = self.state.leader_status();
                if leader.coordinated && !leader.leading {
                    return Err(Outcome::Respond(self.standby_refusal()));
                }
                if replicated == Replicated::Needed {
                    return Err(Outcome::Respond(
                        Response::error(Status::Unavailable, ladder_sequencer::REPLICA_UNAVAILABLE)
                            .retry_after(1),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl crate::server::Service for App {
    /// A write the sequencer refused because this node no longer leads (it passed
    /// [`App::writable`] just before) gets the same answer as one refused at the door.
    fn refusal(&self, reason: &'static str) -> Option<Response> {
        (reason == STANDBY_REFUSAL).then(|| self.standby_refusal())
    }

    fn ws_ready(&self) -> bool {
        self.state.ready.load(Ordering::Acquire)
    }

    fn dead_man_switch_refusal(&self) -> Option<&'static str> {
        self.state.standby.load(Ordering::Acquire).then_some(
            "cancel_on_disconnect: this node is a standby (not primary); subscribe on the primary",
        )
    }

    fn count_answer(&self, path: Option<&str>, status: u16) {
        match path {
            Some(path) => self.metrics.observe(path, status, Instant::now()),
            None => self.metrics.observe_unread(status),
        }
    }

    fn admit_upgrade(&self, peer: SocketAddr) -> Result<(), u64> {
        self.ip_limiter.take(&peer.ip(), Instant::now())
    }

    fn admit_ws_message(&self, peer: IpAddr, units: usize) -> Result<(), u64> {
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        self.ip_limiter.take_n(&peer, units, Instant::now())
    }

    fn ws_user_auth(&self, auth: &serde_json::Value) -> Result<crate::auth::UserAuth, String> {
        crate::auth::authenticate_ws_user(&self.keys, auth, now_s()).map_err(|e| e.0)
    }

    fn api_key_live(&self, key_id: &uuid::Uuid) -> bool {
        self.keys.contains(key_id)
    }

    fn api_key_removals(&self) -> u64 {
        self.keys.removals()
    }

    fn handle(&self, request: &Request, peer: SocketAddr) -> Outcome {
        let started = Instant::now();
        if !self.state.ready.load(Ordering::Acquire) {
            let response = Response::error(Status::Unavailable, "service not ready").retry_after(1);
            self.metrics
                .observe(request.path(), response.status.code(), started);
            return Outcome::Respond(response);
        }
        if let Err(wait_s) = self.ip_limiter.take(&peer.ip(), started) {
            // Counted, without `settle`: the limiter took no token to give back.
            let response = Response::rate_limited(wait_s);
            self.metrics
                .observe(request.path(), response.status.code(), started);
            return Outcome::Respond(response);
        }
        match self.route(request, peer) {
            // Most answers are immediate: nothing to keep for later.
            Outcome::Respond(response) => Outcome::Respond(settle(
                (&self.metrics, request.path(), started),
                (&self.ip_limiter, peer.ip()),
                response,
            )),
            later => Observed {
                metrics: self.metrics.clone(),
                path: request.path().to_string(),
                started,
                ip_limiter: self.ip_limiter.clone(),
                peer: peer.ip(),
            }
            .outcome(later),
        }
    }
}

/// A request's final `response`: counted in the metrics under its path, and a 429 (its key's
/// limit, or its chain calls) gives the IP's token back, since a refused request spends
/// nothing (API.md §18).
fn settle(
    (metrics, path, started): (&Metrics, &str, Instant),
    (ip_limiter, peer): (&RateLimiter<IpAddr>, IpAddr),
    response: Response,
) -> Response {
    metrics.observe(path, response.status.code(), started);
    if response.status == Status::TooManyRequests {
        ip_limiter.give_back(&peer);
    }
    response
}

/// Whether a write needs `--replicas` standbys connected ([`App::admits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Replicated {
    /// It journals something: refused while standbys are missing.
    Needed,
    /// It journals nothing (a heartbeat's beat): taken while standbys are missing.
    NotNeeded,
}

/// What a request answered later (after the sequencer or a deferred job) needs to
/// [`settle`] its final response.
struct Observed {
    metrics: Arc<Metrics>,
    path: String,
    started: Instant,
    ip_limiter: Arc<RateLimiter<IpAddr>>,
    peer: IpAddr,
}

impl Observed {
    fn response(&self, response: Response) -> Response {
        settle(
            (&self.metrics, &self.path, self.started),
            (&self.ip_limiter, self.peer),
            response,
        )
    }

    /// `outcome`, with its final response settled.
    fn outcome(self, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Respond(response) => Outcome::Respond(self.response(response)),
            Outcome::Submit(work, completer) => Outcome::Submit(
                work,
                Box::new(move |completion| self.response(completer(completion))),
            ),
            Outcome::Defer(job) => Outcome::defer(move || self.outcome(job())),
            Outcome::Continue(work, continuation) => Outcome::Continue(
                work,
                Box::new(move |completion| self.outcome(continuation(completion))),
            ),
        }
    }
}

/// Whether `ip` is this machine: a loopback address, or one written as an IPv4-mapped IPv6
/// address (how a local IPv4 client appears on a dual-stack `[::]` listener).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

fn too_many(wait_s: u64) -> Outcome {
    Outcome::Respond(Response::rate_limited(wait_s))
}

/// Server time in Unix nanoseconds.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Server time in Unix seconds.
pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A 200 JSON response of `value`.
pub fn ok_json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => Response::json(Status::Ok, body),
        Err(_) => Response::error(Status::Internal, "internal error"),
    }
}

/// A 400 naming the field and the rule.
pub fn bad_request(message: impl std::fmt::Display) -> Outcome {
    Outcome::error(Status::BadRequest, &message.to_string())
}

/// Runs `read` on the sequencer thread and answers with `respond` on the gateway thread.
pub fn query<T, R, F>(read: R, respond: F) -> Outcome
where
    T: Send + 'static,
    R: FnOnce(&Engine) -> T + Send + 'static,
    F: FnOnce(T) -> Response + Send + 'static,
{
    let (query, answer) = ladder_sequencer::query(read);
    Outcome::submit(
        Work::Query(query),
        Box::new(move |completion| match completion {
            Completion::Answered { .. } => match answer.take() {
                Some(value) => respond(value),
                None => Response::error(Status::Internal, "internal error"),
            },
            other => unexpected(other),
        }),
    )
}

/// Journals and applies `command`, answering with `respond(seq, reply)`.
pub fn command<F>(command: Command, respond: F) -> Outcome
where
    F: FnOnce(u64, Reply) -> Response + Send + 'static,
{
    Outcome::submit(
        Work::Command(command),
        Box::new(move |completion| match completion {
            Completion::Applied { seq, reply, .. } => respond(seq, reply),
            other => unexpected(other),
        }),
    )
}

/// The token of an `Authorization: Bearer <token>` header (the scheme's case does not matter,
/// RFC 7235).
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::MasterKey;
    use crate::routes::{PREFIXED_ROUTES, ROUTES};

    fn app() -> App {
        let config = AppConfig {
            exchange: ExchangeDomain::default(),
            auth: AuthDomain::default(),
            admin_token: None,
            admin_public: false,
            max_keys_per_user: 5,
            rate_limit_key: 0,
            rate_limit_ip: 0,
            smart_accounts: crate::smart::SmartAccounts::default(),
            entry_point: ladder_protocol::Address::ZERO,
            chain_bundler: None,
        };
        let keys = Arc::new(KeyTable::new(MasterKey::from_bytes([7; 32])));
        let state = Arc::new(ServiceState::default());
        state.ready.store(true, Ordering::Release);
        App::new(config, keys, Arc::new(Metrics::default()), state)
    }

    /// The route table and the handler modules agree: every method a route's `Allow` names
    /// is served by the module the table names, and every other method is a 405 naming
    /// them (a module that served a method the table omits would answer it instead).
    #[test]
    fn the_route_table_and_the_handlers_agree_on_every_method() {
        let app = app();
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let routes = ROUTES.iter().map(|r| (r.path.to_string(), *r)).chain(
            PREFIXED_ROUTES
                .iter()
                .map(|(prefix, r)| (format!("{prefix}0x01"), *r)),
        );
        for (path, route) in routes {
            for method in [Method::Get, Method::Head, Method::Post, Method::Delete] {
                let request = Request {
                    method,
                    target: path.clone(),
                    headers: Vec::new(),
                    body: Vec::new(),
                    keep_alive: true,
                    peer: Some(peer.ip()),
                };
                let listed = route.allow.split(", ").any(|m| m == method.as_str());
                let answer = app.route(&request, peer);
                let refused_405 =
                    matches!(&answer, Outcome::Respond(r) if r.status == Status::MethodNotAllowed);
                assert_eq!(
                    !refused_405,
                    listed,
                    "{} {path}: Allow says {:?}",
                    method.as_str(),
                    route.allow
                );
            }
        }
    }

    #[test]
    fn a_late_standby_refusal_names_the_leader_as_one_at_the_door_does() {
        use crate::server::Service;
        let app = app();
        assert!(app
            .refusal("journal full: no space left on device")
            .is_none());
        // Without a coordinator: the plain text, as the door says it.
        let plain = app.refusal(STANDBY_REFUSAL).expect("worded by the app");
        assert_eq!(plain.status, Status::Unavailable);
        let body: serde_json::Value = serde_json::from_slice(&plain.body).unwrap();
        assert_eq!(body, serde_json::json!({ "error": STANDBY_REFUSAL }));
        // With one: the leader's URL too.
        *app.state.leader.write() = Some(LeaderLookup(Arc::new(|| LeaderStatus {
            node_id: Some("b".into()),
            url: Some("http://10.0.0.2:8080".into()),
            term: 3,
            leading: false,
            coordinated: true,
        })));
        let named = app.refusal(STANDBY_REFUSAL).expect("worded by the app");
        let body: serde_json::Value = serde_json::from_slice(&named.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({ "error": STANDBY_REFUSAL, "leader": "http://10.0.0.2:8080" })
        );
        app.state.standby.store(true, Ordering::Release);
        match app.writable() {
            Err(Outcome::Respond(door)) => assert_eq!(door.body, named.body),
            _ => panic!("a standby refuses writes at the door"),
        }
    }

    #[test]
    fn loopback_includes_ipv4_mapped_loopback() {
        for local in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(local.parse().unwrap()), "{local}");
        }
        for remote in ["10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1", "::"] {
            assert!(!is_loopback(remote.parse().unwrap()), "{remote}");
        }
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case_and_other_schemes_are_not() {
        for header in ["Bearer t0k", "bearer t0k", "BEARER  t0k", " Bearer t0k"] {
            assert_eq!(bearer_token(header), Some("t0k"), "{header:?}");
        }
        for header in ["Basic t0k", "Bearert0k", "t0k", ""] {
            assert_eq!(bearer_token(header), None, "{header:?}");
        }
    }
}
