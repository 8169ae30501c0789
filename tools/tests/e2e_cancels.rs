//! Black-box checks of the cancel operations (API.md §2.5, 4.5–4.7; API.md §5, 8).

mod helpers;
mod support;

use helpers::*;
use ladder_client::{
    cancel_market_orders_request, cancel_order_request, cancel_orders_body, Trader, Wallet,
};
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Side, SignatureType, B256};
use serde_json::{json, Value};
use support::*;

fn canceled_sorted(v: &Value) -> Vec<u64> {
    let mut ids: Vec<u64> = v["canceled"]
        .as_array()
        .unwrap_or_else(|| panic!("canceled is an array: {v}"))
        .iter()
        .map(|x| x.as_str().expect("ids are strings").parse().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

fn rest_id(
    trader: &mut Trader,
    token: ladder_protocol::U256,
    side: Side,
    ticks: u32,
    n: u64,
) -> u64 {
    let hash = rest(trader, token, side, ticks, n);
    id_of(trader, &hash)
}

fn cancel_as(trader: &mut Trader, body: &str) -> Value {
    let r = trader.send("DELETE", "/order", Some(body)).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn cancel_one_order_reports_each_reason() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);

    assert_eq!(
        alice.cancel(9_999, market()).unwrap().json(),
        json!({ "canceled": [], "notCanceled": { "9999": "not found" } })
    );

    let bobs = rest_id(&mut bob, yes(), Side::Buy, 2_000, 3);
    assert_eq!(
        alice.cancel(bobs, market()).unwrap().json(),
        json!({ "canceled": [], "notCanceled": { bobs.to_string(): "not owner" } })
    );
    assert_eq!(open_ids(&mut bob), [bobs], "still live for its owner");

    let filled = rest_id(&mut alice, yes(), Side::Buy, 5_000, 5);
    let taken = place(&mut bob, yes(), Side::Sell, 5_000, 5, OrderType::Gtc);
    assert_eq!(taken["status"], json!("matched"), "{taken}");
    assert_eq!(
        alice.cancel(filled, market()).unwrap().json(),
        json!({ "canceled": [], "notCanceled": { filled.to_string(): "already filled" } })
    );
    // Another's filled order is still "not owner" to a stranger.
    assert_eq!(
        bob.cancel(filled, market()).unwrap().json(),
        json!({ "canceled": [], "notCanceled": { filled.to_string(): "not owner" } })
    );

    let partial = rest_id(&mut alice, yes(), Side::Buy, 4_000, 5);
    place(&mut bob, yes(), Side::Sell, 4_000, 2, OrderType::Gtc);
    let open = open_orders(&mut alice);
    assert_eq!(open[0]["size_matched"], json!("2"));
    assert_eq!(
        alice.cancel(partial, market()).unwrap().json(),
        json!({ "canceled": [partial.to_string()], "notCanceled": {} })
    );
    assert_eq!(
        alice.cancel(partial, market()).unwrap().json(),
        json!({ "canceled": [], "notCanceled": { partial.to_string(): "already canceled" } })
    );
    assert_eq!(
        balance(&mut alice, "asset_type=COLLATERAL"),
        json!({ "balance": "9996700000", "allowance": "9996700000" }),
        "2.5 + 0.8 paid, nothing reserved"
    );
}

#[test]
fn a_cancel_whose_signature_does_not_check_out_is_not_canceled() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let id = rest_id(&mut alice, yes(), Side::Buy, 2_000, 3);
    let invalid = json!({ "canceled": [], "notCanceled": { id.to_string(): "invalid signature" } });

    // Type 0 must recover to the maker (a smart account: no key recovers to it).
    let body = cancel_order_request(
        &alice.wallet,
        &alice.exchange,
        id,
        market(),
        SignatureType::Eoa,
    )
    .to_json();
    assert_eq!(cancel_as(&mut alice, &body), invalid);

    // Type 3 naming the owner as signer, signed by someone else.
    let stranger = Wallet::random();
    let mut request = cancel_order_request(
        &stranger,
        &alice.exchange,
        id,
        market(),
        SignatureType::SmartAccount,
    );
    request.signer = Some(alice.wallet.address());
    assert_eq!(cancel_as(&mut alice, &request.to_json()), invalid);

    // Signed over another order id.
    let mut request = cancel_order_request(
        &alice.wallet,
        &alice.exchange,
        id + 1,
        market(),
        SignatureType::SmartAccount,
    );
    request.order_id = id;
    assert_eq!(cancel_as(&mut alice, &request.to_json()), invalid);

    assert_eq!(open_ids(&mut alice), [id]);
}

