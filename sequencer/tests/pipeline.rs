//! The sequencer end to end: submissions through rings, journaled, applied, answered after
//! commit; a restart recovers the same state from the journal (and from a snapshot).

use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};
use ladder_engine::*;
use ladder_journal::{Durability, Journal, JournalOptions};
use ladder_sequencer::*;

struct ChannelSink(Sender<Completion>);

impl CompletionSink for ChannelSink {
    fn deliver(&mut self, completions: Vec<Completion>) {
        for c in completions {
            let _ = self.0.send(c);
        }
    }
}

fn start_on(dir: &std::path::Path) -> (SequencerHandle, Submitter, Receiver<Completion>) {
    let (engine, _) = recover_engine(dir, EngineLimits::default(), None).unwrap();
    let (journal, _) = Journal::open(
        dir,
        JournalOptions {
            segment_size_bytes: 1 << 20,
        },
    )
    .unwrap();
    let (tx, rx) = unbounded();
    let parts = SequencerParts {
        engine,
        journal,
        sinks: vec![Box::new(ChannelSink(tx))],
        events: Vec::new(),
        replication: None,
        board: None,
    };
    let config = SequencerConfig {
        durability: Durability::Sync,
        ..SequencerConfig::default()
    };
    let (handle, mut submitters) = start(config, parts, 1).unwrap();
    (handle, submitters.remove(0), rx)
}

fn deposit(n: u8) -> Command {
    Command::Deposit {
        address: Address([n; 20]),
        asset: Asset::Collateral,
        amount: 1_000_000 * u64::from(n),
    }
}

#[test]
fn commands_are_sequenced_answered_and_recovered_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, submitter, completions) = start_on(dir.path());
    for n in 1..=20u8 {
        let ticket = Ticket {
            sink: 0,
            token: u64::from(n),
        };
        submitter
            .try_submit(Submission {
                ticket,
                work: Work::Command(deposit(n)),
            })
            .unwrap();
    }
    let mut seqs = Vec::new();
    for _ in 0..20 {
        match completions.recv_timeout(Duration::from_secs(5)).unwrap() {
            Completion::Applied { ticket, seq, reply } => {
                assert_eq!(reply, Reply::Ok);
                seqs.push((ticket.token, seq));
            }
            _ => panic!("expected an applied command"),
        }
    }
    assert_eq!(
        seqs,
        (1..=20).map(|n| (n, n)).collect::<Vec<_>>(),
        "in order, seq from 1"
    );
    let flushes = handle.stats.flushes.count();
    let batches = handle
        .stats
        .batches
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        (1..=batches).contains(&flushes),
        "each synced batch flushed once at most ({flushes} flushes, {batches} batches)"
    );
    assert!(
        handle
            .stats
            .flushes
            .sum_ns
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    let (query, hash) = ladder_sequencer::query(|engine: &Engine| engine.state_hash());
    submitter
        .try_submit(Submission {
            ticket: Ticket { sink: 0, token: 99 },
            work: Work::Query(query),
        })
        .unwrap();
    let live_hash = match completions.recv_timeout(Duration::from_secs(5)).unwrap() {
        Completion::Answered { .. } => hash.take().expect("the query left its value"),
        _ => panic!("expected an answer"),
    };
    let engine = handle.stop().unwrap();
    assert_eq!(engine.state_hash(), live_hash);
    let (replayed, info) = recover_engine(dir.path(), EngineLimits::default(), None).unwrap();
    assert_eq!(info.replayed, 20);
    assert_eq!(replayed.state_hash(), live_hash);
    let (partial, _) = recover_engine(dir.path(), EngineLimits::default(), Some(10)).unwrap();
    assert_eq!(partial.last_seq(), 10);

    ladder_journal::write_snapshot(dir.path(), 20, &replayed.snapshot_bytes()).unwrap();
    let (handle, submitter, completions) = start_on(dir.path());
    submitter
        .try_submit(Submission {
            ticket: Ticket { sink: 0, token: 21 },
            work: Work::Command(deposit(21)),
        })
        .unwrap();
    match completions.recv_timeout(Duration::from_secs(5)).unwrap() {
        Completion::Applied { seq, .. } => {
            assert_eq!(seq, 21, "numbering continues after the snapshot")
        }
        _ => panic!("expected an applied command"),
    }
    let engine = handle.stop().unwrap();
    let (from_snapshot, info) = recover_engine(dir.path(), EngineLimits::default(), None).unwrap();
    assert_eq!((info.snapshot_seq, info.replayed), (20, 1));
    assert_eq!(from_snapshot.state_hash(), engine.state_hash());
}

