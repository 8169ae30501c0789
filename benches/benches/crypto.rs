//! Cryptography on the order path: the EIP-712 order digest, secp256k1 address recovery, the
//! L2 HMAC (sign and verify), parsing a POST /order body, and writing ids as text.
//!
//! Run: `cargo bench -p ladder-benches --bench crypto`.

// criterion_group! and criterion_main! make public functions that cannot carry docs.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ladder_protocol::wire::PostOrderRequest;
use ladder_protocol::{order_digest, ExchangeDomain, L2Secret, SignedOrder};

/// The first order vector of `protocol/tests/data/signing.json` as a POST /order body.
const POST_ORDER_BODY: &str = concat!(
    r#"{"order":{"salt":"1234567","maker":"0x5a11c0C0a000000000000000000000000000A001","#,
    r#""signer":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","#,
    r#""beneficiary":"0x5a11c0C0a000000000000000000000000000A001","#,
    r#""tokenId":"52114319501245915516055106046884209969926127482827954674443846427813813222426","#,
    r#""makerAmount":"5500000","takerAmount":"10000000","expiration":"0","nonce":"0","#,
    r#""identifier":"0x00112233445566778899aabbccddeeff","#,
    r#""metadata":"0x0000000000000000000000000000000000000000000000000000000000000000","#,
    r#""side":0,"signatureType":3,"#,
    r#""signature":"0x54554ff3357d0512c7225c528998a6739bdc90c947c3f28f49dfdd904d00862d78cc173a734690ab28ec40508c74219399df817d8199dabd1158d62ef6fb9c811c"},"#,
    r#""orderType":"GTC","postOnly":false}"#
);

/// The HMAC vectors' secret.
const SECRET: &str = "c2VjcmV0LWZvci10ZXN0LXZlY3RvcnMtb25seS0zMmI=";

fn signed_order() -> SignedOrder {
    PostOrderRequest::parse(POST_ORDER_BODY.as_bytes())
        .expect("the vector body parses")
        .order
}

fn bench_order_digest(c: &mut Criterion) {
    let order = signed_order().order;
    let domain = ExchangeDomain::default();
    c.bench_function("order_digest", |b| {
        b.iter(|| order_digest(black_box(&order), &domain))
    });
}

fn bench_recover_address(c: &mut Criterion) {
    let signed = signed_order();
    let digest = signed.digest(&ExchangeDomain::default());
    c.bench_function("recover_address", |b| {
        b.iter(|| black_box(&signed.signature).recover_address(black_box(&digest)))
    });
}

fn bench_verify_order(c: &mut Criterion) {
    let signed = signed_order();
    let domain = ExchangeDomain::default();
    c.bench_function("verify_order (digest + recover + compare)", |b| {
        b.iter(|| black_box(signed).verify(&domain))
    });
}

fn bench_parse_post_order(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_post_order");
    group.throughput(Throughput::Bytes(POST_ORDER_BODY.len() as u64));
    group.bench_function("body", |b| {
        b.iter(|| PostOrderRequest::parse(black_box(POST_ORDER_BODY.as_bytes())))
    });
    group.finish();
}

fn bench_l2_hmac(c: &mut Criterion) {
    let secret = L2Secret::from_base64(SECRET).expect("the vector secret decodes");
    let signature = secret.sign("1700000000", "POST", "/order", POST_ORDER_BODY.as_bytes());
    c.bench_function("l2_hmac_sign", |b| {
        b.iter(|| {
            secret.sign(
                "1700000000",
                "POST",
                "/order",
                black_box(POST_ORDER_BODY.as_bytes()),
            )
        })
    });
    c.bench_function("l2_hmac_verify", |b| {
        b.iter(|| {
            secret.verify(
                "1700000000",
                "POST",
                "/order",
                black_box(POST_ORDER_BODY.as_bytes()),
                black_box(&signature),
            )
        })
    });
}

/// Writing the ids of a user frame or response: an address in EIP-55 form and an owner id
/// (both remembered per thread after the first time), and a token id in decimal. 64
/// addresses in turn, as a market maker's frames would name them.
fn bench_id_text(c: &mut Criterion) {
    let addresses: Vec<ladder_protocol::Address> = (0..64u8)
        .map(|i| ladder_protocol::Address([i.wrapping_mul(37); 20]))
        .collect();
    let token = signed_order().order.token_id;
    let mut next = addresses.iter().cycle();
    c.bench_function("address_eip55_text", |b| {
        b.iter(|| black_box(next.next().map(ToString::to_string)))
    });
    let mut next = addresses.iter().cycle();
    c.bench_function("owner_uuid", |b| {
        b.iter(|| {
            next.next()
                .map(|a| black_box(ladder_protocol::owner_uuid(a)))
        })
    });
    c.bench_function("token_id_decimal_text", |b| {
        b.iter(|| black_box(black_box(token).to_string()))
    });
}

criterion_group!(
    benches,
    bench_id_text,
    bench_order_digest,
    bench_recover_address,
    bench_verify_order,
    bench_parse_post_order,
    bench_l2_hmac
);
criterion_main!(benches);
