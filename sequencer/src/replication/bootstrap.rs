//! Bootstrap: a standby whose next record the primary's journal no longer holds (retention
//! retired it) takes the primary's state instead: the newest snapshot the journal follows on
//! from, with the mark of its last record, a consistent copy of the history store and the
//! master key. It then follows the journal from the record after the snapshot.
//!
//! Inside the encrypted link (see the module above): the standby's hello is
//! `LADDER-REPL 3 BOOTSTRAP FROM <seq> NODE <id>`, `<seq>` the first record it wants. The
//! primary answers [`CURRENT`] when its journal holds that record (nothing to copy: follow
//! as usual), `REFUSED <reason>`, or [`SNAPSHOT`]; then, after the standby's `READY`, it
//! sends the 32-byte master key and one header line,
//! `SNAPSHOT <seq> <mark> <snapshot bytes> <history bytes>\n` (or `FAILED <reason>\n`),
//! followed by the snapshot's payload and the history store's file, and closes.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::patient::PatientReader;
use super::secure::{self, LinkSecret, FRAME_PLAINTEXT_MAX};
use super::{valid_node_id, RecordMark, ReplicationHub, HANDSHAKE_NODE, READY, REFUSED};

/// The bootstrap hello's prefix.
pub const BOOTSTRAP_HANDSHAKE: &str = "LADDER-REPL 3 BOOTSTRAP FROM ";
/// The primary's answer that its journal holds what the standby wants next.
pub const CURRENT: &str = "CURRENT";
/// The primary's answer that it will send its state.
pub const SNAPSHOT: &str = "SNAPSHOT";
/// The header line's opening when the primary could not prepare its state after all.
pub const FAILED: &str = "FAILED ";
/// Longest header line.
const HEADER_BYTES_MAX: u64 = 512;
/// How long the primary keeps the journal after the snapshot for the standby to come back
/// and follow it.
pub const PIN_AFTER_TRANSFER: Duration = Duration::from_secs(60);
/// Longest wait for a byte of the transfer (the primary copies its history store first).
pub const TRANSFER_STALL_MAX: Duration = Duration::from_secs(600);

/// Writes a consistent copy of the history store to the given path (which does not exist)
/// and returns the last sequence the copy holds.
pub type HistoryCopy = Arc<dyn Fn(&Path) -> Result<u64, String> + Send + Sync>;

/// A standby's request for the primary's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapRequest {
    /// The first record the standby wants.
    pub from_seq: u64,
    /// Who it is.
    pub node_id: String,
}

impl BootstrapRequest {
    /// The hello line.
    pub fn line(&self) -> String {
        format!(
            "{BOOTSTRAP_HANDSHAKE}{}{HANDSHAKE_NODE}{}\n",
            self.from_seq, self.node_id
        )
    }

    /// Reads a bootstrap hello line; `None` when the line is not one.
    pub fn parse(line: &str) -> Option<Result<BootstrapRequest, String>> {
        let rest = line.trim_end().strip_prefix(BOOTSTRAP_HANDSHAKE)?;
        let bad = || format!("bad handshake {line:?}");
        let parsed = rest.split_once(HANDSHAKE_NODE).and_then(|(from, node_id)| {
            let from_seq: u64 = from.parse().ok().filter(|&s| s > 0)?;
            valid_node_id(node_id).then(|| BootstrapRequest {
                from_seq,
                node_id: node_id.to_string(),
            })
        });
        Some(parsed.ok_or_else(bad))
    }
}

/// The state a standby received.
#[derive(Debug)]
pub struct Received {
    /// The snapshot's sequence: the journal follows on from the record after it.
    pub seq: u64,
    /// The mark of record `seq` (the standby names it when it follows).
    pub mark: RecordMark,
    /// The snapshot's payload.
    pub snapshot: Vec<u8>,
    /// The primary's master key.
    pub master_key: [u8; 32],
}

/// What the primary said.
#[derive(Debug)]
pub enum Fetched {
    /// Its journal holds the record wanted: follow it as usual.
    Current,
    /// Its state, the history store written to the path given.
    State(Received),
}

