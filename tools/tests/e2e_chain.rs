//! Ladder against a real local EVM node (anvil, installed by `.ci/install-chain-tools.sh`):
//! ERC-1271 smart accounts sign API keys, orders and cancels with no registry entry; a match
//! settles on the test exchange contract (MATCHED → MINED → CONFIRMED, recorded on chain);
//! a batch the contract reverts goes through RETRYING to FAILED and is reversed; statuses
//! survive a restart.
//!
//! Without anvil the test says so and passes, unless `LADDER_REQUIRE_CHAIN=1` (set by
//! `.ci/run`), where a missing node is a failure.

mod helpers;
mod support;

use std::time::{Duration, Instant};

use helpers::{deposit, place, rejection, rest};
use ladder_chain::abi::{address_word, encode_call, selector, uint_word, Arg};
use ladder_client::{Trader, Wallet};
use ladder_protocol::user_op::{eip191_digest, execute_redeem_call_data, UserOperation};
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Address, ExchangeDomain, Side, CHAIN_ID, U256};
use serde_json::{json, Value};
use support::anvil::Anvil;
use support::{no, yes, Service};

/// A trader whose account is a freshly deployed SmartAccount owned by its wallet; nothing
/// is linked in Ladder's registry.
fn smart_trader(anvil: &Anvil, service: &Service, exchange: &ExchangeDomain) -> Trader {
    let wallet = Wallet::random();
    let account = anvil.deploy("SmartAccount", &[address_word(&wallet.address())]);
    deposit(service, &account, "COLLATERAL", 100_000_000);
    let mut trader = Trader::new(&service.url, wallet, account).expect("trader");
    trader.exchange = *exchange;
    trader
}

/// Two fresh smart-account traders (a maker and a taker) with API keys made through ERC-1271
/// L1.
fn keyed_smart_traders(
    anvil: &Anvil,
    service: &Service,
    exchange: &ExchangeDomain,
) -> (Trader, Trader) {
    let mut maker = smart_trader(anvil, service, exchange);
    let mut taker = smart_trader(anvil, service, exchange);
    for t in [&mut maker, &mut taker] {
        let r = t.create_api_key(0).expect("create key");
        assert_eq!(r.status, 200, "ERC-1271 L1: {}", r.body);
    }
    (maker, taker)
}

/// Two fresh smart-account traders make API keys (ERC-1271 L1) and a MINT: the maker bids
/// Yes at 0.60 for 10, the taker bids No at 0.40 for 10. Returns the taker, the trade id and
/// the batch's transaction hash.
fn smart_mint(
    anvil: &Anvil,
    service: &Service,
    exchange: &ExchangeDomain,
) -> (Trader, String, String) {
    let (mut maker, mut taker) = keyed_smart_traders(anvil, service, exchange);
    rest(&mut maker, yes(), Side::Buy, 6_000, 10);
    let matched = place(&mut taker, no(), Side::Buy, 4_000, 10, OrderType::Gtc);
    assert_eq!(matched["status"], json!("matched"), "{matched}");
    let text = |key: &str| matched[key][0].as_str().expect(key).to_string();
    (taker, text("tradeIds"), text("transactionsHashes"))
}

/// A `0x` transaction hash as the contract's `bytes32` batch id.
fn batch_word(batch: &str) -> [u8; 32] {
    hex::decode(batch.trim_start_matches("0x"))
        .expect("hex")
        .try_into()
        .expect("32 bytes")
}

fn trades(trader: &mut Trader) -> Vec<Value> {
    let r = trader.send("GET", "/trades", None).expect("GET /trades");
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    body.get("data")
        .and_then(Value::as_array)
        .or_else(|| body.as_array())
        .cloned()
        .expect("trades list")
}

