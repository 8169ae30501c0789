//! The primary's side: accepts standbys that prove they hold the replication secret, refuses
//! one whose journal diverged from its own, and streams the others the journal's records as
//! they are written.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ladder_journal::JournalReader;
use parking_lot::Mutex;

use super::bootstrap::{self, BootstrapRequest, BootstrapSource, HistoryCopy};
use super::handshakes::{Handshakes, PendingHandshake};
use super::secure::{self, LinkSecret, SecureWriter, FRAME_PLAINTEXT_MAX};
use super::{
    check_standby, HandshakePin, Hello, RecordMark, ReplicationHub, ACCEPTED, READY, REFUSED,
};

/// How a refusal of a standby behind the journal opens (followed by the journal's first
/// sequence): such a standby bootstraps (see [`bootstrap`]) rather than stopping.
pub const BEHIND_JOURNAL: &str = "behind the primary's journal, which starts at sequence ";
/// How a refusal of a standby that holds records past the primary's journal opens (followed
/// by the mark of the primary's last record, or `-`): a primary that lost an unflushed tail
/// (power) restarted shorter, and the standby's extra records were never answered, so the
/// standby cuts them (see [`JournalEnd`]) and follows.
pub const AHEAD_OF_JOURNAL: &str = "ahead of the primary's journal, which ends at ";

/// The primary's last record, as an [`AHEAD_OF_JOURNAL`] refusal names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalEnd {
    /// Its mark (`None`: the primary's journal holds no record).
    pub last: Option<RecordMark>,
}

impl JournalEnd {
    /// The sequence of the primary's last record (0: none).
    pub fn seq(&self) -> u64 {
        self.last.map_or(0, |mark| mark.seq)
    }

    /// The refusal's text.
    pub fn refusal(&self) -> String {
        let mark = self
            .last
            .map_or_else(|| super::NO_MARK.to_string(), |m| m.to_string());
        format!(
            "{AHEAD_OF_JOURNAL}{mark} (it lost records it never answered): the standby cuts \
             its records after that one and follows"
        )
    }

    /// Reads the primary's end from a refusal; `None` when it is not an [`AHEAD_OF_JOURNAL`]
    /// refusal.
    pub fn of_refusal(why: &str) -> Option<JournalEnd> {
        let mark = why.strip_prefix(AHEAD_OF_JOURNAL)?.split(' ').next()?;
        match mark {
            super::NO_MARK => Some(JournalEnd { last: None }),
            text => RecordMark::parse(text).map(|mark| JournalEnd { last: Some(mark) }),
        }
    }
}

/// Most standbys (distinct node ids) served at once.
pub const STANDBYS_MAX: usize = 16;
pub use super::handshakes::{HANDSHAKES_MAX, HANDSHAKES_PER_IP_MAX};

/// Reads the service's master key as it is at the moment.
pub type MasterKeySource = Arc<dyn Fn() -> [u8; 32] + Send + Sync>;

/// What the primary's replication listener serves.
pub struct Primary {
    /// Where the journal is.
    pub data_dir: PathBuf,
    /// Written and acknowledged sequences, shared with the sequencer.
    pub hub: Arc<ReplicationHub>,
    /// Reads the master key as it is now, sent to authenticated standbys inside the
    /// encrypted link. Read at each handshake, not once: a coordinated standby serves
    /// replication from its start and takes its leader's key later, which is the key it
    /// must hand on once it leads.
    pub master_key: MasterKeySource,
    /// The key both ends share.
    pub secret: LinkSecret,
    /// Set to stop serving.
    pub stop: Arc<AtomicBool>,
    /// Copies the history store for a standby that bootstraps (`None`: none can).
    pub history_copy: Option<HistoryCopy>,
}

