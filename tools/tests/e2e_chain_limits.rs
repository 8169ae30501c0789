//! Chain calls a client can cause before it is authenticated (API.md §18): an L1 request
//! whose signer is not the address asks the address's ERC-1271 `isValidSignature` on the
//! node (`--rpc-url`). Random signers for a smart account cannot make the node work more than
//! the per-address chain-call budget allows. A fake JSON-RPC node counts the calls. A call the
//! node ran and the account failed (it halted) is a "no", not a node that could not be asked.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ladder_client::{Trader, Wallet};
use ladder_protocol::Address;
use support::{demo_trader_at, Service};

/// How the fake node answers `eth_call`.
#[derive(Clone, Copy)]
enum CallAnswer {
    /// A word that is not the magic value.
    NotMagic,
    /// The error anvil gives when the account's code hits an invalid opcode.
    Halted,
}

/// Answers one JSON-RPC request read from `stream`; false when the connection ended.
fn answer(stream: &mut BufReader<TcpStream>, calls: &AtomicUsize, call_answer: CallAnswer) -> bool {
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; content_length];
    if stream.read_exact(&mut body).is_err() {
        return false;
    }
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let result = match request["method"].as_str().unwrap_or("") {
        "eth_call" => {
            calls.fetch_add(1, Ordering::SeqCst);
            match call_answer {
                // Not the magic word: the account does not accept the signer.
                CallAnswer::NotMagic => {
                    serde_json::json!(format!("0x{}", "ff".repeat(4) + &"00".repeat(28)))
                }
                CallAnswer::Halted => {
                    let reply = serde_json::json!({ "jsonrpc": "2.0", "id": request["id"],
                        "error": {"code": -32603, "message": "EVM error InvalidFEOpcode"} });
                    return write_reply(stream, &reply.to_string());
                }
            }
        }
        "eth_accounts" => serde_json::json!(["0x70997970c51812dc3a010c7d01b50e0d17dc79c8"]),
        "eth_getCode" => serde_json::json!("0x"),
        "eth_chainId" => serde_json::json!("0xc97"),
        _ => serde_json::json!("0x0"),
    };
    let reply =
        serde_json::json!({ "jsonrpc": "2.0", "id": request["id"], "result": result }).to_string();
    write_reply(stream, &reply)
}

/// Writes `reply` as an HTTP 200 with a JSON body; false when the connection ended.
fn write_reply(stream: &mut BufReader<TcpStream>, reply: &str) -> bool {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        reply.len()
    );
    stream
        .get_mut()
        .write_all([head.as_bytes(), reply.as_bytes()].concat().as_slice())
        .is_ok()
}

/// A node on loopback that answers every `eth_call` with `call_answer` and counts them.
fn fake_node(call_answer: CallAnswer) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let calls = counted.clone();
            std::thread::spawn(move || {
                let mut stream = BufReader::new(stream);
                while answer(&mut stream, &calls, call_answer) {}
            });
        }
    });
    (url, calls)
}

#[test]
fn random_signers_for_a_smart_account_cost_the_node_at_most_the_chain_call_budget() {
    let (node, calls) = fake_node(CallAnswer::NotMagic);
    let service = Service::start(&["--rpc-url", &node, "--rpc-timeout-ms", "2000"]);
    let account = Address::parse("0x5a11c0C0a000000000000000000000000000A001").unwrap();
    let mut statuses = Vec::new();
    let started = std::time::Instant::now();
    for _ in 0..70 {
        // A fresh signer each time: no cached answer helps.
        let trader = Trader::new(&service.url, Wallet::random(), account).unwrap();
        let r = service
            .http()
            .request("GET", "/auth/derive-api-key", &trader.l1(0), None)
            .unwrap();
        statuses.push(r.status);
    }
    let refused_by_budget = statuses.iter().filter(|&&s| s == 429).count();
    let judged = statuses.iter().filter(|&&s| s == 401).count();
    assert_eq!(judged + refused_by_budget, 70, "{statuses:?}");
    // The budget is 50 calls, refilled at 5 per second: a slow (loaded) machine spreads the
    // 70 requests over more time and earns the refill.
    let refilled = (5.0 * started.elapsed().as_secs_f64()).ceil() as usize;
    let most = 50 + refilled + 1;
    assert!(
        judged >= 45 && judged <= most,
        "about 50 (+{refilled} refilled) judged on the chain: {statuses:?}"
    );
    if most < 70 {
        assert!(
            refused_by_budget > 0,
            "the budget refused none: {statuses:?}"
        );
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        judged,
        "one eth_call per judged request"
    );

    // Past the budget the node is not asked and the registry decides alone: the demo
    // account's linked owner still logs in, while a random signer is refused with the 429.
    let spent = loop {
        let stranger = Trader::new(&service.url, Wallet::random(), account).unwrap();
        let r = service
            .http()
            .request("GET", "/auth/derive-api-key", &stranger.l1(0), None)
            .unwrap();
        if r.status == 429 {
            break calls.load(Ordering::SeqCst);
        }
        assert_eq!(r.status, 401, "{}", r.body);
    };
    let mut owner = demo_trader_at(&service.url, 0);
    let r = owner.create_api_key(7).unwrap();
    assert_eq!(r.status, 200, "a linked owner past the budget: {}", r.body);
    let r = owner.derive_api_key(7).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // A token may have come back between the two requests (5 a second): at most one call.
    assert!(calls.load(Ordering::SeqCst) <= spent + 2);
}

#[test]
fn an_account_whose_check_halts_refuses_the_signer_instead_of_asking_to_retry() {
    let (node, calls) = fake_node(CallAnswer::Halted);
    let service = Service::start(&["--rpc-url", &node, "--rpc-timeout-ms", "2000"]);
    let account = Address::parse("0x5a11c0C0a000000000000000000000000000A001").unwrap();
    let stranger = Trader::new(&service.url, Wallet::random(), account).unwrap();
    let r = service
        .http()
        .request("GET", "/auth/derive-api-key", &stranger.l1(0), None)
        .unwrap();
    assert_eq!(r.status, 401, "a halted check is a 'no': {}", r.body);
    assert!(!r.body.contains("smart-account check failed"), "{}", r.body);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the node was asked");
}