/// Polls the trade `id` until its status is `want`, recording every status seen.
fn wait_status(trader: &mut Trader, id: &str, want: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = trader
            .send("GET", &format!("/trades/{id}"), None)
            .expect("GET /trades/{id}");
        assert_eq!(r.status, 200, "{}", r.body);
        let status = r.json()["status"].as_str().unwrap_or_default().to_string();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status == want {
            return;
        }
        assert!(Instant::now() < deadline, "trade {id} stuck: seen {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn collateral(trader: &mut Trader) -> u64 {
    helpers::balance(trader, "asset_type=COLLATERAL")["balance"]
        .as_str()
        .expect("balance")
        .parse()
        .expect("number")
}

/// A service settling on the exchange at `exchange_address` on `anvil`, final after
/// `confirmations` blocks, polling every 100 ms, with `extra` flags.
fn chain_service(
    anvil: &Anvil,
    exchange_address: &Address,
    confirmations: &str,
    extra: &[&str],
) -> Service {
    chain_service_polling(anvil, exchange_address, (confirmations, "100"), extra)
}

/// [`chain_service`] polling every `poll_ms`.
fn chain_service_polling(
    anvil: &Anvil,
    exchange_address: &Address,
    (confirmations, poll_ms): (&str, &str),
    extra: &[&str],
) -> Service {
    let exchange_text = exchange_address.to_lowercase_hex();
    let mut args = vec![
        "--rpc-url",
        &anvil.url,
        "--exchange-address",
        &exchange_text,
        "--chain-confirmations",
        confirmations,
        "--chain-poll-ms",
        poll_ms,
    ];
    args.extend_from_slice(extra);
    Service::start(&args)
}

/// The test exchange deployed on `anvil` (anvil's first account is its operator) and a
/// service settling on it: two confirmations, polled every 100 ms.
fn exchange_and_service(anvil: &Anvil) -> (Address, ExchangeDomain, Service) {
    let exchange_address = anvil.deploy("TestExchange", &[]);
    let service = chain_service(anvil, &exchange_address, "2", &[]);
    (
        exchange_address,
        ExchangeDomain::new(CHAIN_ID, exchange_address),
        service,
    )
}

#[test]
fn smart_accounts_verify_and_batches_settle_on_a_local_chain() {
    let Some(anvil) = Anvil::start() else { return };
    // The exchange first, so the operator (anvil's first account) is its operator.
    let (exchange_address, exchange, mut service) = exchange_and_service(&anvil);
    let exchange_text = exchange_address.to_lowercase_hex();

    // L1: the account's owner creates an API key for it; a stranger cannot.
    let mut maker = smart_trader(&anvil, &service, &exchange);
    let mut taker = smart_trader(&anvil, &service, &exchange);
    let mut stranger = Trader::new(&service.url, Wallet::random(), maker.account).expect("t");
    stranger.exchange = exchange;
    let refused = stranger.create_api_key(0).expect("request");
    assert_eq!(refused.status, 401, "{}", refused.body);
    for t in [&mut maker, &mut taker] {
        let r = t.create_api_key(0).expect("create key");
        assert_eq!(r.status, 200, "ERC-1271 L1: {}", r.body);
    }

    // Orders: the owner's signature passes; a stranger's (with the maker's key) does not.
    let mut forger = Trader::new(&service.url, Wallet::random(), maker.account).expect("t");
    forger.exchange = exchange;
    forger.credentials = maker.credentials.clone();
    let forged = place(&mut forger, yes(), Side::Buy, 6_000, 10, OrderType::Gtc);
    assert!(
        rejection(&forged).contains("signer does not control"),
        "{forged}"
    );
    // A cancel signed by the owner (signature type 3) is accepted on the chain's word.
    let resting = rest(&mut maker, yes(), Side::Buy, 5_000, 10);
    let id = helpers::id_of(&mut maker, &resting);
    let r = maker.cancel(id, support::market()).expect("cancel");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["canceled"], json!([id.to_string()]), "{}", r.body);

    // A MINT: the maker bids Yes at 0.60, the taker bids No at 0.40.
    let maker_before = collateral(&mut maker);
    rest(&mut maker, yes(), Side::Buy, 6_000, 10);
    let matched = place(&mut taker, no(), Side::Buy, 4_000, 10, OrderType::Gtc);
    assert_eq!(matched["status"], json!("matched"), "{matched}");
    let trade_id = matched["tradeIds"][0]
        .as_str()
        .expect("trade id")
        .to_string();
    let batch = matched["transactionsHashes"][0]
        .as_str()
        .expect("batch hash")
        .to_string();
    let mut seen = Vec::new();
    wait_status(&mut taker, &trade_id, "CONFIRMED", &mut seen);
    assert_eq!(
        seen.first().map(String::as_str),
        Some("MATCHED"),
        "{seen:?}"
    );
    assert!(seen.contains(&"MINED".to_string()), "{seen:?}");
    let batch_id = batch_word(&batch);
    let settled_at = anvil.call_word(
        &exchange_address,
        &encode_call(selector("settledAt(bytes32)"), &[Arg::Word(batch_id)]),
    );
    assert!(settled_at > 0, "the contract recorded the batch");
    let fills = anvil.call_word(
        &exchange_address,
        &encode_call(selector("fillCount(bytes32)"), &[Arg::Word(batch_id)]),
    );
    assert_eq!(fills, 1);
    let total = anvil.call_word(
        &exchange_address,
        &encode_call(selector("totalSize(bytes32)"), &[Arg::Word(batch_id)]),
    );
    assert_eq!(total, 10_000_000, "10 shares in base units");
    assert_eq!(collateral(&mut maker), maker_before - 6_000_000);

    // The contract refuses batches: the next match goes RETRYING → FAILED and is reversed.
    anvil.transact(
        Some(&exchange_text),
        &encode_call(selector("setRejecting(bool)"), &[Arg::Word(uint_word(1))]),
    );
    let maker_before = collateral(&mut maker);
    let taker_before = collateral(&mut taker);
    rest(&mut maker, yes(), Side::Buy, 5_500, 10);
    let failing = place(&mut taker, no(), Side::Buy, 4_500, 10, OrderType::Gtc);
    assert_eq!(failing["status"], json!("matched"), "{failing}");
    let failing_id = failing["tradeIds"][0].as_str().expect("id").to_string();
    let mut seen_failing = Vec::new();
    wait_status(&mut taker, &failing_id, "FAILED", &mut seen_failing);
    assert!(seen_failing.first().map(String::as_str) == Some("MATCHED"));
    assert_eq!(
        collateral(&mut maker),
        maker_before,
        "reversed for the maker"
    );
    assert_eq!(
        collateral(&mut taker),
        taker_before,
        "reversed for the taker"
    );

    // A restart replays the same statuses.
    let before: Vec<Value> = trades(&mut taker);
    service.restart();
    let mut taker_again =
        Trader::new(&service.url, taker.wallet.clone(), taker.account).expect("t");
    taker_again.exchange = exchange;
    taker_again.credentials = taker.credentials.clone();
    let after: Vec<Value> = trades(&mut taker_again);
    let statuses = |list: &[Value]| -> Vec<(String, String)> {
        list.iter()
            .map(|t| (t["id"].to_string(), t["status"].to_string()))
            .collect()
    };
    assert_eq!(statuses(&before), statuses(&after));
}

