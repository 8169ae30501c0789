//! Black-box checks of bounded state (API.md §19, "History and bounded state"): a final trade leaves the engine once the
//! history store (`history.db`) holds it, and every read answers the same whether the trade
//! is in the engine or in the store; the store survives SIGKILL with every final trade
//! exactly once; operators can read it with SQLite while the service runs.

mod helpers;
mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use helpers::*;
use ladder_client::Trader;
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::{json, Value};
use support::*;

fn get_json(trader: &mut Trader, path: &str) -> Value {
    let r = trader.send("GET", path, None).unwrap();
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.json()
}

/// Sells `n` times 1..=n shares into `maker`'s resting bid: the trade ids, oldest first.
fn trades_into(taker: &mut Trader, n: u64) -> Vec<String> {
    (1..=n)
        .map(|shares| {
            let p = place(taker, yes(), Side::Sell, 5_000, shares, OrderType::Fak);
            assert_eq!(p["status"], json!("matched"), "{p}");
            p["tradeIds"][0].as_str().unwrap().to_string()
        })
        .collect()
}

/// Waits until the gauge `name` in `/metrics` reads `value`.
fn wait_gauge(service: &Service, name: &str, value: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now: u64 = metric(service, name).parse().unwrap();
        if now == value {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} is still {now}, not {value}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the engine holds `held` trades (`ladder_engine_trades_held`).
fn wait_held(service: &Service, held: u64) {
    wait_gauge(service, "ladder_engine_trades_held", held);
}

/// Waits until every trade of `ids` reads CONFIRMED for `trader`.
fn wait_confirmed(trader: &mut Trader, ids: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for id in ids {
        while get_json(trader, &format!("/trades/{id}"))["status"] != json!("CONFIRMED") {
            assert!(Instant::now() < deadline, "{id} never CONFIRMED");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Every read of trades that can be asked of `trader`: each trade by id, the list, its pages
/// and its filters.
fn trade_reads(trader: &mut Trader, ids: &[String]) -> Vec<(String, Value)> {
    let mut paths: Vec<String> = ids.iter().map(|id| format!("/trades/{id}")).collect();
    paths.extend(
        [
            "/trades",
            "/data/trades",
            "/trades?limit=2",
            "/trades?limit=2&next_cursor=Mg==",
            "/trades?limit=2&next_cursor=NA==",
            &format!("/trades?market={CONDITION_ID}"),
            &format!("/trades?asset_id={}", yes()),
            &format!("/trades?asset_id={}", no()),
            "/trades?before=1&after=0",
        ]
        .map(str::to_string),
    );
    paths.extend(ids.iter().map(|id| format!("/trades?id={id}")));
    paths
        .into_iter()
        .map(|path| {
            let answer = get_json(trader, &path);
            (path, answer)
        })
        .collect()
}

/// The trade ids in `history.db`, read as an operator's `sqlite3` would, and how many rows.
fn stored_trade_ids(data_dir: &Path) -> (BTreeSet<String>, usize) {
    let db = rusqlite::Connection::open_with_flags(
        data_dir.join("history.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("history.db opens read-only");
    let mut statement = db
        .prepare("SELECT trade_id, status FROM trades ORDER BY trade_index")
        .unwrap();
    let rows: Vec<(String, String)> = statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        rows.iter().all(|(_, status)| status == "CONFIRMED"),
        "{rows:?}"
    );
    let count = rows.len();
    (rows.into_iter().map(|(id, _)| id).collect(), count)
}

#[test]
fn a_trade_that_left_the_engine_reads_the_same_as_one_still_in_it() {
    let service = Service::start(&["--settlement-delay-ms", "50"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 60);
    let first = trades_into(&mut bob, 4);
    wait_confirmed(&mut alice, &first);
    let before_alice = trade_reads(&mut alice, &first);
    let before_bob = trade_reads(&mut bob, &first);

    wait_held(&service, 0);
    assert_eq!(
        trade_reads(&mut alice, &first),
        before_alice,
        "maker's reads"
    );
    assert_eq!(trade_reads(&mut bob, &first), before_bob, "taker's reads");
    let (stored, rows) = stored_trade_ids(service.data_dir());
    assert_eq!(stored, first.iter().cloned().collect::<BTreeSet<_>>());
    assert_eq!(rows, first.len(), "each trade once");
    // Alice's open order and Bob's four filled ones: forgotten, their hashes still refused by
    // the engine itself for 2^18 records.
    assert_eq!(metric(&service, "ladder_engine_order_hashes_held"), "5");
    let stored_seq: u64 = metric(&service, "ladder_history_stored_seq")
        .parse()
        .unwrap();
    assert!(stored_seq > 0);

    // Across the boundary: new trades still in the engine list before the stored ones,
    // newest first, and a walk through the pages meets every trade once.
    let second = trades_into(&mut bob, 3);
    let all: Vec<String> = first.iter().chain(&second).rev().cloned().collect();
    let listed: Vec<String> = get_json(&mut alice, "/trades")["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, all);
    let mut walked = Vec::new();
    let mut cursor = String::new();
    while cursor != "LTE=" {
        let page = get_json(&mut alice, &format!("/trades?limit=3&next_cursor={cursor}"));
        walked.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_string()),
        );
        cursor = page["next_cursor"].as_str().unwrap().to_string();
    }
    assert_eq!(walked, all);
    for id in &first {
        let r = alice.send("GET", &format!("/trades/{id}"), None).unwrap();
        assert_eq!(r.status, 200);
    }
    // A stranger sees none of them, stored or not.
    let mut carol = new_trader(&service, 1_000_000);
    for id in all.iter() {
        let r = carol.send("GET", &format!("/trades/{id}"), None).unwrap();
        assert_eq!(r.status, 404, "{id}: {}", r.body);
    }
    assert_eq!(get_json(&mut carol, "/trades")["count"], json!(0));
}

#[test]
fn after_sigkill_the_store_has_every_final_trade_exactly_once() {
    let mut service = Service::start(&["--settlement-delay-ms", "20"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 300);
    let ids = trades_into(&mut bob, 20);
    let listed_before = get_json(&mut alice, "/trades")["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].clone())
        .collect::<Vec<_>>();
    // Killed while the trades settle and the store follows.
    std::thread::sleep(Duration::from_millis(60));
    service.kill_and_restart();
    let mut alice = service.trader(0);
    wait_confirmed(&mut alice, &ids);
    // Start-up journals nothing (CONTRACT 18 (17)): what the killed run stored and had not
    // forgotten yet leaves the engine after the first command of the new run.
    rest(&mut alice, yes(), Side::Buy, 4_000, 1);
    wait_held(&service, 0);
    let (stored, rows) = stored_trade_ids(service.data_dir());
    assert_eq!(stored, ids.iter().cloned().collect::<BTreeSet<_>>());
    assert_eq!(rows, ids.len(), "no row doubled");
    let listed_after = get_json(&mut alice, "/trades")["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].clone())
        .collect::<Vec<_>>();
    assert_eq!(listed_after, listed_before);

    // Killed again once everything is stored and forgotten: the restart reads the same,
    // price history included (the read side starts with no price: they are all stored).
    let reads = trade_reads(&mut alice, &ids);
    let prices = price_reads(&service);
    // Only Yes traded: its history has points, No's has none.
    let yes_token = format!("market={}&", yes());
    assert!(
        prices.iter().all(|(path, h)| {
            h["history"].as_array().unwrap().is_empty() != path.contains(&yes_token)
        }),
        "{prices:?}"
    );
    service.kill_and_restart();
    let mut alice = service.trader(0);
    assert_eq!(trade_reads(&mut alice, &ids), reads);
    assert_eq!(price_reads(&service), prices);
    assert_eq!(stored_trade_ids(service.data_dir()).1, ids.len());
}

/// `/prices-history` of both tokens, by the minute and by the second.
fn price_reads(service: &Service) -> Vec<(String, Value)> {
    let mut reads = Vec::new();
    for token in [yes(), no()] {
        for fidelity in ["1", "10"] {
            let path = format!("/prices-history?market={token}&startTs=0&fidelity={fidelity}");
            let (status, body) = get(service, &path);
            assert_eq!(status, 200, "{path}: {body}");
            reads.push((path, body));
        }
    }
    reads
}

/// Waits until the engine holds `held` orders (`ladder_engine_orders_held`: open ones, and
/// closed ones not yet in the store).
fn wait_orders_held(service: &Service, held: u64) {
    wait_gauge(service, "ladder_engine_orders_held", held);
}

#[test]
fn a_cancel_of_an_order_closed_long_ago_gives_the_same_reason() {
    let service = Service::start(&["--settlement-delay-ms", "20"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let filled_hash = rest(&mut alice, yes(), Side::Buy, 5_000, 5);
    let filled = id_of(&mut alice, &filled_hash);
    let taken = place(&mut bob, yes(), Side::Sell, 5_000, 5, OrderType::Gtc);
    assert_eq!(taken["status"], json!("matched"), "{taken}");
    let canceled_hash = rest(&mut alice, yes(), Side::Buy, 4_000, 5);
    let canceled = id_of(&mut alice, &canceled_hash);
    assert_eq!(
        alice.cancel(canceled, market()).unwrap().json()["canceled"],
        json!([canceled.to_string()])
    );
    let open = rest(&mut bob, yes(), Side::Buy, 1_000, 2);
    let asks = |alice: &mut Trader, bob: &mut Trader| {
        vec![
            alice.cancel(filled, market()).unwrap().json(),
            alice.cancel(canceled, market()).unwrap().json(),
            bob.cancel(filled, market()).unwrap().json(),
            bob.cancel(canceled, market()).unwrap().json(),
            alice.cancel(9_999, market()).unwrap().json(),
        ]
    };
    let before = asks(&mut alice, &mut bob);
    assert_eq!(
        before[0],
        json!({ "canceled": [], "notCanceled": { filled.to_string(): "already filled" } })
    );
    assert_eq!(
        before[1]["notCanceled"][canceled.to_string()],
        json!("already canceled")
    );
    assert_eq!(
        before[2]["notCanceled"][filled.to_string()],
        json!("not owner")
    );
    assert_eq!(before[4]["notCanceled"]["9999"], json!("not found"));

    // Only bob's resting bid is left in the engine once the store holds the closed ones.
    wait_orders_held(&service, 1);
    assert_eq!(asks(&mut alice, &mut bob), before);
    let (stored, _) = stored_trade_ids(service.data_dir());
    assert_eq!(stored.len(), 1);
    let db = rusqlite::Connection::open_with_flags(
        service.data_dir().join("history.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let status = |hash: &str| -> String {
        db.query_row(
            "SELECT status FROM orders WHERE order_hash = ?1",
            [hash.to_ascii_lowercase()],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(status(&filled_hash), "matched");
    assert_eq!(status(&canceled_hash), "canceled");
    let open_rows: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM orders WHERE order_hash = ?1",
            [open.to_ascii_lowercase()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open_rows, 0, "an open order is not history");
    // bob's open bid still cancels as usual.
    let bobs_open = id_of(&mut bob, &open);
    assert_eq!(
        bob.cancel(bobs_open, market()).unwrap().json()["canceled"],
        json!([bobs_open.to_string()])
    );
}

/// A `history.db` SQLite cannot read (garbage, as a failing disk may leave) does not keep the
/// service from starting: it is set aside and the store is rebuilt from the journal, which
/// here starts at sequence 1, with the same answers as before.
#[test]
fn an_unreadable_history_store_is_set_aside_and_rebuilt_from_the_journal() {
    let mut service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 5);
    let p = place(&mut bob, yes(), Side::Sell, 5_000, 5, OrderType::Fak);
    assert_eq!(p["status"], json!("matched"), "{p}");
    let trade_id = p["tradeIds"][0].as_str().unwrap().to_string();
    let before = alice
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap();
    assert_eq!(before.status, 200, "{}", before.body);

    service.kill();
    let store = service.data_dir().join("history.db");
    std::fs::write(&store, vec![0x5a; 64 * 1024]).unwrap();
    for name in ["history.db-wal", "history.db-shm"] {
        let _ = std::fs::remove_file(service.data_dir().join(name));
    }
    service.restart();
    let mut alice = service.trader(0);
    let after = alice
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap();
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(after.json()["id"], before.json()["id"]);
    let aside = std::fs::read_dir(service.data_dir())
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.starts_with("history.db.unreadable-"))
        .count();
    assert!(aside > 0, "the unreadable store is kept aside");
    // The rebuilt store catches up with the journal.
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&service, "ladder_history_stored_seq") == "0" {
        assert!(Instant::now() < deadline, "the store is not rebuilt");
        std::thread::sleep(Duration::from_millis(50));
    }
}
