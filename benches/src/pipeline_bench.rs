//! Measures of the write path beyond the engine: the sequencer end to end (rings, journal
//! with group commit, engine, answers), journal replay from a cold start, and snapshots.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use hdrhistogram::Histogram;
use ladder_engine::{Command, Engine, EngineLimits};
use ladder_history::{Historian, HistorianConfig, HistoryWriter};
use ladder_journal::{Durability, Journal, JournalOptions};
use ladder_sequencer::{
    recover_engine, start, BatchChannelSink, Completion, CorePin, SequencerConfig, SequencerParts,
    Submission, Ticket, Work,
};

use crate::engine_replay::prepared_engine;
use crate::engine_stream::{generate, StreamSpec};

/// What a sequencer run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SequencerResult {
    /// Commands measured.
    pub commands: u64,
    /// `sync` or `async`.
    pub durability: String,
    /// Producers (gateway-like threads).
    pub producers: usize,
    /// Commands per second, submission to answer.
    pub ops_per_sec: f64,
    /// Journal batches (commits).
    pub batches: u64,
    /// Latency from submission to answer: median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// API keys beating their heartbeats once a second beside the stream (0: none).
    pub heartbeat_keys: usize,
    /// Beats answered during the run.
    pub beats: u64,
    /// With the history store's writer following the journal: how far it was.
    pub history: Option<HistoryFollowed>,
}

/// How the history store's writer (the historian) kept up with a sequencer run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct HistoryFollowed {
    /// Records the sequencer had journaled when the last answer came.
    pub journaled: u64,
    /// Records the store held then.
    pub stored_at_end: u64,
    /// Milliseconds from the last answer until the store held every record.
    pub catch_up_ms: f64,
    /// CPU time the historian's thread spent per record (its engine and the store), µs:
    /// what the history costs a core, whatever else ran beside it.
    pub cpu_us_per_record: Option<f64>,
}

