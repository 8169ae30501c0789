//! The service end to end over real sockets: the README walk-through, exact JSON shapes,
//! matching, cancels and a restart after SIGKILL.

mod support;

use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::json;
use support::*;

#[test]
fn create_a_key_place_an_order_see_it_and_cancel_it() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let placed = alice
        .place(yes(), Side::Buy, 5_500, 10, OrderType::Gtc)
        .unwrap();
    assert_eq!(placed.status, 200, "{}", placed.body);
    let p = placed.json();
    assert_eq!(p["success"], json!(true));
    assert_eq!(p["errorMsg"], json!(null));
    assert_eq!(p["status"], json!("live"));
    assert_eq!(
        (p["makingAmount"].clone(), p["takingAmount"].clone()),
        (json!("0"), json!("0"))
    );
    assert_eq!(p["tradeIds"], json!([]));
    let order_hash = p["orderID"].as_str().unwrap().to_string();

    let open = alice.send("GET", "/orders", None).unwrap().json();
    assert_eq!(open["count"], json!(1));
    assert_eq!(open["next_cursor"], json!("LTE="));
    let o = &open["data"][0];
    assert_eq!(o["id"], json!("1"));
    assert_eq!(o["market"], json!(CONDITION_ID));
    assert_eq!(o["asset_id"], json!(YES));
    assert_eq!(o["outcome"], json!("Yes"));
    assert_eq!(o["side"], json!("BUY"));
    assert_eq!(o["price"], json!("0.55"));
    assert_eq!(o["original_size"], json!("10"));
    assert_eq!(o["size_matched"], json!("0"));
    assert_eq!(o["status"], json!("live"));
    assert!(o["created_at"].is_i64(), "created_at is a bare integer");
    assert_eq!(o["order_hash"], json!(order_hash));
    assert_eq!(o["maker_address"], json!(KEYS[0].1));
    assert_eq!(o["owner"], json!("804d344b-d875-5663-82af-dbcd3738a1a2"));
    assert_eq!(o["expiration"], json!("0"));
    assert_eq!(o["order_type"], json!("GTC"));

    let canceled = alice.cancel(1, market()).unwrap().json();
    assert_eq!(canceled, json!({ "canceled": ["1"], "notCanceled": {} }));
    let again = alice.cancel(1, market()).unwrap().json();
    assert_eq!(
        again,
        json!({ "canceled": [], "notCanceled": { "1": "already canceled" } })
    );
    let open = alice.send("GET", "/orders", None).unwrap().json();
    assert_eq!(
        open,
        json!({ "data": [], "next_cursor": "LTE=", "count": 0, "limit": 100 })
    );
}

#[test]
fn a_crossing_order_trades_at_the_makers_price_and_both_see_the_trade() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    assert_eq!(
        alice
            .place(yes(), Side::Buy, 5_500, 10, OrderType::Gtc)
            .unwrap()
            .status,
        200
    );
    let taken = bob
        .place(yes(), Side::Sell, 5_000, 4, OrderType::Gtc)
        .unwrap()
        .json();
    assert_eq!(taken["status"], json!("matched"));
    assert_eq!(taken["makingAmount"], json!("4"), "SELL making is shares");
    assert_eq!(
        taken["takingAmount"],
        json!("2200000"),
        "0.55 x 4 in collateral units"
    );
    let trade_id = taken["tradeIds"][0].as_str().unwrap().to_string();
    assert_eq!(taken["transactionsHashes"].as_array().unwrap().len(), 1);

    let bob_view = bob
        .send("GET", &format!("/trades/{trade_id}"), None)
        .unwrap()
        .json();
    assert_eq!(bob_view["trader_side"], json!("TAKER"));
    assert_eq!(bob_view["price"], json!("0.55"));
    assert_eq!(bob_view["size"], json!("4"));
    assert_eq!(bob_view["bucket_index"], json!(0));
    assert_eq!(bob_view["fee_rate_bps"], json!("0"));
    assert_eq!(bob_view["maker_orders"][0]["order_id"], json!("1"));
    assert_eq!(bob_view["maker_orders"][0]["matched_amount"], json!("4"));
    let alice_trades = alice.send("GET", "/trades", None).unwrap().json();
    assert_eq!(alice_trades["count"], json!(1));
    assert_eq!(alice_trades["data"][0]["trader_side"], json!("MAKER"));
    assert_eq!(
        alice_trades["data"][0]["owner"],
        json!("804d344b-d875-5663-82af-dbcd3738a1a2")
    );

    let balance = alice
        .send("GET", "/balance-allowance?asset_type=COLLATERAL", None)
        .unwrap()
        .json();
    // 10,000 USDC, 2.2 paid, 3.3 still reserved by the remaining 6 at 0.55.
    assert_eq!(
        balance,
        json!({ "balance": "9997800000", "allowance": "9994500000" })
    );
    let book = service
        .http()
        .request("GET", &format!("/book?token_id={YES}"), &[], None)
        .unwrap()
        .json();
    assert_eq!(book["bids"], json!([{ "price": "0.55", "size": "6" }]));
    assert_eq!(book["last_trade_price"], json!("0.55"));
}

