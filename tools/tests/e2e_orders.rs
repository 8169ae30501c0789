//! Black-box checks of order placement (API.md §2.4, 3, 4.4; API.md §1, 6, 7, 18) and of the
//! open-orders page (API.md §2.1, 2.2, 4.3; API.md §11).

mod helpers;
mod support;

use helpers::*;
use ladder_client::{post_orders_body, unix_now_s, Wallet};
use ladder_protocol::wire::{OrderType, PostOrderRequest};
use ladder_protocol::{Address, Side, SignatureType, U256};
use serde_json::{json, Value};
use support::*;

fn collateral(trader: &mut ladder_client::Trader) -> Value {
    balance(trader, "asset_type=COLLATERAL")
}

fn shares(trader: &mut ladder_client::Trader, token: &str) -> Value {
    balance(trader, &format!("asset_type=CONDITIONAL&token_id={token}"))
}

fn both(amount: &str) -> Value {
    json!({ "balance": amount, "allowance": amount })
}

fn book(service: &Service, token: &str) -> Value {
    let (status, v) = get(service, &format!("/book?token_id={token}"));
    assert_eq!(status, 200, "{v}");
    v
}

fn levels(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["price"].as_str().unwrap().to_string(),
                l["size"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn lv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect()
}

fn is_hash(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 66
            && s.starts_with("0x")
            && s[2..]
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

#[test]
fn gtc_rests_with_the_exact_placement_result_and_open_order() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let order = signed(&alice, builder(&alice, yes(), Side::Buy, 5_500, 10));
    let hash = hash_of(&order);
    let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtc));
    assert_eq!(status, 200);
    assert_eq!(
        p,
        json!({
            "success": true,
            "errorMsg": null,
            "makingAmount": "0",
            "takingAmount": "0",
            "orderID": hash,
            "status": "live",
            "transactionsHashes": [],
            "tradeIds": []
        })
    );
    let open = open_orders(&mut alice);
    assert_eq!(open.len(), 1);
    let o = &open[0];
    let created_at = o["created_at"]
        .as_i64()
        .expect("created_at is a bare integer");
    assert!((created_at - unix_now_s() as i64).abs() <= 5, "{o}");
    let id = o["id"].as_str().expect("id is a string");
    assert!(id.parse::<u64>().is_ok(), "{o}");
    assert_eq!(
        *o,
        json!({
            "id": id,
            "market": CONDITION_ID,
            "asset_id": YES,
            "outcome": "Yes",
            "side": "BUY",
            "price": "0.55",
            "original_size": "10",
            "size_matched": "0",
            "status": "live",
            "created_at": created_at,
            "order_hash": hash,
            "maker_address": KEYS[0].1,
            "owner": "804d344b-d875-5663-82af-dbcd3738a1a2",
            "expiration": "0",
            "order_type": "GTC"
        })
    );
    // A SELL of No rests too and shows its own token and trimmed price.
    let p = place(&mut alice, no(), Side::Sell, 3_000, 7, OrderType::Gtc);
    assert_eq!(p["status"], json!("live"), "{p}");
    let open = open_orders(&mut alice);
    assert_eq!(open[1]["asset_id"], json!(NO));
    assert_eq!(open[1]["outcome"], json!("No"));
    assert_eq!(open[1]["side"], json!("SELL"));
    assert_eq!(open[1]["price"], json!("0.3"));
    assert_eq!(open[1]["original_size"], json!("7"));
}

#[test]
fn gtd_with_a_future_expiration_rests() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let expiration = unix_now_s() + 3_600;
    let order = signed(
        &alice,
        builder(&alice, yes(), Side::Buy, 4_000, 3).expiration_s(expiration),
    );
    let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtd));
    assert_eq!(status, 200);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("live"), "{p}");
    let open = open_orders(&mut alice);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["expiration"], json!(expiration.to_string()));
    assert_eq!(open[0]["order_type"], json!("GTD"));
    assert_eq!(open[0]["price"], json!("0.4"));
}

#[test]
fn gtd_needs_a_future_expiration_and_other_types_none() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let now = unix_now_s();
    let cases = [
        (OrderType::Gtd, 0, "GTD without expiration"),
        (OrderType::Gtd, now - 10, "GTD expired"),
        (OrderType::Gtd, 1, "GTD expired long ago"),
        (OrderType::Gtc, now + 3_600, "GTC with an expiration"),
    ];
    for (order_type, expiration, what) in cases {
        let order = signed(
            &alice,
            builder(&alice, yes(), Side::Buy, 4_000, 3).expiration_s(expiration),
        );
        let (status, p) = post(&mut alice, &body_of(&order, order_type));
        assert_eq!(status, 200, "{what}: {p}");
        let msg = rejection(&p);
        assert!(
            msg.to_ascii_lowercase().contains("expiration"),
            "{what}: {msg}"
        );
        if expiration != 0 {
            assert!(msg.contains(&expiration.to_string()), "{what}: {msg}");
        }
    }
    assert!(open_orders(&mut alice).is_empty());
    assert_eq!(collateral(&mut alice), both("10000000000"));
}