/// CPU time so far of this process's thread named `name` (the first found), seconds
/// (`/proc/self/task/*/schedstat`, nanoseconds on the CPU).
fn thread_cpu_s(name: &str) -> Option<f64> {
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|task| {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        if comm.trim() != name {
            return None;
        }
        let ns: u64 = std::fs::read_to_string(path.join("schedstat"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(ns as f64 / 1e9)
    })
}

/// What one sequencer run drives.
#[derive(Clone, Copy, Debug)]
pub struct SequencerRun {
    /// Stream commands measured.
    pub commands: usize,
    /// Gateway-like producer threads.
    pub producers: usize,
    /// The journal's durability.
    pub durability: Durability,
    /// Submissions in flight per producer.
    pub window: usize,
    /// The sequencer thread's core.
    pub pin: CorePin,
    /// API keys beating their heartbeats once a second each beside the stream (0: none).
    pub heartbeat_keys: usize,
    /// Whether the history store's writer follows the journal, as in `ladder serve`.
    pub history: bool,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// Drives `commands` stream commands through a sequencer on a journal in `dir` from
/// `producers` threads, each keeping at most `window` submissions in flight; with
/// `heartbeat_keys` > 0, that many API keys also beat their heartbeats once a second each
/// (spread evenly) from a thread of their own, as market makers' bots would; with `history`,
/// the historian follows the journal into `history.db` as in `ladder serve`.
pub fn sequencer(dir: &Path, run: SequencerRun) -> SequencerResult {
    let SequencerRun {
        commands,
        producers,
        durability,
        window,
        pin,
        heartbeat_keys,
        history,
    } = run;
    let stream = generate(&StreamSpec {
        commands,
        ..StreamSpec::default()
    });
    // The set-up is applied directly; the journal holds the measured commands only (the
    // sequencer numbers them from the journal, the engine does not care).
    let (mut engine, next_seq) = prepared_engine(&stream);
    let keys = heartbeat::create_keys(&mut engine, next_seq, heartbeat_keys);
    let options = JournalOptions {
        segment_size_bytes: 256 << 20,
    };
    let set_up_seq = engine.last_seq();
    if history {
        // The historian starts from a snapshot of the set-up, which the journal follows.
        ladder_journal::write_snapshot(dir, set_up_seq, &engine.snapshot_bytes())
            .expect("snapshot of the set-up");
        ladder_journal::start_journal_after(dir, set_up_seq, options).expect("journal");
    }
    let (journal, _) = Journal::open(dir, options).expect("open journal");
    let mut sinks: Vec<Box<dyn ladder_sequencer::CompletionSink>> = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..producers {
        let (tx, rx) = unbounded();
        sinks.push(Box::new(BatchChannelSink(tx)));
        receivers.push(rx);
    }
    let (beats_tx, beats_rx) = unbounded();
    sinks.push(Box::new(BatchChannelSink(beats_tx)));
    let config = SequencerConfig {
        durability,
        pin,
        ..SequencerConfig::default()
    };
    let parts = SequencerParts {
        engine,
        journal,
        sinks,
        events: Vec::new(),
        replication: None,
        board: None,
    };
    let (handle, mut submitters) = start(config, parts, producers + 1).expect("start sequencer");
    let historian = history.then(|| follow_with_historian(dir, &handle.stats, set_up_seq));
    let beater_ring = submitters.pop().expect("the beater's ring");
    let beating = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let beater = {
        let beating = beating.clone();
        let sink = producers as u16;
        std::thread::spawn(move || heartbeat::beat(keys, &beater_ring, sink, &beats_rx, &beating))
    };
    let commands_list: Arc<Vec<Command>> = Arc::new(stream.measured);
    let started = Instant::now();
    let threads: Vec<_> = submitters
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(p, (submitter, rx))| {
            let list = commands_list.clone();
            std::thread::spawn(move || {
                let mut h = histogram();
                let mut sent_at = std::collections::VecDeque::new();
                let mine: Vec<usize> = (p..list.len()).step_by(producers).collect();
                let mut next = 0;
                let mut done = 0;
                while done < mine.len() {
                    while next < mine.len() && sent_at.len() < window {
                        let submission = Submission {
                            ticket: Ticket {
                                sink: p as u16,
                                token: next as u64,
                            },
                            work: Work::Command(list[mine[next]].clone()),
                        };
                        if submitter.try_submit(submission).is_err() {
                            break;
                        }
                        sent_at.push_back(Instant::now());
                        next += 1;
                    }
                    let Ok(batch) = rx.recv_timeout(Duration::from_secs(10)) else {
                        panic!("the sequencer stopped answering");
                    };
                    let answered = Instant::now();
                    for completion in batch {
                        let t0 = sent_at.pop_front().expect("an answer follows a submission");
                        match completion {
                            Completion::Applied { .. } => {
                                let _ = h.record((answered - t0).as_nanos().max(1) as u64);
                            }
                            // Timing refusals would report a service that did nothing.
                            Completion::Refused { reason, .. } => {
                                panic!("the sequencer refused a command: {reason}")
                            }
                            _ => {}
                        }
                        done += 1;
                    }
                }
                h
            })
        })
        .collect();
    let mut all = histogram();
    for t in threads {
        all.add(t.join().expect("producer")).expect("same bounds");
    }
    let elapsed = started.elapsed().as_secs_f64();
    beating.store(false, std::sync::atomic::Ordering::Release);
    let beats = beater.join().expect("beater");
    let batches = handle
        .stats
        .batches
        .load(std::sync::atomic::Ordering::Relaxed);
    let history = historian.map(|historian| {
        let journaled = handle
            .stats
            .last_seq
            .load(std::sync::atomic::Ordering::Acquire);
        let stored_at_end = historian.stored_through();
        let waited = Instant::now();
        while historian.stored_through() < journaled && waited.elapsed() < Duration::from_secs(300)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let catch_up_ms = waited.elapsed().as_secs_f64() * 1e3;
        let cpu_s = thread_cpu_s("historian");
        historian.stop();
        HistoryFollowed {
            journaled: journaled - set_up_seq,
            stored_at_end: stored_at_end.saturating_sub(set_up_seq),
            catch_up_ms,
            cpu_us_per_record: cpu_s.map(|s| s * 1e6 / journaled.max(1) as f64),
        }
    });
    handle.stop();
    SequencerResult {
        commands: commands_list.len() as u64,
        durability: format!("{durability:?}").to_lowercase(),
        producers,
        ops_per_sec: commands_list.len() as f64 / elapsed,
        batches,
        p50_us: all.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: all.value_at_quantile(0.99) as f64 / 1e3,
        p999_us: all.value_at_quantile(0.999) as f64 / 1e3,
        heartbeat_keys,
        beats,
        history,
    }
}

/// Starts the historian on `dir` as `ladder serve` does, reading what the sequencer released.
fn follow_with_historian(
    dir: &Path,
    stats: &Arc<ladder_sequencer::SequencerStats>,
    set_up_seq: u64,
) -> Historian {
    // The set-up's records were applied directly, never journaled: the store starts after them.
    let mut store = HistoryWriter::open(&ladder_history::history_path(dir)).expect("history.db");
    store
        .apply(set_up_seq, &[])
        .and_then(|()| store.commit())
        .expect("history.db after the set-up");
    drop(store);
    let stats = stats.clone();
    Historian::start(HistorianConfig {
        data_dir: dir.to_path_buf(),
        limits: EngineLimits::default(),
        released: Arc::new(move || stats.last_seq.load(std::sync::atomic::Ordering::Acquire)),
        snapshot_every: 0,
        keep_snapshots: 2,
        journal_last_seq: set_up_seq,
        journal_full: Arc::new(|| false),
        standby_floor: Arc::new(|| u64::MAX),
        journal_archive: None,
        prices_stored_below: Arc::new(|_| {}),
    })
    .expect("start the historian")
}

/// Heartbeats beside the bench's stream.
mod heartbeat {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use crossbeam_channel::Receiver;
    use ladder_engine::{Address, ApiKeySpec, Bytes32, Command, Engine};
    use ladder_sequencer::{
        Completion, HeartbeatAnswer, HeartbeatOp, HeartbeatRequest, Submission, Submitter, Ticket,
        Work,
    };

    /// A key with heartbeats: its id, address and the id its next beat names.
    pub struct Key {
        key_id: [u8; 16],
        address: Address,
        beat_id: Option<String>,
    }

    /// Creates `n` API keys in the engine (applied directly, as the set-up is).
    pub fn create_keys(engine: &mut Engine, first_seq: u64, n: usize) -> Vec<Key> {
        (0..n)
            .map(|i| {
                let mut key_id = [0u8; 16];
                key_id[..8].copy_from_slice(&(i as u64 + 1).to_be_bytes());
                let mut address = Address([0xbe; 20]);
                address.0[..8].copy_from_slice(&(i as u64).to_be_bytes());
                let seq = first_seq + i as u64;
                engine.apply(
                    seq,
                    seq * 1_000,
                    &Command::CreateApiKey(ApiKeySpec {
                        address,
                        signer: address,
                        key_id,
                        nonce: Bytes32::default(),
                        max_keys_per_address: 5,
                    }),
                );
                Key {
                    key_id,
                    address,
                    beat_id: None,
                }
            })
            .collect()
    }

    /// Starts every key's heartbeats, then beats each once a second (evenly spread) until
    /// `beating` is cleared; the beats answered.
    pub fn beat(
        mut keys: Vec<Key>,
        ring: &Submitter,
        sink: u16,
        answers: &Receiver<Vec<Completion>>,
        beating: &AtomicBool,
    ) -> u64 {
        if keys.is_empty() {
            return 0;
        }
        let gap = Duration::from_secs(1) / keys.len() as u32;
        let mut answered = 0u64;
        let mut next_at = Instant::now();
        let mut turn = 0usize;
        while beating.load(Ordering::Acquire) {
            let key = &keys[turn % keys.len()];
            let op = match &key.beat_id {
                None => HeartbeatOp::Start,
                Some(id) => HeartbeatOp::Beat(id.clone()),
            };
            let request = HeartbeatRequest {
                key_id: key.key_id,
                address: key.address,
                op,
            };
            let submission = Submission {
                ticket: Ticket {
                    sink,
                    token: (turn % keys.len()) as u64,
                },
                work: Work::Heartbeat(request),
            };
            if ring.try_submit(submission).is_ok() {
                turn += 1;
            }
            while let Ok(batch) = answers.try_recv() {
                for completion in batch {
                    if let Completion::Heartbeat { ticket, answer, .. } = completion {
                        let id = match answer {
                            HeartbeatAnswer::Beating { heartbeat_id } => Some(heartbeat_id),
                            HeartbeatAnswer::WrongId { current } => current,
                            HeartbeatAnswer::Stopped => None,
                        };
                        keys[ticket.token as usize].beat_id = id;
                        answered += 1;
                    }
                }
            }
            next_at += gap;
            let now = Instant::now();
            if next_at > now {
                std::thread::sleep(next_at - now);
            }
        }
        answered
    }
}

/// What a replay measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplayResult {
    /// Records replayed.
    pub records: u64,
    /// Records per second from a cold start (open, read, decode, apply).
    pub records_per_sec: f64,
    /// Wall time.
    pub seconds: f64,
}

