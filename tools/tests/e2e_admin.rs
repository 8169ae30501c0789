//! Black-box checks of the admin surface (API.md §15, 17, 18): the token, markets and their
//! states, account links, deposits and withdrawals, taker delay.

mod helpers;
mod support;

use std::time::Duration;

use helpers::*;
use ladder_protocol::wire::OrderType;
use ladder_protocol::Side;
use serde_json::json;
use support::*;

#[test]
fn the_admin_surface_needs_the_bearer_token() {
    let service = Service::start(&[]);
    let body = json!({
        "condition_id": format!("0x{}", "91".repeat(32)),
        "yes_token_id": "91001",
        "no_token_id": "91002",
        "minimum_tick_size": 0.01,
        "min_order_size": 1,
        "neg_risk": false,
        "taker_delay_ms": 0,
        "fee_rate_bps": 0
    })
    .to_string();
    let mut http = service.http();
    for headers in [
        vec![],
        vec![(
            "Authorization".to_string(),
            "Bearer wrong-token".to_string(),
        )],
        vec![("Authorization".to_string(), ADMIN_TOKEN.to_string())],
    ] {
        let r = http
            .request("POST", "/admin/markets", &headers, Some(&body))
            .unwrap();
        error_text(&r, 401);
        let r = http
            .request("GET", "/admin/state-hash", &headers, None)
            .unwrap();
        error_text(&r, 401);
    }
    let (_, markets) = get(&service, "/markets");
    assert_eq!(markets["count"], json!(1), "nothing was created");

    let r = service.admin("GET", "/admin/state-hash", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
    assert!(v["seq"].is_u64(), "{v}");
    let hash = v["state_hash"].as_str().unwrap();
    assert!(hash.len() == 66 && hash.starts_with("0x"), "{hash}");
    assert!(hash[2..].chars().all(|c| c.is_ascii_hexdigit()), "{hash}");

    let r = service.admin("POST", "/admin/markets", Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    let after = service.admin("GET", "/admin/state-hash", None).json();
    assert!(
        after["seq"].as_u64() > v["seq"].as_u64(),
        "a journaled command"
    );
    assert_ne!(after["state_hash"], v["state_hash"]);
}

#[test]
fn a_new_market_and_a_new_funded_trader_work_end_to_end() {
    let service = Service::start(&[]);
    let m = create_market(&service, 0x92, json!({ "minimum_tick_size": "0.01" }));
    let (status, market) = get(&service, &format!("/markets/{}", m.condition_id));
    assert_eq!(status, 200, "{market}");
    assert_eq!(market["minimum_tick_size"], json!(0.01));
    assert_eq!(market["active"], json!(true));

    // The same market again is refused.
    let again = service.admin(
        "POST",
        "/admin/markets",
        Some(
            &json!({
                "condition_id": m.condition_id,
                "yes_token_id": m.yes,
                "no_token_id": m.no
            })
            .to_string(),
        ),
    );
    assert!(again.status >= 400 && again.status < 500, "{}", again.body);
    error_text(&again, again.status);
    // A missing field is a 400 naming it.
    let r = service.admin(
        "POST",
        "/admin/markets",
        Some(
            &json!({ "condition_id": format!("0x{}", "93".repeat(32)), "no_token_id": "1" })
                .to_string(),
        ),
    );
    let text = error_text(&r, 400);
    assert!(text.contains("yes_token_id"), "{text}");
    // Values no market can serve are refused, naming the field and the rule.
    let fresh = format!("0x{}", "94".repeat(32));
    for (fields, want) in [
        (
            json!({ "yes_token_id": "77", "no_token_id": "77" }),
            "no_token_id: must differ from yes_token_id".to_string(),
        ),
        (
            json!({ "yes_token_id": m.yes, "no_token_id": "78" }),
            "yes_token_id: already a token of another market".to_string(),
        ),
        (
            json!({ "yes_token_id": "0", "no_token_id": "78" }),
            "yes_token_id: must not be 0".to_string(),
        ),
        (
            json!({ "yes_token_id": "77", "no_token_id": "78", "taker_delay_ms": 3_600_001 }),
            "taker_delay_ms: at most 3600000 (an hour), found 3600001".to_string(),
        ),
        (
            json!({ "yes_token_id": "77", "no_token_id": "78", "min_order_size": 1_000_000_001u64 }),
            "min_order_size: at most 1000000000 (the largest order), found 1000000001".to_string(),
        ),
    ] {
        let mut body = fields.clone();
        body["condition_id"] = json!(fresh);
        let r = service.admin("POST", "/admin/markets", Some(&body.to_string()));
        assert_eq!(error_text(&r, 400), want, "{fields}");
    }
    // An amount past 64 bits is an integer, too large; one with a sign is not an integer.
    for (amount, want) in [
        (
            json!("18446744073709551616"),
            "amount: too large (at most 18446744073709551615)",
        ),
        (json!("+5"), "amount: expected a non-negative integer"),
        // Within 64 bits, but past what one balance holds.
        (
            json!("4611686018427387905"),
            "amount too large: a balance holds at most 4611686018427387904 base units",
        ),
    ] {
        let body = json!({ "address": "0x00000000000000000000000000000000000000aa", "asset": "COLLATERAL", "amount": amount });
        let r = service.admin("POST", "/admin/deposits", Some(&body.to_string()));
        assert_eq!(error_text(&r, 400), want, "{amount}");
    }
    // COLLATERAL in any case.
    for asset in ["collateral", "Collateral", "cOLLATERAL"] {
        let body = json!({ "address": "0x00000000000000000000000000000000000000aa", "asset": asset, "amount": "5" });
        let r = service.admin("POST", "/admin/deposits", Some(&body.to_string()));
        assert_eq!(r.status, 200, "{asset}: {}", r.body);
    }

    let mut carol = new_trader(&service, 100_000_000);
    let mut dave = new_trader(&service, 0);
    deposit(&service, &dave.account, &m.yes, 20_000_000);
    assert_eq!(
        balance(&mut carol, "asset_type=COLLATERAL"),
        json!({ "balance": "100000000", "allowance": "100000000" })
    );
    assert_eq!(
        balance(
            &mut dave,
            &format!("asset_type=CONDITIONAL&token_id={}", m.yes)
        ),
        json!({ "balance": "20000000", "allowance": "20000000" })
    );
    // 0.555 is not on this market's 0.01 tick.
    let p = place(&mut carol, m.yes(), Side::Buy, 5_550, 10, OrderType::Gtc);
    rejection(&p);
    rest(&mut carol, m.yes(), Side::Buy, 5_500, 10);
    let p = place(&mut dave, m.yes(), Side::Sell, 5_000, 20, OrderType::Gtc);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("live"), "the remainder of 10 rests: {p}");
    assert_eq!(p["takingAmount"], json!("5500000"));
    assert_eq!(
        balance(&mut carol, "asset_type=COLLATERAL"),
        json!({ "balance": "94500000", "allowance": "94500000" })
    );
    assert_eq!(
        balance(&mut dave, "asset_type=COLLATERAL"),
        json!({ "balance": "5500000", "allowance": "5500000" }),
        "a maker's or taker's proceeds are usable at once"
    );
    // The demo market is unaffected and carol holds none of its tokens.
    let p = place(&mut carol, yes(), Side::Sell, 5_000, 1, OrderType::Gtc);
    assert_eq!(rejection(&p), "not enough balance / allowance");
}

#[test]
fn a_paused_market_keeps_resting_orders_refuses_new_ones_and_accepts_cancels() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let first = rest(&mut alice, yes(), Side::Buy, 4_000, 2);
    let first_id = id_of(&mut alice, &first);
    rest(&mut alice, yes(), Side::Buy, 3_000, 2);
    admin_ok(
        &service,
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/pause"),
        json!({}),
    );
    let (_, m) = get(&service, &format!("/markets/{CONDITION_ID}"));
    assert_eq!(m["active"], json!(false), "{m}");
    let p = place(&mut alice, yes(), Side::Buy, 2_000, 2, OrderType::Gtc);
    rejection(&p);
    let mut bob = service.trader(1);
    let p = place(&mut bob, yes(), Side::Sell, 3_000, 4, OrderType::Fak);
    rejection(&p);
    let (_, book) = get(&service, &format!("/book?token_id={YES}"));
    assert_eq!(
        book["bids"],
        json!([{ "price": "0.3", "size": "2" }, { "price": "0.4", "size": "2" }]),
        "resting orders stay"
    );
    assert_eq!(
        alice.cancel(first_id, market()).unwrap().json(),
        json!({ "canceled": [first_id.to_string()], "notCanceled": {} })
    );
    let r = alice.send("DELETE", "/cancel-all", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["canceled"].as_array().unwrap().len(), 1);

    admin_ok(
        &service,
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/resume"),
        json!({}),
    );
    let (_, m) = get(&service, &format!("/markets/{CONDITION_ID}"));
    assert_eq!(m["active"], json!(true), "{m}");
    rest(&mut alice, yes(), Side::Buy, 2_000, 2);
}