#[test]
fn errors_use_the_specification_texts() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut http = service.http();
    let r = http.request("GET", "/orders", &[], None).unwrap();
    assert_eq!(
        (r.status, r.json()),
        (401, json!({ "error": "HMAC L2 credentials required" }))
    );
    let r = http.request("POST", "/auth/api-key", &[], None).unwrap();
    assert_eq!(
        (r.status, r.json()),
        (401, json!({ "error": "L1 ClobAuth headers required" }))
    );

    let fok = alice
        .place(yes(), Side::Buy, 5_000, 5, OrderType::Fok)
        .unwrap()
        .json();
    assert_eq!(fok["success"], json!(false));
    assert_eq!(
        fok["errorMsg"],
        json!("order couldn't be fully filled, FOK orders are fully filled or killed")
    );
    assert_eq!(fok["status"], json!("delayed"));

    let spec = ladder_client::OrderSpec {
        post_only: true,
        order_type: OrderType::Fak,
        ..ladder_client::OrderSpec::gtc(yes(), Side::Buy, 5_000, 5)
    };
    let body = alice.order_body(&spec).unwrap();
    let r = alice.send("POST", "/order", Some(&body)).unwrap();
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({ "error": "postOnly orders must use orderType GTC or GTD" })
        )
    );

    let mut bob = service.trader(1);
    assert_eq!(
        bob.place(yes(), Side::Sell, 6_000, 5, OrderType::Gtc)
            .unwrap()
            .status,
        200
    );
    let spec = ladder_client::OrderSpec {
        post_only: true,
        ..ladder_client::OrderSpec::gtc(yes(), Side::Buy, 6_000, 5)
    };
    let body = alice.order_body(&spec).unwrap();
    let r = alice.send("POST", "/order", Some(&body)).unwrap();
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({ "error": "post-only order would cross resting liquidity" })
        )
    );

    let r = alice
        .send(
            "POST",
            "/order",
            Some("{\"orderType\":\"GTC\",\"order\":{\"salt\":\"1\"}}"),
        )
        .unwrap();
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"].as_str().unwrap().starts_with("order."),
        "{}",
        r.body
    );
}

#[test]
fn keys_open_orders_and_trades_survive_a_sigkill() {
    // Settlement timers, which journal when they fire after a restart too, wait.
    let mut service = Service::start(&["--settlement-delay-ms", "600000"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    alice
        .place(yes(), Side::Buy, 5_500, 10, OrderType::Gtc)
        .unwrap();
    bob.place(yes(), Side::Sell, 5_000, 4, OrderType::Gtc)
        .unwrap();
    let orders_before = alice.send("GET", "/orders", None).unwrap().body;
    let trades_before = alice.send("GET", "/trades", None).unwrap().body;
    let hash_before = service.admin("GET", "/admin/state-hash", None).json();

    service.kill_and_restart();
    let orders_after = alice.send("GET", "/orders", None).unwrap();
    assert_eq!(
        orders_after.status, 200,
        "the same API key still works: {}",
        orders_after.body
    );
    assert_eq!(orders_after.body, orders_before);
    assert_eq!(
        alice.send("GET", "/trades", None).unwrap().body,
        trades_before
    );
    // A start-up journals nothing (CONTRACT 18 (17)), not even, past the second in which
    // the service forgets what history.db holds, the history it could forget now (the
    // filled order, stored before the kill): the state is the one before the kill, and the
    // journal up to that sequence replays to it.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let hash_after = service.admin("GET", "/admin/state-hash", None).json();
    assert_eq!(hash_after, hash_before);
    service.kill();
    let replayed = replayed_state_hash(
        service.data_dir(),
        None,
        "keys_open_orders_and_trades_survive_a_sigkill",
    );
    assert_eq!(serde_json::Value::from(replayed), hash_before["state_hash"]);
}
