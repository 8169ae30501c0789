//! `mm` runs as market makers do, with their dead-man switch on: each maker account beats
//! `POST /heartbeats` every second on a connection of its own for the whole run (so the
//! cost of heartbeats shows in the results), and stops them (`DELETE /heartbeats`) at the
//! end, so that the service does not cancel the run's quotes afterwards.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::wire::{read_response, write_request, Auth};

/// Time between two beats of one account.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);

/// Beats sent and refused during a run.
#[derive(Debug, Default)]
pub struct BeatCounts {
    /// Beats answered 200.
    pub ok: AtomicU64,
    /// Beats answered otherwise (or not at all).
    pub failed: AtomicU64,
}

/// The heartbeat threads of a run.
pub struct Heartbeats {
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// What they did.
    pub counts: Arc<BeatCounts>,
    /// Set when they must not stop their accounts' heartbeats at the end.
    leave_running: Arc<AtomicBool>,
}

impl Heartbeats {
    /// Starts one beating thread per account in `auths`, against `host`.
    pub fn start(host: &str, auths: Vec<Auth>) -> Heartbeats {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(BeatCounts::default());
        let leave_running = Arc::new(AtomicBool::new(false));
        let threads = auths
            .into_iter()
            .map(|auth| {
                let (host, stop, counts) = (host.to_string(), stop.clone(), counts.clone());
                let leave = leave_running.clone();
                std::thread::spawn(move || beat_until(&host, &auth, &stop, &counts, &leave))
            })
            .collect();
        Heartbeats {
            threads,
            stop,
            counts,
            leave_running,
        }
    }

    /// Stops the threads and waits for them; each stops its account's heartbeats unless
    /// `leave_running` (the service's dead-man switch then cancels the account's orders once
    /// the beats are overdue, as for a maker that went away).
    pub fn finish(self, leave_running: bool) -> Arc<BeatCounts> {
        self.leave_running.store(leave_running, Ordering::Release);
        self.stop.store(true, Ordering::Release);
        for thread in self.threads {
            let _ = thread.join();
        }
        self.counts
    }
}

fn now_s() -> String {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .to_string()
}

/// One request on `stream`; its status and body.
fn exchange(
    stream: &mut TcpStream,
    reader: &mut BufReader<TcpStream>,
    host: &str,
    method: &str,
    auth: &Auth,
    body: &[u8],
) -> Option<(u16, serde_json::Value)> {
    let mut out = Vec::with_capacity(512);
    write_request(&mut out, host, method, "/heartbeats", auth, &now_s(), body);
    stream.write_all(&out).ok()?;
    let response = read_response(reader).ok()?;
    let value = serde_json::from_slice(&response.body).unwrap_or_default();
    Some((response.status, value))
}

fn beat_until(
    host: &str,
    auth: &Auth,
    stop: &AtomicBool,
    counts: &BeatCounts,
    leave_running: &AtomicBool,
) {
    let Ok(mut stream) = TcpStream::connect(host) else {
        counts.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut id = serde_json::Value::Null;
    while !stop.load(Ordering::Acquire) {
        let body = serde_json::json!({ "heartbeat_id": id }).to_string();
        match exchange(
            &mut stream,
            &mut reader,
            host,
            "POST",
            auth,
            body.as_bytes(),
        ) {
            Some((status, answer)) => {
                let counter = if status == 200 {
                    &counts.ok
                } else {
                    &counts.failed
                };
                counter.fetch_add(1, Ordering::Relaxed);
                // The next id, or (400) the current one to go on from.
                id = answer["heartbeat_id"].clone();
            }
            None => {
                counts.failed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let mut slept = Duration::ZERO;
        while slept < BEAT_EVERY && !stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(50));
            slept += Duration::from_millis(50);
        }
    }
    if !leave_running.load(Ordering::Acquire) {
        let _ = exchange(&mut stream, &mut reader, host, "DELETE", auth, b"");
    }
}