/// The standby's side: asks the primary at `primary` for its state when its journal no
/// longer holds `from_seq`; the history store's copy goes to `history_to`. Gives up when
/// `stop` is set.
pub fn fetch(
    primary: &str,
    secret: &LinkSecret,
    request: &BootstrapRequest,
    history_to: &Path,
    stop: &AtomicBool,
) -> Result<Fetched, String> {
    let stream = super::client::dial(primary)?;
    let (answer, (reader, mut writer)) =
        secure::connect(&stream, secret, request.line().as_bytes())?;
    let answer = String::from_utf8_lossy(&answer);
    if answer == CURRENT {
        return Ok(Fetched::Current);
    }
    if let Some(why) = answer.strip_prefix(REFUSED) {
        return Err(format!("the primary cannot bootstrap this standby: {why}"));
    }
    if answer != SNAPSHOT {
        return Err(format!("unexpected handshake answer {answer:?}"));
    }
    writer
        .write_all(READY)
        .map_err(|e| format!("confirmation: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .ok();
    let patient = PatientReader::new(reader, stop, TRANSFER_STALL_MAX);
    let mut reader = BufReader::with_capacity(1 << 20, patient);
    let mut master_key = [0u8; 32];
    reader
        .read_exact(&mut master_key)
        .map_err(|e| format!("master key: {e}"))?;
    let mut header = String::new();
    Read::take(&mut reader, HEADER_BYTES_MAX)
        .read_line(&mut header)
        .map_err(|e| format!("bootstrap header: {e}"))?;
    if let Some(why) = header.trim_end().strip_prefix(FAILED) {
        return Err(format!("the primary could not send its state: {why}"));
    }
    let header = Header::parse(&header)?;
    let mut snapshot = vec![0u8; usize::try_from(header.snapshot_bytes).map_err(|_| "size")?];
    reader
        .read_exact(&mut snapshot)
        .map_err(|e| format!("snapshot: {e}"))?;
    receive_file(&mut reader, header.history_bytes, history_to)?;
    Ok(Fetched::State(Received {
        seq: header.mark.seq,
        mark: header.mark,
        snapshot,
        master_key,
    }))
}

/// Copies `bytes` bytes from `reader` into a new file at `path`, synced.
fn receive_file(reader: &mut impl Read, bytes: u64, path: &Path) -> Result<(), String> {
    let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut file = BufWriter::with_capacity(1 << 20, file);
    let copied = std::io::copy(&mut Read::take(reader, bytes), &mut file)
        .map_err(|e| format!("history store: {e}"))?;
    if copied != bytes {
        return Err(format!(
            "history store: the primary sent {copied} of {bytes} bytes"
        ));
    }
    file.into_inner()
        .map_err(|e| e.to_string())?
        .sync_all()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The line that opens the transfer.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    mark: RecordMark,
    snapshot_bytes: u64,
    history_bytes: u64,
}

impl Header {
    fn line(&self) -> String {
        format!(
            "{SNAPSHOT} {} {} {} {}\n",
            self.mark.seq, self.mark, self.snapshot_bytes, self.history_bytes
        )
    }

    fn parse(line: &str) -> Result<Header, String> {
        let bad = || format!("bad bootstrap header {line:?}");
        let mut words = line.trim_end().split(' ');
        if words.next() != Some(SNAPSHOT) {
            return Err(bad());
        }
        let seq: u64 = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
        let mark = words
            .next()
            .and_then(RecordMark::parse)
            .filter(|m| m.seq == seq)
            .ok_or_else(bad)?;
        let snapshot_bytes = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
        let history_bytes = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
        if words.next().is_some()
            || snapshot_bytes > ladder_journal::snapshot::SNAPSHOT_PAYLOAD_MAX_BYTES
        {
            return Err(bad());
        }
        Ok(Header {
            mark,
            snapshot_bytes,
            history_bytes,
        })
    }
}

/// What the primary needs to serve a bootstrap.
pub struct BootstrapSource<'a> {
    /// Its data directory.
    pub data_dir: &'a Path,
    /// Its replication hub (to keep the journal after the snapshot).
    pub hub: &'a ReplicationHub,
    /// Copies its history store.
    pub history_copy: Option<&'a HistoryCopy>,
    /// Its master key.
    pub master_key: [u8; 32],
    /// Set when the service stops.
    pub stop: &'a AtomicBool,
}

/// Whether the primary's journal holds `from_seq` (or will: it is at or past its first).
pub fn journal_holds(data_dir: &Path, from_seq: u64) -> Result<bool, String> {
    let first = ladder_journal::journal_first_seq(data_dir).map_err(|e| e.to_string())?;
    Ok(first.is_none_or(|first| from_seq >= first))
}

/// The primary's side, after it answered [`SNAPSHOT`] and the standby confirmed: sends the
/// master key, then its state (or why it could not), then keeps the journal after the
/// snapshot for [`PIN_AFTER_TRANSFER`].
pub fn serve(
    stream: &TcpStream,
    writer: secure::SecureWriter,
    request: &BootstrapRequest,
    source: &BootstrapSource<'_>,
) -> Result<(), String> {
    // Nothing is retired while the state is gathered (the pin moves to the snapshot after).
    let gathering = source.hub.pin(0);
    let staging = source.data_dir.join(STAGING_DIR);
    let history = staging.join(format!("history-{}.db", request.node_id));
    let mut writer = BufWriter::with_capacity(FRAME_PLAINTEXT_MAX, writer);
    writer
        .write_all(&source.master_key)
        .map_err(|e| e.to_string())?;
    let gathered = gather(source, &staging, &history);
    let sent = match gathered {
        Err(why) => {
            let _ = writer
                .write_all(format!("{FAILED}{why}\n").as_bytes())
                .and_then(|()| writer.flush());
            Err(format!("bootstrap of {} failed: {why}", request.node_id))
        }
        Ok((header, snapshot)) => {
            let pin = source.hub.pin(header.mark.seq);
            drop(gathering);
            let sent = send_state(&mut writer, &header, &snapshot, &history);
            let _ = fs::remove_file(&history);
            if sent.is_ok() {
                tracing::info!(node = %request.node_id, seq = header.mark.seq, history_bytes = header.history_bytes, "bootstrapped a standby");
                let _ = stream.shutdown(std::net::Shutdown::Write);
                let until = Instant::now() + PIN_AFTER_TRANSFER;
                while Instant::now() < until && !source.stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            drop(pin);
            sent
        }
    };
    let _ = fs::remove_file(&history);
    sent
}

/// Where the primary stages the copies it sends, inside its data directory.
pub const STAGING_DIR: &str = "bootstrap";

/// The history store's copy (at `history`), then the newest snapshot at or before what the
/// copy holds that the journal follows on from, and its header.
fn gather(
    source: &BootstrapSource<'_>,
    staging: &Path,
    history: &Path,
) -> Result<(Header, Vec<u8>), String> {
    let copy = source
        .history_copy
        .ok_or("this primary keeps no history store")?;
    fs::create_dir_all(staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    match fs::remove_file(history) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", history.display())),
    }
    let stored = copy(history)?;
    let snapshot = ladder_journal::latest_valid_snapshot_through(source.data_dir, stored)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no snapshot at or before sequence {stored} yet"))?;
    let mark = RecordMark::of_journal(source.data_dir, snapshot.seq)?.ok_or_else(|| {
        format!(
            "the journal no longer holds record {} of the newest snapshot the history store \
             covers; a newer snapshot comes with the next one the service writes",
            snapshot.seq
        )
    })?;
    let history_bytes = fs::metadata(history)
        .map_err(|e| format!("{}: {e}", history.display()))?
        .len();
    let header = Header {
        mark,
        snapshot_bytes: snapshot.payload.len() as u64,
        history_bytes,
    };
    Ok((header, snapshot.payload))
}

fn send_state(
    writer: &mut BufWriter<secure::SecureWriter>,
    header: &Header,
    snapshot: &[u8],
    history: &Path,
) -> Result<(), String> {
    let mut file = File::open(history).map_err(|e| format!("{}: {e}", history.display()))?;
    writer
        .write_all(header.line().as_bytes())
        .and_then(|()| writer.write_all(snapshot))
        .map_err(|e| e.to_string())?;
    let copied = std::io::copy(&mut file, writer).map_err(|e| e.to_string())?;
    if copied != header.history_bytes {
        return Err(format!(
            "the history store's copy changed size while sent ({copied} of {} bytes)",
            header.history_bytes
        ));
    }
    writer.flush().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bootstrap_request_reads_back_and_is_not_a_follow_hello() {
        let request = BootstrapRequest {
            from_seq: 42,
            node_id: "standby-1".into(),
        };
        let line = request.line();
        assert_eq!(line, "LADDER-REPL 3 BOOTSTRAP FROM 42 NODE standby-1\n");
        assert_eq!(BootstrapRequest::parse(&line), Some(Ok(request)));
        assert!(super::super::Hello::parse(&line).is_err());
        assert_eq!(
            BootstrapRequest::parse("LADDER-REPL 3 FROM 1 AFTER - NODE n\n"),
            None
        );
        for bad in [
            "LADDER-REPL 3 BOOTSTRAP FROM 0 NODE n\n",
            "LADDER-REPL 3 BOOTSTRAP FROM 1 NODE two words\n",
            "LADDER-REPL 3 BOOTSTRAP FROM x NODE n\n",
            "LADDER-REPL 3 BOOTSTRAP FROM 1\n",
        ] {
            assert!(
                matches!(BootstrapRequest::parse(bad), Some(Err(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_header_reads_back_and_its_mark_must_name_its_sequence() {
        let mark = RecordMark {
            seq: 7,
            timestamp_ns: 9,
            record_type: 2,
            payload_crc: 0xabc,
        };
        let header = Header {
            mark,
            snapshot_bytes: 100,
            history_bytes: 4096,
        };
        assert_eq!(Header::parse(&header.line()), Ok(header));
        for bad in [
            "SNAPSHOT 8 7:9:2:00000abc 100 4096\n",
            "SNAPSHOT 7 7:9:2:00000abc 100\n",
            "SNAPSHOT 7 7:9:2:00000abc 100 4096 1\n",
            "SNAPSHOT 7 7:9:2:00000abc 99999999999999 1\n",
            "FAILED 7\n",
        ] {
            assert!(Header::parse(bad).is_err(), "{bad}");
        }
    }
}