#[test]
fn fok_fills_entirely_or_is_killed_without_touching_the_book() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut bob, yes(), Side::Sell, 6_000, 10);
    rest(&mut bob, yes(), Side::Sell, 6_200, 5);

    let killed = place(&mut alice, yes(), Side::Buy, 6_200, 20, OrderType::Fok);
    assert_eq!(
        rejection(&killed),
        "order couldn't be fully filled, FOK orders are fully filled or killed"
    );
    assert_eq!(
        levels(&book(&service, YES)["asks"]),
        lv(&[("0.62", "5"), ("0.6", "10")])
    );
    assert_eq!(collateral(&mut alice), both("10000000000"));

    // 12 fill: 10 at 0.6 and 2 at 0.62 (the maker's prices), one settlement batch.
    let filled = place(&mut alice, yes(), Side::Buy, 6_200, 12, OrderType::Fok);
    assert_eq!(filled["success"], json!(true), "{filled}");
    assert_eq!(filled["errorMsg"], json!(null));
    assert_eq!(filled["status"], json!("matched"));
    assert_eq!(filled["makingAmount"], json!("7240000"));
    assert_eq!(filled["takingAmount"], json!("12"));
    let trade_ids = filled["tradeIds"].as_array().unwrap();
    assert_eq!(trade_ids.len(), 2, "{filled}");
    assert!(trade_ids.iter().all(is_hash), "{filled}");
    let txs = filled["transactionsHashes"].as_array().unwrap();
    assert_eq!(txs.len(), 1, "{filled}");
    assert!(is_hash(&txs[0]));
    assert!(open_orders(&mut alice).is_empty(), "a FOK never rests");
    assert_eq!(levels(&book(&service, YES)["asks"]), lv(&[("0.62", "3")]));
    assert_eq!(collateral(&mut alice), both("9992760000"));
    assert_eq!(shares(&mut alice, YES), both("1012000000"));

    // Nothing left at the price: killed.
    let killed = place(&mut alice, yes(), Side::Buy, 6_000, 1, OrderType::Fok);
    rejection(&killed);
}

#[test]
fn a_fok_sell_fills_against_bids() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut bob, yes(), Side::Buy, 5_000, 10);
    let p = place(&mut alice, yes(), Side::Sell, 4_500, 10, OrderType::Fok);
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert_eq!(p["makingAmount"], json!("10"), "SELL making is shares");
    assert_eq!(p["takingAmount"], json!("5000000"), "at the maker's 0.5");
    assert_eq!(collateral(&mut alice), both("10005000000"));
    assert_eq!(shares(&mut alice, YES), both("990000000"));
}

#[test]
fn fak_fills_what_it_can_and_cancels_the_rest() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);

    let nothing = place(&mut alice, yes(), Side::Buy, 6_000, 10, OrderType::Fak);
    rejection(&nothing);

    rest(&mut bob, yes(), Side::Sell, 6_000, 4);
    let p = place(&mut alice, yes(), Side::Buy, 6_100, 10, OrderType::Fak);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["errorMsg"], json!(null));
    assert_eq!(p["status"], json!("matched"));
    assert_eq!(p["makingAmount"], json!("2400000"));
    assert_eq!(p["takingAmount"], json!("4"));
    assert_eq!(p["tradeIds"].as_array().unwrap().len(), 1);
    assert_eq!(p["transactionsHashes"].as_array().unwrap().len(), 1);
    assert!(
        open_orders(&mut alice).is_empty(),
        "the remainder is cancelled"
    );
    let b = book(&service, YES);
    assert_eq!(b["bids"], json!([]));
    assert_eq!(b["asks"], json!([]));
    assert_eq!(collateral(&mut alice), both("9997600000"));
    assert_eq!(shares(&mut alice, YES), both("1004000000"));
}

#[test]
fn mint_buy_yes_matches_a_resting_buy_no_at_the_makers_price() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    // BUY No at 0.45 is a Yes ask at 0.55.
    rest(&mut bob, no(), Side::Buy, 4_500, 10);
    assert_eq!(levels(&book(&service, YES)["asks"]), lv(&[("0.55", "10")]));
    let p = place(&mut alice, yes(), Side::Buy, 6_000, 10, OrderType::Gtc);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert_eq!(p["makingAmount"], json!("5500000"), "0.55 x 10: {p}");
    assert_eq!(p["takingAmount"], json!("10"));
    assert_eq!(p["tradeIds"].as_array().unwrap().len(), 1);
    assert_eq!(collateral(&mut alice), both("9994500000"));
    assert_eq!(shares(&mut alice, YES), both("1010000000"));
    assert_eq!(shares(&mut alice, NO), both("1000000000"));
    assert_eq!(collateral(&mut bob), both("9995500000"));
    assert_eq!(shares(&mut bob, NO), both("1010000000"));
    assert_eq!(shares(&mut bob, YES), both("1000000000"));
    assert!(open_orders(&mut bob).is_empty());
    let b = book(&service, YES);
    assert_eq!(
        (b["bids"].clone(), b["asks"].clone()),
        (json!([]), json!([]))
    );
}

#[test]
fn merge_sell_yes_matches_a_resting_sell_no_at_the_makers_price() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    // SELL No at 0.35 is a Yes bid at 0.65.
    rest(&mut bob, no(), Side::Sell, 3_500, 10);
    assert_eq!(levels(&book(&service, YES)["bids"]), lv(&[("0.65", "10")]));
    let p = place(&mut alice, yes(), Side::Sell, 6_000, 10, OrderType::Gtc);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert_eq!(p["makingAmount"], json!("10"), "{p}");
    assert_eq!(p["takingAmount"], json!("6500000"), "0.65 x 10: {p}");
    assert_eq!(collateral(&mut alice), both("10006500000"));
    assert_eq!(shares(&mut alice, YES), both("990000000"));
    assert_eq!(collateral(&mut bob), both("10003500000"));
    assert_eq!(shares(&mut bob, NO), both("990000000"));
    assert!(open_orders(&mut bob).is_empty());
}

#[test]
fn orders_of_any_signature_type_but_3_are_rejected_as_not_smart_account() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    // 0: a plain EOA; 1 and 2: Polymarket's proxy and Safe wallets; 7: no type at all. Each is
    // a well-formed integer: a 200 rejection (API.md §8), not a 400.
    for given in [0u8, 1, 2, 7] {
        let order = signed(
            &alice,
            builder(&alice, yes(), Side::Buy, 5_000, 2)
                .signature_type(SignatureType::from_u8(given)),
        );
        let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtc));
        assert_eq!(status, 200, "{p}");
        let msg = rejection(&p).to_ascii_lowercase();
        assert!(
            msg.contains(&format!("unsupported signature type {given}"))
                && msg.contains("smart")
                && msg.contains("only"),
            "says only smart-account orders are accepted: {msg}"
        );
    }
    assert!(open_orders(&mut alice).is_empty());
}