#[test]
fn a_type_3_cancel_signer_must_control_the_maker() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let id = rest_id(&mut alice, yes(), Side::Buy, 2_000, 3);
    // A stranger signs and names itself as signer: it recovers, but controls nothing.
    let stranger = Wallet::random();
    let body = cancel_order_request(
        &stranger,
        &alice.exchange,
        id,
        market(),
        SignatureType::SmartAccount,
    )
    .to_json();
    assert_eq!(
        cancel_as(&mut alice, &body),
        json!({ "canceled": [], "notCanceled": { id.to_string(): "invalid signature" } })
    );
    assert_eq!(open_ids(&mut alice), [id]);
}

#[test]
fn delete_orders_cancels_several_and_reports_the_rest() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let a1 = rest_id(&mut alice, yes(), Side::Buy, 2_000, 1);
    let a2 = rest_id(&mut alice, no(), Side::Buy, 2_000, 1);
    let a3 = rest_id(&mut alice, yes(), Side::Sell, 8_000, 1);
    let b1 = rest_id(&mut bob, yes(), Side::Buy, 2_000, 1);
    let v = delete_orders(&mut alice, &[a1, a3, b1, 9_999]);
    assert_eq!(canceled_sorted(&v), [a1, a3]);
    assert_eq!(
        v["notCanceled"],
        json!({ b1.to_string(): "not owner", "9999": "not found" })
    );
    assert_eq!(open_ids(&mut alice), [a2]);
    assert_eq!(open_ids(&mut bob), [b1]);
    // An order named twice is reported once, as cancelled.
    let v = delete_orders(&mut alice, &[a2, a2]);
    assert_eq!(canceled_sorted(&v), [a2]);
    assert_eq!(v["notCanceled"], json!({}));
}

/// `DELETE /orders` of `trader`'s signed cancels of `ids` on the market; its 200 answer.
fn delete_orders(trader: &mut Trader, ids: &[u64]) -> Value {
    let requests: Vec<_> = ids
        .iter()
        .map(|&id| {
            cancel_order_request(
                &trader.wallet,
                &trader.exchange,
                id,
                market(),
                SignatureType::SmartAccount,
            )
        })
        .collect();
    let r = trader
        .send("DELETE", "/orders", Some(&cancel_orders_body(&requests)))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn delete_orders_takes_the_full_batch_of_1000_cancels() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let kept = rest_id(&mut alice, yes(), Side::Buy, 2_000, 1);
    let gone = rest_id(&mut alice, yes(), Side::Buy, 2_100, 1);
    let ids: Vec<u64> = std::iter::once(gone).chain(100_000..100_999).collect();
    let requests: Vec<_> = ids
        .iter()
        .map(|&id| {
            cancel_order_request(
                &alice.wallet,
                &alice.exchange,
                id,
                market(),
                SignatureType::SmartAccount,
            )
        })
        .collect();
    let body = cancel_orders_body(&requests);
    assert!(
        body.len() > 64 * 1024,
        "the batch is past the general limit"
    );
    let r = alice.send("DELETE", "/orders", Some(&body)).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(canceled_sorted(&v), [gone]);
    assert_eq!(v["notCanceled"].as_object().map(|m| m.len()), Some(999));
    assert_eq!(open_ids(&mut alice), [kept]);
    // One more is refused by count, and the general limit stands for every other route.
    let mut over = requests.clone();
    over.push(requests[0]);
    let r = alice
        .send("DELETE", "/orders", Some(&cancel_orders_body(&over)))
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    let r = alice.send("DELETE", "/order", Some(&body)).unwrap();
    assert_eq!(r.status, 413, "{}", r.body);
}