#[test]
fn a_taker_delay_answers_delayed_then_matches() {
    let service = Service::start(&[]);
    let m = create_market(&service, 0x94, json!({ "taker_delay_ms": 400 }));
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    deposit(&service, &bob.account, &m.yes, 10_000_000);
    // Not marketable: rests at once.
    rest(&mut bob, m.yes(), Side::Sell, 6_000, 5);
    let p = place(&mut alice, m.yes(), Side::Buy, 6_000, 5, OrderType::Gtc);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("delayed"), "{p}");
    assert_eq!(p["makingAmount"], json!("0"));
    assert_eq!(p["tradeIds"], json!([]));
    let open = open_orders(&mut alice);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["status"], json!("delayed"));
    std::thread::sleep(Duration::from_millis(1_200));
    assert!(
        open_orders(&mut alice).is_empty(),
        "matched after the delay"
    );
    assert!(open_orders(&mut bob).is_empty());
    assert_eq!(
        balance(
            &mut alice,
            &format!("asset_type=CONDITIONAL&token_id={}", m.yes)
        ),
        json!({ "balance": "5000000", "allowance": "5000000" })
    );
    let trades = alice.send("GET", "/trades", None).unwrap().json();
    assert_eq!(trades["count"], json!(1), "{trades}");
    assert_eq!(trades["data"][0]["price"], json!("0.6"));
}