/// A sink whose deliveries wait while the test holds its gate (answers stalled: a disk
/// that does not flush, a standby that does not acknowledge).
struct GatedSink {
    tx: Sender<Completion>,
    gate: std::sync::Arc<std::sync::Mutex<()>>,
}

impl CompletionSink for GatedSink {
    fn deliver(&mut self, completions: Vec<Completion>) {
        let _open = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        for c in completions {
            let _ = self.tx.send(c);
        }
    }
}

/// While answers stall, a key whose beat's answer has not reached its client is not
/// expired: once answers flow again its deadline is pushed back by the stall. The beat is
/// released by the sequencer itself (it waits in the sink).
#[test]
fn a_key_whose_beat_answer_is_held_by_a_stall_does_not_expire() {
    beat_held_by_a_stall(0);
}

/// The same with the beat behind a burst of writes: released by the committer thread while
/// the sequencer goes on (and looks at the deadlines meanwhile).
#[test]
fn a_key_whose_beat_answer_the_committer_holds_does_not_expire() {
    beat_held_by_a_stall(40);
}

/// A beat on time whose answer a stalled sink holds for three timeouts, behind `burst`
/// deposits submitted with it.
fn beat_held_by_a_stall(burst: u64) {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(dir.path(), JournalOptions::default()).unwrap();
    let (tx, rx) = unbounded();
    let gate = std::sync::Arc::new(std::sync::Mutex::new(()));
    let parts = SequencerParts {
        engine: Engine::new(EngineLimits::default()),
        journal,
        sinks: vec![Box::new(GatedSink {
            tx,
            gate: gate.clone(),
        })],
        events: Vec::new(),
        replication: None,
        board: None,
    };
    let config = SequencerConfig {
        durability: Durability::Sync,
        heartbeat_timeout: Duration::from_millis(500),
        ..SequencerConfig::default()
    };
    let (handle, submitters) = start(config, parts, 1).unwrap();
    let submitter = &submitters[0];
    let key_id = [9; 16];
    let address = Address([1; 20]);
    let submit = |token, work| {
        let ticket = Ticket { sink: 0, token };
        submitter.try_submit(Submission { ticket, work }).unwrap();
    };
    let heartbeat = |op| {
        Work::Heartbeat(HeartbeatRequest {
            key_id,
            address,
            op,
        })
    };
    let beating = |completion| match completion {
        Completion::Heartbeat {
            answer: HeartbeatAnswer::Beating { heartbeat_id },
            ..
        } => heartbeat_id,
        _ => panic!("expected a running heartbeat"),
    };
    submit(
        1,
        Work::Command(Command::CreateCountedApiKey {
            spec: ApiKeySpec {
                address,
                signer: address,
                key_id,
                nonce: FixedBytes([0; 32]),
                max_keys_per_address: 5,
            },
            creations_before: 0,
        }),
    );
    assert!(matches!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        Completion::Applied {
            reply: Reply::Ok,
            ..
        }
    ));
    submit(2, heartbeat(HeartbeatOp::Start));
    let id = beating(rx.recv_timeout(Duration::from_secs(5)).unwrap());

    // A beat on time whose answer is held for three timeouts.
    let stalled = gate.lock().unwrap();
    for n in 0..burst {
        submit(100 + n, Work::Command(deposit(1)));
    }
    submit(3, heartbeat(HeartbeatOp::Beat(id)));
    std::thread::sleep(Duration::from_millis(1_500));
    drop(stalled);
    let id = loop {
        match rx.recv_timeout(Duration::from_secs(5)).unwrap() {
            Completion::Applied { .. } => continue,
            beat => break beating(beat),
        }
    };
    // Its client beats again at once: still running.
    std::thread::sleep(Duration::from_millis(100));
    submit(4, heartbeat(HeartbeatOp::Beat(id)));
    beating(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    assert_eq!(
        handle
            .stats
            .heartbeat_expiries
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    // It stops beating: it expires a timeout later.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while handle
        .stats
        .heartbeat_expiries
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
    {
        assert!(std::time::Instant::now() < deadline, "never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    handle.stop().expect("the engine back");
}

/// A sequencer with a client sink and an internal one, short of the one standby it needs,
/// to which each sink has sent one deposit (address 1 from the client, 2 from the runtime).
fn client_and_runtime_deposits(
    dir: &std::path::Path,
    config: SequencerConfig,
) -> (
    SequencerHandle,
    Receiver<Completion>,
    Receiver<Completion>,
    Vec<Submitter>,
) {
    let (journal, _) = Journal::open(dir, JournalOptions::default()).unwrap();
    let (client_tx, client_rx) = unbounded();
    let (internal_tx, internal_rx) = unbounded();
    let parts = SequencerParts {
        engine: Engine::new(EngineLimits::default()),
        journal,
        sinks: vec![
            Box::new(ChannelSink(client_tx)),
            Box::new(ChannelSink(internal_tx)),
        ],
        events: Vec::new(),
        replication: Some(std::sync::Arc::new(replication::ReplicationHub::new(1, 0))),
        board: None,
    };
    let config = SequencerConfig {
        client_sinks: 1,
        ..config
    };
    let (handle, submitters) = start(config, parts, 2).unwrap();
    for (sink, submitter) in submitters.iter().enumerate() {
        let ticket = Ticket {
            sink: sink as u16,
            token: 1,
        };
        submitter
            .try_submit(Submission {
                ticket,
                work: Work::Command(deposit(sink as u8 + 1)),
            })
            .unwrap();
    }
    (handle, client_rx, internal_rx, submitters)
}

/// With fewer standbys connected than required, a client's write is refused before it is
/// journaled or applied (its 503 changed nothing); the runtime's own work (sinks past
/// `client_sinks`) is applied regardless.
#[test]
fn without_the_required_standby_client_writes_are_refused_unapplied() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, client_rx, internal_rx, _) =
        client_and_runtime_deposits(dir.path(), SequencerConfig::default());
    // The client's write is refused before anything is journaled; the internal one is
    // applied, and answered as not confirmed by a standby.
    for (rx, expected) in [
        (&client_rx, REPLICA_UNAVAILABLE),
        (&internal_rx, REPLICA_LOST),
    ] {
        match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            Completion::Refused { reason, .. } => assert_eq!(reason, expected),
            _ => panic!("without its standby nothing is acknowledged"),
        }
    }
    let engine = handle.stop().expect("the engine back");
    // Only the internal deposit (address 2) was journaled and applied.
    assert_eq!(engine.last_seq(), 1);
    assert_eq!(engine.balance(&Address([1; 20]), Asset::Collateral).free, 0);
    assert_eq!(
        engine.balance(&Address([2; 20]), Asset::Collateral).free,
        2_000_000
    );
}

