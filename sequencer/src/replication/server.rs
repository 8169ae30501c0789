//! The primary's side: accepts standbys, refuses one whose journal diverged from its own, and
//! streams the others the journal's records as they are written.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ladder_journal::JournalReader;

use super::{check_standby, parse_handshake, RecordMark, ReplicationHub, ACCEPTED, REFUSED};

/// Most standbys served at once.
pub const STANDBYS_MAX: usize = 16;

/// Serves standbys on `listener` until `stop` is set.
pub fn serve(
    listener: TcpListener,
    data_dir: PathBuf,
    hub: Arc<ReplicationHub>,
    master_key: [u8; 32],
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("replication".into())
        .spawn(move || {
            while !stop.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((stream, peer)) => {
                        if hub.connected() >= STANDBYS_MAX {
                            continue;
                        }
                        let (data_dir, hub, stop) = (data_dir.clone(), hub.clone(), stop.clone());
                        let _ = std::thread::Builder::new()
                            .name("replication-stream".into())
                            .spawn(move || {
                                tracing::info!(%peer, "standby connected");
                                if let Err(e) =
                                    stream_to(stream, &data_dir, &hub, &master_key, &stop)
                                {
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

fn stream_to(
    stream: TcpStream,
    data_dir: &std::path::Path,
    hub: &Arc<ReplicationHub>,
    master_key: &[u8; 32],
    stop: &AtomicBool,
) -> Result<(), String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).ok();
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut lines = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut handshake = String::new();
    lines
        .by_ref()
        .take(128)
        .read_line(&mut handshake)
        .map_err(|e| e.to_string())?;
    let (from_seq, last_held) = parse_handshake(&handshake)?;
    stream.set_read_timeout(None).ok();
    let mut writer = BufWriter::new(stream);
    let mut reader = JournalReader::open(data_dir).map_err(|e| e.to_string())?;
    if let Some(theirs) = last_held {
        let ours = RecordMark::read_at(&mut reader, theirs.seq)?;
        if let Err(why) = check_standby(&theirs, ours.as_ref()) {
            let _ = writeln!(writer, "{REFUSED}{why}").and_then(|_| writer.flush());
            return Err(format!("standby refused: {why}"));
        }
    }
    writeln!(writer, "{ACCEPTED}")
        .and_then(|_| writer.write_all(master_key))
        .and_then(|_| writer.flush())
        .map_err(|e| e.to_string())?;
    let id = hub.register(from_seq);
    let alive = Arc::new(AtomicBool::new(true));
    let acks = {
        let (hub, alive) = (hub.clone(), alive.clone());
        std::thread::spawn(move || {
            for line in lines.lines() {
                let Ok(line) = line else { break };
                if let Some(seq) = line
                    .strip_prefix("ACK ")
                    .and_then(|s| s.trim().parse().ok())
                {
                    hub.ack(id, seq);
                }
            }
            alive.store(false, Ordering::Release);
        })
    };
    let result = send_records(&mut writer, reader, hub, from_seq, stop, &alive);
    hub.unregister(id);
    let _ = writer.get_ref().shutdown(std::net::Shutdown::Both);
    let _ = acks.join();
    result
}

/// Streams written records from `from_seq` on, read with `reader`.
fn send_records(
    writer: &mut BufWriter<TcpStream>,
    mut reader: JournalReader,
    hub: &ReplicationHub,
    from_seq: u64,
    stop: &AtomicBool,
    alive: &AtomicBool,
) -> Result<(), String> {
    if from_seq > 1 {
        reader.seek(from_seq).map_err(|e| e.to_string())?;
    }
    let mut sent = from_seq.saturating_sub(1);
    while !stop.load(Ordering::Acquire) && alive.load(Ordering::Acquire) {
        let written = hub.wait_written_after(sent, Duration::from_millis(50));
        while sent < written {
            let Some(record) = reader.poll().map_err(|e| e.to_string())? else {
                break;
            };
            let mut head = [0u8; 22];
            head[..4].copy_from_slice(&(record.payload.len() as u32).to_be_bytes());
            head[4..12].copy_from_slice(&record.seq.to_be_bytes());
            head[12..20].copy_from_slice(&record.timestamp_ns.to_be_bytes());
            head[20..22].copy_from_slice(&record.record_type.to_be_bytes());
            writer.write_all(&head).map_err(|e| e.to_string())?;
            writer
                .write_all(record.payload)
                .map_err(|e| e.to_string())?;
            sent = record.seq;
        }
        writer.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}
