//! The coordinator thread: keeps this node's etcd lease, publishes its position, and runs for
//! leader when the leader's key is free and no live node holds more of the journal.
//!
//! Fencing (the timing argument, `docs/FAILOVER.md`): a renewal sent at local time `s` and
//! answered keeps the lease at etcd until at least `s + TTL` on etcd's clock, and
//! `TTL >= --lease-ms`. The leader may acknowledge writes only until
//! `s + lease - margin` on its own monotonic clock, where `margin` covers the two clocks'
//! rate difference and the time an acknowledgement takes to leave. Another node can take the
//! key only once the lease is gone at etcd, so the old leader's last acknowledgement comes
//! before the new leader's first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::RwLock;

use crate::acknowledged::{Acknowledgements, Publisher};
use crate::etcd::{Etcd, Lease};
use crate::records::{AcknowledgedRecord, Keys, LeaderRecord, NodeRecord};

/// How a node takes part.
#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    /// etcd's client URLs.
    pub endpoints: Vec<String>,
    /// The cluster's name (`/ladder/<cluster>/...`).
    pub cluster: String,
    /// This node's id.
    pub node_id: String,
    /// The lease: a leader that cannot renew stops acknowledging within it.
    pub lease: Duration,
    /// Whether this node may lead a cluster that never had a leader (`ladder serve`); a
    /// `ladder standby` waits for a leader to copy from.
    pub may_lead_empty: bool,
}

impl CoordinatorConfig {
    /// How often the lease is renewed and the leader's key read.
    pub fn tick(&self) -> Duration {
        (self.lease / 8).clamp(Duration::from_millis(20), Duration::from_millis(250))
    }

    /// What the leader keeps back from its lease: clock rates, the time an answer takes to
    /// leave, and a renewal's own round trip are covered by it.
    pub fn margin(&self) -> Duration {
        self.lease / 10 + Duration::from_millis(50)
    }

    /// The lease's time to live asked of etcd: whole seconds, at least the lease.
    pub fn ttl_s(&self) -> u64 {
        self.lease.as_millis().div_ceil(1000).max(1) as u64
    }
}

/// What the node holds, kept current by the runtime and published by the coordinator.
#[derive(Debug, Default)]
pub struct Position {
    /// The last sequence held durably.
    pub held: AtomicU64,
    /// The newest term in the journal.
    pub term: AtomicU64,
    /// While this node leads: its term and the last record `--replicas` standbys (at least
    /// one) hold, once they hold the term's first record. Published in etcd for that term
    /// only (before the writes are answered); a node holding less never runs for leader by
    /// itself, so an empty or set-aside node does not lead over acknowledged writes.
    pub acknowledged: Arc<Acknowledgements>,
}

/// Changes of role the runtime acts on, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// This node won the election for `term`: it journals the term and takes writes.
    Lead {
        /// The new term.
        term: u64,
    },
    /// This node led and no longer may: it has stopped acknowledging and becomes a standby.
    Demoted,
    /// Another node leads: follow it.
    Follow(LeaderRecord),
}

/// What `GET /admin/leader` and the gauges show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// The leader as last read (`None`: none, or etcd unreachable).
    pub leader: Option<LeaderRecord>,
    /// The newest term seen.
    pub term: u64,
    /// Whether this node leads.
    pub leading: bool,
}

/// Where a leader is reached, published in its record: its client URL and its replication
/// address. A node runs for leader only once it has them (they are known once it listens).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Addresses {
    /// The client URL (`http://host:port`).
    pub url: String,
    /// The replication address (`host:port`).
    pub replication: String,
}

/// Sets how long this node may acknowledge writes: `Some(deadline)` while it leads, `None`
/// when it may not.
pub type AckDeadline = Box<dyn Fn(Option<Instant>) + Send>;

/// The running coordinator.
pub struct Coordinator {
    view: Arc<RwLock<View>>,
    addresses: Arc<RwLock<Option<Addresses>>>,
    asked: Arc<AtomicBool>,
    resign: Arc<AtomicU64>,
    changes: Receiver<Change>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    publisher: Publisher,
    config: CoordinatorConfig,
}

