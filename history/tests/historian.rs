//! The historian against a real journal: it stores every final trade and closed order of the
//! journal exactly once, across stops and restarts, answers the trade reads as the engine does,
//! writes snapshots the service can start from, and sets a store past the journal's end back.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ladder_engine::*;
use ladder_history::{Historian, HistorianConfig};
use ladder_journal::{Durability, Journal, JournalOptions};
use ladder_sequencer::{encode_command, HistoryReads, RECORD_COMMAND_V1};

const CONDITION: Bytes32 = FixedBytes([0x3b; 32]);
const YES: Bytes32 = FixedBytes([0x01; 32]);
const NO: Bytes32 = FixedBytes([0x02; 32]);
const SHARE: u64 = UNITS_PER_SHARE;
const START_NS: u64 = 1_700_000_000 * NANOS_PER_SECOND;

fn trader(n: u8) -> Address {
    Address([n; 20])
}

/// A stream of commands with trades (some settled to CONFIRMED, one batch FAILED, the last
/// ones left MATCHED) and cancels, applied to `engine` as it is built: the journal it writes
/// and the engine that holds everything (it is never told to forget).
struct Stream {
    engine: Engine,
    commands: Vec<(u64, Command)>,
    salt: u8,
}

impl Stream {
    fn new() -> Stream {
        let mut stream = Stream {
            engine: Engine::default(),
            commands: Vec::new(),
            salt: 0,
        };
        stream.push(Command::CreateMarket(MarketSpec {
            condition_id: CONDITION,
            yes_token_id: YES,
            no_token_id: NO,
            tick_size_ticks: 100,
            min_order_size_units: SHARE,
            neg_risk: false,
            taker_delay_ms: 0,
            fee_rate_bps: 0,
        }));
        for n in 1..=3 {
            stream.push(Command::LinkAccount {
                account: trader(n),
                owner: trader(n),
            });
            for asset in [Asset::Collateral, Asset::Token(YES), Asset::Token(NO)] {
                stream.push(Command::Deposit {
                    address: trader(n),
                    asset,
                    amount: 10_000 * SHARE,
                });
            }
        }
        stream
    }

    fn push(&mut self, command: Command) -> Reply {
        let seq = self.commands.len() as u64 + 1;
        let now_ns = START_NS + seq * 1_000_000_000;
        let reply = self.engine.apply(seq, now_ns, &command);
        self.commands.push((now_ns, command));
        reply
    }

    fn order(&mut self, n: u8, token: TokenId, side: Side, price: u32, shares: u64) -> Reply {
        self.salt += 1;
        self.push(Command::PlaceOrder(NewOrder {
            order_hash: FixedBytes([self.salt; 32]),
            maker: trader(n),
            signer: trader(n),
            token_id: token,
            side,
            price_ticks: price,
            size_units: shares * SHARE,
            order_type: if side == Side::Sell {
                OrderType::Fak
            } else {
                OrderType::Gtc
            },
            post_only: false,
            expiration_s: 0,
            signer_verified: false,
            signed: None,
        }))
    }

    /// The batches made so far, oldest first.
    fn batches(&self) -> Vec<Hash32> {
        let mut hashes: Vec<Hash32> = Vec::new();
        for trade in self.engine.held_trades() {
            if hashes.last() != Some(&trade.transaction_hash) {
                hashes.push(trade.transaction_hash);
            }
        }
        hashes
    }

    fn settle(&mut self, batch: Hash32, statuses: &[TradeStatus]) {
        for &status in statuses {
            let reply = self.push(Command::SettlementUpdate {
                transaction_hash: batch,
                status,
            });
            assert_eq!(reply, Reply::Ok);
        }
    }

