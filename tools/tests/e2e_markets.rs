//! Black-box checks of the public reads (API.md §2.7–2.9, 4.10–4.14; API.md §11, 11, 13, 18):
//! markets, books and their hash, prices, last trades, price history, claimable, time, and
//! the caller's balances.

mod helpers;
mod support;

use helpers::*;
use ladder_client::unix_now_s;
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::{json, Value};
use support::*;

const BOOK_KEYS: [&str; 10] = [
    "market",
    "asset_id",
    "timestamp",
    "hash",
    "bids",
    "asks",
    "min_order_size",
    "tick_size",
    "neg_risk",
    "last_trade_price",
];

fn is_trimmed_decimal(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s == "0"
            || s == "1"
            || (s.starts_with("0.")
                && s.len() > 2
                && s[2..].chars().all(|c| c.is_ascii_digit())
                && !s.ends_with('0'))
    })
}

/// Checks a book's `hash`: SHA-1 of its compact JSON with `hash` set to "" (key order kept).
fn assert_book_hash(book: &Value) {
    let presented = book["hash"].as_str().expect("hash is a string").to_string();
    let mut blank = book.clone();
    blank["hash"] = json!("");
    let compact = serde_json::to_string(&blank).unwrap();
    assert_eq!(presented, sha1_hex(compact.as_bytes()), "hash of {compact}");
}