#[test]
fn maker_signer_and_signature_must_all_check_out() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let bob_account = Address::parse(KEYS[1].1).unwrap();

    // Maker is not the API key's address.
    let order = signed(
        &alice,
        builder(&alice, yes(), Side::Buy, 5_000, 2).maker(bob_account),
    );
    let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtc));
    assert_eq!(status, 200, "{p}");
    let msg = rejection(&p).to_ascii_lowercase();
    assert!(msg.contains("maker"), "{msg}");
    assert!(
        msg.contains(&bob_account.to_string().to_ascii_lowercase()),
        "{msg}"
    );
    assert!(
        msg.contains(&alice.account.to_string().to_ascii_lowercase()),
        "{msg}"
    );

    // Signed by a key that does not control the maker.
    let stranger = Wallet::random();
    let order = builder(&alice, yes(), Side::Buy, 5_000, 2)
        .sign(&stranger, &alice.exchange)
        .unwrap();
    let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtc));
    assert_eq!(status, 200, "{p}");
    let msg = rejection(&p).to_ascii_lowercase();
    assert!(
        msg.starts_with("invalid signature: signer does not control the maker account"),
        "{msg}"
    );
    for named in [stranger.address().to_string(), alice.account.to_string()] {
        assert!(
            msg.contains(&named.to_ascii_lowercase()),
            "{msg} names {named}"
        );
    }

    // A well-formed signature that does not verify (the order changed after signing).
    let mut order = signed(&alice, builder(&alice, yes(), Side::Buy, 5_000, 2));
    order.order.salt = U256::from_u64(12_345);
    let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtc));
    assert_eq!(status, 200, "{p}");
    let msg = rejection(&p);
    assert!(msg.starts_with("invalid signature"), "{msg}");

    assert!(open_orders(&mut alice).is_empty());
    assert_eq!(collateral(&mut alice), both("10000000000"));
}

#[test]
fn an_order_over_the_size_limit_is_rejected_naming_its_size_and_the_limit() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let order = signed(
        &alice,
        builder(&alice, yes(), Side::Sell, 5_000, 2_000_000_000),
    );
    let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtc));
    assert_eq!(status, 200, "{p}");
    assert_eq!(
        rejection(&p),
        "amount too large: order size 2000000000 shares, at most 1000000000 shares"
    );
}

#[test]
fn off_tick_prices_and_fractional_shares_are_rejected() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    // 0.5005 is on the 0.0001 grid but not on the market's 0.001 tick.
    let p = place(&mut alice, yes(), Side::Buy, 5_005, 10, OrderType::Gtc);
    let msg = rejection(&p);
    assert!(
        msg.contains("0.5005") && msg.contains("0.001"),
        "names the price and the tick: {msg}"
    );
    // Amounts that imply a price off every grid, a price of 1 and one of 3: one message per
    // cause, naming the price and the market's tick or range (API.md §8), whatever the grid.
    for (maker, taker, token, want) in [
        (
            5_555_555u64,
            10_000_000u64,
            yes(),
            "invalid price 0.5555555: must be a multiple of the tick size 0.001",
        ),
        (
            1_000_000,
            3_000_000,
            yes(),
            "invalid price 1000000/3000000: must be a multiple of the tick size 0.001",
        ),
        (
            10_000_000,
            10_000_000,
            yes(),
            "invalid price 1: must be between 0.001 and 0.999",
        ),
        (
            30_000_000,
            10_000_000,
            yes(),
            "invalid price 3: must be between 0.001 and 0.999",
        ),
        // Off every grid and outside the market's range too: the range is checked first
        // (rows 6 then 7), as for a price on the grid below the tick.
        (
            100,
            10_000_000,
            yes(),
            "invalid price 0.00001: must be between 0.001 and 0.999",
        ),
        (
            5_000,
            10_000_000,
            yes(),
            "invalid price 0.0005: must be between 0.001 and 0.999",
        ),
        (
            9_999_500,
            10_000_000,
            yes(),
            "invalid price 0.99995: must be between 0.001 and 0.999",
        ),
        (
            10_000_000,
            10_000_000,
            U256::from_u64(77),
            "unknown token: no market has this tokenId (tokenId 77)",
        ),
    ] {
        let mut order = unsigned(&alice, token, Side::Buy, 5_000, 10);
        order.maker_amount = U256::from_u64(maker);
        order.taker_amount = U256::from_u64(taker);
        let body = body_of(&sign_raw(&alice, order), OrderType::Gtc);
        let (status, p) = post(&mut alice, &body);
        assert_eq!(status, 200, "{p}");
        assert_eq!(rejection(&p), want);
    }
    // On the 0.0001 grid but off the market's tick, with a signature that does not verify:
    // the tick (row 7) is reported before the signature (row 8), and before a paused market
    // (row 11).
    let mut order = signed(&alice, builder(&alice, yes(), Side::Buy, 5_005, 2));
    order.order.salt = U256::from_u64(54_321);
    let (status, p) = post(&mut alice, &body_of(&order, OrderType::Gtc));
    assert_eq!(status, 200, "{p}");
    assert_eq!(
        rejection(&p),
        "invalid price 0.5005: must be a multiple of the tick size 0.001"
    );
    let paused = service.admin(
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/pause"),
        None,
    );
    assert_eq!(paused.status, 200);
    for (price_ticks, want) in [
        (
            5_005,
            "invalid price 0.5005: must be a multiple of the tick size 0.001",
        ),
        (
            9_995,
            "invalid price 0.9995: must be between 0.001 and 0.999",
        ),
        (5_000, "market not active: it is paused"),
    ] {
        let p = place(
            &mut alice,
            yes(),
            Side::Buy,
            price_ticks,
            10,
            OrderType::Gtc,
        );
        assert_eq!(rejection(&p), want);
    }
    // 10.5 shares at 0.55, BUY and SELL.
    for side in [Side::Buy, Side::Sell] {
        let mut order = unsigned(&alice, yes(), side, 5_500, 10);
        let (collateral_units, share_units) = (5_775_000u64, 10_500_000u64);
        let (maker, taker) = match side {
            Side::Buy => (collateral_units, share_units),
            Side::Sell => (share_units, collateral_units),
        };
        order.maker_amount = U256::from_u64(maker);
        order.taker_amount = U256::from_u64(taker);
        let body = body_of(&sign_raw(&alice, order), OrderType::Gtc);
        let (status, p) = post(&mut alice, &body);
        assert_eq!(status, 200, "{p}");
        let msg = rejection(&p);
        assert!(
            msg.contains("10500000") || msg.contains("10.5"),
            "names the share amount: {msg}"
        );
    }
    assert!(open_orders(&mut alice).is_empty());
}

