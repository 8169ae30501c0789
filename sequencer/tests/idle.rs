//! An idle sequencer waits instead of spinning, also once a producer has gone away (its ring
//! disconnected): a ring that is "ready" forever must not turn the wait into a busy loop.
//! Its own test binary, so that its sequencer is the only thread of that name.

use std::time::Duration;

use crossbeam_channel::{unbounded, Sender};
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

/// CPU time (user + system) of this process's thread named `sequencer`, in clock ticks.
fn sequencer_cpu_ticks() -> u64 {
    let mut total = None;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() != "sequencer" {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        // utime and stime are fields 14 and 15 of proc(5); index 0 here is field 3.
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        assert!(total.is_none(), "one sequencer thread expected");
        total = Some(ticks);
    }
    total.expect("the sequencer thread")
}

#[test]
fn a_sequencer_whose_producer_left_waits_without_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = recover_engine(dir.path(), EngineLimits::default(), None).unwrap();
    let (journal, _) = Journal::open(dir.path(), JournalOptions::default()).unwrap();
    let (tx, completions) = unbounded();
    let parts = SequencerParts {
        engine,
        journal,
        sinks: vec![Box::new(ChannelSink(tx))],
        events: Vec::new(),
        replication: None,
        board: None,
    };
    let config = SequencerConfig {
        durability: Durability::Async,
        ..SequencerConfig::default()
    };
    let (handle, mut submitters) = start(config, parts, 2).unwrap();
    let staying = submitters.pop().unwrap();
    let leaving = submitters.pop().unwrap();
    let deposit = Command::Deposit {
        address: Address([7; 20]),
        asset: Asset::Collateral,
        amount: 1_000_000,
    };
    leaving
        .try_submit(Submission {
            ticket: Ticket { sink: 0, token: 1 },
            work: Work::Command(deposit.clone()),
        })
        .unwrap();
    assert!(matches!(
        completions.recv_timeout(Duration::from_secs(5)).unwrap(),
        Completion::Applied { .. }
    ));
    drop(leaving);
    std::thread::sleep(Duration::from_millis(100));
    let before = sequencer_cpu_ticks();
    std::thread::sleep(Duration::from_millis(1_000));
    let spent = sequencer_cpu_ticks() - before;
    // SAFETY: sysconf reads a configuration value.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    // Waiting costs next to nothing; a spin would take most of the second (or all of it).
    assert!(
        spent * 10 < ticks_per_s,
        "the idle sequencer used {spent} ticks of CPU in 1 s ({ticks_per_s} ticks/s)"
    );
    // The ring that stayed still works.
    staying
        .try_submit(Submission {
            ticket: Ticket { sink: 0, token: 2 },
            work: Work::Command(deposit),
        })
        .unwrap();
    assert!(matches!(
        completions.recv_timeout(Duration::from_secs(5)).unwrap(),
        Completion::Applied { .. }
    ));
    drop(staying);
    handle.stop().expect("the engine back");
}