impl Coordinator {
    /// Starts the thread for `config`; `position` is what this node holds, `ack_deadline`
    /// is told how long it may acknowledge.
    pub fn start(
        config: CoordinatorConfig,
        position: Arc<Position>,
        ack_deadline: AckDeadline,
    ) -> Result<Coordinator, String> {
        let timeout = config.tick().max(Duration::from_millis(200));
        let etcd = Etcd::new(&config.endpoints, timeout)?;
        let publisher = Publisher::start(
            Etcd::new(&config.endpoints, timeout)?,
            Keys::of(&config.cluster),
            position.acknowledged.clone(),
            config.tick(),
        )?;
        let view = Arc::new(RwLock::new(View::default()));
        let addresses = Arc::new(RwLock::new(None));
        let asked = Arc::new(AtomicBool::new(false));
        let resign = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, changes) = unbounded();
        let mut campaign = Campaign {
            addresses: addresses.clone(),
            asked: asked.clone(),
            resign: resign.clone(),
            keys: Keys::of(&config.cluster),
            config: config.clone(),
            etcd,
            position,
            ack_deadline,
            view: view.clone(),
            changes: tx,
            lease: None,
            renewed_at: None,
            warned_long_lease: false,
            leading: None,
            following: None,
            unled_ticks: 0,
            resigned_at: None,
            blocked_logged: None,
        };
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("coordinator".into())
            .spawn(move || campaign.run(&flag))
            .map_err(|e| format!("coordinator thread: {e}"))?;
        Ok(Coordinator {
            view,
            addresses,
            asked,
            resign,
            changes,
            stop,
            thread: Some(thread),
            publisher,
            config,
        })
    }

    /// The leader as this node sees it.
    pub fn view(&self) -> View {
        self.view.read().clone()
    }

    /// Publishes where this node is reached; it runs for leader only once they are known.
    pub fn advertise(&self, addresses: Addresses) {
        *self.addresses.write() = Some(addresses);
    }

    /// An operator's promotion (`POST /admin/promote`): run for leader at the next tick if
    /// the lease is free, whatever the other nodes hold.
    pub fn run_now(&self) {
        self.asked.store(true, Ordering::Release);
    }

    /// Gives the lead of `term` up: a node that won the lease but could not take writes (its
    /// term was not journaled) must not keep the key, or the cluster would have a leader that
    /// accepts nothing. At the next tick, if this node still leads `term` (or its lease still
    /// holds the key for it), the lease is revoked (the leader's key goes with it); then this
    /// node lets another that holds as much run first (three leases), else tries again after
    /// one lease, unless an operator asks.
    pub fn resign(&self, term: u64) {
        self.resign.store(term, Ordering::Release);
    }

    /// The shared view (for the admin surface and the gauges).
    pub fn shared_view(&self) -> Arc<RwLock<View>> {
        self.view.clone()
    }

    /// Changes of role, in order.
    pub fn changes(&self) -> &Receiver<Change> {
        &self.changes
    }

    /// The configuration.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// Stops the thread and gives the lease back (a leader that stops hands over at once).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.publisher.stop();
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// The thread's state.
struct Campaign {
    addresses: Arc<RwLock<Option<Addresses>>>,
    asked: Arc<AtomicBool>,
    resign: Arc<AtomicU64>,
    keys: Keys,
    config: CoordinatorConfig,
    etcd: Etcd,
    position: Arc<Position>,
    ack_deadline: AckDeadline,
    view: Arc<RwLock<View>>,
    changes: Sender<Change>,
    lease: Option<Lease>,
    /// When the last renewal that etcd answered was sent.
    renewed_at: Option<Instant>,
    /// The term this node leads in.
    leading: Option<u64>,
    /// The leader this node was told to follow.
    following: Option<LeaderRecord>,
    /// Ticks in a row that found no leader.
    unled_ticks: u32,
    /// When this node last gave the lead up (it lets others run first for a while).
    resigned_at: Option<Instant>,
    /// What kept this node from running, last logged (logged again when it changes).
    blocked_logged: Option<(u64, u64, AcknowledgedRecord)>,
    /// Whether etcd's raising of a short lease was logged (once per run).
    warned_long_lease: bool,
}