/// Serves standbys on `listener` until `primary.stop` is set.
pub fn serve(listener: TcpListener, primary: Primary) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let primary = Arc::new(primary);
    let handshakes = Arc::new(Handshakes::default());
    let sessions = Arc::new(Sessions::default());
    std::thread::Builder::new()
        .name("replication".into())
        .spawn(move || {
            while !primary.stop.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((stream, peer)) => {
                        // Closed at once, unanswered, past the handshake limits.
                        let Some(pending) = handshakes.begin(peer.ip(), &stream) else {
                            primary.hub.count_refused_link();
                            continue;
                        };
                        let (primary, sessions) = (primary.clone(), sessions.clone());
                        let _ = std::thread::Builder::new()
                            .name("replication-stream".into())
                            .spawn(move || {
                                if let Err(e) = stream_to(stream, &primary, &sessions, pending) {
                                    tracing::warn!(%peer, error = %e, "standby stream ended");
                                }
                            });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "replication accept failed");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
}

/// The authenticated sessions by node id: one each, a new one ending the old (whose peer
/// most likely vanished without the primary seeing it go).
#[derive(Default)]
struct Sessions {
    by_node: Mutex<HashMap<String, (u64, TcpStream)>>,
    next: AtomicU64,
    /// Held while a standby bootstraps.
    bootstrapping: Mutex<()>,
}

impl Sessions {
    /// Registers a session of `node`, ending its older one; refused when [`STANDBYS_MAX`]
    /// other nodes are connected.
    fn admit(&self, node: &str, stream: &TcpStream) -> Result<u64, String> {
        let mut by_node = self.by_node.lock();
        if !by_node.contains_key(node) && by_node.len() >= STANDBYS_MAX {
            return Err(format!("{STANDBYS_MAX} standbys are already connected"));
        }
        let clone = stream.try_clone().map_err(|e| e.to_string())?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Some((_, old)) = by_node.insert(node.to_string(), (id, clone)) {
            tracing::info!(node, "a standby reconnected: its older session ends");
            let _ = old.shutdown(Shutdown::Both);
        }
        Ok(id)
    }

    fn leave(&self, node: &str, id: u64) {
        let mut by_node = self.by_node.lock();
        if by_node.get(node).is_some_and(|(current, _)| *current == id) {
            by_node.remove(node);
        }
    }
}

fn stream_to(
    stream: TcpStream,
    primary: &Primary,
    sessions: &Sessions,
    pending: PendingHandshake,
) -> Result<(), String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).ok();
    let opened = secure::open(&stream, &primary.secret).inspect_err(|_| {
        // Nothing was sent: the peer learns nothing, not even that this is Ladder.
        primary.hub.count_refused_link();
    })?;
    drop(pending);
    let text = std::str::from_utf8(&opened.hello).map_err(|_| "a hello that is not text");
    if let Some(request) = text.ok().and_then(BootstrapRequest::parse) {
        return bootstrap_session(&stream, opened, request, primary, sessions);
    }
    let hello = text.map_err(str::to_string).and_then(Hello::parse);
    // Retention keeps what this standby asks for until it is registered (in the session).
    let pin = hello
        .as_ref()
        .ok()
        .map(|h| primary.hub.pin(h.from_seq.saturating_sub(1)));
    let refusal = match &hello {
        Err(why) => Some(why.clone()),
        Ok(hello) => refusal_of(&primary.data_dir, &primary.hub, hello)?,
    };
    if let Some(why) = refusal {
        let _ = opened.answer(&stream, format!("{REFUSED}{why}").as_bytes());
        return Err(format!("standby refused: {why}"));
    }
    let hello = hello?;
    let (mut reader, writer) = opened.answer(&stream, ACCEPTED.as_bytes())?;
    // A recorded first message can be replayed and opens again; only the standby that made
    // it can speak under this session's keys. Nothing more is sent, and no session is taken
    // or counted, before it has.
    confirm_ready(&stream, &mut reader)?;
    let session = sessions.admit(&hello.node_id, &stream)?;
    tracing::info!(node = %hello.node_id, from = hello.from_seq, "standby connected");
    let result = serve_session(&stream, (reader, writer), &hello, primary, pin);
    sessions.leave(&hello.node_id, session);
    result
}

