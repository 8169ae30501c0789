//! A node whose role etcd decides (CONTRACT 22): `ladder serve --coordinator` or `ladder
//! standby --coordinator`. Every run starts as a standby that follows whoever leads; the
//! coordinator promotes it in place when it wins the lease (it journals the new term first),
//! and a node that loses the lead stops acknowledging at once and runs again as a standby of
//! the next leader, cutting what it wrote past that leader's term start.

use super::*;

use ladder_coordinator::{Coordinator, CoordinatorConfig, Position};

use super::advertise::advertised;
use crate::cmd::CoordinatorFlags;

/// What a coordinated node keeps across its runs.
pub(super) struct Coordination {
    /// The coordinator thread.
    pub coordinator: Coordinator,
    /// What this node holds, published for the election.
    pub position: Arc<Position>,
    /// Until when this node may acknowledge writes (closed while it does not lead).
    pub fence: Arc<ladder_sequencer::AckFence>,
    /// Where standbys connect while this node leads (`None`: nowhere; it leads alone).
    pub replication_listen: Option<String>,
    /// Standbys that must hold a batch before it is answered, while this node leads.
    pub replicas: u32,
    /// `ladder serve --demo`: the demo market on an empty journal, once this node leads.
    pub demo: bool,
}

impl Coordination {
    /// The leader's replication address, when another node leads.
    pub fn leader_replication(&self) -> Option<String> {
        let view = self.coordinator.view();
        view.leader
            .filter(|l| l.node_id != self.coordinator.config().node_id)
            .map(|l| l.replication)
            .filter(|address| !address.is_empty())
    }

    /// The leader as `GET /admin/leader` shows it; this node leads once it takes writes, and
    /// only until its lease's deadline: past it (before the coordinator has learned whether
    /// the lease is gone) no leader is known, and a refusal names none rather than itself.
    /// So too between winning the lease and taking writes (it journals its term first).
    pub fn lookup(self: &Arc<Self>, state: &Arc<ServiceState>) -> LeaderLookup {
        let view = self.coordinator.shared_view();
        let state = state.clone();
        let fence = self.fence.clone();
        LeaderLookup(Arc::new(move || {
            let view = view.read();
            let lapsing = view.leading && !fence.may_acknowledge();
            let promoting = view.leading && state.standby.load(Ordering::Acquire);
            let leader = view.leader.as_ref().filter(|_| !lapsing && !promoting);
            LeaderStatus {
                node_id: leader.map(|l| l.node_id.clone()),
                url: leader.map(|l| l.url.clone()),
                term: view.term,
                leading: view.leading && !lapsing && !state.standby.load(Ordering::Acquire),
                coordinated: true,
            }
        }))
    }
}