#[test]
fn withdrawals_never_go_below_what_is_reserved() {
    let service = Service::start(&[]);
    let mut carol = new_trader(&service, 100_000_000);
    rest(&mut carol, yes(), Side::Buy, 5_000, 100);
    let account = carol.account.to_string();
    let withdraw = |amount: u64| {
        service.admin(
            "POST",
            "/admin/withdrawals",
            Some(
                &json!({ "address": account, "asset": "COLLATERAL", "amount": amount }).to_string(),
            ),
        )
    };
    let r = withdraw(50_000_001);
    error_text(&r, 400);
    let r = withdraw(50_000_000);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        balance(&mut carol, "asset_type=COLLATERAL"),
        json!({ "balance": "50000000", "allowance": "0" })
    );
}

#[test]
fn unlinking_an_account_takes_its_owner_off_it() {
    let service = Service::start(&[]);
    let mut carol = new_trader(&service, 100_000_000);
    rest(&mut carol, yes(), Side::Buy, 5_000, 1);
    let link = json!({
        "account": carol.account.to_string(),
        "owner": carol.wallet.address().to_string()
    });
    admin_ok(&service, "DELETE", "/admin/accounts", link);
    let p = place(&mut carol, yes(), Side::Buy, 5_000, 2, OrderType::Gtc);
    rejection(&p);
    let r = carol.create_api_key(9).unwrap();
    assert_error(&r, 401, "L1 auth address does not match request address");
}

#[test]
fn unknown_admin_paths_and_methods() {
    let service = Service::start(&[]);
    assert_error(
        &service.admin("GET", "/admin/nothing-here", None),
        404,
        "not found",
    );
    let wrong_method = service.admin("GET", "/admin/markets", None);
    error_text(&wrong_method, 405);
    assert_eq!(wrong_method.header("Allow"), Some("POST"));
    let r = service.admin(
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/resolve"),
        Some("{\"outcome\":\"Maybe\"}"),
    );
    assert!(error_text(&r, 400).contains("outcome"));
    let unknown = format!("0x{}", "95".repeat(32));
    let r = service.admin("POST", &format!("/admin/markets/{unknown}/pause"), None);
    assert_eq!(r.status, 404, "{}", r.body);
    // The route and the method are settled before the body: an unknown route is 404 and a
    // wrong method 405 whatever the body holds.
    for path in [
        format!("/admin/markets/{CONDITION_ID}/bogus"),
        format!("/admin/markets/{CONDITION_ID}"),
        format!("/admin/markets/{CONDITION_ID}/pause/again"),
        "/admin/nothing-here".to_string(),
        "/administrator".to_string(),
    ] {
        let r = service.admin("POST", &path, Some("not json"));
        assert_error(&r, 404, "not found");
    }
    let r = service.admin("DELETE", "/admin/markets", Some("not json"));
    error_text(&r, 405);
    // HEAD is answered wherever GET is, as Allow says.
    let r = service.admin("PUT", "/admin/state-hash", None);
    assert_eq!(r.header("Allow"), Some("GET, HEAD"));
    assert_eq!(head_status(&service, "/admin/state-hash"), 200);
}

