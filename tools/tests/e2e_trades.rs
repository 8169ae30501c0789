//! Black-box checks of trades (API.md §2.6, 4.8, 4.9; API.md §11, 10, 18): the exact shape from
//! both sides, the list (newest first, filters, pages), settlement statuses, a failed batch's
//! reversal, and the taker fee.

mod helpers;
mod support;

use std::time::{Duration, Instant};

use helpers::*;
use ladder_client::{unix_now_s, Trader};
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::{json, Value};
use support::*;

fn owner_of(address: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        address.to_ascii_lowercase().as_bytes(),
    )
    .to_string()
}

fn trade(trader: &mut Trader, id: &str) -> Value {
    let r = trader.send("GET", &format!("/trades/{id}"), None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn trades(trader: &mut Trader, query: &str) -> Value {
    let r = trader
        .send("GET", &format!("/trades{query}"), None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Polls trade `id` until its status is `status`.
fn wait_status(trader: &mut Trader, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let t = trade(trader, id);
        if t["status"] == json!(status) {
            return t;
        }
        assert!(Instant::now() < deadline, "never reached {status}: {t}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn secs(v: &Value) -> u64 {
    v.as_str()
        .unwrap_or_else(|| panic!("a string: {v}"))
        .parse()
        .unwrap_or_else(|_| panic!("decimal seconds: {v}"))
}

#[test]
fn a_trade_has_the_exact_shape_from_both_sides_and_settles() {
    let service = Service::start(&["--settlement-delay-ms", "300"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let maker_hash = rest(&mut alice, yes(), Side::Buy, 5_500, 10);
    let maker_id = id_of(&mut alice, &maker_hash);
    let order = signed(&bob, builder(&bob, yes(), Side::Sell, 5_000, 4));
    let (_, p) = post(&mut bob, &body_of(&order, OrderType::Gtc));
    assert_eq!(p["status"], json!("matched"), "{p}");
    let trade_id = p["tradeIds"][0].as_str().unwrap().to_string();
    let tx = p["transactionsHashes"][0].as_str().unwrap().to_string();

    let taker_view = trade(&mut bob, &trade_id);
    let match_time = secs(&taker_view["match_time"]);
    assert!(match_time.abs_diff(unix_now_s()) <= 5);
    let last_update = secs(&taker_view["last_update"]);
    assert!(last_update >= match_time);
    assert!(
        taker_view["maker_address"]
            .as_str()
            .is_some_and(|a| a.len() == 42 && a.starts_with("0x")),
        "{taker_view}"
    );
    let expected = |owner: &str, side: &str, status: &str, last_update: u64| {
        json!({
            "id": trade_id,
            "market": CONDITION_ID,
            "outcome": "Yes",
            "side": "SELL",
            "price": "0.55",
            "size": "4",
            "status": status,
            "match_time": match_time.to_string(),
            "last_update": last_update.to_string(),
            "bucket_index": 0,
            "transaction_hash": tx,
            "taker_order_id": hash_of(&order),
            "asset_id": YES,
            "fee_rate_bps": "0",
            "owner": owner,
            "maker_address": taker_view["maker_address"],
            "trader_side": side,
            "maker_orders": [{
                "order_id": maker_id.to_string(),
                "maker_address": KEYS[0].1,
                "owner": owner_of(KEYS[0].1),
                "matched_amount": "4",
                "price": "0.55",
                "fee_rate_bps": "0",
                "asset_id": YES,
                "outcome": "Yes"
            }]
        })
    };
    assert_eq!(
        taker_view,
        expected(&owner_of(KEYS[1].1), "TAKER", "MATCHED", last_update)
    );
    let maker_view = trade(&mut alice, &trade_id);
    assert_eq!(
        maker_view,
        expected(&owner_of(KEYS[0].1), "MAKER", "MATCHED", last_update)
    );

    wait_status(&mut bob, &trade_id, "MINED");
    let confirmed = wait_status(&mut bob, &trade_id, "CONFIRMED");
    assert!(secs(&confirmed["last_update"]) >= last_update);
    assert_eq!(confirmed["match_time"], taker_view["match_time"]);
    assert_eq!(trade(&mut alice, &trade_id)["status"], json!("CONFIRMED"));

    let unknown = format!("0x{}", "00".repeat(32));
    let r = bob
        .send("GET", &format!("/trades/{unknown}"), None)
        .unwrap();
    error_text(&r, 404);
}

#[test]
fn the_trade_list_is_newest_first_filtered_and_paged() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let mut carol = new_trader(&service, 10_000_000);
    rest(&mut alice, yes(), Side::Buy, 5_000, 30);
    let mut ids = Vec::new();
    for n in 1..=3 {
        let p = place(&mut bob, yes(), Side::Sell, 5_000, n, OrderType::Fak);
        assert_eq!(p["status"], json!("matched"), "{p}");
        ids.push(p["tradeIds"][0].as_str().unwrap().to_string());
    }
    let newest_first: Vec<Value> = ids.iter().rev().map(|i| json!(i)).collect();
    for path in ["", "?limit=100"] {
        let all = trades(&mut alice, path);
        assert_eq!(all["count"], json!(3));
        assert_eq!(all["next_cursor"], json!("LTE="));
        let got: Vec<Value> = all["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].clone())
            .collect();
        assert_eq!(got, newest_first);
        assert!(all["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["trader_side"] == json!("MAKER")));
    }
    let r = alice.send("GET", "/data/trades", None).unwrap();
    assert_eq!(r.json()["data"], trades(&mut alice, "")["data"], "alias");
    let bobs = trades(&mut bob, "");
    assert!(bobs["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["trader_side"] == json!("TAKER")));
    assert_eq!(
        trades(&mut carol, ""),
        json!({ "data": [], "next_cursor": "LTE=", "count": 0, "limit": 100 })
    );

    let page = trades(&mut alice, "?limit=2");
    assert_eq!(
        (page["count"].clone(), page["next_cursor"].clone()),
        (json!(2), json!("Mg=="))
    );
    let page = trades(&mut alice, "?limit=2&next_cursor=Mg==");
    assert_eq!(
        (page["count"].clone(), page["next_cursor"].clone()),
        (json!(1), json!("LTE="))
    );
    assert_eq!(page["data"][0]["id"], json!(ids[0]));

    let now = unix_now_s();
    let count = |trader: &mut Trader, q: String| trades(trader, &q)["count"].clone();
    assert_eq!(count(&mut alice, format!("?id={}", ids[1])), json!(1));
    assert_eq!(
        count(&mut alice, format!("?market={CONDITION_ID}")),
        json!(3)
    );
    assert_eq!(
        count(&mut alice, format!("?market=0x{}", "ab".repeat(32))),
        json!(0)
    );
    assert_eq!(count(&mut alice, format!("?asset_id={YES}")), json!(3));
    assert_eq!(count(&mut alice, format!("?asset_id={NO}")), json!(0));
    assert_eq!(count(&mut alice, format!("?after={}", now - 100)), json!(3));
    assert_eq!(count(&mut alice, format!("?after={}", now + 100)), json!(0));
    assert_eq!(
        count(&mut alice, format!("?before={}", now + 100)),
        json!(3)
    );
    assert_eq!(
        count(&mut alice, format!("?before={}", now - 100)),
        json!(0)
    );
    assert_eq!(
        count(&mut alice, format!("?maker_address={}", KEYS[0].1)),
        json!(3)
    );
    error_text(
        &alice
            .send("GET", "/trades?next_cursor=garbage!", None)
            .unwrap(),
        400,
    );
}

#[test]
fn a_failed_batch_reverses_its_ledger_movement_and_orders_stay_filled() {
    let service = Service::start(&[
        "--settlement-delay-ms",
        "200",
        "--settlement-fail-percent",
        "100",
    ]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let maker = rest(&mut alice, yes(), Side::Buy, 5_500, 10);
    let p = place(&mut bob, yes(), Side::Sell, 5_000, 4, OrderType::Gtc);
    assert_eq!(p["status"], json!("matched"), "{p}");
    let trade_id = p["tradeIds"][0].as_str().unwrap().to_string();
    assert_eq!(
        balance(&mut bob, "asset_type=COLLATERAL"),
        json!({ "balance": "10002200000", "allowance": "10002200000" })
    );
    wait_status(&mut bob, &trade_id, "RETRYING");
    let failed = wait_status(&mut bob, &trade_id, "FAILED");
    assert_eq!(failed["size"], json!("4"));
    assert_eq!(
        balance(&mut bob, "asset_type=COLLATERAL"),
        json!({ "balance": "10000000000", "allowance": "10000000000" })
    );
    assert_eq!(
        balance(&mut bob, &format!("asset_type=CONDITIONAL&token_id={YES}")),
        json!({ "balance": "1000000000", "allowance": "1000000000" })
    );
    // Alice: the 2.2 comes back; 6 x 0.55 = 3.3 is still reserved by her open order.
    assert_eq!(
        balance(&mut alice, "asset_type=COLLATERAL"),
        json!({ "balance": "10000000000", "allowance": "9996700000" })
    );
    assert_eq!(
        balance(
            &mut alice,
            &format!("asset_type=CONDITIONAL&token_id={YES}")
        ),
        json!({ "balance": "1000000000", "allowance": "1000000000" })
    );
    let open = open_orders(&mut alice);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["order_hash"], json!(maker));
    assert_eq!(
        open[0]["size_matched"],
        json!("4"),
        "the order stays filled"
    );
    assert!(open_orders(&mut bob).is_empty());
}

#[test]
fn a_fee_is_charged_to_the_taker_only() {
    let service = Service::start(&[]);
    let m = create_market(&service, 0xa1, json!({ "fee_rate_bps": 100 }));
    let (_, fee) = get(&service, &format!("/fee-rate?token_id={}", m.yes));
    assert_eq!(fee, json!({ "fee_rate_bps": "100" }));
    let mut alice = new_trader(&service, 100_000_000);
    let mut bob = new_trader(&service, 100_000_000);
    deposit(&service, &bob.account, &m.yes, 20_000_000);
    deposit(&service, &alice.account, &m.yes, 20_000_000);

    // Taker BUY: the maker gets exactly 5.00, the taker pays more.
    rest(&mut bob, m.yes(), Side::Sell, 5_000, 10);
    let p = place(&mut alice, m.yes(), Side::Buy, 5_000, 10, OrderType::Fok);
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert_eq!(
        balance(&mut bob, "asset_type=COLLATERAL"),
        json!({ "balance": "105000000", "allowance": "105000000" })
    );
    let paid: u64 = 100_000_000
        - balance(&mut alice, "asset_type=COLLATERAL")["balance"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap();
    assert!(paid > 5_000_000, "the taker pays a fee: {paid}");
    let trade_id = p["tradeIds"][0].as_str().unwrap().to_string();
    let t = trade(&mut alice, &trade_id);
    assert_eq!(t["fee_rate_bps"], json!("0"));
    assert_eq!(t["maker_orders"][0]["fee_rate_bps"], json!("0"));

    // Taker SELL: the maker pays exactly 5.00, the taker receives less.
    rest(&mut bob, m.yes(), Side::Buy, 5_000, 10);
    let before: u64 = balance(&mut alice, "asset_type=COLLATERAL")["balance"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let p = place(&mut alice, m.yes(), Side::Sell, 5_000, 10, OrderType::Fok);
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert_eq!(
        balance(&mut bob, "asset_type=COLLATERAL"),
        json!({ "balance": "100000000", "allowance": "100000000" })
    );
    let after: u64 = balance(&mut alice, "asset_type=COLLATERAL")["balance"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        after - before < 5_000_000,
        "the taker's proceeds carry the fee"
    );
}