/// The command a coordinated node was started with.
pub(super) enum CoordinatedNode<'a> {
    /// `ladder serve`: may lead a cluster that never had a leader.
    Serve(&'a ServeArgs),
    /// `ladder standby`: waits for a leader to copy from.
    Standby(&'a StandbyArgs),
}

/// Runs a coordinated node until stopped.
pub(super) fn coordinated(node: CoordinatedNode<'_>, signals: Signals) -> Result<(), String> {
    let demo = matches!(node, CoordinatedNode::Serve(args) if args.demo);
    let (flags, service, replication_listen, replicas, secret) = match &node {
        CoordinatedNode::Serve(args) => (
            &args.coordinator,
            &args.service,
            args.replication_listen.clone(),
            args.replicas,
            args.replication_secret.link_secret(),
        ),
        CoordinatedNode::Standby(args) => (
            &args.coordinator,
            &args.service,
            args.replication_listen.clone(),
            args.replicas,
            args.replication_secret.link_secret(),
        ),
    };
    // The node's id defaults to its listen address, so a port to be chosen (`:0`) is chosen
    // now: every run listens on it, and other nodes can tell this node from one another. An
    // id that cannot be is refused before anything is written.
    let listen = concrete_listen(&service.listen)?;
    let cluster_id = match &flags.node_id {
        Some(id) => id.clone(),
        None => default_node_id(&listen, flags.advertise_host.as_deref())?,
    };
    let data_dir = service.data_dir.clone();
    ladder_journal::create_dir_durably(&data_dir)
        .map_err(|e| format!("--data-dir {}: {e}", data_dir.display()))?;
    let coordination = Arc::new(start_coordination(
        flags,
        cluster_id,
        matches!(node, CoordinatedNode::Serve(_)),
        replication_listen,
        replicas,
        demo,
    )?);
    let link_node = node_id(&data_dir)?;
    let mut listen = listen;
    let result = loop {
        if let Some(leader) = coordination.leader_replication() {
            let asking = bootstrap::Asking {
                data_dir: &data_dir,
                node_id: &link_node,
                primary: &leader,
                secret: &secret,
                journal: JournalOptions {
                    segment_size_bytes: service.segment_size_bytes(),
                },
                stop: &signals.stop,
            };
            if let Err(e) = bootstrap::when_behind(&asking) {
                tracing::warn!(error = %e, %leader, "could not ask the leader for its state; following its journal");
            }
        }
        if signals.stop.load(Ordering::Acquire) {
            break Ok(());
        }
        let role = Role::Standby {
            primary: FollowTarget::default(),
            secret: secret.clone(),
        };
        let options = match &node {
            CoordinatedNode::Serve(args) => serve_options(args, &listen, role, signals.clone()),
            CoordinatedNode::Standby(args) => standby_options(args, &listen, role, signals.clone()),
        };
        let mut options = match options {
            Ok(options) => options,
            Err(e) => break Err(e),
        };
        options.coordination = Some(coordination.clone());
        match run(options) {
            Err(e) => break Err(e),
            Ok(RunEnd::Stopped) => break Ok(()),
            Ok(RunEnd::Behind { bound }) | Ok(RunEnd::Rejoin { bound }) => {
                listen = bound.to_string();
            }
            Ok(RunEnd::Ahead { end, bound }) => {
                if let Err(why) =
                    ahead::cut_after_primary_end(&data_dir, end, ahead::Ahead::OlderTerm)
                {
                    break Err(format!("the leader refused replication: {why}"));
                }
                listen = bound.to_string();
            }
        }
    };
    match Arc::try_unwrap(coordination) {
        Ok(coordination) => coordination.coordinator.stop(),
        Err(_) => tracing::warn!("the coordinator is still shared; its lease expires by itself"),
    }
    result
}

/// etcd's `acknowledged` key as the witness a leader's replicated writes wait for.
struct EtcdWitness(Arc<ladder_coordinator::Acknowledgements>);

impl ladder_sequencer::AckWitness for EtcdWitness {
    fn witness(&self, seq: u64, give_up: &dyn Fn() -> bool) -> bool {
        self.0.witness(seq, give_up)
    }

    fn holds(&self, seq: u64) -> bool {
        self.0.holds(seq)
    }

    fn failing(&self) -> bool {
        self.0.failing()
    }
}

/// `listen` with a free port in place of port 0.
fn concrete_listen(listen: &str) -> Result<String, String> {
    let address = resolve(listen).map_err(|e| format!("--listen {e}"))?;
    if address.port() != 0 {
        return Ok(listen.to_string());
    }
    let probe =
        std::net::TcpListener::bind(address).map_err(|e| format!("--listen {listen}: {e}"))?;
    let chosen = probe
        .local_addr()
        .map_err(|e| format!("--listen {listen}: {e}"))?;
    Ok(chosen.to_string())
}

fn start_coordination(
    flags: &CoordinatorFlags,
    node_id: String,
    may_lead_empty: bool,
    replication_listen: Option<String>,
    replicas: u32,
    demo: bool,
) -> Result<Coordination, String> {
    let position = Arc::new(Position::default());
    let fence = Arc::new(
        ladder_sequencer::AckFence::closed()
            .witnessed_by(Arc::new(EtcdWitness(position.acknowledged.clone()))),
    );
    let fenced = fence.clone();
    let config = CoordinatorConfig {
        endpoints: flags.coordinator.clone(),
        cluster: flags.cluster.clone(),
        node_id,
        lease: Duration::from_millis(flags.lease_ms),
        may_lead_empty,
    };
    let coordinator = Coordinator::start(
        config,
        position.clone(),
        Box::new(move |deadline| fenced.allow_until(deadline)),
    )?;
    Ok(Coordination {
        coordinator,
        position,
        fence,
        replication_listen,
        replicas,
        demo,
    })
}

/// The node id when none is given: the listen address as given, or, for one on every
/// interface (`0.0.0.0`, `::`), the advertised host with its port (two hosts listening on
/// `0.0.0.0:8080` are two nodes). Refused when that is not a valid id.
fn default_node_id(listen: &str, advertise_host: Option<&str>) -> Result<String, String> {
    let id = match resolve(listen) {
        Ok(address) if address.ip().is_unspecified() => {
            advertised(address, advertise_host).replace(['[', ']'], "")
        }
        _ => listen.to_string(),
    };
    if ladder_sequencer::replication::valid_node_id(&id) {
        Ok(id)
    } else {
        Err(format!(
            "--node-id: the default {id:?} is not a valid node id (1 to 64 letters, digits, \
             '.', '_', ':' or '-'); give --node-id"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_node_id_replaces_only_an_unspecified_ip() {
        assert_eq!(
            default_node_id("0.0.0.0:8080", Some("node-a.internal")),
            Ok("node-a.internal:8080".to_string())
        );
        assert_eq!(
            default_node_id("[::]:8080", Some("fd00::7")),
            Ok("fd00::7:8080".to_string())
        );
        // A named listen address is the id as given, not what it resolves to.
        assert_eq!(
            default_node_id("localhost:8080", Some("ignored")),
            Ok("localhost:8080".to_string())
        );
        assert_eq!(
            default_node_id("10.0.0.1:8080", None),
            Ok("10.0.0.1:8080".to_string())
        );
        let long = "h".repeat(70);
        assert!(default_node_id("0.0.0.0:8080", Some(&long))
            .unwrap_err()
            .contains("give --node-id"));
    }
}