#[test]
fn an_expiration_past_64_bits_gets_the_message_of_its_cause() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let huge = "18446744073709551616";
    for (order_type, want) in [
        (
            OrderType::Gtc,
            format!(
                "only GTD orders may have a non-zero expiration (orderType GTC, expiration {huge})"
            ),
        ),
        (
            OrderType::Gtd,
            format!("expiration {huge} is too large (at most 18446744073709551615)"),
        ),
    ] {
        let mut order = unsigned(&alice, yes(), Side::Buy, 5_000, 1);
        order.expiration = U256::from_dec_str(huge).unwrap();
        let body = body_of(&sign_raw(&alice, order), order_type);
        let (status, p) = post(&mut alice, &body);
        assert_eq!(status, 200, "{p}");
        assert_eq!(rejection(&p), want);
    }
}

#[test]
fn unknown_tokens_are_rejected() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let p = place(
        &mut alice,
        U256::from_u64(123_456_789),
        Side::Buy,
        5_000,
        1,
        OrderType::Gtc,
    );
    let msg = rejection(&p);
    assert!(msg.contains("unknown token"), "{msg}");
    assert!(msg.contains("123456789"), "names the tokenId: {msg}");
}

#[test]
fn a_duplicate_order_is_rejected() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let order = signed(&alice, builder(&alice, yes(), Side::Buy, 5_000, 2));
    let body = body_of(&order, OrderType::Gtc);
    let (_, first) = post(&mut alice, &body);
    assert_eq!(first["status"], json!("live"), "{first}");
    let (status, again) = post(&mut alice, &body);
    assert_eq!(status, 200);
    let msg = rejection(&again);
    assert!(msg.to_ascii_lowercase().contains("duplicate"), "{msg}");
    // Still a duplicate after the first is cancelled.
    let id = id_of(&mut alice, &hash_of(&order));
    assert_eq!(
        alice.cancel(id, market()).unwrap().json()["canceled"],
        json!([id.to_string()])
    );
    let (_, again) = post(&mut alice, &body);
    rejection(&again);
    assert!(open_orders(&mut alice).is_empty());
}

#[test]
fn orders_beyond_the_balance_are_rejected_and_reservations_count() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    const TEXT: &str = "not enough balance / allowance";
    // 30,000 shares at 0.5 is 15,000 USDC; alice has 10,000.
    let p = place(&mut alice, yes(), Side::Buy, 5_000, 30_000, OrderType::Gtc);
    assert_eq!(rejection(&p), TEXT);
    let p = place(&mut alice, yes(), Side::Sell, 5_000, 1_001, OrderType::Gtc);
    assert_eq!(rejection(&p), TEXT);

    // 9,500 reserved, 500 free.
    rest(&mut alice, yes(), Side::Buy, 5_000, 19_000);
    assert_eq!(
        collateral(&mut alice),
        json!({ "balance": "10000000000", "allowance": "500000000" })
    );
    let p = place(&mut alice, yes(), Side::Buy, 5_000, 1_001, OrderType::Gtc);
    assert_eq!(rejection(&p), TEXT);
    rest(&mut alice, yes(), Side::Buy, 5_000, 1_000);
    assert_eq!(
        collateral(&mut alice),
        json!({ "balance": "10000000000", "allowance": "0" })
    );
    let p = place(&mut alice, no(), Side::Buy, 1_000, 1, OrderType::Gtc);
    assert_eq!(rejection(&p), TEXT);

    // Shares: 600 reserved by a SELL leaves 400.
    rest(&mut alice, no(), Side::Sell, 9_000, 600);
    assert_eq!(
        shares(&mut alice, NO),
        json!({ "balance": "1000000000", "allowance": "400000000" })
    );
    let p = place(&mut alice, no(), Side::Sell, 9_000, 401, OrderType::Gtc);
    assert_eq!(rejection(&p), TEXT);
}

#[test]
fn below_the_minimum_order_size_is_rejected() {
    let service = Service::start(&[]);
    let m = create_market(&service, 0x51, json!({ "min_order_size": 5 }));
    let mut alice = service.trader(0);
    let p = place(&mut alice, m.yes(), Side::Buy, 5_000, 4, OrderType::Gtc);
    rejection(&p);
    let p = place(&mut alice, m.yes(), Side::Buy, 5_000, 5, OrderType::Gtc);
    assert_eq!(p["status"], json!("live"), "{p}");
}