impl Campaign {
    fn run(&mut self, stop: &AtomicBool) {
        let tick = self.config.tick();
        while !stop.load(Ordering::Acquire) {
            let started = Instant::now();
            self.step();
            let spent = started.elapsed();
            if spent < tick {
                std::thread::sleep(tick - spent);
            }
        }
        if self.leading.take().is_some() {
            (self.ack_deadline)(None);
            self.position.acknowledged.set_lead(None);
        }
        if let Some(lease) = self.lease.take() {
            if let Err(e) = self.etcd.revoke(lease.id) {
                tracing::warn!(error = %e, "could not give the lease back; it expires by itself");
            }
        }
    }

    fn step(&mut self) {
        let resign = self.resign.swap(0, Ordering::AcqRel);
        if resign != 0 {
            self.give_up_lease(resign);
        }
        self.renew();
        if let Some(term) = self.leading {
            // Past the deadline the runtime already stopped acknowledging (see `renew`).
            if !self.may_acknowledge_now() {
                tracing::warn!(term, "could not renew the lease in time: no longer leading");
                self.demote();
            }
        }
        let (leader, leader_lease) = match self.etcd.get_with_lease(&self.keys.leader) {
            Ok(Some((bytes, lease))) => {
                (serde_json::from_slice::<LeaderRecord>(&bytes).ok(), lease)
            }
            Ok(None) => (None, 0),
            Err(e) => {
                tracing::debug!(error = %e, "leader unknown");
                return;
            }
        };
        self.publish_position();
        {
            let mut view = self.view.write();
            view.term = view.term.max(leader.as_ref().map_or(0, |l| l.term));
            view.leader = leader.clone();
            view.leading = self.leading.is_some();
        }
        match (self.leading, leader) {
            // Still leading: `acknowledged` is published as the writes are answered.
            (Some(term), Some(record))
                if record.node_id == self.config.node_id && record.term == term => {}
            (Some(term), _) => {
                tracing::warn!(term, "the leader's key is no longer this node's");
                self.demote();
            }
            // The key this node's own lease holds (a leader cut off from etcd for a while,
            // whose lease etcd kept): nobody else led meanwhile, so it leads on.
            (None, Some(record))
                if record.node_id == self.config.node_id
                    && self.lease.is_some_and(|l| l.id == leader_lease)
                    && self.may_acknowledge_now() =>
            {
                tracing::info!(term = record.term, "this node's lease still holds the lead");
                self.take_lead(record);
            }
            (None, Some(record)) => {
                self.unled_ticks = 0;
                self.asked.store(false, Ordering::Release);
                if record.node_id != self.config.node_id && self.following.as_ref() != Some(&record)
                {
                    self.following = Some(record.clone());
                    let _ = self.changes.send(Change::Follow(record));
                }
            }
            (None, None) => {
                self.unled_ticks = self.unled_ticks.saturating_add(1);
                // One tick for every node to publish where it stopped.
                let asked = self.asked.swap(false, Ordering::AcqRel);
                if self.unled_ticks >= 2 || asked {
                    self.run_for_leader(asked);
                }
            }
        }
    }

