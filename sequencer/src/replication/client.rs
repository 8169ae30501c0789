//! The standby's side: follows a primary, feeding its records to the local sequencer as
//! replicated work (same sequence numbers and times), and acknowledging what is durable.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Receiver;
use ladder_engine::{Command, Reply};

use super::{HANDSHAKE, RECORD_PAYLOAD_MAX};
use crate::codec::decode_command;
use crate::submission::{Completion, Submission, SubmitError, Submitter, Ticket, Work};

/// Called with each applied command, its reply and the primary's timestamp of it, once it is
/// durable here (to keep read-side tables current and to measure the standby's lag).
pub type OnApplied = Box<dyn FnMut(&Command, &Reply, u64) + Send>;
/// Called with the primary's master key on every connection.
pub type OnMasterKey = Box<dyn FnMut([u8; 32]) + Send>;

/// Where the standby follows from and what it feeds.
pub struct Follower {
    /// The primary's replication address.
    pub primary: String,
    /// The last sequence the standby holds.
    pub last_seq: u64,
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
}

/// Follows the primary until `stop`; reconnects (resuming after the last sequence held).
pub fn follow(mut follower: Follower) -> std::io::Result<JoinHandle<u64>> {
    std::thread::Builder::new().name("standby".into()).spawn(move || {
        while !follower.stop.load(Ordering::Acquire) {
            match session(&mut follower) {
                Ok(()) => {}
                Err(e) => tracing::warn!(error = %e, primary = %follower.primary, last_seq = follower.last_seq, "replication interrupted; reconnecting"),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        follower.last_seq
    })
}

fn session(f: &mut Follower) -> Result<(), String> {
    let mut stream = TcpStream::connect(&f.primary).map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).ok();
    stream
        .write_all(format!("{HANDSHAKE}{}\n", f.last_seq + 1).as_bytes())
        .map_err(|e| e.to_string())?;
    let mut reader =
        BufReader::with_capacity(1 << 20, stream.try_clone().map_err(|e| e.to_string())?);
    let mut key = [0u8; 32];
    reader
        .read_exact(&mut key)
        .map_err(|e| format!("master key: {e}"))?;
    (f.on_master_key)(key);
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .ok();
    tracing::info!(primary = %f.primary, from = f.last_seq + 1, "following");
    let mut pending: Vec<(u64, Command)> = Vec::new();
    loop {
        if f.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        match read_record(&mut reader) {
            Ok(Some((seq, timestamp_ns, command))) => {
                if seq != f.last_seq + 1 + pending.len() as u64 {
                    return Err(format!(
                        "expected record {}, got {seq}",
                        f.last_seq + 1 + pending.len() as u64
                    ));
                }
                submit(f, seq, timestamp_ns, command.clone())?;
                pending.push((timestamp_ns, command));
                if reader.buffer().is_empty() {
                    settle(f, &mut pending, &mut stream)?;
                }
            }
            Ok(None) => settle(f, &mut pending, &mut stream)?,
            Err(e) => return Err(e),
        }
    }
}

fn read_record(reader: &mut BufReader<TcpStream>) -> Result<Option<(u64, u64, Command)>, String> {
    // Nothing buffered and nothing arriving within the read timeout: no record yet.
    match reader.fill_buf() {
        Ok([]) => return Err("the primary closed the stream".into()),
        Ok(_) => {}
        Err(e) if is_timeout(&e) => return Ok(None),
        Err(e) => return Err(format!("read: {e}")),
    }
    let mut head = [0u8; 22];
    read_full(reader, &mut head)?;
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > RECORD_PAYLOAD_MAX {
        return Err(format!("record of {len} bytes"));
    }
    let seq = u64::from_be_bytes(head[4..12].try_into().map_err(|_| "header")?);
    let timestamp_ns = u64::from_be_bytes(head[12..20].try_into().map_err(|_| "header")?);
    let record_type = u16::from_be_bytes([head[20], head[21]]);
    let mut payload = vec![0u8; len];
    read_full(reader, &mut payload)?;
    let command =
        decode_command(record_type, &payload).map_err(|e| format!("record {seq}: {e}"))?;
    Ok(Some((seq, timestamp_ns, command)))
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Reads exactly `buf.len()` bytes of a record that has started to arrive, waiting through
/// read timeouts (a partial read is never dropped).
fn read_full(reader: &mut BufReader<TcpStream>, buf: &mut [u8]) -> Result<(), String> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => return Err("the primary closed the stream mid-record".into()),
            Ok(n) => filled += n,
            Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    Ok(())
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
    pending: &mut Vec<(u64, Command)>,
    stream: &mut TcpStream,
) -> Result<(), String> {
    if pending.is_empty() {
        return Ok(());
    }
    for (timestamp_ns, command) in pending.drain(..) {
        match f.completions.recv_timeout(Duration::from_secs(30)) {
            Ok(Completion::Applied { seq, reply, .. }) => {
                (f.on_applied)(&command, &reply, timestamp_ns);
                f.last_seq = seq;
            }
            Ok(Completion::Refused { reason, .. }) => return Err(reason.to_string()),
            Ok(_) => return Err("unexpected completion".into()),
            Err(_) => return Err("the sequencer did not answer".into()),
        }
    }
    stream
        .write_all(format!("ACK {}\n", f.last_seq).as_bytes())
        .map_err(|e| format!("ack: {e}"))
}