    /// The standard stream: 12 trades in 12 batches on both tokens, by two takers; 9 batches
    /// confirmed, one failed, two left matched; two orders cancelled.
    fn standard() -> Stream {
        let mut s = Stream::new();
        s.order(1, YES, Side::Buy, 5_000, 100);
        s.order(1, NO, Side::Buy, 4_000, 100);
        for i in 0..12u32 {
            let taker = 2 + (i % 2) as u8;
            let token = if i % 3 == 0 { NO } else { YES };
            let price = if token == YES { 5_000 } else { 4_000 };
            s.order(taker, token, Side::Sell, price, u64::from(1 + i % 4));
        }
        let batches = s.batches();
        assert_eq!(batches.len(), 12);
        for (i, batch) in batches.iter().enumerate().take(10) {
            if i == 4 {
                s.settle(*batch, &[TradeStatus::Retrying, TradeStatus::Failed]);
            } else {
                s.settle(*batch, &[TradeStatus::Mined, TradeStatus::Confirmed]);
            }
        }
        s.order(3, YES, Side::Buy, 1_000, 5);
        s.push(Command::CancelAll {
            requester: trader(3),
        });
        s.push(Command::CancelAll {
            requester: trader(1),
        });
        s
    }

    fn write_journal(&self, data_dir: &Path) {
        let (mut journal, _) = Journal::open(data_dir, JournalOptions::default()).unwrap();
        let mut bytes = Vec::new();
        for (i, (now_ns, command)) in self.commands.iter().enumerate() {
            encode_command(command, &mut bytes);
            journal
                .append(i as u64 + 1, *now_ns, RECORD_COMMAND_V1, &bytes)
                .unwrap();
        }
        journal.commit(Durability::Sync).unwrap();
    }

    fn final_trades(&self) -> Vec<TradeView> {
        self.engine
            .held_trades()
            .filter(|t| t.status.is_final())
            .copied()
            .collect()
    }
}

fn start(data_dir: &Path, released: Arc<AtomicU64>, journal_last_seq: u64) -> Historian {
    Historian::start(HistorianConfig {
        data_dir: data_dir.to_path_buf(),
        limits: EngineLimits::default(),
        released: Arc::new(move || released.load(Ordering::Acquire)),
        snapshot_every: 10,
        keep_snapshots: 2,
        journal_last_seq,
        journal_full: Arc::new(|| false),
        standby_floor: Arc::new(|| u64::MAX),
        journal_archive: None,
        prices_stored_below: Arc::new(|_| {}),
    })
    .expect("historian starts")
}

