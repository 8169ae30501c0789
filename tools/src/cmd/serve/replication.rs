//! Both ends of replication as the service runs them: the primary's listener, and the
//! standby's follower with its node id and the settlement feed it drains until promoted.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use ladder_engine::{Command, Reply};
use ladder_gateway::keys::{KeyTable, MasterKey};
use ladder_protocol::Address;
use ladder_sequencer::replication::client::FollowTarget;
use ladder_sequencer::replication::{client, server, LinkSecret, RecordMark, ReplicationHub};
use ladder_sequencer::{Completion, Submitter};

use super::resolve;
use crate::cmd::bootstrap;
use uuid::Uuid;

/// Serves replication on `address` until `stop`; returns where it listens and the listener's
/// thread.
pub(super) fn serve_replication(
    address: &str,
    hub: &Arc<ReplicationHub>,
    data_dir: &Path,
    keys: &Arc<KeyTable>,
    secret: &LinkSecret,
    stop: &Arc<AtomicBool>,
) -> Result<(SocketAddr, std::thread::JoinHandle<()>), String> {
    let listener = std::net::TcpListener::bind(resolve(address)?)
        .map_err(|e| format!("--replication-listen {address}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    crate::cmd::stdout::print_notice(format_args!("ladder: replication on {bound}"));
    let history_dir = data_dir.to_path_buf();
    let master_keys = keys.clone();
    let thread = server::serve(
        listener,
        server::Primary {
            data_dir: data_dir.to_path_buf(),
            hub: hub.clone(),
            master_key: Arc::new(move || master_keys.master_bytes()),
            secret: secret.clone(),
            stop: stop.clone(),
            history_copy: Some(Arc::new(move |to: &Path| {
                ladder_history::copy_store(&history_dir, to)
            })),
        },
    )
    .map_err(|e| format!("replication: {e}"))?;
    Ok((bound, thread))
}

/// The standby's follower: its stop flag and its thread (the last sequence held, or why the
/// primary refused it).
pub(super) type FollowerThread = (
    Arc<AtomicBool>,
    std::thread::JoinHandle<Result<u64, String>>,
);

/// Why the primary refused to be followed, once the follower has ended for that reason (a
/// standby whose journal diverged cannot follow, and must not go on serving as if it did).
pub(super) fn refused_by_primary(follower: &mut Option<FollowerThread>) -> Option<String> {
    if !follower.as_ref()?.1.is_finished() {
        return None;
    }
    let (_, thread) = follower.take()?;
    match thread.join() {
        Ok(Err(why)) => Some(why),
        Ok(Ok(_)) => None,
        Err(_) => Some("the follower thread panicked".to_string()),
    }
}

/// On a standby, nothing settles: the settlement feed is drained (promotion re-arms every
/// pending batch from the engine) so that it never holds the sequencer back.
pub(super) fn drain_until_promoted(
    events: ladder_sequencer::bell::BellReceiver<ladder_sequencer::PublishedBatch>,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        while !flag.load(Ordering::Acquire) {
            let _ = events.recv_timeout(Duration::from_millis(50));
        }
    });
    (stop, thread)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn start_follower(
    primary: &FollowTarget,
    secret: &LinkSecret,
    (last_seq, term): (u64, u64),
    submitter: Submitter,
    completions: Receiver<Completion>,
    sink: u16,
    keys: &Arc<KeyTable>,
    data_dir: &Path,
    position: Option<Arc<ladder_coordinator::Position>>,
) -> Result<FollowerThread, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let applied_keys = keys.clone();
    let master_keys = keys.clone();
    let key_dir = data_dir.to_path_buf();
    let last_mark = match last_seq {
        0 => None,
        seq => {
            // Right after a bootstrap the journal does not hold the snapshot's record.
            let held = match bootstrap::mark_of_start(data_dir, seq)? {
                Some(mark) => Some(mark),
                None => RecordMark::of_journal(data_dir, seq)?,
            };
            Some(held.ok_or_else(|| format!("the journal does not hold its last record {seq}"))?)
        }
    };
    let follower = client::Follower {
        primary: primary.clone(),
        term,
        secret: secret.clone(),
        node_id: node_id(data_dir)?,
        last_seq,
        last_mark,
        submitter,
        completions,
        sink,
        stop: stop.clone(),
        on_applied: Box::new(move |command, reply, _| match (command, reply) {
            (Command::CreateApiKey(spec), Reply::Ok) => {
                let address = Address(spec.address.0);
                let before = applied_keys.creations(&address, &spec.nonce.0);
                applied_keys.set_creations(address, spec.nonce.0, before.saturating_add(1));
                applied_keys.insert(Uuid::from_bytes(spec.key_id), address);
            }
            (
                Command::CreateCountedApiKey {
                    spec,
                    creations_before,
                },
                Reply::Ok,
            ) => {
                let address = Address(spec.address.0);
                applied_keys.set_creations(
                    address,
                    spec.nonce.0,
                    creations_before.saturating_add(1),
                );
                applied_keys.insert(Uuid::from_bytes(spec.key_id), address);
            }
            (Command::DeleteApiKey { key_id, .. }, Reply::Ok) => {
                applied_keys.remove(&Uuid::from_bytes(*key_id))
            }
            (Command::BeginTerm { term }, _) => {
                if let Some(position) = &position {
                    position.term.fetch_max(*term, Ordering::AcqRel);
                }
            }
            _ => {}
        }),
        on_master_key: Box::new(move |key| {
            if master_keys.master_bytes() != key {
                let master = MasterKey::from_bytes(key);
                if let Err(e) = master.store(&key_dir) {
                    tracing::warn!(error = %e, "could not keep the primary's master key");
                }
                master_keys.replace_master(master);
            }
        }),
        refusal_logged: false,
    };
    let thread = client::follow(follower).map_err(|e| format!("standby thread: {e}"))?;
    Ok((stop, thread))
}

/// The file in a data directory that holds its node id.
pub const NODE_ID_FILE: &str = "node.id";

/// This data directory's node id, made (a random UUID) the first time: a standby names it to
/// its primary, which keeps one replication session per node.
pub(super) fn node_id(data_dir: &Path) -> Result<String, String> {
    let path = data_dir.join(NODE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if ladder_sequencer::replication::valid_node_id(text.trim()) => {
            Ok(text.trim().to_string())
        }
        // Empty: an older version's write that a power loss emptied. A new id only makes the
        // primary see a new standby.
        Ok(text) if !text.trim().is_empty() => Err(format!("{}: not a node id", path.display())),
        Ok(_) => new_node_id(&path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => new_node_id(&path),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Makes a node id (a random UUID) and keeps it at `path`, durably.
fn new_node_id(path: &Path) -> Result<String, String> {
    let id = Uuid::new_v4().to_string();
    ladder_journal::write_file_durably(path, format!("{id}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    Ok(id)
}
