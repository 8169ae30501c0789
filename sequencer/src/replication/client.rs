//! The standby's side: follows a primary, feeding its records to the local sequencer as
//! replicated work (same sequence numbers and times), and acknowledging what is durable.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Receiver;
use ladder_engine::{Command, Reply};
use ladder_journal::RecordRef;

use super::patient::{nothing_yet, PatientReader};
use super::secure::{self, LinkSecret, SecureReader, SecureWriter};
use super::{Hello, RecordMark, ACCEPTED, READY, RECORD_PAYLOAD_MAX, REFUSED};
use crate::codec::decode_command;
use crate::submission::{Completion, Submission, SubmitError, Submitter, Ticket, Work};

/// Called with each applied command, its reply and the primary's timestamp of it, once it is
/// durable here (to keep read-side tables current and to measure the standby's lag).
pub type OnApplied = Box<dyn FnMut(&Command, &Reply, u64) + Send>;
/// Called with the primary's master key on every connection.
pub type OnMasterKey = Box<dyn FnMut([u8; 32]) + Send>;

/// The replication address a standby follows: fixed by `--primary`, or set by the
/// coordinator to whichever node leads (`None` while none does). A change ends the session
/// with the old one.
#[derive(Clone, Debug, Default)]
pub struct FollowTarget(Arc<Mutex<Option<String>>>);

impl FollowTarget {
    /// Always `primary`.
    pub fn fixed(primary: &str) -> FollowTarget {
        FollowTarget(Arc::new(Mutex::new(Some(primary.to_string()))))
    }

    /// Follow `primary` from now on (`None`: nobody, until set again).
    pub fn set(&self, primary: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = primary;
    }

    /// The address to follow now.
    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether it is still `primary` (no copy: the follower asks before every record).
    pub fn is(&self, primary: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).as_deref() == Some(primary)
    }
}

/// Where the standby follows from and what it feeds.
pub struct Follower {
    /// The primary's replication address.
    pub primary: FollowTarget,
    /// The newest term this standby's journal holds: a `BeginTerm` record of an older one is
    /// refused (CONTRACT 22), and the link with it.
    pub term: u64,
    /// The key both ends of the link share.
    pub secret: LinkSecret,
    /// This standby's node id (the primary keeps one session per id).
    pub node_id: String,
    /// The last sequence the standby holds.
    pub last_seq: u64,
    /// The mark of that record (`None` when it holds none): the primary refuses a standby
    /// whose last record is not its own (`RecordMark::of_journal` reads it).
    pub last_mark: Option<RecordMark>,
    /// Its ring into the local sequencer.
    pub submitter: Submitter,
    /// Its completions.
    pub completions: Receiver<Completion>,
    /// The sink index of `completions`.
    pub sink: u16,
    /// Set to stop following (promotion or shutdown).
    pub stop: Arc<AtomicBool>,
    /// See [`OnApplied`].
    pub on_applied: OnApplied,
    /// See [`OnMasterKey`].
    pub on_master_key: OnMasterKey,
    /// Whether the local sequencer's refusal of replicated records (a full disk) was logged
    /// since the last record it took: logged once, not once per record and retry.
    pub refusal_logged: bool,
}

/// How a following session ended.
enum SessionEnd {
    /// Stopped, or cut (connection, primary, local sequencer): follow again.
    Interrupted(String),
    /// The primary refused this standby (its journal diverged): following cannot go on.
    Refused(String),
}

impl From<String> for SessionEnd {
    fn from(why: String) -> Self {
        SessionEnd::Interrupted(why)
    }
}