fn stored_rows(data_dir: &Path, table: &str) -> i64 {
    let db = rusqlite::Connection::open(data_dir.join("history.db")).unwrap();
    db.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[test]
fn every_final_trade_and_closed_order_is_stored_once_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let stream = Stream::standard();
    stream.write_journal(dir.path());
    let last = stream.commands.len() as u64;
    let released = Arc::new(AtomicU64::new(last / 2));

    let historian = start(dir.path(), released.clone(), last);
    assert!(historian.wait_stored(last / 2, Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        historian.stored_through(),
        last / 2,
        "reads no unreleased record"
    );
    historian.stop();

    released.store(last, Ordering::Release);
    let historian = start(dir.path(), released.clone(), last);
    assert!(historian.wait_stored(last, Duration::from_secs(10)));
    let finals = stream.final_trades();
    assert_eq!(finals.len(), 10);
    assert_eq!(stored_rows(dir.path(), "trades"), finals.len() as i64);
    let reader = historian.reader();
    for trade in &finals {
        assert_eq!(reader.trade(trade.index).unwrap().as_ref(), Some(trade));
    }
    let matched: Vec<_> = stream
        .engine
        .held_trades()
        .filter(|t| !t.status.is_final())
        .collect();
    assert_eq!(matched.len(), 2);
    assert!(matched
        .iter()
        .all(|t| reader.trade(t.index).unwrap().is_none()));
    // Trader 1's two resting bids and trader 3's bid were cancelled; all 12 FAK sells filled.
    assert_eq!(stored_rows(dir.path(), "orders"), 15);
    assert_eq!(stored_rows(dir.path(), "prices"), 12, "every trade's price");
    // Order 3 is the first sell (trader 2's, filled); order 1 trader 1's bid (cancelled at
    // the end); the last order, trader 3's bid, too.
    assert_eq!(
        reader.closed_order(3).unwrap(),
        Some((trader(2), OrderStatus::Matched))
    );
    assert_eq!(
        reader.closed_order(1).unwrap(),
        Some((trader(1), OrderStatus::Canceled))
    );
    assert_eq!(reader.closed_order(99).unwrap(), None);
    assert!(reader.order_hash_stored(&FixedBytes([3; 32])).unwrap());
    assert!(!reader.order_hash_stored(&FixedBytes([99; 32])).unwrap());
    historian.stop();

    // Once more from the start of the journal: nothing changes.
    let historian = start(dir.path(), released, last);
    assert!(historian.wait_stored(last, Duration::from_secs(10)));
    historian.stop();
    assert_eq!(stored_rows(dir.path(), "trades"), finals.len() as i64);
    assert_eq!(stored_rows(dir.path(), "orders"), 15);
}

#[test]
fn the_store_answers_trade_lists_as_the_engine_does() {
    let dir = tempfile::tempdir().unwrap();
    let stream = Stream::standard();
    stream.write_journal(dir.path());
    let last = stream.commands.len() as u64;
    let historian = start(dir.path(), Arc::new(AtomicU64::new(last)), last);
    assert!(historian.wait_stored(last, Duration::from_secs(10)));
    let reader = historian.reader();
    let some_trade = stream.final_trades()[3];
    let match_s = some_trade.match_time_ns / NANOS_PER_SECOND;
    let filters = [
        TradeFilter::default(),
        TradeFilter {
            market: Some(CONDITION),
            ..TradeFilter::default()
        },
        TradeFilter {
            market: Some(FixedBytes([9; 32])),
            ..TradeFilter::default()
        },
        TradeFilter {
            token_id: Some(YES),
            ..TradeFilter::default()
        },
        TradeFilter {
            token_id: Some(NO),
            ..TradeFilter::default()
        },
        TradeFilter {
            id: Some(some_trade.id),
            ..TradeFilter::default()
        },
        TradeFilter {
            maker_address: Some(trader(3)),
            ..TradeFilter::default()
        },
        TradeFilter {
            before_s: Some(match_s),
            ..TradeFilter::default()
        },
        TradeFilter {
            after_s: Some(match_s),
            ..TradeFilter::default()
        },
        TradeFilter {
            before_s: Some(match_s + 1),
            after_s: Some(match_s - 1),
            ..TradeFilter::default()
        },
    ];
    for address in [trader(1), trader(2), trader(3), trader(4)] {
        for filter in &filters {
            let expected: Vec<TradeView> = stream
                .engine
                .trades_of(&address, filter)
                .into_iter()
                .filter(|t| t.status.is_final())
                .collect();
            for limit in [1, 3, 100] {
                let stored = reader.trades_of(&address, filter, limit).unwrap();
                let want: Vec<_> = expected.iter().take(limit).copied().collect();
                assert_eq!(stored, want, "{address:?} {filter:?} limit {limit}");
            }
        }
    }
    historian.stop();
}

#[test]
fn the_store_answers_price_history_by_the_last_trade_of_each_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let stream = Stream::standard();
    stream.write_journal(dir.path());
    let last = stream.commands.len() as u64;
    let historian = start(dir.path(), Arc::new(AtomicU64::new(last)), last);
    assert!(historian.wait_stored(last, Duration::from_secs(10)));
    let reader = historian.reader();
    let trades: Vec<TradeView> = stream.engine.held_trades().copied().collect();
    for outcome in [Outcome::Yes, Outcome::No] {
        for bucket_s in [1u64, 7, 60, 3_600] {
            // The last trade of the token in each bucket, by the engine's own trades: a
            // trade is the token's when the taker's or the maker's order is on it.
            let mut expected: Vec<(u64, u32, u64)> = Vec::new();
            for t in trades
                .iter()
                .filter(|t| t.taker.outcome == outcome || t.maker.outcome == outcome)
            {
                let time_s = t.match_time_ns / NANOS_PER_SECOND;
                let start = time_s - time_s % bucket_s;
                let yes = ladder_sequencer::token_price(t.taker.outcome, t.taker.price_ticks);
                match expected.last_mut() {
                    Some(last) if last.0 == start => *last = (start, yes, t.index),
                    _ => expected.push((start, yes, t.index)),
                }
            }
            let stored: Vec<(u64, u32, u64)> = reader
                .price_buckets(&CONDITION, outcome, 0, u64::MAX, bucket_s, 1_000)
                .unwrap()
                .iter()
                .map(|b| (b.start_s, b.yes_price_ticks, b.trade_index))
                .collect();
            assert_eq!(stored, expected, "{outcome:?}, buckets of {bucket_s} s");
            let two = reader
                .price_buckets(&CONDITION, outcome, 0, u64::MAX, bucket_s, 2)
                .unwrap();
            assert_eq!(two.len(), expected.len().min(2));
        }
    }
    assert!(reader
        .price_buckets(&FixedBytes([9; 32]), Outcome::Yes, 0, u64::MAX, 60, 10)
        .unwrap()
        .is_empty());
    historian.stop();
}