/// Serves a standby's request for the primary's state (one at a time: each copies the
/// history store).
fn bootstrap_session(
    stream: &TcpStream,
    opened: secure::Opened,
    request: Result<BootstrapRequest, String>,
    primary: &Primary,
    sessions: &Sessions,
) -> Result<(), String> {
    let refuse = |opened: secure::Opened, why: String| {
        let _ = opened.answer(stream, format!("{REFUSED}{why}").as_bytes());
        Err(format!("bootstrap refused: {why}"))
    };
    let request = match request {
        Ok(request) => request,
        Err(why) => return refuse(opened, why),
    };
    if bootstrap::journal_holds(&primary.data_dir, request.from_seq)? {
        opened.answer(stream, bootstrap::CURRENT.as_bytes())?;
        return Ok(());
    }
    let Some(_only_one) = sessions.bootstrapping.try_lock() else {
        return refuse(opened, "another standby is bootstrapping: try again".into());
    };
    let (mut reader, writer) = opened.answer(stream, bootstrap::SNAPSHOT.as_bytes())?;
    confirm_ready(stream, &mut reader)?;
    tracing::info!(node = %request.node_id, from = request.from_seq, "a standby behind the journal bootstraps");
    let source = BootstrapSource {
        data_dir: &primary.data_dir,
        hub: &primary.hub,
        history_copy: primary.history_copy.as_ref(),
        master_key: (primary.master_key)(),
        stop: &primary.stop,
    };
    bootstrap::serve(stream, writer, &request, &source)
}

/// Reads the standby's [`READY`] under the session's keys within the handshake deadline.
fn confirm_ready(stream: &TcpStream, reader: &mut secure::SecureReader) -> Result<(), String> {
    stream
        .set_read_timeout(Some(secure::HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut ready = [0u8; READY.len()];
    std::io::Read::read_exact(reader, &mut ready)
        .map_err(|e| format!("no confirmation under the session's keys: {e}"))?;
    if ready != *READY {
        return Err("the standby's confirmation is not READY".into());
    }
    Ok(())
}

/// Why a standby cannot follow: its last record is not the primary's.
fn refusal_of(
    data_dir: &Path,
    hub: &ReplicationHub,
    hello: &Hello,
) -> Result<Option<String>, String> {
    // Retention removed the records it needs next.
    let first = ladder_journal::journal_first_seq(data_dir).map_err(|e| e.to_string())?;
    if let Some(first) = first.filter(|&first| hello.from_seq < first) {
        return Ok(Some(format!(
            "{BEHIND_JOURNAL}{first} (the records before it were retired): the standby \
             bootstraps from the primary's snapshot"
        )));
    }
    let Some(theirs) = hello.last else {
        return Ok(None);
    };
    let mut reader = JournalReader::open(data_dir).map_err(|e| e.to_string())?;
    let written = hub.last_written();
    // Records past this term's start that are not this primary's were written under an older
    // leader and never acknowledged (CONTRACT 22): the standby keeps what precedes the term.
    let term_start = hub.term_start();
    if term_start > 1 && theirs.seq >= term_start {
        let ours = match theirs.seq <= written {
            true => RecordMark::read_at(&mut reader, theirs.seq)?,
            false => None,
        };
        if ours != Some(theirs) {
            // The record before the term was retired (a term begun long ago): the standby
            // cannot be told where to cut, and takes this primary's state instead.
            if let Some(first) = first.filter(|&first| term_start - 1 < first) {
                return Ok(Some(format!(
                    "{BEHIND_JOURNAL}{first} (the records before it were retired, and this \
                     standby's past the term start are not this primary's): the standby \
                     bootstraps from the primary's snapshot"
                )));
            }
            let last = RecordMark::read_at(&mut reader, term_start - 1)?;
            return Ok(Some(JournalEnd { last }.refusal()));
        }
    }
    if theirs.seq > written {
        let last = match written {
            0 => None,
            seq => RecordMark::read_at(&mut reader, seq)?,
        };
        return Ok(Some(JournalEnd { last }.refusal()));
    }
    let ours = RecordMark::read_at(&mut reader, theirs.seq)?;
    Ok(check_standby(&theirs, ours.as_ref()).err())
}

fn serve_session(
    stream: &TcpStream,
    (reader, writer): secure::Link,
    hello: &Hello,
    primary: &Primary,
    pin: Option<HandshakePin<'_>>,
) -> Result<(), String> {
    let mut writer = BufWriter::with_capacity(FRAME_PLAINTEXT_MAX, writer);
    let hub = &primary.hub;
    // Registered before the standby has the key, so that a standby that has it counts
    // (toward `--replicas`) at once: a client write right after it connected is held for it,
    // not refused as having no standby.
    let id = hub.register(hello.from_seq);
    if let Err(e) = writer
        .write_all(&(primary.master_key)())
        .and_then(|_| writer.flush())
    {
        hub.unregister(id);
        return Err(e.to_string());
    }
    stream.set_read_timeout(None).ok();
    // Registered: its acknowledgements keep the journal from here on.
    drop(pin);
    let sent = Arc::new(AtomicU64::new(hello.from_seq.saturating_sub(1)));
    let alive = Arc::new(AtomicBool::new(true));
    let acks = {
        let (hub, alive, sent) = (hub.clone(), alive.clone(), sent.clone());
        let node = hello.node_id.clone();
        std::thread::spawn(move || {
            if let Err(why) = read_acks(BufReader::new(reader), &hub, id, &sent) {
                tracing::warn!(%node, %why, "standby acknowledgements ended");
            }
            alive.store(false, Ordering::Release);
        })
    };
    let journal = JournalReader::open(&primary.data_dir).map_err(|e| e.to_string());
    let result = journal.and_then(|journal| {
        send_records(
            &mut writer,
            journal,
            hub,
            hello.from_seq,
            &primary.stop,
            &alive,
            &sent,
        )
    });
    hub.unregister(id);
    let _ = stream.shutdown(Shutdown::Both);
    let _ = acks.join();
    result
}

/// Longest acknowledgement line.
const ACK_LINE_BYTES_MAX: u64 = 32;

/// Reads `ACK <seq>` lines until the link ends. An acknowledgement of a record not sent yet
/// (or one that goes backwards, or a line of any other form) ends the session: the standby
/// cannot hold what it was not sent, and an answer must never leave on a forged promise.
fn read_acks(
    mut lines: BufReader<secure::SecureReader>,
    hub: &ReplicationHub,
    id: u64,
    sent: &AtomicU64,
) -> Result<(), String> {
    let mut acked = 0u64;
    loop {
        let mut line = String::new();
        let read = std::io::Read::take(&mut lines, ACK_LINE_BYTES_MAX)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Ok(());
        }
        let seq: u64 = line
            .strip_suffix('\n')
            .and_then(|l| l.strip_prefix("ACK "))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("not an acknowledgement: {line:?}"))?;
        let sent_seq = sent.load(Ordering::Acquire);
        if seq > sent_seq || seq < acked {
            return Err(format!(
                "acknowledged {seq}, but {sent_seq} is the last record sent and {acked} was acknowledged"
            ));
        }
        acked = seq;
        hub.ack(id, seq);
    }
}