/// A batch whose transaction waits in the node's pool when the service is killed: the
/// restarted service finds it in the node's pending state and waits for it, instead of
/// sending it again (that estimate reverts on `batch already settled`) and failing a batch
/// the chain then settles. Mining resumes: CONFIRMED, never FAILED.
#[test]
fn a_batch_in_the_pool_across_a_crash_is_waited_for_not_failed() {
    let Some(anvil) = Anvil::start() else { return };
    let (exchange_address, exchange, mut service) = exchange_and_service(&anvil);
    let exchange_text = exchange_address.to_lowercase_hex();
    let (mut maker, mut taker) = keyed_smart_traders(&anvil, &service, &exchange);
    // No more blocks: the batch's transaction stays in the pool.
    anvil
        .rpc
        .call("evm_setIntervalMining", json!([0]))
        .expect("stop mining");
    rest(&mut maker, yes(), Side::Buy, 6_000, 10);
    let matched = place(&mut taker, no(), Side::Buy, 4_000, 10, OrderType::Gtc);
    assert_eq!(matched["status"], json!("matched"), "{matched}");
    let trade_id = matched["tradeIds"][0].as_str().expect("id").to_string();
    let batch = batch_word(matched["transactionsHashes"][0].as_str().expect("batch"));
    let settled_at = encode_call(selector("settledAt(bytes32)"), &[Arg::Word(batch)]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pending = anvil
            .rpc
            .eth_call_at(&exchange_text, &settled_at, "pending")
            .expect("settledAt at pending");
        if pending.iter().any(|&b| b != 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the batch never reached the pool"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    service.kill_and_restart();
    let mut taker = Trader::new(&service.url, taker.wallet.clone(), taker.account)
        .map(|mut t| {
            t.exchange = exchange;
            t.credentials = taker.credentials.clone();
            t
        })
        .expect("trader");
    // The restarted settler has looked several times (every 100 ms) before mining resumes.
    std::thread::sleep(Duration::from_millis(1_500));
    let mut seen = Vec::new();
    let r = taker
        .send("GET", &format!("/trades/{trade_id}"), None)
        .expect("GET /trades/{id}");
    assert_ne!(r.json()["status"], json!("FAILED"), "{}", r.body);
    anvil
        .rpc
        .call("evm_setIntervalMining", json!([1]))
        .expect("mine again");
    wait_status(&mut taker, &trade_id, "CONFIRMED", &mut seen);
    assert!(!seen.contains(&"FAILED".to_string()), "{seen:?}");
    assert!(
        anvil.call_word(&exchange_address, &settled_at) > 0,
        "the contract recorded the batch"
    );
}

/// With the chain down, the registry still decides; what it refuses says the chain could not
/// be asked, and a match waits in RETRYING. Needs no node.
#[test]
fn an_unreachable_chain_leaves_the_registry_in_charge_and_says_why() {
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let service = Service::start(&[
        "--rpc-url",
        &dead,
        "--chain-from",
        "0x0000000000000000000000000000000000000001",
        "--rpc-timeout-ms",
        "300",
        "--chain-poll-ms",
        "50",
    ]);
    // Linked in the registry: key, order and match work without the chain.
    let mut maker = helpers::new_trader(&service, 100_000_000);
    let mut taker = helpers::new_trader(&service, 100_000_000);
    rest(&mut maker, yes(), Side::Buy, 6_000, 10);

    // Not linked: the refusal names the chain's failure.
    let mut stranger =
        Trader::new(&service.url, Wallet::random(), Wallet::random().address()).expect("trader");
    let refused = stranger.create_api_key(0).expect("request");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("smart-account check failed: RPC node unreachable"),
        "{}",
        refused.body
    );
    let mut forger = Trader::new(&service.url, Wallet::random(), maker.account).expect("t");
    forger.credentials = maker.credentials.clone();
    let forged = place(&mut forger, yes(), Side::Buy, 6_000, 10, OrderType::Gtc);
    assert!(
        rejection(&forged).starts_with("smart-account check failed: RPC node unreachable"),
        "{forged}"
    );

    let matched = place(&mut taker, no(), Side::Buy, 4_000, 10, OrderType::Gtc);
    assert_eq!(matched["status"], json!("matched"), "{matched}");
    let trade_id = matched["tradeIds"][0].as_str().expect("id").to_string();
    let mut seen = Vec::new();
    wait_status(&mut taker, &trade_id, "RETRYING", &mut seen);
    // The refusal is immediate, so MATCHED may already be gone at the first look.
    assert!(
        seen == ["MATCHED", "RETRYING"] || seen == ["RETRYING"],
        "{seen:?}"
    );
}

/// `--rpc-url` with no contract at `--exchange-address`: ERC-1271 still uses the chain, and
/// batches settle with the built-in backend (an address without code would accept every
/// batch and record none).
#[test]
fn without_an_exchange_contract_batches_settle_with_the_built_in_backend() {
    let Some(anvil) = Anvil::start() else { return };
    let service = Service::start(&["--rpc-url", &anvil.url, "--settlement-delay-ms", "200"]);
    let exchange = ExchangeDomain::default();
    let (mut taker, trade_id, _) = smart_mint(&anvil, &service, &exchange);
    let mut seen = Vec::new();
    wait_status(&mut taker, &trade_id, "CONFIRMED", &mut seen);
    assert!(seen.contains(&"MINED".to_string()), "{seen:?}");
}

/// The chain keys batches by transaction hash (`settledAt`). A second deployment (a new data
/// directory) against the same exchange contract must settle its own batches, not find them
/// already settled by the first one's: their hashes differ although both are batch 0.
#[test]
fn a_new_data_directory_on_the_same_contract_settles_its_own_batches() {
    let Some(anvil) = Anvil::start() else { return };
    let exchange_address = anvil.deploy("TestExchange", &[]);
    let exchange = ExchangeDomain::new(CHAIN_ID, exchange_address);
    let mut batches = Vec::new();
    for _deployment in 0..2 {
        let service = chain_service(&anvil, &exchange_address, "1", &[]);
        let (mut taker, trade_id, batch) = smart_mint(&anvil, &service, &exchange);
        wait_status(&mut taker, &trade_id, "CONFIRMED", &mut Vec::new());
        let fills = anvil.call_word(
            &exchange_address,
            &encode_call(
                selector("fillCount(bytes32)"),
                &[Arg::Word(batch_word(&batch))],
            ),
        );
        assert_eq!(fills, 1, "this deployment's batch reached the contract");
        batches.push(batch);
    }
    assert_ne!(
        batches[0], batches[1],
        "each deployment's first batch has its own hash"
    );
}

/// `eth_*` call to the service's `POST /bundler`: the JSON-RPC answer.
fn bundler_call(service: &Service, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let r = helpers::public(service, "POST", "/bundler", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// The claimable entries of `account`.
fn claimable_of(service: &Service, account: &Address) -> Vec<Value> {
    let (status, body) = helpers::get(
        service,
        &format!("/claimable?address={}", account.to_lowercase_hex()),
    );
    assert_eq!(status, 200, "{body}");
    body["claimable"].as_array().expect("claimable").clone()
}

/// Chain mode (`--rpc-url` with `--bundler-url`): a market registered on the test exchange
/// trades (a MINT, settled on the chain, so the contract holds the positions), resolves No on
/// the chain and in Ladder; the No holder's smart account redeems through `POST /bundler`,
/// which checks the operation against the ledger and hands it to Alto beside the node; the
/// EntryPoint runs it, the exchange pays the test collateral, and once the redemption event
/// is final the entry leaves `/claimable`. A second redeem finds nothing.
#[test]
fn a_redeem_goes_through_the_bundler_beside_the_node() {
    let Some(anvil) = Anvil::start() else { return };
    let entry_point = anvil.place_entry_point();
    let Some(alto) = support::anvil::Alto::start(&anvil) else {
        return;
    };
    let exchange_address = anvil.deploy("TestExchange", &[]);
    let exchange_text = exchange_address.to_lowercase_hex();
    let condition = batch_word(support::CONDITION_ID);
    anvil.transact(
        Some(&exchange_text),
        &encode_call(
            selector("registerMarket(bytes32,uint256,uint256)"),
            &[
                Arg::Word(condition),
                Arg::Word(yes().to_be_bytes()),
                Arg::Word(no().to_be_bytes()),
            ],
        ),
    );
    let service = Service::start(&[
        "--rpc-url",
        &anvil.url,
        "--exchange-address",
        &exchange_text,
        // Six blocks (a block a second): a window in which the redemption is on the chain
        // but not final, so its entry is still in the ledger.
        "--chain-confirmations",
        "6",
        "--chain-poll-ms",
        "100",
        "--bundler-url",
        &alto.url,
    ]);
    let chain_id = bundler_call(&service, "eth_chainId", json!([]));
    assert_eq!(
        chain_id["result"],
        json!(format!("0x{CHAIN_ID:x}")),
        "{chain_id}"
    );

    let exchange = ExchangeDomain::new(CHAIN_ID, exchange_address);
    let (mut taker, trade_id, _) = smart_mint(&anvil, &service, &exchange);
    wait_status(&mut taker, &trade_id, "CONFIRMED", &mut Vec::new());
    let account = taker.account;
    let held = anvil.call_word(
        &exchange_address,
        &encode_call(
            selector("positions(address,uint256)"),
            &[
                Arg::Word(address_word(&account)),
                Arg::Word(no().to_be_bytes()),
            ],
        ),
    );
    assert_eq!(held, 10_000_000, "the contract holds the taker's No tokens");

    // Resolved No on the chain and in Ladder: the taker's 10 No shares are claimable.
    anvil.transact(
        Some(&exchange_text),
        &encode_call(
            selector("resolve(bytes32,uint8)"),
            &[Arg::Word(condition), Arg::Word(uint_word(2))],
        ),
    );
    helpers::admin_ok(
        &service,
        "POST",
        &format!("/admin/markets/{}/resolve", support::CONDITION_ID),
        json!({"outcome": "No"}),
    );
    let claimable = claimable_of(&service, &account);
    assert_eq!(claimable.len(), 1, "{claimable:?}");
    assert_eq!(claimable[0]["refund_reason"], json!("resolved_winner"));

    // The service's estimate is Alto's, with the fees it asks for.
    anvil.fund(&account);
    let probe = UserOperation {
        sender: account,
        call_data: execute_redeem_call_data(&exchange_address, &support::market()),
        signature: [[0u8; 31].as_slice(), &[1], &[0; 31], &[1], &[27]].concat(),
        ..UserOperation::default()
    };
    let estimate = bundler_call(
        &service,
        "eth_estimateUserOperationGas",
        json!([probe.to_json(), entry_point.to_string()]),
    );
    for field in ["callGasLimit", "verificationGasLimit", "maxFeePerGas"] {
        assert!(estimate["result"][field].is_string(), "{field}: {estimate}");
    }
    // A nonce the EntryPoint does not expect: refused before the bundler, saying which.
    let mut wrong = probe.clone();
    wrong.nonce = U256::from(3u64);
    let refused = bundler_call(
        &service,
        "eth_sendUserOperation",
        json!([wrong.to_json(), entry_point.to_string()]),
    );
    assert_eq!(
        refused["error"]["message"],
        json!("AA25 invalid account nonce"),
        "{refused}"
    );
    assert_eq!(
        refused["error"]["data"]["expectedNonce"],
        json!("0x0"),
        "{refused}"
    );

    // Signed by a stranger: the EntryPoint's simulation refuses it (Alto answers ERC-4337's
    // -32507), answered as CONTRACT 20's -32500.
    let quantity = |key: &str| {
        let text = estimate["result"][key].as_str().expect("estimate field");
        u128::from_str_radix(text.trim_start_matches("0x"), 16).expect("quantity")
    };
    let mut stranger_op = probe.clone();
    stranger_op.call_gas_limit = quantity("callGasLimit") * 3 / 2;
    stranger_op.verification_gas_limit = quantity("verificationGasLimit") * 3 / 2;
    stranger_op.pre_verification_gas = U256::from(quantity("preVerificationGas"));
    stranger_op.max_fee_per_gas = quantity("maxFeePerGas");
    stranger_op.max_priority_fee_per_gas = quantity("maxPriorityFeePerGas");
    let hash = stranger_op.hash(&entry_point, CHAIN_ID);
    stranger_op.signature = ladder_client::Wallet::random()
        .sign_digest(&eip191_digest(&hash))
        .as_bytes()
        .to_vec();
    let refused = bundler_call(
        &service,
        "eth_sendUserOperation",
        json!([stranger_op.to_json(), entry_point.to_string()]),
    );
    assert_eq!(refused["error"]["code"], json!(-32500), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("AA24")),
        "{refused}"
    );

    // The Rust client: execute(exchange, 0, redeem(conditionId)) with Alto's estimate,
    // signed by the owner, sent, and its receipt waited for.
    let receipt = taker.redeem(&support::market()).expect("redeem");
    assert_eq!(receipt["success"], json!(true), "{receipt}");
    assert_eq!(receipt["sender"], json!(account.to_string()), "{receipt}");

    // A second redeem before the first is final (its entry still listed): nothing to redeem,
    // refused before the bundler, though the EntryPoint would take its nonce.
    let second_redeem = |nonce: u64| {
        let mut op = probe.clone();
        op.nonce = U256::from(nonce);
        let hash = op.hash(&entry_point, CHAIN_ID);
        op.signature = taker
            .wallet
            .sign_digest(&eip191_digest(&hash))
            .as_bytes()
            .to_vec();
        bundler_call(
            &service,
            "eth_sendUserOperation",
            json!([op.to_json(), entry_point.to_string()]),
        )
    };
    assert_eq!(
        claimable_of(&service, &account).len(),
        1,
        "the redemption is not final yet"
    );
    let early = second_redeem(1);
    assert_eq!(early["error"]["code"], json!(-32500), "{early}");
    assert_eq!(
        early["error"]["message"],
        json!("nothing to redeem"),
        "{early}"
    );
    assert_eq!(
        claimable_of(&service, &account).len(),
        1,
        "still not final after the refusal: the chain refused it, not the ledger"
    );

    // The exchange paid the test collateral on the chain; the entry leaves /claimable once
    // the redemption is final.
    let collateral_address = anvil
        .rpc
        .eth_call(&exchange_text, &selector("collateral()"))
        .expect("collateral()");
    let collateral_address = Address(
        collateral_address[12..32]
            .try_into()
            .expect("collateral address"),
    );
    let paid = anvil.call_word(
        &collateral_address,
        &encode_call(
            selector("balanceOf(address)"),
            &[Arg::Word(address_word(&account))],
        ),
    );
    assert_eq!(paid, 10_000_000, "one unit of collateral per winning token");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !claimable_of(&service, &account).is_empty() {
        assert!(Instant::now() < deadline, "the redemption was not recorded");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Nothing left: refused before it reaches the bundler.
    let again = second_redeem(1);
    assert_eq!(again["error"]["code"], json!(-32500), "{again}");
    assert_eq!(
        again["error"]["message"],
        json!("nothing to redeem"),
        "{again}"
    );
}

/// A taker that fills 600 resting orders makes one batch of 600 fills: its gas is the
/// node's estimate with a margin, not a per-fill allowance that passed the block's gas
/// limit (the node refused that send, and the batch stayed RETRYING for ever).
#[test]
fn a_taker_filling_six_hundred_orders_settles_in_one_batch_on_the_chain() {
    let Some(anvil) = Anvil::start() else { return };
    let exchange_address = anvil.deploy("TestExchange", &[]);
    let service = chain_service(
        &anvil,
        &exchange_address,
        "1",
        &["--rate-limit-key", "0", "--rate-limit-ip", "0"],
    );
    let exchange = ExchangeDomain::new(CHAIN_ID, exchange_address);
    let (mut maker, mut taker) = keyed_smart_traders(&anvil, &service, &exchange);
    for trader in [&maker, &taker] {
        deposit(&service, &trader.account, "COLLATERAL", 1_000_000_000);
    }
    const FILLS: u64 = 600;
    for _ in 0..FILLS {
        rest(&mut maker, yes(), Side::Buy, 1_000, 1);
    }
    let matched = place(&mut taker, no(), Side::Buy, 9_000, FILLS, OrderType::Fak);
    assert_eq!(matched["status"], json!("matched"), "{matched}");
    assert_eq!(
        matched["tradeIds"].as_array().map(Vec::len),
        Some(FILLS as usize),
        "{matched}"
    );
    let trade_id = matched["tradeIds"][0]
        .as_str()
        .expect("trade id")
        .to_string();
    let mut seen = Vec::new();
    wait_status(&mut taker, &trade_id, "CONFIRMED", &mut seen);
    let batch_id = batch_word(matched["transactionsHashes"][0].as_str().expect("batch"));
    let fills = anvil.call_word(
        &exchange_address,
        &encode_call(selector("fillCount(bytes32)"), &[Arg::Word(batch_id)]),
    );
    assert_eq!(fills, FILLS as usize, "every fill recorded on the chain");
}

/// A redemption on the chain by an account that holds nothing of its market here (anyone may
/// redeem nothing) in a market this service has not resolved does not hold up the
/// redemptions after it: a holder's redemption in another market is recorded once final.
#[test]
fn a_redemption_of_nothing_in_a_market_unresolved_here_holds_up_no_other() {
    let Some(anvil) = Anvil::start() else { return };
    let exchange_address = anvil.deploy("TestExchange", &[]);
    let exchange_text = exchange_address.to_lowercase_hex();
    let service = chain_service(&anvil, &exchange_address, "1", &[]);
    let exchange = ExchangeDomain::new(CHAIN_ID, exchange_address);
    let second = helpers::create_market(&service, 9, json!({}));
    let (yes2, no2): (U256, U256) = (second.yes.parse().unwrap(), second.no.parse().unwrap());
    let register = |condition: [u8; 32], yes: U256, no: U256| {
        anvil.transact(
            Some(&exchange_text),
            &encode_call(
                selector("registerMarket(bytes32,uint256,uint256)"),
                &[
                    Arg::Word(condition),
                    Arg::Word(yes.to_be_bytes()),
                    Arg::Word(no.to_be_bytes()),
                ],
            ),
        );
    };
    let (first_condition, second_condition) = (
        batch_word(support::CONDITION_ID),
        batch_word(&second.condition_id),
    );
    register(first_condition, yes(), no());
    register(second_condition, yes2, no2);
    let on_chain = |call: &str, condition: [u8; 32], outcome: Option<u64>| {
        let mut args = vec![Arg::Word(condition)];
        args.extend(outcome.map(|o| Arg::Word(uint_word(o))));
        anvil.transact(Some(&exchange_text), &encode_call(selector(call), &args));
    };

    // The holder is a smart account the operator (anvil's first account) owns: it buys No
    // of the second market in a MINT that settles on the chain.
    let operator_key = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    let wallet = Wallet::from_secret_key(
        secp256k1::SecretKey::from_slice(&hex::decode(operator_key).unwrap()).unwrap(),
    );
    assert_eq!(wallet.address().to_lowercase_hex(), anvil.operator());
    let holder_address = anvil.deploy("SmartAccount", &[address_word(&wallet.address())]);
    deposit(&service, &holder_address, "COLLATERAL", 100_000_000);
    let mut holder = Trader::new(&service.url, wallet, holder_address).expect("trader");
    holder.exchange = exchange;
    let r = holder.create_api_key(0).expect("create key");
    assert_eq!(r.status, 200, "{}", r.body);
    let mut maker = smart_trader(&anvil, &service, &exchange);
    let r = maker.create_api_key(0).expect("create key");
    assert_eq!(r.status, 200, "{}", r.body);
    rest(&mut maker, yes2, Side::Buy, 6_000, 10);
    let matched = place(&mut holder, no2, Side::Buy, 4_000, 10, OrderType::Gtc);
    assert_eq!(matched["status"], json!("matched"), "{matched}");
    let trade_id = matched["tradeIds"][0].as_str().unwrap().to_string();
    wait_status(&mut holder, &trade_id, "CONFIRMED", &mut Vec::new());

    // The first market is resolved on the chain only, and the operator's own address (which
    // holds nothing of it) redeems it there: nothing is paid, but the event is emitted.
    on_chain("resolve(bytes32,uint8)", first_condition, Some(1));
    on_chain("redeem(bytes32)", first_condition, None);
    // The second is resolved on both; the holder redeems its No shares on the chain.
    on_chain("resolve(bytes32,uint8)", second_condition, Some(2));
    helpers::admin_ok(
        &service,
        "POST",
        &format!("/admin/markets/{}/resolve", second.condition_id),
        json!({"outcome": "No"}),
    );
    assert_eq!(claimable_of(&service, &holder_address).len(), 1);
    anvil.transact(
        Some(&holder_address.to_lowercase_hex()),
        &execute_redeem_call_data(&exchange_address, &second.market()),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !claimable_of(&service, &holder_address).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the holder's redemption on the chain was never recorded"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A redemption watch far behind the chain (a fresh data directory on a long chain, or a
/// node that was stopped for long) reads on at the node's pace, not one range per poll.
#[test]
fn a_redemption_watch_far_behind_the_chain_catches_up_without_waiting_for_each_poll() {
    let Some(anvil) = Anvil::start() else { return };
    let exchange_address = anvil.deploy("TestExchange", &[]);
    for _ in 0..21 {
        anvil
            .rpc
            .call("anvil_mine", json!(["0xc8"]))
            .expect("200 blocks mined");
    }
    let head = anvil.rpc.block_number().expect("head");
    // One range of 2,000 blocks per poll would take 3 polls of 5 s.
    let service = chain_service_polling(&anvil, &exchange_address, ("1", "5000"), &[]);
    let cursor = service.data_dir().join("chain-redemptions");
    let started = Instant::now();
    loop {
        let next: u64 = std::fs::read_to_string(&cursor)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0);
        if next > head {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "the watch reads block {next} of {head} after {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
