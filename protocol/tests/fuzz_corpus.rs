//! Runs the seed corpus of the `post_order` fuzz target (`fuzz/corpus/post_order/`) through the
//! same checks the fuzzer runs (`fuzz/src/post_order.rs`), so the order and cancel parsers'
//! no-panic and round-trip properties are exercised on every test run, with or without
//! cargo-fuzz.

use std::path::PathBuf;

use ladder_protocol::wire::{
    parse_cancel_orders, parse_post_orders, CancelMarketOrdersRequest, CancelOrderRequest,
    PostOrderRequest,
};

#[path = "../../fuzz/src/post_order.rs"]
mod post_order;

#[test]
fn post_order_corpus_passes_the_fuzz_checks() {
    let dir = run_corpus("post_order", post_order::check);

    // The valid seeds stay valid, so the fuzzer starts from bodies that get past the parsers.
    let seed = |name: &str| std::fs::read(dir.join(name)).unwrap();
    for name in [
        "order_gtc.json",
        "order_fok_int_salt_sell.json",
        "order_gtd_post_only.json",
    ] {
        let parsed = PostOrderRequest::parse(&seed(name));
        assert!(parsed.is_ok(), "{name}: {parsed:?}");
    }
    assert_eq!(
        parse_post_orders(&seed("orders_batch.json")).map(|b| b.len()),
        Ok(2)
    );
    assert_eq!(
        parse_cancel_orders(&seed("cancel_orders.json")).map(|b| b.len()),
        Ok(2)
    );
    assert!(CancelOrderRequest::parse(&seed("cancel_order.json")).is_ok());
    assert!(CancelMarketOrdersRequest::parse(&seed("cancel_market.json")).is_ok());
}

#[path = "../../fuzz/src/bundler_request.rs"]
mod bundler_request;

/// The `bundler_request` target's seed corpus passes its checks, and its valid seeds parse (so
/// the fuzzer starts from operations that get past the parser).
#[test]
fn bundler_request_corpus_passes_the_fuzz_checks() {
    let dir = run_corpus("bundler_request", bundler_request::check);
    for name in ["send_vector.json", "send_factory_paymaster.json"] {
        let call: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap();
        let parsed = ladder_protocol::user_op::parse_user_operation(&call["params"][0]);
        assert!(parsed.is_ok(), "{name}: {parsed:?}");
    }
}

/// Runs every file of `fuzz/corpus/<target>/` (at least 5) through `check`, naming the file
/// of a panic; returns the directory.
fn run_corpus(target: &str, check: fn(&[u8])) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../fuzz/corpus/{target}"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "{}: only {} files",
        dir.display(),
        files.len()
    );
    for path in &files {
        let data = std::fs::read(path).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{}: {message}", path.display());
        }
    }
    dir
}
