//! Parsing a POST /order body: the whole request parse (the linear pre-scan, simd-json's
//! borrowed DOM and the field readers; serde_json DOM before, 5.96 us) against the JSON step
//! alone with serde_json and with simd-json, to decide which parser the hot path uses.

// criterion_group! and criterion_main! make public functions that cannot carry docs.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ladder_protocol::wire::order::PostOrderRequest;

const BODY: &str = r#"{"order":{"salt":"1234567","maker":"0x5a11c0C0a000000000000000000000000000A001","signer":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","beneficiary":"0x5a11c0C0a000000000000000000000000000A001","tokenId":"52114319501245915516055106046884209969926127482827954674443846427813813222426","makerAmount":"5500000","takerAmount":"10000000","expiration":"0","nonce":"0","identifier":"0x00112233445566778899aabbccddeeff","metadata":"0x0000000000000000000000000000000000000000000000000000000000000000","side":0,"signatureType":3,"signature":"0x54554ff3357d0512c7225c528998a6739bdc90c947c3f28f49dfdd904d00862d78cc173a734690ab28ec40508c74219399df817d8199dabd1158d62ef6fb9c811c"},"orderType":"GTC","postOnly":false}"#;

fn parse(c: &mut Criterion) {
    let body = BODY.as_bytes();
    assert!(PostOrderRequest::parse(body).is_ok());
    let mut group = c.benchmark_group("post_order_body");
    group.bench_function("request parse (DOM + fields)", |b| {
        b.iter(|| PostOrderRequest::parse(black_box(body)))
    });
    group.bench_function("serde_json to Value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(body)))
    });
    group.bench_function("simd-json to serde_json Value (with the copy)", |b| {
        b.iter(|| {
            let mut copy = black_box(body).to_vec();
            simd_json::serde::from_slice::<serde_json::Value>(&mut copy)
        })
    });
    group.bench_function("simd-json to borrowed value (with the copy)", |b| {
        b.iter(|| {
            let mut copy = black_box(body).to_vec();
            simd_json::to_borrowed_value(&mut copy).map(|v| drop(black_box(v)))
        })
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