/// Writes a journal of `commands` stream commands (set-up included) into `dir`, then times
/// `recover_engine` on it.
pub fn replay(dir: &Path, commands: usize) -> ReplayResult {
    let stream = generate(&StreamSpec {
        commands,
        ..StreamSpec::default()
    });
    {
        let (mut journal, _) = Journal::open(
            dir,
            JournalOptions {
                segment_size_bytes: 256 << 20,
            },
        )
        .expect("open journal");
        let mut buf = Vec::new();
        for (i, command) in stream
            .setup
            .iter()
            .chain(stream.measured.iter())
            .enumerate()
        {
            let seq = i as u64 + 1;
            ladder_sequencer::encode_command(command, &mut buf);
            journal
                .append(seq, seq * 1_000, ladder_sequencer::RECORD_COMMAND_V1, &buf)
                .expect("append");
        }
        journal.commit(Durability::Async).expect("commit");
    }
    let started = Instant::now();
    let (_, recovered) = recover_engine(dir, EngineLimits::default(), None).expect("replay");
    let seconds = started.elapsed().as_secs_f64();
    ReplayResult {
        records: recovered.replayed,
        records_per_sec: recovered.replayed as f64 / seconds,
        seconds,
    }
}

/// What a snapshot run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SnapshotResult {
    /// Open orders in the engine.
    pub open_orders: usize,
    /// Snapshot size.
    pub bytes: usize,
    /// Encode and write (temp file, fsync, rename).
    pub write_ms: f64,
    /// Read, check and decode.
    pub restore_ms: f64,
    /// The restored state hash equals the original.
    pub hash_equal: bool,
}