#[test]
fn snapshots_are_written_off_the_sequencer_and_restore_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let stream = Stream::standard();
    stream.write_journal(dir.path());
    let last = stream.commands.len() as u64;
    // Released a few records at a time, as a running service releases them (a snapshot is
    // written at most once per commit).
    let released = Arc::new(AtomicU64::new(0));
    let historian = start(dir.path(), released.clone(), last);
    for seq in (5..=last).step_by(5).chain([last]) {
        released.store(seq, Ordering::Release);
        assert!(historian.wait_stored(seq, Duration::from_secs(10)));
    }
    historian.stop();
    let snapshot = ladder_journal::latest_valid_snapshot(dir.path())
        .unwrap()
        .expect("a snapshot every 10 records");
    assert!(snapshot.seq >= last - 10 && snapshot.seq <= last);
    let mut restored = Engine::from_snapshot_bytes(&snapshot.payload).unwrap();
    let mut replay = Engine::default();
    for (i, (now_ns, command)) in stream.commands.iter().enumerate() {
        let seq = i as u64 + 1;
        replay.apply(seq, *now_ns, command);
        if seq > snapshot.seq {
            restored.apply(seq, *now_ns, command);
        }
        if seq == snapshot.seq {
            assert_eq!(restored.state_hash(), replay.state_hash());
        }
    }
    assert_eq!(restored.state_hash(), stream.engine.state_hash());
    let kept = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .count();
    assert_eq!(kept, 2, "--keep-snapshots");
}

#[test]
fn a_store_past_the_journals_end_is_set_back() {
    let dir = tempfile::tempdir().unwrap();
    let stream = Stream::standard();
    stream.write_journal(dir.path());
    let last = stream.commands.len() as u64;
    let historian = start(dir.path(), Arc::new(AtomicU64::new(last)), last);
    assert!(historian.wait_stored(last, Duration::from_secs(10)));
    historian.stop();
    // As if the journal had lost its records after the first settlement's confirmation.
    let first_final = stream
        .final_trades()
        .iter()
        .map(|t| t.last_update_ns)
        .min()
        .unwrap();
    let cut = (first_final - START_NS) / 1_000_000_000;
    let historian = start(dir.path(), Arc::new(AtomicU64::new(cut)), cut);
    assert_eq!(historian.stored_through(), cut);
    historian.stop();
    assert_eq!(
        stored_rows(dir.path(), "trades"),
        1,
        "only the first final trade"
    );
}