fn requests(trader: &ladder_client::Trader, n: u64) -> Vec<PostOrderRequest> {
    (0..n)
        .map(|i| PostOrderRequest {
            order: signed(
                trader,
                builder(trader, yes(), Side::Buy, 1_000 + 10 * i as u32, 1),
            ),
            order_type: OrderType::Gtc,
            post_only: false,
        })
        .collect()
}

#[test]
fn a_batch_answers_in_order_and_rejects_per_element() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut batch = requests(&alice, 4);
    // The middle one is off-tick: a 200 rejection in its slot.
    batch[1].order = signed(&alice, builder(&alice, yes(), Side::Buy, 1_005, 1));
    // One is off every grid: the same message as a single order's (the market's tick).
    let mut order = unsigned(&alice, yes(), Side::Buy, 5_000, 10);
    order.maker_amount = U256::from_u64(5_555_555);
    batch[3].order = sign_raw(&alice, order);
    let r = alice
        .send("POST", "/orders", Some(&post_orders_body(&batch)))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let results = r.json();
    let results = results.as_array().expect("an array of results");
    assert_eq!(results.len(), 4);
    assert_eq!(
        rejection(&results[3]),
        "invalid price 0.5555555: must be a multiple of the tick size 0.001"
    );
    for (i, result) in results.iter().enumerate() {
        assert_eq!(
            result["orderID"],
            json!(hash_of(&batch[i].order)),
            "{result}"
        );
    }
    assert_eq!(results[0]["status"], json!("live"));
    assert_eq!(results[0]["success"], json!(true));
    rejection(&results[1]);
    assert_eq!(results[2]["status"], json!("live"));
    let open = open_orders(&mut alice);
    assert_eq!(open.len(), 2);
    assert_eq!(open[0]["price"], json!("0.1"));
    assert_eq!(open[1]["price"], json!("0.102"));

    // 15 is the most a batch holds.
    let r = alice
        .send(
            "POST",
            "/orders",
            Some(&post_orders_body(&requests(&alice, 15))),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let results = r.json();
    assert_eq!(results.as_array().unwrap().len(), 15);
    assert!(results
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["success"] == json!(true)));
}

#[test]
fn a_malformed_batch_element_fails_the_whole_batch() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let batch = requests(&alice, 4);
    let mut value: Value = serde_json::from_str(&post_orders_body(&batch)).unwrap();
    value[2]["order"]["makerAmount"] = json!(5);
    let r = alice
        .send("POST", "/orders", Some(&value.to_string()))
        .unwrap();
    let text = error_text(&r, 400);
    assert!(text.starts_with("orders[2].makerAmount: "), "{text}");
    assert!(open_orders(&mut alice).is_empty(), "nothing was placed");

    let mut value: Value = serde_json::from_str(&post_orders_body(&batch)).unwrap();
    value[3]["orderType"] = json!("MARKET");
    let text = error_text(
        &alice
            .send("POST", "/orders", Some(&value.to_string()))
            .unwrap(),
        400,
    );
    assert!(
        text.starts_with("orders[3]") && text.contains("orderType"),
        "{text}"
    );

    error_text(&alice.send("POST", "/orders", Some("[]")).unwrap(), 400);
    error_text(
        &alice
            .send(
                "POST",
                "/orders",
                Some(&post_orders_body(&requests(&alice, 16))),
            )
            .unwrap(),
        400,
    );
    error_text(
        &alice
            .send(
                "POST",
                "/orders",
                Some(&body_of(&batch[0].order, OrderType::Gtc)),
            )
            .unwrap(),
        400,
    );
    assert!(open_orders(&mut alice).is_empty(), "nothing was placed");
}

#[test]
fn open_orders_page_with_chained_cursors() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut hashes = Vec::new();
    for i in 0..5u32 {
        hashes.push(rest(
            &mut alice,
            yes(),
            Side::Buy,
            1_000 + 100 * i,
            1 + u64::from(i),
        ));
    }
    let all = open_orders(&mut alice);
    assert_eq!(
        all.iter()
            .map(|o| o["order_hash"].clone())
            .collect::<Vec<_>>(),
        hashes.iter().map(|h| json!(h)).collect::<Vec<_>>(),
        "oldest first"
    );

    let mut seen = Vec::new();
    let mut cursor = String::new();
    let mut cursors = Vec::new();
    for page in 0..3 {
        let path = if cursor.is_empty() {
            "/orders?limit=2".to_string()
        } else {
            format!("/orders?limit=2&next_cursor={cursor}")
        };
        let r = alice.send("GET", &path, None).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        let data = v["data"].as_array().unwrap();
        let expected = if page < 2 { 2 } else { 1 };
        assert_eq!(data.len(), expected, "{v}");
        assert_eq!(v["count"], json!(expected));
        assert_eq!(v["limit"], json!(2));
        seen.extend(data.iter().map(|o| o["order_hash"].clone()));
        cursor = v["next_cursor"]
            .as_str()
            .expect("next_cursor is a string")
            .to_string();
        cursors.push(cursor.clone());
    }
    assert_eq!(cursors, ["Mg==", "NA==", "LTE="]);
    assert_eq!(seen, hashes.iter().map(|h| json!(h)).collect::<Vec<_>>());

    // The end sentinel gives an empty page; a percent-encoded cursor is the same cursor.
    let r = alice
        .send("GET", "/orders?limit=2&next_cursor=LTE=", None)
        .unwrap();
    assert_eq!(
        r.json(),
        json!({ "data": [], "next_cursor": "LTE=", "count": 0, "limit": 2 })
    );
    let r = alice
        .send("GET", "/orders?limit=2&next_cursor=NA%3D%3D", None)
        .unwrap();
    assert_eq!(r.json()["data"][0]["order_hash"], json!(hashes[4]));
    let r = alice.send("GET", "/orders?next_cursor=", None).unwrap();
    assert_eq!(
        r.json()["count"],
        json!(5),
        "an empty cursor is the first page"
    );
    let r = alice.send("GET", "/orders?limit=10000", None).unwrap();
    assert_eq!(r.json()["limit"], json!(500), "a larger limit is clamped");

    // API.md §2.2: the final page is the one smaller than the limit. A full page is mid-stream
    // even when it holds the last orders; the empty page after it ends the stream.
    let r = alice.send("GET", "/orders?limit=5", None).unwrap();
    let v = r.json();
    assert_eq!(
        (v["count"].clone(), v["next_cursor"].clone()),
        (json!(5), json!("NQ==")),
        "{v}"
    );
    let r = alice
        .send("GET", "/orders?limit=5&next_cursor=NQ==", None)
        .unwrap();
    assert_eq!(
        r.json(),
        json!({ "data": [], "next_cursor": "LTE=", "count": 0, "limit": 5 })
    );

    for bad in ["garbage!", "LTI=", "YWJj", "%%%"] {
        let r = alice
            .send("GET", &format!("/orders?next_cursor={bad}"), None)
            .unwrap();
        let text = error_text(&r, 400);
        assert!(text.contains("next_cursor"), "{bad}: {text}");
    }
}