/// Streams written records from `from_seq` on, read with `reader`.
fn send_records(
    writer: &mut BufWriter<SecureWriter>,
    mut reader: JournalReader,
    hub: &ReplicationHub,
    from_seq: u64,
    stop: &AtomicBool,
    alive: &AtomicBool,
    sent: &AtomicU64,
) -> Result<(), String> {
    if from_seq > 1 {
        reader.seek(from_seq).map_err(|e| e.to_string())?;
    }
    let mut last = from_seq.saturating_sub(1);
    while !stop.load(Ordering::Acquire) && alive.load(Ordering::Acquire) {
        let written = hub.wait_written_after(last, Duration::from_millis(50));
        while last < written {
            let Some(record) = reader.poll().map_err(|e| e.to_string())? else {
                break;
            };
            let mut head = [0u8; 22];
            head[..4].copy_from_slice(&(record.payload.len() as u32).to_be_bytes());
            head[4..12].copy_from_slice(&record.seq.to_be_bytes());
            head[12..20].copy_from_slice(&record.timestamp_ns.to_be_bytes());
            head[20..22].copy_from_slice(&record.record_type.to_be_bytes());
            // Counted sent before any byte of it can leave (the buffered writer sends full
            // frames by itself), so that its acknowledgement never arrives first.
            sent.store(record.seq, Ordering::Release);
            writer.write_all(&head).map_err(|e| e.to_string())?;
            writer
                .write_all(record.payload)
                .map_err(|e| e.to_string())?;
            last = record.seq;
        }
        writer.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_end_reads_back_from_its_refusal() {
        let last = RecordMark {
            seq: 10,
            timestamp_ns: 7,
            record_type: 1,
            payload_crc: 0xed55,
        };
        for end in [JournalEnd { last: Some(last) }, JournalEnd { last: None }] {
            assert_eq!(JournalEnd::of_refusal(&end.refusal()), Some(end));
        }
        assert_eq!(JournalEnd { last: Some(last) }.seq(), 10);
        assert_eq!(JournalEnd::of_refusal("behind the primary's journal"), None);
        assert_eq!(JournalEnd::of_refusal(AHEAD_OF_JOURNAL), None);
    }

    /// A standby that wrote records of its own past this primary's term start (an old leader
    /// rejoining) is told to keep what precedes the term; one that followed this primary past
    /// it, or holds less, is not.
    #[test]
    fn records_past_the_term_start_that_are_not_the_primarys_are_refused_back_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) =
            ladder_journal::Journal::open(dir.path(), ladder_journal::JournalOptions::default())
                .unwrap();
        for seq in 1..=10u64 {
            journal.append(seq, seq * 100, 1, &[seq as u8; 8]).unwrap();
        }
        journal.commit(ladder_journal::Durability::Sync).unwrap();
        let hub = ReplicationHub::new(0, 10);
        hub.set_term_start(6);
        let mut reader = JournalReader::open(dir.path()).unwrap();
        let mut ours = |seq| RecordMark::read_at(&mut reader, seq).unwrap().unwrap();
        let (at_4, at_5, at_8) = (ours(4), ours(5), ours(8));
        let foreign = |mark: RecordMark| RecordMark {
            payload_crc: mark.payload_crc ^ 1,
            ..mark
        };
        let refusal = |last: RecordMark| {
            let hello = Hello {
                from_seq: last.seq + 1,
                last: Some(last),
                node_id: "n".into(),
            };
            refusal_of(dir.path(), &hub, &hello).unwrap()
        };
        let back_to_term = Some(JournalEnd { last: Some(at_5) }.refusal());
        assert_eq!(
            refusal(at_8),
            None,
            "it followed this primary past the term start"
        );
        assert_eq!(refusal(at_4), None, "it holds less");
        assert_eq!(
            refusal(foreign(at_8)),
            back_to_term,
            "its own records past the term"
        );
        let beyond = RecordMark {
            seq: 12,
            ..foreign(at_8)
        };
        assert_eq!(
            refusal(beyond),
            back_to_term,
            "more of its own records than we hold"
        );
        // Before the term start a different record is a divergence a person must look at.
        let diverged = refusal(foreign(at_4)).unwrap();
        assert!(JournalEnd::of_refusal(&diverged).is_none(), "{diverged}");
    }

    /// The same standby, once retention retired the record before the term (a term begun long
    /// ago), is told to bootstrap: there is no record left to name for its cut.
    #[test]
    fn records_past_a_term_whose_record_before_it_was_retired_bootstrap_the_standby() {
        let dir = tempfile::tempdir().unwrap();
        let options = ladder_journal::JournalOptions {
            segment_size_bytes: 4 << 10,
        };
        let (mut journal, _) = ladder_journal::Journal::open(dir.path(), options).unwrap();
        for seq in 1..=20u64 {
            journal
                .append(seq, seq * 100, 1, &[seq as u8; 1_000])
                .unwrap();
        }
        journal.commit(ladder_journal::Durability::Sync).unwrap();
        let mut segments: Vec<(u64, std::path::PathBuf)> = walk(dir.path())
            .into_iter()
            .filter_map(|path| {
                let first = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(".seg")?
                    .parse()
                    .ok()?;
                Some((first, path))
            })
            .collect();
        segments.sort();
        assert!(segments.len() >= 3, "{segments:?}");
        // Retention took the first two segments; the term began at the third.
        let term_start = segments[2].0;
        for (_, path) in &segments[..2] {
            std::fs::remove_file(path).unwrap();
        }
        let hub = ReplicationHub::new(0, 20);
        hub.set_term_start(term_start);
        let mut reader = JournalReader::open(dir.path()).unwrap();
        let at = RecordMark::read_at(&mut reader, term_start + 1)
            .unwrap()
            .unwrap();
        let theirs = RecordMark {
            payload_crc: at.payload_crc ^ 1,
            ..at
        };
        let hello = Hello {
            from_seq: theirs.seq + 1,
            last: Some(theirs),
            node_id: "n".into(),
        };
        let refusal = refusal_of(dir.path(), &hub, &hello)
            .unwrap()
            .expect("refused");
        assert!(
            refusal.starts_with(&format!("{BEHIND_JOURNAL}{term_start} ")),
            "{refusal}"
        );
    }

    /// Every file under `dir`.
    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(walk(&path));
            } else {
                files.push(path);
            }
        }
        files
    }
}