fn assert_book_keys(book: &Value) {
    let keys: Vec<&str> = book
        .as_object()
        .expect("a book is an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(&keys[..BOOK_KEYS.len()], BOOK_KEYS, "key order: {keys:?}");
    assert!(book["seq"].is_u64(), "seq is an integer: {book}");
}

#[test]
fn sha1_helper_matches_known_answers() {
    assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    assert_eq!(
        sha1_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
    );
}

#[test]
fn time_is_a_bare_integer_of_unix_seconds() {
    let service = Service::start(&[]);
    let r = public(&service, "GET", "/time", None);
    assert_eq!(r.status, 200);
    assert!(
        !r.body.is_empty() && r.body.chars().all(|c| c.is_ascii_digit()),
        "bare integer: {:?}",
        r.body
    );
    let t: u64 = r.body.parse().unwrap();
    assert!(t.abs_diff(unix_now_s()) <= 5, "{t}");
}

#[test]
fn markets_and_sampling_markets_page_in_creation_order() {
    let service = Service::start(&[]);
    let created: Vec<NewMarket> = (0x71..=0x74)
        .map(|n| {
            create_market(
                &service,
                n,
                json!({ "minimum_tick_size": "0.01", "neg_risk": n == 0x72 }),
            )
        })
        .collect();
    let mut expected_ids = vec![CONDITION_ID.to_string()];
    expected_ids.extend(created.iter().map(|m| m.condition_id.clone()));

    for path in ["/markets", "/sampling-markets"] {
        let (status, all) = get(&service, path);
        assert_eq!(status, 200, "{all}");
        assert_eq!(all["count"], json!(5));
        assert_eq!(all["limit"], json!(100));
        assert_eq!(all["next_cursor"], json!("LTE="));
        let demo = &all["data"][0];
        assert_eq!(demo["condition_id"], json!(CONDITION_ID));
        assert_eq!(demo["minimum_tick_size"], json!(0.001));
        assert_eq!(demo["neg_risk"], json!(false));
        assert_eq!(demo["active"], json!(true));
        let tokens = demo["tokens"].as_array().unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!(tokens[0]["token_id"], json!(YES));
        assert_eq!(tokens[0]["outcome"], json!("Yes"));
        assert_eq!(tokens[1]["token_id"], json!(NO));
        assert_eq!(tokens[1]["outcome"], json!("No"));
        assert!(
            tokens.iter().all(|t| is_trimmed_decimal(&t["price"])),
            "{demo}"
        );
        assert_eq!(demo.as_object().unwrap().len(), 5, "{demo}");
        assert_eq!(all["data"][2]["neg_risk"], json!(true));
        assert_eq!(all["data"][1]["minimum_tick_size"], json!(0.01));

        let mut seen = Vec::new();
        let mut cursors = Vec::new();
        let mut cursor = String::new();
        for _ in 0..3 {
            let (status, page) = get(&service, &format!("{path}?limit=2&next_cursor={cursor}"));
            assert_eq!(status, 200, "{page}");
            assert_eq!(page["limit"], json!(2));
            let data = page["data"].as_array().unwrap();
            assert_eq!(page["count"], json!(data.len()));
            seen.extend(
                data.iter()
                    .map(|m| m["condition_id"].as_str().unwrap().to_string()),
            );
            cursor = page["next_cursor"].as_str().unwrap().to_string();
            cursors.push(cursor.clone());
        }
        assert_eq!(cursors, ["Mg==", "NA==", "LTE="], "{path}");
        assert_eq!(seen, expected_ids, "{path}");
        let (status, end) = get(&service, &format!("{path}?next_cursor=LTE="));
        assert_eq!(status, 200);
        assert_eq!(end["data"], json!([]));
        assert_eq!(end["next_cursor"], json!("LTE="));
        let r = public(
            &service,
            "GET",
            &format!("{path}?next_cursor=nonsense!"),
            None,
        );
        error_text(&r, 400);
        for huge in ["5000", "99999999999999999999999"] {
            let (_, clamped) = get(&service, &format!("{path}?limit={huge}"));
            assert_eq!(clamped["limit"], json!(500), "{huge}");
        }
    }

    let (status, one) = get(&service, &format!("/markets/{}", created[1].condition_id));
    assert_eq!(status, 200, "{one}");
    let (_, all) = get(&service, "/markets");
    assert_eq!(one, all["data"][2]);
    assert_eq!(one["neg_risk"], json!(true));
    assert_eq!(one["tokens"][0]["token_id"], json!(created[1].yes));
    assert_eq!(one["tokens"][1]["token_id"], json!(created[1].no));

    let unknown = format!("0x{}", "99".repeat(32));
    let r = public(&service, "GET", &format!("/markets/{unknown}"), None);
    assert_error(&r, 404, "not found");
}

/// The book of the tests below: Yes bids 0.5 x10, 0.52 x5 and (SELL No at 0.45) 0.55 x4;
/// Yes asks 0.58 x3 and 0.6 x7.
fn build_book(service: &Service) {
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_000, 10);
    rest(&mut alice, yes(), Side::Buy, 5_200, 5);
    rest(&mut bob, yes(), Side::Sell, 6_000, 7);
    rest(&mut bob, yes(), Side::Sell, 5_800, 3);
    rest(&mut bob, no(), Side::Sell, 4_500, 4);
}

fn level(p: &str, s: &str) -> Value {
    json!({ "price": p, "size": s })
}