#[test]
fn open_orders_filters() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 2_000, 1);
    rest(&mut alice, no(), Side::Buy, 2_000, 1);
    rest(&mut alice, yes(), Side::Buy, 2_100, 1);
    rest(&mut bob, yes(), Side::Buy, 2_000, 1);
    let ids = open_ids(&mut alice);
    assert_eq!(ids.len(), 3, "only the caller's orders");

    let v = alice
        .send("GET", &format!("/orders?asset_id={NO}"), None)
        .unwrap()
        .json();
    assert_eq!(v["count"], json!(1));
    assert_eq!(v["data"][0]["asset_id"], json!(NO));
    let v = alice
        .send("GET", &format!("/orders?id={}", ids[2]), None)
        .unwrap()
        .json();
    assert_eq!(v["count"], json!(1));
    assert_eq!(v["data"][0]["id"], json!(ids[2].to_string()));
    let v = alice
        .send("GET", &format!("/orders?market={CONDITION_ID}"), None)
        .unwrap()
        .json();
    assert_eq!(v["count"], json!(3));
    let other = format!("0x{}", "ab".repeat(32));
    let v = alice
        .send("GET", &format!("/orders?market={other}"), None)
        .unwrap()
        .json();
    assert_eq!(
        v,
        json!({ "data": [], "next_cursor": "LTE=", "count": 0, "limit": 100 })
    );
}

/// The order's JSON body as a value, to alter.
fn body_value(order: &ladder_protocol::SignedOrder, order_type: OrderType) -> Value {
    serde_json::from_str(&body_of(order, order_type)).unwrap()
}

#[test]
fn legacy_keys_and_alternative_forms_are_accepted() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    // Legacy keys are ignored (API.md §2.3).
    let order = signed(&alice, builder(&alice, yes(), Side::Buy, 2_000, 1));
    let mut v = body_value(&order, OrderType::Gtc);
    v["order"]["taker"] = json!("0x0000000000000000000000000000000000000000");
    v["order"]["feeRateBps"] = json!("100");
    let (status, p) = post(&mut alice, &v.to_string());
    assert_eq!((status, p["success"].clone()), (200, json!(true)), "{p}");
    assert_eq!(p["orderID"], json!(hash_of(&order)));
    // side as a string, salt as a JSON integer, maker and signer in lowercase (API.md §1).
    let order = signed(&alice, builder(&alice, yes(), Side::Buy, 2_100, 1));
    let mut v = body_value(&order, OrderType::Gtc);
    v["order"]["side"] = json!("BUY");
    let salt: u64 = v["order"]["salt"].as_str().unwrap().parse().unwrap();
    v["order"]["salt"] = json!(salt);
    for field in ["maker", "signer", "beneficiary"] {
        let lower = v["order"][field].as_str().unwrap().to_ascii_lowercase();
        v["order"][field] = json!(lower);
    }
    let (status, p) = post(&mut alice, &v.to_string());
    assert_eq!((status, p["success"].clone()), (200, json!(true)), "{p}");
    assert_eq!(p["orderID"], json!(hash_of(&order)));
    // v as 0/1 instead of 27/28 (API.md §4).
    let order = signed(&alice, builder(&alice, yes(), Side::Buy, 2_200, 1));
    let mut v = body_value(&order, OrderType::Gtc);
    let sig = v["order"]["signature"].as_str().unwrap().to_string();
    let last = u8::from_str_radix(&sig[130..132], 16).unwrap();
    assert!(last == 27 || last == 28);
    v["order"]["signature"] = json!(format!("{}{:02x}", &sig[..130], last - 27));
    let (status, p) = post(&mut alice, &v.to_string());
    assert_eq!((status, p["success"].clone()), (200, json!(true)), "{p}");
    assert_eq!(open_orders(&mut alice).len(), 3);
}

/// secp256k1's group order.
const CURVE_N: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