    /// Keeps the lease: a new one when there is none, else a renewal.
    fn renew(&mut self) {
        let sent = Instant::now();
        match self.lease {
            None => match self.etcd.grant(self.config.ttl_s()) {
                Ok(lease) => {
                    if lease.ttl_s > self.config.ttl_s() && !self.warned_long_lease {
                        // etcd has a floor (about 1.5 times its election timeout, 2 s with
                        // its defaults): the lease outlives a dead node for that long.
                        tracing::warn!(
                            asked_s = self.config.ttl_s(),
                            granted_s = lease.ttl_s,
                            "etcd granted a longer lease than --lease-ms asks: a dead leader's \
                             lease lasts the granted time, and failover takes up to 3 times it"
                        );
                        self.warned_long_lease = true;
                    }
                    self.lease = Some(lease);
                    self.renewed_at = Some(sent);
                }
                Err(e) => tracing::debug!(error = %e, "no lease"),
            },
            Some(lease) => match self.etcd.keep_alive(lease.id) {
                Ok(Some(_)) => self.renewed_at = Some(sent),
                Ok(None) => {
                    tracing::warn!(lease = lease.id, "the lease expired");
                    self.lease = None;
                    self.renewed_at = None;
                    if self.leading.is_some() {
                        self.demote();
                    }
                }
                Err(e) => tracing::debug!(error = %e, "lease not renewed"),
            },
        }
        if self.leading.is_some() {
            (self.ack_deadline)(self.deadline());
        }
    }

    /// Until when this node may acknowledge, from its last answered renewal.
    fn deadline(&self) -> Option<Instant> {
        let renewed = self.renewed_at?;
        Some(renewed + self.config.lease.saturating_sub(self.config.margin()))
    }

    fn may_acknowledge_now(&self) -> bool {
        self.deadline().is_some_and(|d| Instant::now() < d)
    }

    fn take_lead(&mut self, record: LeaderRecord) {
        let term = record.term;
        self.leading = Some(term);
        self.following = None;
        self.position
            .acknowledged
            .set_lead(self.lease.map(|lease| (term, lease.id)));
        (self.ack_deadline)(self.deadline());
        {
            let mut view = self.view.write();
            view.leader = Some(record);
            view.term = view.term.max(term);
            view.leading = true;
        }
        let _ = self.changes.send(Change::Lead { term });
    }

    fn demote(&mut self) {
        (self.ack_deadline)(None);
        self.position.acknowledged.set_lead(None);
        if self.leading.take().is_some() {
            {
                // Not this node any more, and who leads next is not known yet.
                let mut view = self.view.write();
                view.leading = false;
                view.leader = None;
            }
            let _ = self.changes.send(Change::Demoted);
        }
        self.following = None;
    }

    /// Resigns the lead of `term`: stops acknowledging and revokes the lease (etcd deletes the
    /// leader's key and this node's record with it) when this node leads `term`, or its lease
    /// still holds the key for it; a resignation of another term is stale and ignored.
    fn give_up_lease(&mut self, term: u64) {
        let holds_key = || -> bool {
            let Some(lease) = self.lease else {
                return false;
            };
            matches!(
                self.etcd.get_with_lease(&self.keys.leader),
                Ok(Some((bytes, key_lease)))
                    if key_lease == lease.id
                        && serde_json::from_slice::<LeaderRecord>(&bytes)
                            .is_ok_and(|r| r.node_id == self.config.node_id && r.term == term)
            )
        };
        let leads_it = match self.leading {
            Some(leading) => leading == term,
            None => holds_key(),
        };
        if !leads_it {
            tracing::debug!(
                term,
                "a resignation of a term this node does not lead: ignored"
            );
            return;
        }
        self.demote();
        if let Some(lease) = self.lease.take() {
            self.renewed_at = None;
            match self.etcd.revoke(lease.id) {
                Ok(()) => tracing::warn!(term, "gave the lead up: the lease is revoked"),
                Err(e) => {
                    tracing::warn!(term, error = %e, "gave the lead up; the lease expires by itself")
                }
            }
        }
        self.resigned_at = Some(Instant::now());
    }

    fn publish_position(&self) {
        let Some(lease) = self.lease else { return };
        let record = self.own_record();
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        if let Err(e) = self.etcd.put(
            &self.keys.node(&self.config.node_id),
            &bytes,
            Some(lease.id),
        ) {
            tracing::debug!(error = %e, "position not published");
        }
    }

    /// How far the cluster holds its records for good, as its last leader published it
    /// (nothing yet: term 0, seq 0). `None` when etcd does not answer or the key holds
    /// something else (then this node does not run).
    fn cluster_acknowledged(&self) -> Option<AcknowledgedRecord> {
        match self.etcd.get(&self.keys.acknowledged) {
            Ok(None) => Some(AcknowledgedRecord::default()),
            Ok(Some(bytes)) => {
                let record = serde_json::from_slice(&bytes).ok();
                if record.is_none() {
                    tracing::error!(key = %self.keys.acknowledged, "the key holds no acknowledged record");
                }
                record
            }
            Err(_) => None,
        }
    }