#[test]
fn cancel_market_orders_by_market_and_by_token() {
    let service = Service::start(&[]);
    let other = create_market(&service, 0x62, json!({}));
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let y1 = rest_id(&mut alice, yes(), Side::Buy, 2_000, 1);
    let n1 = rest_id(&mut alice, no(), Side::Buy, 2_000, 1);
    let y2 = rest_id(&mut alice, yes(), Side::Sell, 8_000, 1);
    let elsewhere = rest_id(&mut alice, other.yes(), Side::Buy, 2_000, 1);
    let bobs = rest_id(&mut bob, yes(), Side::Buy, 2_000, 1);

    let send = |trader: &mut Trader, market: B256, token| {
        let body = cancel_market_orders_request(
            &trader.wallet,
            &trader.exchange,
            market,
            token,
            SignatureType::SmartAccount,
        )
        .to_json();
        let r = trader
            .send("DELETE", "/cancel-market-orders", Some(&body))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    let v = send(&mut alice, market(), Some(yes()));
    assert_eq!(canceled_sorted(&v), [y1, y2]);
    assert_eq!(v["notCanceled"], json!({}));
    assert_eq!(open_ids(&mut alice), [n1, elsewhere]);
    let v = send(&mut alice, market(), None);
    assert_eq!(
        v,
        json!({ "canceled": [n1.to_string()], "notCanceled": {} })
    );
    let v = send(&mut alice, market(), None);
    assert_eq!(v, json!({ "canceled": [], "notCanceled": {} }));
    assert_eq!(open_ids(&mut alice), [elsewhere]);
    assert_eq!(open_ids(&mut bob), [bobs]);
}

#[test]
fn cancel_all_cancels_every_open_order_of_the_caller() {
    let service = Service::start(&[]);
    let other = create_market(&service, 0x63, json!({}));
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let ids = vec![
        rest_id(&mut alice, yes(), Side::Buy, 2_000, 10),
        rest_id(&mut alice, no(), Side::Sell, 9_000, 10),
        rest_id(&mut alice, other.no(), Side::Buy, 3_000, 10),
    ];
    let bobs = rest_id(&mut bob, yes(), Side::Buy, 2_000, 1);
    let r = alice.send("DELETE", "/cancel-all", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(canceled_sorted(&v), ids);
    assert_eq!(v["notCanceled"], json!({}));
    assert!(open_orders(&mut alice).is_empty());
    assert_eq!(open_ids(&mut bob), [bobs]);
    assert_eq!(
        balance(&mut alice, "asset_type=COLLATERAL"),
        json!({ "balance": "10000000000", "allowance": "10000000000" }),
        "reservations released"
    );
    assert_eq!(
        balance(&mut alice, &format!("asset_type=CONDITIONAL&token_id={NO}")),
        json!({ "balance": "1000000000", "allowance": "1000000000" })
    );
    let r = alice.send("DELETE", "/cancel-all", None).unwrap();
    assert_eq!(r.json(), json!({ "canceled": [], "notCanceled": {} }));
    // The book no longer shows them.
    let (_, book) = get(&service, &format!("/book?token_id={YES}"));
    assert_eq!(book["bids"], json!([{ "price": "0.2", "size": "1" }]));
    assert_eq!(book["asks"], json!([]));
}

#[test]
fn a_market_cancel_that_fails_its_signature_reports_each_order_and_cancels_nothing() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let y = rest_id(&mut alice, yes(), Side::Buy, 2_000, 1);
    let n = rest_id(&mut alice, no(), Side::Buy, 2_000, 1);
    let send = |trader: &mut Trader, body: String| {
        let r = trader
            .send("DELETE", "/cancel-market-orders", Some(&body))
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    let both_invalid = json!({ "canceled": [], "notCanceled": {
        y.to_string(): "invalid signature", n.to_string(): "invalid signature" } });

    // A stranger signs and names itself as signer: it recovers, but controls nothing.
    let stranger = Wallet::random();
    let request = cancel_market_orders_request(
        &stranger,
        &alice.exchange,
        market(),
        None,
        SignatureType::SmartAccount,
    );
    assert_eq!(send(&mut alice, request.to_json()), both_invalid);

    // Alice's signature over another market does not verify for this one.
    let mut request = cancel_market_orders_request(
        &alice.wallet,
        &alice.exchange,
        B256::from([0x44; 32]),
        None,
        SignatureType::SmartAccount,
    );
    request.market_id = market();
    assert_eq!(send(&mut alice, request.to_json()), both_invalid);
    // Limited to one token, only that token's order is named.
    request.token_id = Some(yes());
    assert_eq!(
        send(&mut alice, request.to_json()),
        json!({ "canceled": [], "notCanceled": { y.to_string(): "invalid signature" } })
    );
    assert_eq!(open_ids(&mut alice), [y, n]);

    // A market the exchange does not know holds nothing to cancel.
    let unknown = cancel_market_orders_request(
        &alice.wallet,
        &alice.exchange,
        B256::from([0x45; 32]),
        None,
        SignatureType::SmartAccount,
    );
    assert_eq!(
        send(&mut alice, unknown.to_json()),
        json!({ "canceled": [], "notCanceled": {} })
    );
    assert_eq!(open_ids(&mut alice), [y, n]);
}