/// With fewer standbys connected than required, a client's heartbeat start or stop is
/// refused as a write is, and a beat, which journals nothing, is taken (here answered for a
/// key whose heartbeats do not run): a standby's outage does not expire a beating key.
#[test]
fn without_the_required_standby_beats_are_taken_and_starts_and_stops_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, client_rx, internal_rx, submitters) =
        client_and_runtime_deposits(dir.path(), SequencerConfig::default());
    assert!(matches!(
        internal_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        Completion::Refused {
            reason: REPLICA_LOST,
            ..
        }
    ));
    assert!(matches!(
        client_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        Completion::Refused {
            reason: REPLICA_UNAVAILABLE,
            ..
        }
    ));
    let submitter = &submitters[0];
    for (token, op) in [
        (2, HeartbeatOp::Start),
        (3, HeartbeatOp::Beat("an id".into())),
        (4, HeartbeatOp::Stop),
    ] {
        let work = Work::Heartbeat(HeartbeatRequest {
            key_id: [9; 16],
            address: Address([1; 20]),
            op: op.clone(),
        });
        let ticket = Ticket { sink: 0, token };
        submitter.try_submit(Submission { ticket, work }).unwrap();
        let completion = client_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        match (&op, completion) {
            (
                HeartbeatOp::Beat(_),
                Completion::Heartbeat {
                    answer, journaled, ..
                },
            ) => {
                assert_eq!(answer, HeartbeatAnswer::WrongId { current: None });
                assert!(!journaled);
            }
            (_, Completion::Refused { reason, .. }) => {
                assert!(op.journals());
                assert_eq!(reason, REPLICA_UNAVAILABLE);
            }
            (op, _) => panic!("{op:?}: neither taken as a beat nor refused as a write"),
        }
    }
    let engine = handle.stop().expect("the engine back");
    assert_eq!(
        engine.last_seq(),
        1,
        "only the runtime's deposit was journaled"
    );
}