#[test]
fn the_book_shows_both_axes_best_last_with_polymarkets_hash() {
    let service = Service::start(&[]);
    build_book(&service);
    let before_ms = u128::from(unix_now_s()) * 1000;

    let (status, yes_book) = get(&service, &format!("/book?token_id={YES}"));
    assert_eq!(status, 200, "{yes_book}");
    assert_book_keys(&yes_book);
    assert_book_hash(&yes_book);
    assert_eq!(yes_book["market"], json!(CONDITION_ID));
    assert_eq!(yes_book["asset_id"], json!(YES));
    assert_eq!(
        yes_book["bids"],
        json!([level("0.5", "10"), level("0.52", "5"), level("0.55", "4")])
    );
    assert_eq!(
        yes_book["asks"],
        json!([level("0.6", "7"), level("0.58", "3")])
    );
    assert_eq!(yes_book["min_order_size"], json!("1"));
    assert_eq!(yes_book["tick_size"], json!("0.001"));
    assert_eq!(yes_book["neg_risk"], json!(false));
    let ts: u128 = yes_book["timestamp"]
        .as_str()
        .expect("timestamp is a string")
        .parse()
        .expect("ms digits");
    assert!(
        ts + 5_000 >= before_ms && ts <= before_ms + 5_000,
        "milliseconds: {ts}"
    );
    let hash = yes_book["hash"].as_str().unwrap();
    assert_eq!(hash.len(), 40);
    assert!(hash
        .chars()
        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)));

    let (status, no_book) = get(&service, &format!("/book?token_id={NO}"));
    assert_eq!(status, 200, "{no_book}");
    assert_book_keys(&no_book);
    assert_book_hash(&no_book);
    assert_eq!(no_book["asset_id"], json!(NO));
    assert_eq!(
        no_book["bids"],
        json!([level("0.4", "7"), level("0.42", "3")])
    );
    assert_eq!(
        no_book["asks"],
        json!([level("0.5", "10"), level("0.48", "5"), level("0.45", "4")])
    );

    let r = public(
        &service,
        "POST",
        "/books",
        Some(&json!([{ "token_id": YES }, { "token_id": NO }]).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let books = r.json();
    let books = books.as_array().expect("an array of books");
    assert_eq!(books.len(), 2);
    for (book, expected) in books.iter().zip([&yes_book, &no_book]) {
        assert_book_keys(book);
        assert_book_hash(book);
        for key in [
            "market",
            "asset_id",
            "bids",
            "asks",
            "min_order_size",
            "tick_size",
        ] {
            assert_eq!(book[key], expected[key], "{key}");
        }
    }

    let r = public(&service, "GET", "/book?token_id=123456", None);
    assert_error(&r, 404, "not found");
    error_text(&public(&service, "GET", "/book", None), 400);
}

#[test]
fn price_midpoint_and_spread() {
    let service = Service::start(&[]);
    build_book(&service);
    let other = create_market(&service, 0x81, json!({}));
    let cases = [
        (
            format!("/price?token_id={YES}&side=BUY"),
            json!({ "price": "0.55" }),
        ),
        (
            format!("/price?token_id={YES}&side=SELL"),
            json!({ "price": "0.58" }),
        ),
        (
            format!("/price?token_id={NO}&side=BUY"),
            json!({ "price": "0.42" }),
        ),
        (
            format!("/price?token_id={NO}&side=SELL"),
            json!({ "price": "0.45" }),
        ),
        (
            format!("/midpoint?token_id={YES}"),
            json!({ "mid": "0.565" }),
        ),
        (
            format!("/midpoint?token_id={NO}"),
            json!({ "mid": "0.435" }),
        ),
        (
            format!("/spread?token_id={YES}"),
            json!({ "spread": "0.03" }),
        ),
        (
            format!("/spread?token_id={NO}"),
            json!({ "spread": "0.03" }),
        ),
    ];
    for (path, expected) in cases {
        let (status, v) = get(&service, &path);
        assert_eq!((status, v), (200, expected), "{path}");
    }
    for side in ["BUY", "SELL"] {
        let r = public(
            &service,
            "GET",
            &format!("/price?token_id={}&side={side}", other.yes),
            None,
        );
        assert_error(&r, 404, "no orders");
    }
    error_text(
        &public(&service, "GET", &format!("/price?token_id={YES}"), None),
        400,
    );
    let r = public(&service, "GET", "/price?token_id=424242&side=BUY", None);
    assert_eq!(r.status, 404, "{}", r.body);
}

#[test]
fn tick_size_neg_risk_and_fee_rate() {
    let service = Service::start(&[]);
    let other = create_market(
        &service,
        0x82,
        json!({ "minimum_tick_size": "0.01", "neg_risk": true, "fee_rate_bps": 25 }),
    );
    let cases = [
        (
            format!("/tick-size?token_id={YES}"),
            json!({ "minimum_tick_size": 0.001 }),
        ),
        (
            format!("/neg-risk?token_id={NO}"),
            json!({ "neg_risk": false }),
        ),
        (
            format!("/fee-rate?token_id={YES}"),
            json!({ "fee_rate_bps": "0" }),
        ),
        (
            format!("/tick-size?token_id={}", other.no),
            json!({ "minimum_tick_size": 0.01 }),
        ),
        (
            format!("/neg-risk?token_id={}", other.yes),
            json!({ "neg_risk": true }),
        ),
        (
            format!("/fee-rate?token_id={}", other.yes),
            json!({ "fee_rate_bps": "25" }),
        ),
    ];
    for (path, expected) in cases {
        let (status, v) = get(&service, &path);
        assert_eq!((status, v), (200, expected), "{path}");
    }
    for path in ["/tick-size", "/neg-risk", "/fee-rate"] {
        let r = public(&service, "GET", &format!("{path}?token_id=31337"), None);
        assert_error(&r, 404, "not found");
    }
}

#[test]
fn last_trades_prices_on_get_and_post_omit_tokens_without_trades() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let body = json!([{ "token_id": YES }, { "token_id": NO }]).to_string();
    for method in ["GET", "POST"] {
        let r = public(&service, method, "/last-trades-prices", Some(&body));
        assert_eq!((r.status, r.json()), (200, json!([])), "{method}");
    }
    rest(&mut alice, yes(), Side::Buy, 5_500, 10);
    let p = place(&mut bob, yes(), Side::Sell, 5_000, 4, OrderType::Gtc);
    assert_eq!(p["status"], json!("matched"), "{p}");
    for method in ["GET", "POST"] {
        let r = public(&service, method, "/last-trades-prices", Some(&body));
        assert_eq!(r.status, 200, "{method}: {}", r.body);
        assert_eq!(
            r.json(),
            json!([{ "token_id": YES, "price": "0.55", "side": "SELL" }]),
            "{method}"
        );
    }
    let (_, book) = get(&service, &format!("/book?token_id={YES}"));
    assert_eq!(book["last_trade_price"], json!("0.55"));
    assert_book_hash(&book);
    let r = public(
        &service,
        "GET",
        "/last-trades-prices",
        Some("{\"token_id\":1}"),
    );
    error_text(&r, 400);
}