/// The status of a HEAD request (which has no body to read).
fn head_status(service: &Service, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = connect(service);
    let request = format!(
        "HEAD {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nConnection: close\r\n\r\n",
        authority(service)
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(!answer.contains("\r\n\r\n{"), "no body on HEAD: {answer}");
    answer[9..12].parse().unwrap()
}

#[test]
fn a_delayed_order_can_be_cancelled_before_it_matches() {
    let service = Service::start(&[]);
    let m = create_market(&service, 0x96, json!({ "taker_delay_ms": 700 }));
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    deposit(&service, &bob.account, &m.yes, 10_000_000);
    rest(&mut bob, m.yes(), Side::Sell, 6_000, 5);
    let p = place(&mut alice, m.yes(), Side::Buy, 6_000, 5, OrderType::Gtc);
    assert_eq!(p["status"], json!("delayed"), "{p}");
    let id = open_ids(&mut alice)[0];
    assert_eq!(
        alice.cancel(id, m.market()).unwrap().json(),
        json!({ "canceled": [id.to_string()], "notCanceled": {} })
    );
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(open_orders(&mut bob).len(), 1, "the maker was not taken");
    assert_eq!(
        alice.send("GET", "/trades", None).unwrap().json()["count"],
        json!(0)
    );
    assert_eq!(
        balance(&mut alice, "asset_type=COLLATERAL"),
        json!({ "balance": "10000000000", "allowance": "10000000000" })
    );
}

#[test]
fn metrics_are_served_to_loopback_without_a_token() {
    let service = Service::start(&[]);
    public(&service, "GET", "/time", None);
    // A write (the trader's API key) is journaled with `sync` durability: one flush at least.
    let _trader = service.trader(0);
    let r = public(&service, "GET", "/metrics", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let flushes: u64 = r
        .body
        .lines()
        .find_map(|l| l.strip_prefix("ladder_journal_flush_duration_seconds_count "))
        .unwrap_or_else(|| panic!("no flush histogram in /metrics:\n{}", r.body))
        .parse()
        .unwrap();
    assert!(flushes >= 1, "{}", r.body);
    assert!(r
        .body
        .contains("ladder_journal_flush_duration_seconds_bucket{le=\"+Inf\"}"));
}

/// `promtool check metrics` (Prometheus's own linter) finds nothing to say of `/metrics`:
/// every family has its help text and type, counters end in `_total`, units are base units.
/// Skipped without `promtool` unless `LADDER_REQUIRE_PROMTOOL=1` (CI installs it).
#[test]
fn promtool_finds_nothing_to_say_of_the_metrics() {
    let available = std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        assert!(
            std::env::var("LADDER_REQUIRE_PROMTOOL").as_deref() != Ok("1"),
            "LADDER_REQUIRE_PROMTOOL=1 but no promtool: apt-get install prometheus"
        );
        eprintln!("promtool not found: skipped");
        return;
    }
    let service = Service::start(&[]);
    public(&service, "GET", "/time", None);
    let _trader = service.trader(0);
    let r = public(&service, "GET", "/metrics", None);
    assert_eq!(r.status, 200, "{}", r.body);
    for family in [
        "ladder_http_requests_total",
        "ladder_http_request_duration_seconds",
        "ladder_sequencer_commands_total",
        "ladder_journal_flush_duration_seconds",
        "ladder_ring_depth",
        "ladder_history_stored_seq",
        "process_cpu_seconds_total",
        "ladder_heap_in_use_bytes",
        "ladder_thread_cpu_seconds_total",
        "ladder_thread_wait_seconds_total",
    ] {
        assert!(
            r.body.contains(&format!("# HELP {family} ")),
            "no help for {family}:\n{}",
            r.body
        );
    }
    for thread in ["sequencer", "gateway-0"] {
        let sample = format!("ladder_thread_wait_seconds_total{{thread=\"{thread}\"}} ");
        assert!(r.body.contains(&sample), "no {sample}:\n{}", r.body);
    }
    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write;
    check
        .stdin
        .take()
        .expect("stdin")
        .write_all(r.body.as_bytes())
        .expect("write to promtool");
    let out = check.wait_with_output().expect("promtool");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        r.body
    );
}

#[test]
fn a_delayed_fok_is_judged_again_when_the_delay_ends() {
    let service = Service::start(&[]);
    let m = create_market(&service, 0x97, json!({ "taker_delay_ms": 500 }));
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    deposit(&service, &bob.account, &m.yes, 10_000_000);
    let hash = rest(&mut bob, m.yes(), Side::Sell, 6_000, 5);
    let bobs = id_of(&mut bob, &hash);
    let p = place(&mut alice, m.yes(), Side::Buy, 6_000, 5, OrderType::Fok);
    assert_eq!(p["success"], json!(true), "{p}");
    assert_eq!(p["status"], json!("delayed"), "{p}");
    assert_eq!(open_orders(&mut alice)[0]["status"], json!("delayed"));
    // The liquidity goes away during the delay.
    assert_eq!(
        bob.cancel(bobs, m.market()).unwrap().json()["canceled"],
        json!([bobs.to_string()])
    );
    std::thread::sleep(Duration::from_millis(1_200));
    assert!(open_orders(&mut alice).is_empty());
    assert_eq!(
        alice.send("GET", "/trades", None).unwrap().json()["count"],
        json!(0)
    );
    assert_eq!(
        balance(&mut alice, "asset_type=COLLATERAL"),
        json!({ "balance": "10000000000", "allowance": "10000000000" })
    );
}