/// A leader past its lease's deadline (its acknowledgement fence closed) is a standby
/// already: a client's write is refused `standby: not primary` before it is journaled (not
/// `replica unavailable`, though its standby is gone too), and so is the runtime's own work
/// (it sends it again), so that nothing reaches the journal or the feeds to be cut later.
#[test]
fn past_the_lease_deadline_writes_are_refused_unapplied_as_from_a_standby() {
    let dir = tempfile::tempdir().unwrap();
    let fence = std::sync::Arc::new(AckFence::closed());
    fence.allow_until(Some(std::time::Instant::now() - Duration::from_millis(1)));
    let config = SequencerConfig {
        ack_fence: fence,
        ..SequencerConfig::default()
    };
    let (handle, client_rx, internal_rx, _) = client_and_runtime_deposits(dir.path(), config);
    for rx in [&client_rx, &internal_rx] {
        match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            Completion::Refused { reason, .. } => assert_eq!(reason, STANDBY_REFUSAL),
            _ => panic!("past the deadline nothing is acknowledged"),
        }
    }
    let engine = handle.stop().expect("the engine back");
    assert_eq!(engine.last_seq(), 0, "nothing was journaled");
    assert_eq!(engine.balance(&Address([2; 20]), Asset::Collateral).free, 0);
}

/// Counts the events of each batch published to the feeds.
struct CountingPublisher(Sender<usize>);

impl Publisher for CountingPublisher {
    fn publish(&mut self, batch: &PublishedBatch) {
        let _ = self.0.send(batch.event_count());
    }
}

/// A write applied before the lease's deadline and released after it (its standby's
/// acknowledgement came late) is answered `leadership lost`, and its events reach no feed
/// while the fence stays closed: if the next leader cuts the record, nobody saw it. Once the
/// lease is renewed (the node still leads, the record stands) they are published.
#[test]
fn a_write_released_past_the_deadline_publishes_nothing_until_the_lease_is_renewed() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(dir.path(), JournalOptions::default()).unwrap();
    let (client_tx, client_rx) = unbounded();
    let (events_tx, events_rx) = unbounded();
    let hub = std::sync::Arc::new(replication::ReplicationHub::new(1, 0));
    let standby = hub.register(1);
    let fence = std::sync::Arc::new(AckFence::closed());
    let renewed = || Some(std::time::Instant::now() + Duration::from_secs(60));
    fence.allow_until(renewed());
    let parts = SequencerParts {
        engine: Engine::new(EngineLimits::default()),
        journal,
        sinks: vec![Box::new(ChannelSink(client_tx))],
        events: vec![EventConsumer::Inline(Box::new(CountingPublisher(
            events_tx,
        )))],
        replication: Some(hub.clone()),
        board: None,
    };
    let config = SequencerConfig {
        ack_fence: fence.clone(),
        ..SequencerConfig::default()
    };
    let (handle, submitters) = start(config, parts, 1).unwrap();
    let market = MarketSpec {
        condition_id: FixedBytes([0xc1; 32]),
        yes_token_id: FixedBytes([0x11; 32]),
        no_token_id: FixedBytes([0x21; 32]),
        tick_size_ticks: 100,
        min_order_size_units: UNITS_PER_SHARE,
        neg_risk: false,
        taker_delay_ms: 0,
        fee_rate_bps: 0,
    };
    submitters[0]
        .try_submit(Submission {
            ticket: Ticket { sink: 0, token: 1 },
            work: Work::Command(Command::CreateMarket(market)),
        })
        .unwrap();
    // Journaled and waiting for the standby; the deadline passes meanwhile.
    assert_eq!(hub.wait_written_after(0, Duration::from_secs(10)), 1);
    fence.allow_until(Some(std::time::Instant::now() - Duration::from_millis(1)));
    hub.ack(standby, 1);
    match client_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
        Completion::Refused { reason, .. } => assert_eq!(reason, LEADERSHIP_LOST),
        _ => panic!("released past the deadline: not acknowledged"),
    }
    assert!(
        events_rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "a write released past the deadline reached the feeds"
    );
    // The lease is renewed: the record stands and its events go out.
    fence.allow_until(renewed());
    let published = events_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the withheld events once the lease is renewed");
    assert!(published > 0);
    let engine = handle.stop().expect("the engine back");
    assert_eq!(engine.last_seq(), 1);
}