/// A MINT (BUY Yes against a resting BUY No) trades both tokens: each token's last trade
/// price is its own side of the fill (the taker's at its price and side, the maker's at the
/// maker's price and side); the same after a MERGE.
#[test]
fn a_mint_or_merge_moves_the_last_trade_price_of_both_tokens() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let body = json!([{ "token_id": YES }, { "token_id": NO }]).to_string();
    rest(&mut alice, no(), Side::Buy, 4_500, 5);
    let p = place(&mut bob, yes(), Side::Buy, 5_500, 5, OrderType::Gtc);
    assert_eq!(p["status"], json!("matched"), "{p}");
    let r = public(&service, "POST", "/last-trades-prices", Some(&body));
    assert_eq!(
        r.json(),
        json!([
            { "token_id": YES, "price": "0.55", "side": "BUY" },
            { "token_id": NO, "price": "0.45", "side": "BUY" }
        ])
    );
    let (_, book) = get(&service, &format!("/book?token_id={NO}"));
    assert_eq!(book["last_trade_price"], json!("0.45"));

    // MERGE: both sell back what they minted, Bob resting SELL Yes at 0.6, Alice selling No
    // at 0.3 or better (0.6 + 0.3 <= 1): she fills at the maker's price, No at 0.4.
    rest(&mut bob, yes(), Side::Sell, 6_000, 5);
    let p = place(&mut alice, no(), Side::Sell, 3_000, 5, OrderType::Gtc);
    assert_eq!(p["status"], json!("matched"), "{p}");
    let r = public(&service, "POST", "/last-trades-prices", Some(&body));
    assert_eq!(
        r.json(),
        json!([
            { "token_id": YES, "price": "0.6", "side": "SELL" },
            { "token_id": NO, "price": "0.4", "side": "SELL" }
        ])
    );
}

