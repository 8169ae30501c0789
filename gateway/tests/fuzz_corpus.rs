//! Runs the seed corpus of the `http_request` and `ws_subscribe` fuzz targets
//! (`fuzz/corpus/<target>/`) through the same checks the fuzzer runs (`fuzz/src/<target>.rs`),
//! so the parsers' no-panic and round-trip properties are exercised on every test run, with or
//! without cargo-fuzz.

use std::path::PathBuf;

use ladder_gateway::http::parse_request;
use ladder_gateway::ws::conn::parse_user_subscribe;
use ladder_gateway::ws::parse_market_message;

#[path = "../../fuzz/src/http_request.rs"]
mod http_request;
#[path = "../../fuzz/src/ws_subscribe.rs"]
mod ws_subscribe;

/// Every file of `fuzz/corpus/<target>/`, by name.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "{}: only {} files",
        dir.display(),
        files.len()
    );
    files
}

/// Runs `check` on every file, naming the file that fails.
fn run_all(target: &str, check: fn(&[u8])) -> Vec<(String, Vec<u8>)> {
    let files = corpus(target);
    for (name, data) in &files {
        if let Err(panic) = std::panic::catch_unwind(|| check(data)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("fuzz/corpus/{target}/{name}: {message}");
        }
    }
    files
}

fn data<'a>(files: &'a [(String, Vec<u8>)], name: &str) -> &'a [u8] {
    &files
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("seed {name} is missing"))
        .1
}

#[test]
fn http_request_corpus_passes_the_fuzz_checks() {
    let files = run_all("http_request", http_request::check);
    // The valid seeds stay valid, so the fuzzer starts from requests that get past the parser.
    for name in [
        "get_time.http",
        "post_order.http",
        "pipelined.http",
        "ws_upgrade.http",
    ] {
        assert!(
            matches!(parse_request(data(&files, name)), Ok(Some(_))),
            "{name} no longer parses"
        );
    }
}

#[test]
fn ws_subscribe_corpus_passes_the_fuzz_checks() {
    let files = run_all("ws_subscribe", ws_subscribe::check);
    let text = |name| String::from_utf8(data(&files, name).to_vec()).unwrap();
    for name in [
        "market_type.json",
        "market_subscribe.json",
        "market_unsubscribe.json",
    ] {
        assert!(
            parse_market_message(&text(name)).is_ok(),
            "{name} no longer parses"
        );
    }
    for name in ["user.json", "user_no_markets.json"] {
        assert!(
            parse_user_subscribe(&text(name)).is_ok(),
            "{name} no longer parses"
        );
    }
}