    fn own_record(&self) -> NodeRecord {
        NodeRecord {
            node_id: self.config.node_id.clone(),
            held: self.position.held.load(Ordering::Acquire),
            term: self.position.term.load(Ordering::Acquire),
        }
    }

    /// Takes the leader's key when this node may lead and holds what every other live node
    /// holds.
    fn run_for_leader(&mut self, asked: bool) {
        let Some(lease) = self.lease else { return };
        let resigned_for = self.resigned_at.map(|at| at.elapsed());
        if !asked && resigned_for.is_some_and(|for_| for_ < self.config.lease) {
            return;
        }
        let Some(addresses) = self.addresses.read().clone() else {
            return;
        };
        if !self.may_acknowledge_now() {
            return;
        }
        let last_term = match self.etcd.get(&self.keys.term) {
            Ok(value) => value,
            Err(_) => return,
        };
        let last_term_number = match &last_term {
            None => 0,
            Some(bytes) => match std::str::from_utf8(bytes).ok().and_then(|t| t.parse().ok()) {
                Some(n) => n,
                None => {
                    tracing::error!(key = %self.keys.term, "the term key holds no number");
                    return;
                }
            },
        };
        if last_term.is_none() && !self.config.may_lead_empty && !asked {
            return;
        }
        let me = self.own_record();
        let Some(acknowledged) = self.cluster_acknowledged() else {
            return;
        };
        if !me.holds_acknowledged(&acknowledged) && !asked {
            let blocked = (me.term, me.held, acknowledged);
            if self.blocked_logged != Some(blocked) {
                tracing::warn!(
                    term = me.term,
                    held = me.held,
                    acknowledged_term = acknowledged.term,
                    acknowledged_seq = acknowledged.seq,
                    "the cluster acknowledged records this node does not hold: not running for \
                     leader (POST /admin/promote leads anyway, without them)"
                );
                self.blocked_logged = Some(blocked);
            }
            return;
        }
        let others = match self.etcd.get_prefix(&self.keys.nodes) {
            Ok(others) => others,
            Err(_) => return,
        };
        let others: Vec<NodeRecord> = others
            .iter()
            .filter_map(|kv| serde_json::from_slice::<NodeRecord>(&kv.value).ok())
            .filter(|other| other.node_id != me.node_id)
            .collect();
        // After giving the lead up, another node that could lead runs first.
        let another_could_lead = || {
            others
                .iter()
                .any(|o| o.holds_at_least(&me) && o.holds_acknowledged(&acknowledged))
        };
        if !asked
            && resigned_for.is_some_and(|for_| for_ < self.config.lease * 3)
            && another_could_lead()
        {
            return;
        }
        let ahead = others.iter().find(|other| !me.holds_at_least(other));
        if let Some(other) = ahead.filter(|_| !asked) {
            tracing::info!(
                other = %other.node_id, other_held = other.held, held = me.held,
                "another node holds more: not running for leader"
            );
            return;
        }
        let term = last_term_number.max(me.term) + 1;
        let record = LeaderRecord {
            node_id: self.config.node_id.clone(),
            url: addresses.url,
            replication: addresses.replication,
            term,
        };
        let value = serde_json::to_vec(&record).unwrap_or_default();
        let won = self.etcd.create_if_absent(
            (&self.keys.leader, &value, lease.id),
            (
                &self.keys.term,
                last_term.as_deref(),
                term.to_string().as_bytes(),
            ),
        );
        match won {
            Ok(true) => {
                tracing::info!(term, held = me.held, "won the election");
                self.take_lead(record);
            }
            Ok(false) => tracing::debug!("another node took the lead first"),
            Err(e) => tracing::debug!(error = %e, "election not decided"),
        }
    }
}