#[test]
fn prices_history_has_polymarkets_shape() {
    let service = Service::start(&[]);
    let quiet = create_market(&service, 0x83, json!({}));
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_500, 10);
    place(&mut bob, yes(), Side::Sell, 5_000, 4, OrderType::Gtc);
    let now = unix_now_s();
    let (status, v) = get(
        &service,
        &format!(
            "/prices-history?market={YES}&startTs={}&endTs={}&fidelity=1",
            now - 3_600,
            now + 60
        ),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
    let history = v["history"].as_array().expect("history array");
    assert_eq!(history.len(), 1, "{v}");
    let point = history[0].as_object().unwrap();
    assert_eq!(point.len(), 2, "{v}");
    let t = point["t"].as_u64().expect("t is an integer");
    assert!(t <= now + 1 && t + 120 >= now, "{t} vs {now}");
    assert!(point["p"].is_number(), "p is a number: {v}");
    assert_eq!(point["p"], json!(0.55));
    let (status, v) = get(
        &service,
        &format!(
            "/prices-history?market={}&startTs=0&endTs={}",
            quiet.yes,
            now + 60
        ),
    );
    assert_eq!(status, 200, "{v}");
    assert!(v["history"].is_array(), "{v}");
    // A fidelity of any size is one bucket at most, not an overflow.
    let (status, v) = get(
        &service,
        &format!("/prices-history?market={YES}&startTs=0&fidelity=307445734561825861"),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["history"].as_array().map(Vec::len), Some(1), "{v}");
    error_text(&public(&service, "GET", "/prices-history", None), 400);
}

/// A token's price history is its own trades', as its last trade price is: a trade of the
/// other token alone leaves it, a MINT or a MERGE trades both.
#[test]
fn prices_history_of_a_token_follows_its_own_trades() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let history = |token: &str| {
        let path = format!(
            "/prices-history?market={token}&startTs=0&endTs={}&fidelity=1",
            unix_now_s() + 60
        );
        let (status, v) = get(&service, &path);
        assert_eq!(status, 200, "{v}");
        v["history"]
            .as_array()
            .expect("history")
            .iter()
            .map(|point| point["p"].as_f64().expect("p"))
            .collect::<Vec<f64>>()
    };
    // Yes trades at 0.33; then No trades with No at 0.2 (the book's Yes ask at 0.8).
    rest(&mut alice, yes(), Side::Buy, 3_300, 5);
    place(&mut bob, yes(), Side::Sell, 3_300, 2, OrderType::Gtc);
    assert_eq!(history(NO), Vec::<f64>::new(), "No has not traded");
    rest(&mut alice, no(), Side::Buy, 2_000, 3);
    place(&mut bob, no(), Side::Sell, 2_000, 1, OrderType::Gtc);
    assert_eq!(history(YES).last(), Some(&0.33), "a No trade is not Yes's");
    assert_eq!(history(NO).last(), Some(&0.2));
    // A MINT trades both: Bob buys Yes at 0.75 from Alice's resting No bid at 0.25.
    rest(&mut alice, no(), Side::Buy, 2_500, 1);
    place(&mut bob, yes(), Side::Buy, 7_500, 1, OrderType::Gtc);
    assert_eq!(history(YES).last(), Some(&0.75));
    assert_eq!(history(NO).last(), Some(&0.25));
    let body = json!([{ "token_id": YES }, { "token_id": NO }]).to_string();
    let last = public(&service, "POST", "/last-trades-prices", Some(&body)).json();
    assert_eq!(last[0]["price"], json!("0.75"), "{last}");
    assert_eq!(last[1]["price"], json!("0.25"), "{last}");
}

#[test]
fn prices_history_of_a_market_without_trades_is_empty() {
    let service = Service::start(&[]);
    let quiet = create_market(&service, 0x85, json!({}));
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_500, 10);
    place(&mut bob, yes(), Side::Sell, 5_000, 4, OrderType::Gtc);
    let now = unix_now_s();
    for token in [&quiet.yes, &quiet.no] {
        let (status, v) = get(
            &service,
            &format!(
                "/prices-history?market={token}&startTs=0&endTs={}&fidelity=1",
                now + 60
            ),
        );
        assert_eq!(
            (status, v),
            (200, json!({ "history": [] })),
            "token {token}"
        );
    }
}