/// Follows the primary until `stop`; reconnects (resuming after the last sequence held). The
/// thread returns the last sequence held, or why the primary refused to be followed.
pub fn follow(mut follower: Follower) -> std::io::Result<JoinHandle<Result<u64, String>>> {
    std::thread::Builder::new().name("standby".into()).spawn(move || {
        // The last interruption logged: the same one again (a full disk, a primary that is
        // down) is not logged at every retry, until another or a record in between.
        let mut last_logged: Option<(String, u64)> = None;
        while !follower.stop.load(Ordering::Acquire) {
            let Some(primary) = follower.primary.get() else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            match session(&mut follower, &primary) {
                Ok(()) => {}
                Err(SessionEnd::Interrupted(e)) => {
                    let now = (e.clone(), follower.last_seq);
                    if last_logged.as_ref() != Some(&now) {
                        tracing::warn!(error = %e, %primary, last_seq = follower.last_seq, "replication interrupted; reconnecting (the same interruption is logged once)");
                        last_logged = Some(now);
                    }
                }
                Err(SessionEnd::Refused(why)) => {
                    let behind = why.starts_with(super::server::BEHIND_JOURNAL);
                    if behind || super::server::JournalEnd::of_refusal(&why).is_some() {
                        tracing::warn!(%primary, last_seq = follower.last_seq, %why, "this standby and the primary's journal need reconciling");
                    } else {
                        tracing::error!(%primary, last_seq = follower.last_seq, %why, "the primary refused this standby");
                    }
                    return Err(why);
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(follower.last_seq)
    })
}

/// How long a read waits for the primary's next record before the follower looks at its
/// stop flag and its target: a promotion waits for it (so does a failover's).
const IDLE_READ_TIMEOUT: Duration = Duration::from_millis(50);

/// How long a connection to the primary may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to the primary's replication address.
pub(super) fn dial(primary: &str) -> Result<TcpStream, String> {
    let address = primary
        .to_socket_addrs()
        .map_err(|e| format!("resolve {primary}: {e}"))?
        .next()
        .ok_or_else(|| format!("resolve {primary}: no address"))?;
    let stream = TcpStream::connect_timeout(&address, CONNECT_TIMEOUT)
        .map_err(|e| format!("connect to {primary}: {e}"))?;
    stream.set_nodelay(true).ok();
    Ok(stream)
}

fn session(f: &mut Follower, primary: &str) -> Result<(), SessionEnd> {
    let stream = dial(primary)?;
    let hello = Hello {
        from_seq: f.last_seq + 1,
        last: f.last_mark,
        node_id: f.node_id.clone(),
    };
    let (answer, (reader, mut writer)) =
        secure::connect(&stream, &f.secret, hello.line().as_bytes())?;
    let answer = String::from_utf8_lossy(&answer);
    if let Some(why) = answer.strip_prefix(REFUSED) {
        return Err(SessionEnd::Refused(why.to_string()));
    }
    if answer != ACCEPTED {
        return Err(format!("unexpected handshake answer {answer:?}").into());
    }
    writer
        .write_all(READY)
        .map_err(|e| format!("confirmation: {e}"))?;
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    stream
        .set_read_timeout(Some(secure::HANDSHAKE_TIMEOUT))
        .ok();
    let mut key = [0u8; 32];
    reader
        .read_exact(&mut key)
        .map_err(|e| format!("master key: {e}"))?;
    (f.on_master_key)(key);
    stream.set_read_timeout(Some(IDLE_READ_TIMEOUT)).ok();
    tracing::info!(%primary, from = f.last_seq + 1, "following");
    let mut pending: VecDeque<(RecordMark, Command)> = VecDeque::new();
    let followed = follow_stream(f, primary, &mut pending, &mut reader, &mut writer);
    // Records already handed to the sequencer are applied whatever became of the link (or
    // a promotion stopped it): their completions are taken here, so that the next session
    // (or the promoted primary's key table) starts after them and never pairs them with
    // other records.
    drain_pending(f, &mut pending);
    followed
}

/// Reads, applies and acknowledges records until `stop` or a fault.
fn follow_stream(
    f: &mut Follower,
    primary: &str,
    pending: &mut VecDeque<(RecordMark, Command)>,
    reader: &mut BufReader<SecureReader>,
    writer: &mut SecureWriter,
) -> Result<(), SessionEnd> {
    loop {
        if f.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if !f.primary.is(primary) {
            settle(f, pending, writer)?;
            return Err(format!("the leader changed from {primary}").into());
        }
        match read_record(reader, &f.stop)? {
            Some((mark, command)) => {
                let expected = f.last_seq + 1 + pending.len() as u64;
                if mark.seq != expected {
                    return Err(format!("expected record {expected}, got {}", mark.seq).into());
                }
                if let Command::BeginTerm { term } = command {
                    if term < f.term {
                        settle(f, pending, writer)?;
                        return Err(format!(
                            "record {} begins term {term}, older than term {} held here",
                            mark.seq, f.term
                        )
                        .into());
                    }
                    f.term = term;
                }
                submit(f, mark.seq, mark.timestamp_ns, command.clone())?;
                pending.push_back((mark, command));
                if reader.buffer().is_empty() {
                    settle(f, pending, writer)?;
                }
            }
            None => settle(f, pending, writer)?,
        }
    }
}

/// Takes the completions of records submitted before the link failed (each is applied and
/// durable here once its completion comes), without acknowledging them to anyone.
fn drain_pending(f: &mut Follower, pending: &mut VecDeque<(RecordMark, Command)>) {
    let mut in_order = true;
    for (mark, command) in pending.drain(..) {
        match f.completions.recv_timeout(Duration::from_secs(30)) {
            Ok(Completion::Applied { seq, reply, .. }) if in_order && seq == mark.seq => {
                (f.on_applied)(&command, &reply, mark.timestamp_ns);
                f.last_seq = seq;
                f.last_mark = Some(mark);
                if std::mem::take(&mut f.refusal_logged) {
                    tracing::info!(seq, "replicated records are taken here again");
                }
            }
            Ok(Completion::Refused { reason, .. }) => {
                in_order = false;
                if !std::mem::replace(&mut f.refusal_logged, true) {
                    tracing::warn!(
                        seq = mark.seq,
                        reason,
                        "replicated records are refused here; following again until taken \
                         (logged once)"
                    );
                }
            }
            Ok(_) => in_order = false,
            Err(_) => {
                tracing::warn!(
                    seq = mark.seq,
                    "a replicated record's completion never came"
                );
                return;
            }
        }
    }
}

/// The next record and its mark, or `None` when none arrives within the read timeout.
fn read_record(
    reader: &mut BufReader<SecureReader>,
    stop: &AtomicBool,
) -> Result<Option<(RecordMark, Command)>, String> {
    // Nothing buffered and nothing arriving within the read timeout: no record yet.
    match reader.fill_buf() {
        Ok([]) => return Err("the primary closed the stream".into()),
        Ok(_) => {}
        Err(e) if nothing_yet(&e) => return Ok(None),
        Err(e) => return Err(format!("read: {e}")),
    }
    let mut head = [0u8; 22];
    read_full(reader, &mut head, stop)?;
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > RECORD_PAYLOAD_MAX {
        return Err(format!("record of {len} bytes"));
    }
    let seq = u64::from_be_bytes(head[4..12].try_into().map_err(|_| "header")?);
    let timestamp_ns = u64::from_be_bytes(head[12..20].try_into().map_err(|_| "header")?);
    let record_type = u16::from_be_bytes([head[20], head[21]]);
    let mut payload = vec![0u8; len];
    read_full(reader, &mut payload, stop)?;
    let command =
        decode_command(record_type, &payload).map_err(|e| format!("record {seq}: {e}"))?;
    let mark = RecordMark::of(&RecordRef {
        seq,
        timestamp_ns,
        record_type,
        payload: &payload,
    });
    Ok(Some((mark, command)))
}

/// How long a record that has started to arrive may go without a byte before the link is
/// taken for dead (a primary that lost power after a record's head went out).
pub const RECORD_STALL_MAX: Duration = Duration::from_secs(10);

/// Reads exactly `buf.len()` bytes of a record that has started to arrive, waiting through
/// read timeouts (a partial read is never dropped), but not past [`RECORD_STALL_MAX`]
/// without progress, nor once `stop` is set (a promotion must not wait on a dead primary).
fn read_full(
    reader: &mut BufReader<SecureReader>,
    buf: &mut [u8],
    stop: &AtomicBool,
) -> Result<(), String> {
    PatientReader::new(reader, stop, RECORD_STALL_MAX)
        .read_exact(buf)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                "the primary closed the stream mid-record".to_string()
            }
            _ => format!("mid-record: {e}"),
        })
}