fn hex_bytes(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn a_high_s_signature_or_a_bad_checksum_is_refused() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let order = signed(&alice, builder(&alice, yes(), Side::Buy, 2_000, 1));
    let mut v = body_value(&order, OrderType::Gtc);
    // The malleated twin (r, n - s, v ^ 1) recovers to the same signer but is high-s.
    let sig = hex_bytes(&v["order"]["signature"].as_str().unwrap()[2..]);
    let mut s = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = i16::from(CURVE_N[i]) - i16::from(sig[32 + i]) - borrow;
        borrow = i16::from(d < 0);
        s[i] = (d + if d < 0 { 256 } else { 0 }) as u8;
    }
    let mut twin = sig[..32].to_vec();
    twin.extend_from_slice(&s);
    twin.push(if sig[64] == 27 { 28 } else { 27 });
    let twin_hex: String = twin.iter().map(|b| format!("{b:02x}")).collect();
    v["order"]["signature"] = json!(format!("0x{twin_hex}"));
    let r = alice.send("POST", "/order", Some(&v.to_string())).unwrap();
    if r.status == 200 {
        let msg = rejection(&r.json());
        assert!(msg.starts_with("invalid signature"), "{msg}");
    } else {
        error_text(&r, 400);
    }
    // A mixed-case address that fails the EIP-55 checksum is a 400 naming the field.
    let mut v = body_value(&order, OrderType::Gtc);
    v["order"]["maker"] = json!("0x5A11c0C0a000000000000000000000000000A001");
    let text = error_text(
        &alice.send("POST", "/order", Some(&v.to_string())).unwrap(),
        400,
    );
    assert!(text.starts_with("order.maker"), "{text}");
    assert!(open_orders(&mut alice).is_empty());
}

#[test]
fn self_trade_prevention_cancels_the_resting_order() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let resting = rest(&mut alice, yes(), Side::Sell, 5_000, 5);
    let resting_id = id_of(&mut alice, &resting);
    let p = place(&mut alice, yes(), Side::Buy, 5_000, 5, OrderType::Gtc);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("live"), "no trade with itself: {p}");
    assert_eq!(p["tradeIds"], json!([]));
    let open = open_orders(&mut alice);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["side"], json!("BUY"));
    assert_eq!(
        alice.cancel(resting_id, market()).unwrap().json(),
        json!({ "canceled": [], "notCanceled": { resting_id.to_string(): "already canceled" } })
    );
    assert_eq!(shares(&mut alice, YES), both("1000000000"));
    // Across the MINT path too: a resting BUY No of the same maker.
    let mint = rest(&mut alice, no(), Side::Buy, 3_000, 2);
    let p = place(&mut alice, yes(), Side::Buy, 7_000, 2, OrderType::Gtc);
    assert_eq!(p["status"], json!("live"), "{p}");
    assert_eq!(p["tradeIds"], json!([]));
    assert!(
        open_orders(&mut alice)
            .iter()
            .all(|o| o["order_hash"] != json!(mint)),
        "the resting BUY No was cancelled"
    );
}

#[test]
fn gtd_orders_leave_the_book_at_their_expiration() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let expiration = unix_now_s() + 2;
    let order = signed(
        &alice,
        builder(&alice, yes(), Side::Buy, 5_000, 10).expiration_s(expiration),
    );
    let (_, p) = post(&mut alice, &body_of(&order, OrderType::Gtd));
    assert_eq!(p["status"], json!("live"), "{p}");
    assert_eq!(collateral(&mut alice)["allowance"], json!("9995000000"));
    std::thread::sleep(std::time::Duration::from_millis(3_300));
    // Reads only: nothing else happened since.
    assert_eq!(
        book(&service, YES)["bids"],
        json!([]),
        "expired order left the book"
    );
    assert!(open_orders(&mut alice).is_empty());
    assert_eq!(collateral(&mut alice), both("10000000000"));
}

#[test]
fn post_only_is_refused_when_it_would_cross_by_mint_or_merge() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut bob, no(), Side::Buy, 4_500, 5); // a Yes ask at 0.55
    rest(&mut bob, no(), Side::Sell, 6_000, 5); // a Yes bid at 0.4
    for (side, ticks) in [(Side::Buy, 5_500), (Side::Sell, 4_000)] {
        let spec = ladder_client::OrderSpec {
            post_only: true,
            ..ladder_client::OrderSpec::gtc(yes(), side, ticks, 5)
        };
        let body = alice.order_body(&spec).unwrap();
        let r = alice.send("POST", "/order", Some(&body)).unwrap();
        assert_error(&r, 400, "post-only order would cross resting liquidity");
    }
    // Not crossing: it rests.
    let spec = ladder_client::OrderSpec {
        post_only: true,
        ..ladder_client::OrderSpec::gtc(yes(), Side::Buy, 5_400, 5)
    };
    let body = alice.order_body(&spec).unwrap();
    let (_, p) = post(&mut alice, &body);
    assert_eq!(p["status"], json!("live"), "{p}");
    assert_eq!(open_orders(&mut bob).len(), 2, "nothing traded");
}

#[test]
fn price_time_priority_holds_across_both_kinds_at_a_level() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let mut carol = new_trader(&service, 100_000_000);
    // At the Yes ask 0.6: bob's SELL Yes first, then carol's BUY No at 0.4.
    rest(&mut bob, yes(), Side::Sell, 6_000, 5);
    rest(&mut carol, no(), Side::Buy, 4_000, 5);
    assert_eq!(levels(&book(&service, YES)["asks"]), lv(&[("0.6", "10")]));
    let p = place(&mut alice, yes(), Side::Buy, 6_000, 5, OrderType::Fok);
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert!(open_orders(&mut bob).is_empty(), "bob was first");
    assert_eq!(open_orders(&mut carol).len(), 1);
    let p = place(&mut alice, yes(), Side::Buy, 6_000, 5, OrderType::Fok);
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert!(open_orders(&mut carol).is_empty());
    assert_eq!(shares(&mut carol, NO), both("5000000"));
    assert_eq!(collateral(&mut carol), both("98000000"));
    assert_eq!(collateral(&mut alice), both("9994000000"));
    assert_eq!(shares(&mut alice, YES), both("1010000000"));
}