/// Builds an engine with `open_orders` resting orders, then times a snapshot and a restore.
pub fn snapshot(dir: &Path, open_orders: usize) -> SnapshotResult {
    let spec = StreamSpec {
        markets: 8,
        traders: 2_000,
        resting_per_book: open_orders / 8,
        commands: 0,
        ..StreamSpec::default()
    };
    let stream = generate(&spec);
    let (engine, _) = prepared_engine(&stream);
    let started = Instant::now();
    let bytes = engine.snapshot_bytes();
    ladder_journal::write_snapshot(dir, engine.last_seq(), &bytes).expect("write snapshot");
    let write_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let loaded = ladder_journal::latest_valid_snapshot(dir)
        .expect("read")
        .expect("a snapshot");
    let restored = Engine::from_snapshot_bytes(&loaded.payload).expect("decode");
    let restore_ms = started.elapsed().as_secs_f64() * 1e3;
    SnapshotResult {
        open_orders: engine.open_order_count(),
        bytes: bytes.len(),
        write_ms,
        restore_ms,
        hash_equal: restored.state_hash() == engine.state_hash(),
    }
}

/// What a standby-lag run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StandbyLagResult {
    /// Commands measured.
    pub commands: u64,
    /// Offered rate (commands/s, open loop).
    pub offered_rate: f64,
    /// Standbys the primary waited for before answering (`--replicas`).
    pub replicas: usize,
    /// Lag from the primary stamping a command to the standby holding it durably and
    /// applied: median, in µs.
    pub lag_p50_us: f64,
    /// 99th percentile.
    pub lag_p99_us: f64,
    /// 99.9th percentile.
    pub lag_p999_us: f64,
    /// Largest.
    pub lag_max_us: f64,
    /// The primary's answer latency from each command's planned send time: median, in µs.
    pub answer_p50_us: f64,
    /// 99th percentile.
    pub answer_p99_us: f64,
    /// Whether both engines ended with the same state hash.
    pub state_hashes_equal: bool,
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A primary and a standby in this process, replicating over loopback TCP (journals in
/// `dir`, `sync` durability on both): `commands` stream commands are offered to the primary
/// at `rate` per second (open loop: each has a planned send time), and the standby records,
/// for each command it holds, how long after the primary stamped it.
pub fn standby_lag(dir: &Path, commands: usize, rate: f64, replicas: usize) -> StandbyLagResult {
    use ladder_sequencer::replication::{client, server, LinkSecret, ReplicationHub};
    use ladder_sequencer::{rings, start_with, ChannelSink, CompletionSink};
    use std::sync::atomic::{AtomicBool, Ordering};

    let stream = generate(&StreamSpec {
        commands,
        ..StreamSpec::default()
    });
    let (primary_engine, _) = prepared_engine(&stream);
    let (standby_engine, _) = prepared_engine(&stream);
    let options = JournalOptions {
        segment_size_bytes: 256 << 20,
    };
    let primary_dir = dir.join("primary");
    let standby_dir = dir.join("standby");
    let (primary_journal, _) = Journal::open(&primary_dir, options).expect("journal");
    let (standby_journal, _) = Journal::open(&standby_dir, options).expect("journal");

    // The primary: one producer ring, its answers on a channel, a replication hub and port.
    let hub = Arc::new(ReplicationHub::new(replicas, 0));
    let (answers_tx, answers_rx) = unbounded();
    let primary_sinks: Vec<Box<dyn CompletionSink>> = vec![Box::new(ChannelSink(answers_tx))];
    let (primary, submitters) = start(
        SequencerConfig::default(),
        SequencerParts {
            engine: primary_engine,
            journal: primary_journal,
            sinks: primary_sinks,
            events: Vec::new(),
            replication: Some(hub.clone()),
            board: None,
        },
        1,
    )
    .expect("primary sequencer");
    let stop = Arc::new(AtomicBool::new(false));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let secret = LinkSecret::from_bytes(b"the standby bench's replication secret").expect("secret");
    let replication = server::serve(
        listener,
        server::Primary {
            data_dir: primary_dir,
            hub: hub.clone(),
            master_key: std::sync::Arc::new(|| [7; 32]),
            secret: secret.clone(),
            stop: stop.clone(),
            history_copy: None,
        },
    )
    .expect("replication server");

    // The standby: a follower sequencer fed by the replication client.
    let standby_config = SequencerConfig::default();
    standby_config.follower.store(true, Ordering::Release);
    let (mut standby_rings, standby_consumer) = rings(1, standby_config.ring_capacity);
    let (applied_tx, applied_rx) = unbounded();
    let standby = start_with(
        standby_config,
        SequencerParts {
            engine: standby_engine,
            journal: standby_journal,
            sinks: vec![Box::new(ChannelSink(applied_tx))],
            events: Vec::new(),
            replication: None,
            board: None,
        },
        standby_consumer,
    )
    .expect("standby sequencer");
    let (lag_tx, lag_rx) = unbounded::<u64>();
    let follow_stop = Arc::new(AtomicBool::new(false));
    let follower = client::follow(client::Follower {
        primary: client::FollowTarget::fixed(&address),
        term: 0,
        secret,
        node_id: "bench-standby".to_string(),
        last_seq: 0,
        last_mark: None,
        submitter: standby_rings.pop().expect("a ring"),
        completions: applied_rx,
        sink: 0,
        stop: follow_stop.clone(),
        on_applied: Box::new(move |_, _, stamped_ns| {
            let _ = lag_tx.send(wall_ns().saturating_sub(stamped_ns));
        }),
        on_master_key: Box::new(|_| {}),
        refusal_logged: false,
    })
    .expect("follower");
    let deadline = Instant::now() + Duration::from_secs(10);
    while hub.connected() < 1 {
        assert!(Instant::now() < deadline, "the standby did not connect");
        std::thread::sleep(Duration::from_millis(10));
    }

    // Open loop: command i is planned at start + i / rate.
    let submitter = submitters.into_iter().next().expect("a ring");
    let list: Vec<Command> = stream.measured;
    let total = list.len();
    let planned: Arc<Vec<Instant>> = {
        let start = Instant::now() + Duration::from_millis(20);
        Arc::new(
            (0..total)
                .map(|i| start + Duration::from_secs_f64(i as f64 / rate))
                .collect(),
        )
    };
    let answers = {
        let planned = planned.clone();
        std::thread::spawn(move || {
            let mut h = histogram();
            for _ in 0..total {
                match answers_rx.recv_timeout(Duration::from_secs(30)) {
                    Ok(completion) => {
                        let i = completion.ticket().token as usize;
                        let _ = h.record(planned[i].elapsed().as_nanos().max(1) as u64);
                    }
                    Err(_) => panic!("the primary stopped answering"),
                }
            }
            h
        })
    };
    for (i, command) in list.into_iter().enumerate() {
        // Sleep, not spin, until the command's planned time: on a 2-core machine a spinning
        // sender takes a whole core from the two sequencers, their committers and the
        // replication threads (its late sends still count from the planned time).
        let at = planned[i];
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        let mut work = Work::Command(command);
        loop {
            match submitter.try_submit(Submission {
                ticket: Ticket {
                    sink: 0,
                    token: i as u64,
                },
                work,
            }) {
                Ok(()) => break,
                Err(ladder_sequencer::SubmitError::Full(s)) => {
                    work = s.work;
                    std::thread::yield_now();
                }
                Err(ladder_sequencer::SubmitError::Stopped(_)) => panic!("primary stopped"),
            }
        }
    }
    let answer = answers.join().expect("answers");
    let mut lag = histogram();
    for _ in 0..total {
        let ns = lag_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the standby fell behind");
        let _ = lag.record(ns.max(1));
    }
    follow_stop.store(true, Ordering::Release);
    let _ = follower.join();
    stop.store(true, Ordering::Release);
    let _ = replication.join();
    let primary_engine = primary.stop().expect("primary engine");
    let standby_engine = standby.stop().expect("standby engine");
    StandbyLagResult {
        commands: total as u64,
        offered_rate: rate,
        replicas,
        lag_p50_us: lag.value_at_quantile(0.5) as f64 / 1e3,
        lag_p99_us: lag.value_at_quantile(0.99) as f64 / 1e3,
        lag_p999_us: lag.value_at_quantile(0.999) as f64 / 1e3,
        lag_max_us: lag.max() as f64 / 1e3,
        answer_p50_us: answer.value_at_quantile(0.5) as f64 / 1e3,
        answer_p99_us: answer.value_at_quantile(0.99) as f64 / 1e3,
        state_hashes_equal: primary_engine.state_hash() == standby_engine.state_hash(),
    }
}