fn submit(f: &mut Follower, seq: u64, timestamp_ns: u64, command: Command) -> Result<(), String> {
    let mut work = Work::Replicated {
        seq,
        timestamp_ns,
        command,
    };
    loop {
        let submission = Submission {
            ticket: Ticket {
                sink: f.sink,
                token: seq,
            },
            work,
        };
        match f.submitter.try_submit(submission) {
            Ok(()) => return Ok(()),
            Err(SubmitError::Full(s)) => {
                work = s.work;
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(SubmitError::Stopped(_)) => return Err("the sequencer stopped".into()),
        }
    }
}

/// Waits for the submitted records to be durable and applied, then acknowledges the last.
fn settle(
    f: &mut Follower,
    pending: &mut VecDeque<(RecordMark, Command)>,
    link: &mut SecureWriter,
) -> Result<(), String> {
    if pending.is_empty() {
        return Ok(());
    }
    // Each record leaves `pending` once its completion is taken; on a fault the records
    // whose completions are still to come stay there for `drain_pending`.
    while let Some((mark, command)) = pending.pop_front() {
        match f.completions.recv_timeout(Duration::from_secs(30)) {
            Ok(Completion::Applied { seq, reply, .. }) => {
                if seq != mark.seq {
                    return Err(format!(
                        "the completion of record {seq} came for record {}",
                        mark.seq
                    ));
                }
                (f.on_applied)(&command, &reply, mark.timestamp_ns);
                f.last_seq = seq;
                f.last_mark = Some(mark);
            }
            Ok(Completion::Refused { reason, .. }) => return Err(reason.to_string()),
            Ok(_) => return Err("unexpected completion".into()),
            Err(_) => {
                pending.push_front((mark, command));
                return Err("the sequencer did not answer".into());
            }
        }
    }
    link.write_all(format!("ACK {}\n", f.last_seq).as_bytes())
        .map_err(|e| format!("ack: {e}"))
}