#[test]
fn a_takers_price_improvement_is_not_left_reserved() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut bob, yes(), Side::Sell, 5_000, 4);
    // BUY 10 at 0.6: 4 fill at 0.5 (2.0 paid), 6 rest at 0.6 (3.6 reserved).
    let p = place(&mut alice, yes(), Side::Buy, 6_000, 10, OrderType::Gtc);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("live"), "{p}");
    assert_eq!(p["makingAmount"], json!("2000000"));
    assert_eq!(p["takingAmount"], json!("4"));
    assert_eq!(
        collateral(&mut alice),
        json!({ "balance": "9998000000", "allowance": "9994400000" })
    );
    let open = open_orders(&mut alice);
    assert_eq!(open[0]["size_matched"], json!("4"));
    assert_eq!(open[0]["original_size"], json!("10"));
    let r = alice.send("DELETE", "/cancel-all", None).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(collateral(&mut alice), both("9998000000"));
}

#[test]
fn polymarket_envelope_keys_and_uppercase_hex_are_accepted() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let api_key = alice.credentials.as_ref().unwrap().api_key.to_string();
    let order = signed(&alice, builder(&alice, yes(), Side::Buy, 2_000, 1));
    let mut v = body_value(&order, OrderType::Gtc);
    v["owner"] = json!(api_key);
    v["postOnly"] = json!(false);
    let sig = v["order"]["signature"].as_str().unwrap().to_string();
    v["order"]["signature"] = json!(format!("0x{}", sig[2..].to_ascii_uppercase()));
    let (status, p) = post(&mut alice, &v.to_string());
    assert_eq!((status, p["success"].clone()), (200, json!(true)), "{p}");
    assert_eq!(p["orderID"], json!(hash_of(&order)));
}

/// With `async` durability, a gateway thread (or the settlement thread) that finds the
/// sequencer thread asleep does the sequencer's round itself
/// (`ladder_sequencer_rounds_in_seat_total`): the answers, the book, the trades' settlement and
/// the state recovered after a SIGKILL are those the sequencer thread alone would make.
#[test]
fn with_async_durability_a_gateway_thread_sequences_for_a_sleeping_sequencer() {
    // Not pinned (`auto` pins on 4 cores or more, which closes the seat).
    let mut service = Service::start(&[
        "--durability",
        "async",
        "--sequencer-core",
        "none",
        "--settlement-delay-ms",
        "30",
    ]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    for step in 0..4 {
        rest(&mut bob, yes(), Side::Sell, 6_000 + 100 * step, 10);
        // The sequencer thread goes back to sleep between two requests.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let p = place(&mut alice, yes(), Side::Buy, 6_100, 15, OrderType::Gtc);
    assert_eq!(p["status"], json!("matched"), "{p}");
    assert_eq!(p["tradeIds"].as_array().unwrap().len(), 2, "{p}");
    assert_eq!(
        levels(&book(&service, YES)["asks"]),
        lv(&[("0.63", "10"), ("0.62", "10"), ("0.61", "5")])
    );
    let cancelled = open_ids(&mut bob)[0];
    assert_eq!(
        bob.cancel(cancelled, market()).unwrap().json(),
        json!({ "canceled": [cancelled.to_string()], "notCanceled": {} })
    );
    // Settlement's status changes go through the seat too: each trade reaches CONFIRMED.
    for id in p["tradeIds"].as_array().unwrap() {
        let path = format!("/trades/{}", id.as_str().unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let status = alice.send("GET", &path, None).unwrap().json()["status"].clone();
            if status == json!("CONFIRMED") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{path} stays {status}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let in_seat: f64 = metric(&service, "ladder_sequencer_rounds_in_seat_total")
        .parse()
        .unwrap();
    assert!(in_seat >= 1.0, "no round was done in the seat: {in_seat}");

    let before = service.admin("GET", "/admin/state-hash", None).json();
    service.kill_and_restart();
    let after = service.admin("GET", "/admin/state-hash", None).json();
    assert_eq!(
        before, after,
        "the journal replays to the state it answered from"
    );
    assert_eq!(
        levels(&book(&service, YES)["asks"]),
        lv(&[("0.63", "10"), ("0.62", "10")])
    );
}

/// `ladder client --exchange-address` signs for the service's `--exchange-address` (a
/// service on a chain has its contract's address there, never the default one): orders it
/// signs so are accepted, and without the flag the same order is refused as signed for
/// another exchange.
#[test]
fn ladder_client_signs_for_the_exchange_address_it_is_given() {
    let exchange = "0x00000000000000000000000000000000000aaaaa";
    let service = Service::start(&["--exchange-address", exchange]);
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials.json");
    let client = |args: &[&str]| {
        let out = ladder_client_as_trader_0(&service.url, &credentials, args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    client(&["create-key"]);
    let order = [
        "order", "--token", "yes", "--side", "buy", "--price", "0.40", "--size", "1",
    ];
    let refused = client(&order);
    assert_eq!(refused["success"], false, "{refused}");
    let mut with_flag = vec!["--exchange-address", exchange];
    with_flag.extend(order);
    let placed = client(&with_flag);
    assert_eq!(placed["success"], true, "{placed}");
}

/// A request the service refuses makes `ladder client` exit 1 with the status and the
/// service's error text on stderr's one line (API.md §19), the body on stdout.
#[test]
fn ladder_client_names_the_services_error_when_a_request_is_refused() {
    let service = Service::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials.json");
    let first = ladder_client_as_trader_0(&service.url, &credentials, &["create-key"]);
    assert!(first.status.success(), "{first:?}");
    let again = ladder_client_as_trader_0(&service.url, &credentials, &["create-key"]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    let body: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let error = body["error"].as_str().expect("an error text");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(
        stderr.lines().last(),
        Some(format!("ladder: HTTP 400: {error}").as_str()),
        "{stderr}"
    );
    let missing = ladder_client_as_trader_0(&service.url, &credentials, &["raw", "GET", "/nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr).ends_with("ladder: HTTP 404: not found\n"),
        "{missing:?}"
    );
}