#[test]
fn claimable_lists_winners_and_refunds_until_redeemed() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    rest(&mut alice, yes(), Side::Buy, 5_500, 10);
    place(&mut bob, yes(), Side::Sell, 5_000, 4, OrderType::Gtc);
    let alice_addr = KEYS[0].1;
    let bob_addr = KEYS[1].1;
    let (status, v) = get(&service, &format!("/claimable?address={alice_addr}"));
    assert_eq!(
        (status, v),
        (200, json!({ "address": alice_addr, "claimable": [] }))
    );

    admin_ok(
        &service,
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/resolve"),
        json!({ "outcome": "Yes" }),
    );
    let entry = |balance: &str| {
        json!({
            "market_id": CONDITION_ID,
            "outcome": "Yes",
            "token_id": YES,
            "balance": balance,
            "refund_reason": "resolved_winner"
        })
    };
    // Asked in lowercase, answered in EIP-55.
    let (status, v) = get(
        &service,
        &format!("/claimable?address={}", alice_addr.to_ascii_lowercase()),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v,
        json!({ "address": alice_addr, "claimable": [entry("1004000000")] })
    );
    let (_, v) = get(&service, &format!("/claimable?address={bob_addr}"));
    assert_eq!(v["claimable"], json!([entry("996000000")]));

    // Resolution cancelled alice's remaining order and released its reservation.
    assert!(open_orders(&mut alice).is_empty());
    let c = balance(&mut alice, "asset_type=COLLATERAL");
    assert_eq!(c["balance"], c["allowance"], "{c}");
    assert_eq!(c["balance"], json!("9997800000"));
    let (_, m) = get(&service, &format!("/markets/{CONDITION_ID}"));
    assert_eq!(m["active"], json!(false), "{m}");
    let p = place(&mut alice, yes(), Side::Buy, 5_000, 1, OrderType::Gtc);
    rejection(&p);

    admin_ok(
        &service,
        "POST",
        "/admin/redemptions",
        json!({ "address": alice_addr, "condition_id": CONDITION_ID }),
    );
    let (_, v) = get(&service, &format!("/claimable?address={alice_addr}"));
    assert_eq!(v, json!({ "address": alice_addr, "claimable": [] }));
    let (_, v) = get(&service, &format!("/claimable?address={bob_addr}"));
    assert_eq!(v["claimable"], json!([entry("996000000")]));

    // A voided market refunds every non-zero position.
    let voided = create_market(&service, 0x84, json!({}));
    let account = alice.account;
    deposit(&service, &account, &voided.yes, 5_000_000);
    deposit(&service, &account, &voided.no, 3_000_000);
    admin_ok(
        &service,
        "POST",
        &format!("/admin/markets/{}/resolve", voided.condition_id),
        json!({ "outcome": "void" }),
    );
    let (_, v) = get(&service, &format!("/claimable?address={alice_addr}"));
    let mut entries = v["claimable"].as_array().unwrap().clone();
    entries.sort_by_key(|e| e["outcome"].as_str().unwrap().to_string());
    assert_eq!(
        entries,
        vec![
            json!({
                "market_id": voided.condition_id,
                "outcome": "No",
                "token_id": voided.no,
                "balance": "3000000",
                "refund_reason": "voided_refund"
            }),
            json!({
                "market_id": voided.condition_id,
                "outcome": "Yes",
                "token_id": voided.yes,
                "balance": "5000000",
                "refund_reason": "voided_refund"
            }),
        ]
    );
    admin_ok(
        &service,
        "POST",
        "/admin/redemptions",
        json!({ "address": alice_addr, "condition_id": voided.condition_id }),
    );
    let (_, v) = get(&service, &format!("/claimable?address={alice_addr}"));
    assert_eq!(v["claimable"], json!([]));

    let stranger = ladder_client::Wallet::random().address().to_string();
    let (_, v) = get(&service, &format!("/claimable?address={stranger}"));
    assert_eq!(v, json!({ "address": stranger, "claimable": [] }));
    error_text(&public(&service, "GET", "/claimable", None), 400);
}

#[test]
fn balance_allowance_for_collateral_and_tokens() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    assert_eq!(
        balance(&mut alice, "asset_type=COLLATERAL"),
        json!({ "balance": "10000000000", "allowance": "10000000000" })
    );
    assert_eq!(
        balance(
            &mut alice,
            &format!("asset_type=CONDITIONAL&token_id={YES}")
        ),
        json!({ "balance": "1000000000", "allowance": "1000000000" })
    );
    rest(&mut alice, yes(), Side::Sell, 9_000, 10);
    assert_eq!(
        balance(
            &mut alice,
            &format!("asset_type=CONDITIONAL&token_id={YES}")
        ),
        json!({ "balance": "1000000000", "allowance": "990000000" })
    );
    for bad in [
        "/balance-allowance?asset_type=CONDITIONAL",
        "/balance-allowance",
        "/balance-allowance?asset_type=GOLD",
    ] {
        let r = alice.send("GET", bad, None).unwrap();
        error_text(&r, 400);
    }
}

/// Book reads come from the read side, which every release updates before it answers: a
/// read on another connection (so on any gateway thread) right after each acknowledged order
/// finds it, and `seq` never goes back.
#[test]
fn a_book_read_right_after_an_acknowledgement_shows_the_order() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut last_seq = 0;
    for n in 1..=20u64 {
        rest(&mut alice, yes(), Side::Buy, 4_000, 1);
        let (status, book) = get(&service, &format!("/book?token_id={YES}"));
        assert_eq!(status, 200, "{book}");
        assert_eq!(
            book["bids"],
            json!([level("0.4", &n.to_string())]),
            "after order {n}"
        );
        let seq = book["seq"].as_u64().expect("seq");
        assert!(
            seq > last_seq,
            "seq rises with each change: {seq} after {last_seq}"
        );
        last_seq = seq;
        let (_, price) = get(&service, &format!("/price?token_id={NO}&side=SELL"));
        assert_eq!(price, json!({ "price": "0.6" }), "the No token sees it too");
    }
}

/// The read side is rebuilt from the journal on start: after a SIGKILL and restart, the
/// books, last trade and price history read the same as before.
#[test]
fn book_and_price_history_reads_survive_a_restart() {
    let mut service = Service::start(&[]);
    {
        let mut alice = service.trader(0);
        let mut bob = service.trader(1);
        rest(&mut alice, yes(), Side::Buy, 5_500, 10);
        rest(&mut alice, yes(), Side::Buy, 5_100, 2);
        place(&mut bob, yes(), Side::Sell, 5_000, 4, OrderType::Gtc);
        rest(&mut bob, no(), Side::Buy, 4_000, 1);
    }
    let now = unix_now_s();
    let reads = [
        format!("/book?token_id={YES}"),
        format!("/book?token_id={NO}"),
        format!(
            "/prices-history?market={YES}&startTs=0&endTs={}&fidelity=1",
            now + 60
        ),
        format!("/midpoint?token_id={YES}"),
    ];
    let read_all = |service: &Service| -> Vec<Value> {
        reads
            .iter()
            .map(|path| {
                let (status, mut v) = get(service, path);
                assert_eq!(status, 200, "{path}: {v}");
                if let Some(book) = v.as_object_mut() {
                    // The read time and the hash over it differ between reads.
                    book.remove("timestamp");
                    book.remove("hash");
                }
                v
            })
            .collect()
    };
    let before = read_all(&service);
    assert_eq!(
        before[0]["bids"],
        json!([level("0.51", "2"), level("0.55", "6")])
    );
    assert_eq!(before[0]["asks"], json!([level("0.6", "1")]));
    assert_eq!(
        before[2]["history"].as_array().map(Vec::len),
        Some(1),
        "{}",
        before[2]
    );
    service.kill_and_restart();
    assert_eq!(read_all(&service), before);
}
