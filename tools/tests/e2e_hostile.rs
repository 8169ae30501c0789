//! Black-box checks of hostile and malformed input and of HTTP behaviour (API.md §8, 15, 17,
//! 18): malformed requests, oversized bodies and headers, bad bytes and JSON, wrong types,
//! unknown paths and methods, pipelining, and rate limits.

mod helpers;
mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use helpers::*;
use ladder_client::cancel_order_request;
use ladder_protocol::wire::OrderType;
use ladder_protocol::{Side, SignatureType};
use serde_json::{json, Value};
use support::*;

fn serves(service: &Service) {
    let r = public(service, "GET", "/time", None);
    assert_eq!(r.status, 200, "the service still serves: {}", r.body);
}

fn raw_status(service: &Service, bytes: &[u8]) -> RawResponse {
    raw_exchange(service, bytes).expect("an HTTP response")
}

fn assert_raw_error(r: &RawResponse, status: u16) {
    assert_eq!(r.status, status, "{r:?}");
    let v = r.json();
    assert!(
        v.as_object().is_some_and(|o| o.len() == 1) && v["error"].is_string(),
        "JSON {{error}}: {r:?}"
    );
}

#[test]
fn malformed_requests_are_400_and_the_server_keeps_serving() {
    let service = Service::start(&[]);
    let cases: [&[u8]; 8] = [
        b"POST /books HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n[] ",
        b"}{ nonsense\r\n\r\n",
        b"GET /time HTTP/1.1 trailing\r\n\r\n",
        b"GET /time\r\n\r\n",
        b"GET time HTTP/1.1\r\n\r\n",
        b"GET /time HTTP/1.1\r\nthis header has no colon\r\n\r\n",
        b"GET /time HTTP/1.1\r\nContent-Length: banana\r\n\r\n",
        b"GET /time HTTP/1.1\r\nX-Bytes: \xff\xfe\r\n\r\n",
    ];
    for bytes in cases {
        let r = raw_status(&service, bytes);
        assert_raw_error(&r, 400);
        serves(&service);
    }
}

#[test]
fn an_absolute_form_target_is_served_and_expect_100_continue_is_answered() {
    use std::io::Read;
    let service = Service::start(&[]);
    let port = service.port();
    let r = raw_status(
        &service,
        format!("GET http://127.0.0.1:{port}/time HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");

    // The client waits for the interim answer before it sends the body.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let body = format!(r#"[{{"token_id":"{YES}"}}]"#);
    write!(
        stream,
        "POST /books HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
    let mut got = vec![0u8; interim.len()];
    stream
        .read_exact(&mut got)
        .expect("100 Continue before the body");
    assert_eq!(got, interim);
    stream.write_all(body.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    // An HTTP/1.0 client asking to keep the connection is told it stays open, and it does.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    for _ in 0..2 {
        stream
            .write_all(b"GET /time HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            stream
                .read_exact(&mut byte)
                .expect("an answer on the same connection");
            answer.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&answer).to_string();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("\r\nConnection: keep-alive\r\n"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).unwrap();
    }
}

#[test]
fn a_request_line_that_is_not_http_is_400() {
    let service = Service::start(&[]);
    for bytes in [
        &b"this is not http\r\n\r\n"[..],
        &b"GET /time banana\r\n\r\n"[..],
    ] {
        let r = raw_status(&service, bytes);
        assert_raw_error(&r, 400);
        serves(&service);
    }
}

/// API.md §8 makes an order body over 64 KiB a body error (400); API.md §18 answers 413
/// for every other route.
#[test]
fn a_body_over_64_kib_is_400_for_an_order_and_413_elsewhere() {
    let service = Service::start(&[]);
    let alice = service.trader(0);
    let body = vec![b'x'; 70 * 1024];
    let headers = l2_for_bytes(&alice, "POST", "/order", &body);
    let r = raw_request(&service, "POST", "/order", &headers, &body);
    assert_raw_error(&r, 400);
    assert!(r.body.contains("64 KiB"), "{}", r.body);
    // The batch is placing orders too (API.md §8).
    let headers = l2_for_bytes(&alice, "POST", "/orders", &body);
    let r = raw_request(&service, "POST", "/orders", &headers, &body);
    assert_raw_error(&r, 400);
    assert!(r.body.contains("64 KiB"), "{}", r.body);
    let body = format!("[{}]", vec!["{\"token_id\":\"1\"}"; 5_000].join(","));
    assert!(body.len() > 64 * 1024);
    let r = raw_request(&service, "POST", "/books", &[], body.as_bytes());
    assert_raw_error(&r, 413);
    serves(&service);
}

#[test]
fn a_header_section_over_16_kib_is_431() {
    let service = Service::start(&[]);
    let request = format!(
        "GET /time HTTP/1.1\r\nHost: x\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(17 * 1024)
    );
    let r = raw_status(&service, request.as_bytes());
    assert_raw_error(&r, 431);
    // Many small headers adding up to more than 16 KiB.
    let mut request = "GET /time HTTP/1.1\r\nHost: x\r\n".to_string();
    for i in 0..40 {
        request.push_str(&format!("X-Filler-{i}: {}\r\n", "b".repeat(450)));
    }
    request.push_str("\r\n");
    let r = raw_status(&service, request.as_bytes());
    assert_raw_error(&r, 431);
    serves(&service);
}

#[test]
fn invalid_utf8_and_deeply_nested_json_are_400() {
    let service = Service::start(&[]);
    let alice = service.trader(0);
    let nested_arrays = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let nested_objects = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let bodies: Vec<Vec<u8>> = vec![
        vec![0xff, 0xfe, 0xfd, b'{', b'}'],
        b"{\"orderType\":\"GT\xffC\",\"order\":{}}".to_vec(),
        nested_arrays.clone().into_bytes(),
        nested_objects.into_bytes(),
    ];
    for body in &bodies {
        for (method, path) in [
            ("POST", "/order"),
            ("POST", "/orders"),
            ("DELETE", "/order"),
            ("DELETE", "/orders"),
            ("DELETE", "/cancel-market-orders"),
        ] {
            let headers = l2_for_bytes(&alice, method, path, body);
            let r = raw_request(&service, method, path, &headers, body);
            assert_raw_error(&r, 400);
        }
        for (method, path) in [
            ("POST", "/books"),
            ("GET", "/last-trades-prices"),
            ("POST", "/last-trades-prices"),
        ] {
            let r = raw_request(&service, method, path, &[], body);
            assert_raw_error(&r, 400);
        }
        let admin = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
        let r = raw_request(&service, "POST", "/admin/markets", &admin, body);
        assert_raw_error(&r, 400);
    }
    serves(&service);
}

fn order_value(alice: &ladder_client::Trader) -> Value {
    let order = signed(alice, builder(alice, yes(), Side::Buy, 5_000, 2));
    serde_json::from_str(&body_of(&order, OrderType::Gtc)).unwrap()
}

#[test]
fn fields_of_the_wrong_type_or_form_are_400_naming_the_field() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let base = order_value(&alice);
    let cases: Vec<(&str, Value)> = vec![
        ("order.makerAmount", json!(5)),
        ("order.makerAmount", json!("9".repeat(100))),
        ("order.makerAmount", json!("-5")),
        ("order.makerAmount", json!("0x10")),
        ("order.takerAmount", json!("ten")),
        ("order.tokenId", json!(12_345)),
        ("order.salt", json!(true)),
        ("order.side", json!("LEFT")),
        ("order.signatureType", json!(256)),
        ("order.signatureType", json!(-3)),
        ("order.signatureType", json!("three")),
        ("order.signature", json!("0x1234")),
        ("order.signature", json!(42)),
        ("order.maker", json!("not an address")),
        ("order.signer", json!(null)),
        ("order.expiration", json!("-1")),
        ("order.nonce", json!([])),
        ("order.identifier", json!("0x12")),
        ("order.metadata", json!({})),
        ("orderType", json!(1)),
        ("orderType", json!("MARKET")),
        ("postOnly", json!("yes")),
        ("order", json!("a string")),
    ];
    for (path, value) in cases {
        let mut body = base.clone();
        match path.split_once('.') {
            Some((outer, inner)) => body[outer][inner] = value.clone(),
            None => body[path] = value.clone(),
        }
        let r = alice
            .send("POST", "/order", Some(&body.to_string()))
            .unwrap();
        let text = error_text(&r, 400);
        let leaf = path.rsplit('.').next().unwrap();
        assert!(text.contains(leaf), "{path} = {value}: {text}");
    }
    for missing in ["order", "orderType"] {
        let mut body = base.clone();
        body.as_object_mut().unwrap().remove(missing);
        let text = error_text(
            &alice
                .send("POST", "/order", Some(&body.to_string()))
                .unwrap(),
            400,
        );
        assert!(text.contains(missing), "{text}");
    }
    for field in ["makerAmount", "signature", "side"] {
        let mut body = base.clone();
        body["order"].as_object_mut().unwrap().remove(field);
        let text = error_text(
            &alice
                .send("POST", "/order", Some(&body.to_string()))
                .unwrap(),
            400,
        );
        assert!(text.contains(field), "{text}");
    }
    let trailing = format!("{base}x");
    for body in ["", "null", "[]", "\"order\"", "{", trailing.as_str()] {
        error_text(&alice.send("POST", "/order", Some(body)).unwrap(), 400);
    }

    // Cancels.
    let cancel: Value = serde_json::from_str(
        &cancel_order_request(
            &alice.wallet,
            &alice.exchange,
            1,
            market(),
            SignatureType::SmartAccount,
        )
        .to_json(),
    )
    .unwrap();
    let cases: Vec<(&str, Value)> = vec![
        ("orderId", json!("abc")),
        ("orderId", json!(-1)),
        ("orderId", json!(1.5)),
        ("marketId", json!("0x12")),
        ("marketId", json!(5)),
        ("signature", json!(12)),
        ("signatureType", json!("x")),
        ("signer", json!("nobody")),
    ];
    for (field, value) in cases {
        let mut body = cancel.clone();
        body[field] = value.clone();
        let text = error_text(
            &alice
                .send("DELETE", "/order", Some(&body.to_string()))
                .unwrap(),
            400,
        );
        assert!(text.contains(field), "{field} = {value}: {text}");
    }
    let mut body = json!({
        "marketId": 5,
        "signature": cancel["signature"],
        "signatureType": 3,
        "signer": cancel["signer"]
    });
    let text = error_text(
        &alice
            .send("DELETE", "/cancel-market-orders", Some(&body.to_string()))
            .unwrap(),
        400,
    );
    assert!(text.contains("marketId"), "{text}");
    body["marketId"] = json!(CONDITION_ID);
    body["tokenId"] = json!(17);
    let text = error_text(
        &alice
            .send("DELETE", "/cancel-market-orders", Some(&body.to_string()))
            .unwrap(),
        400,
    );
    assert!(text.contains("tokenId"), "{text}");
    assert!(open_orders(&mut alice).is_empty());
}

#[test]
fn another_users_order_id_in_a_cancel_is_not_owner() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let hash = rest(&mut bob, yes(), Side::Buy, 2_000, 3);
    let id = id_of(&mut bob, &hash);
    assert_eq!(
        alice.cancel(id, market()).unwrap().json(),
        json!({ "canceled": [], "notCanceled": { id.to_string(): "not owner" } })
    );
    let body = ladder_client::cancel_orders_body(&[cancel_order_request(
        &alice.wallet,
        &alice.exchange,
        id,
        market(),
        SignatureType::SmartAccount,
    )]);
    let r = alice.send("DELETE", "/orders", Some(&body)).unwrap();
    assert_eq!(
        r.json(),
        json!({ "canceled": [], "notCanceled": { id.to_string(): "not owner" } })
    );
    let r = alice.send("DELETE", "/cancel-all", None).unwrap();
    assert_eq!(r.json(), json!({ "canceled": [], "notCanceled": {} }));
    assert_eq!(open_ids(&mut bob), [id]);
}

#[test]
fn unknown_paths_are_404_and_wrong_methods_405() {
    let service = Service::start(&[]);
    for (method, path) in [
        ("GET", "/nope"),
        ("POST", "/nope"),
        ("GET", "/"),
        ("GET", "/auth"),
        ("GET", "/order/1"),
        ("DELETE", "/v1/orders"),
    ] {
        assert_error(&public(&service, method, path, None), 404, "not found");
    }
    for (method, path) in [
        ("POST", "/time"),
        ("PUT", "/order"),
        ("GET", "/order"),
        ("GET", "/cancel-all"),
        ("DELETE", "/markets"),
        ("POST", "/book"),
        ("PATCH", "/orders"),
        ("GET", "/auth/api-key"),
        ("POST", "/claimable"),
        ("TRACE", "/order"),
        ("POST", "/ws/user"),
    ] {
        let r = public(&service, method, path, Some("{}"));
        error_text(&r, 405);
        let allow = r.header("Allow").unwrap_or_default();
        assert!(
            !allow.is_empty() && !allow.contains(method),
            "{method} {path}: Allow {allow}"
        );
    }
    let r = public(&service, "PUT", "/orders", None);
    assert_eq!(r.header("Allow"), Some("GET, HEAD, POST, DELETE"));
    // A WebSocket endpoint fetched without an upgrade: a bad request naming the rule.
    for path in ["/ws/user", "/ws/market"] {
        let r = public(&service, "GET", path, None);
        assert!(error_text(&r, 400).contains("Upgrade: websocket"), "{path}");
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let service = Service::start(&[]);
    let mut stream = connect(&service);
    let unknown = format!("0x{}", "77".repeat(32));
    let requests = format!(
        "GET /time HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /markets/{unknown} HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /markets/{CONDITION_ID} HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
    );
    stream.write_all(requests.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let statuses: Vec<u16> = (0..4)
        .map(|_| {
            read_response(&mut stream, &mut buf)
                .expect("response")
                .status
        })
        .collect();
    assert_eq!(statuses, [200, 404, 200, 404]);
}

#[test]
fn a_slow_client_does_not_hold_up_others() {
    let service = Service::start(&[]);
    let mut slow = connect(&service);
    slow.write_all(b"POST /books HTTP/1.1\r\nHost: x\r\nContent-Le")
        .unwrap();
    let started = Instant::now();
    serves(&service);
    assert!(started.elapsed() < Duration::from_secs(2));
    drop(slow);
}

#[test]
fn the_ip_rate_limit_answers_429_with_retry_after_and_spends_nothing() {
    let service = Service::start(&["--rate-limit-ip", "5"]);
    let mut http = service.http();
    let mut statuses = Vec::new();
    let mut retry_after = 0u64;
    for _ in 0..10 {
        let r = http.request("GET", "/time", &[], None).unwrap();
        statuses.push(r.status);
        if r.status == 429 {
            error_text(&r, 429);
            let wait: u64 = r
                .header("retry-after")
                .expect("Retry-After on a 429")
                .parse()
                .expect("whole seconds");
            assert!(wait >= 1, "{wait}");
            retry_after = wait;
        }
    }
    assert_eq!(statuses[0], 200, "{statuses:?}");
    assert!(
        statuses.iter().filter(|s| **s == 429).count() >= 5,
        "{statuses:?}"
    );
    // Refused requests spent nothing: after Retry-After a token is there.
    std::thread::sleep(Duration::from_millis(retry_after * 1_000 + 200));
    let r = http.request("GET", "/time", &[], None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn the_key_rate_limit_answers_429_with_retry_after() {
    let service = Service::start(&["--rate-limit-key", "3"]);
    let mut alice = service.trader(0);
    let mut bob = service.trader(1);
    let statuses: Vec<(u16, Option<String>)> = (0..6)
        .map(|_| {
            let r = alice.send("GET", "/orders", None).unwrap();
            (r.status, r.header("retry-after").map(str::to_string))
        })
        .collect();
    assert!(statuses[..3].iter().all(|(s, _)| *s == 200), "{statuses:?}");
    assert!(
        statuses[3..]
            .iter()
            .all(|(s, h)| *s == 429 && h.as_deref().is_some_and(|h| h.parse::<u64>().is_ok())),
        "{statuses:?}"
    );
    // Another key has its own bucket.
    assert_eq!(bob.send("GET", "/orders", None).unwrap().status, 200);
}

#[test]
fn a_request_refused_by_its_keys_limit_spends_none_of_its_ips() {
    let service = Service::start(&["--rate-limit-key", "2", "--rate-limit-ip", "20"]);
    let mut alice = service.trader(0);
    let statuses: Vec<u16> = (0..27)
        .map(|_| alice.send("GET", "/orders", None).unwrap().status)
        .collect();
    assert!(statuses[..2].iter().all(|s| *s == 200), "{statuses:?}");
    assert!(statuses[2..].iter().all(|s| *s == 429), "{statuses:?}");
    // 27 requests from one IP whose limit is 20: the 25 the key refused spent nothing there.
    let r = service.http().request("GET", "/time", &[], None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn websocket_upgrades_count_against_the_ip_rate_limit() {
    let service = Service::start(&["--rate-limit-ip", "3"]);
    let upgrade = |path: &str| {
        raw_exchange(
            &service,
            format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("an HTTP response")
    };
    // The service's start-up check may have spent one of the IP's three tokens.
    let answers: Vec<RawResponse> = (0..6)
        .map(|i| upgrade(["/ws/market", "/ws/user"][i % 2]))
        .collect();
    assert_eq!(answers[0].status, 101, "{:?}", answers[0]);
    let refused: Vec<&RawResponse> = answers.iter().filter(|r| r.status != 101).collect();
    assert!(refused.len() >= 3, "{answers:?}");
    for r in refused {
        assert_raw_error(r, 429);
        assert!(r.header("retry-after").is_some(), "{r:?}");
    }
}

#[test]
fn a_request_that_never_completes_is_not_kept_open() {
    let service = Service::start(&[]);
    let mut slow = connect(&service);
    slow.write_all(b"GET /time HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    // Either an error response or a close, within a little more than 10 s.
    if let Some(r) = read_response(&mut slow, &mut buf) {
        assert!(r.status >= 400, "{r:?}");
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(14),
        "{waited:?}"
    );
    serves(&service);
}

/// A connection to the service from the loopback address `source` (127.0.0.x).
fn connect_from(service: &Service, source: &str) -> std::net::TcpStream {
    let target: std::net::SocketAddr = authority(service).parse().unwrap();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let from: std::net::SocketAddr = format!("{source}:0").parse().unwrap();
    socket.bind(&from.into()).unwrap();
    socket.connect(&target.into()).unwrap();
    socket.into()
}

/// Whether the service closed `stream` without a byte, within 5 s.
fn closed_unanswered(stream: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 64];
    matches!(stream.read(&mut buf), Ok(0))
        || matches!(stream.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

#[test]
fn by_default_one_address_holds_256_connections() {
    let service = Service::start(&[]);
    let held: Vec<std::net::TcpStream> = (0..256)
        .map(|_| connect_from(&service, "127.0.0.4"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut over = connect_from(&service, "127.0.0.4");
    assert!(
        closed_unanswered(&mut over),
        "the 257th connection was kept"
    );
    serves(&service);
    drop(held);
}

#[test]
fn one_address_holds_at_most_its_connection_cap_and_others_are_served() {
    let service = Service::start(&["--max-connections-per-ip", "8"]);
    // Eight idle connections from 127.0.0.2 (HTTP and WebSocket alike count): the ninth is
    // closed at once, unanswered.
    let mut held: Vec<std::net::TcpStream> = (0..8)
        .map(|_| connect_from(&service, "127.0.0.2"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut ninth = connect_from(&service, "127.0.0.2");
    assert!(
        closed_unanswered(&mut ninth),
        "the ninth connection was kept"
    );
    assert!(
        metric(
            &service,
            "ladder_connections_refused_total{reason=\"per_ip\"}"
        )
        .parse::<f64>()
        .unwrap()
            >= 1.0
    );

    // Another address is served while they sit there.
    serves(&service);
    let mut other = connect_from(&service, "127.0.0.3");
    other
        .write_all(b"GET /time HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        read_response(&mut other, &mut buf).map(|r| r.status),
        Some(200)
    );

    // A slot given back is free again.
    held.pop();
    std::thread::sleep(Duration::from_millis(300));
    let mut again = connect_from(&service, "127.0.0.2");
    again
        .write_all(b"GET /time HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        read_response(&mut again, &mut buf).map(|r| r.status),
        Some(200)
    );
}

#[test]
fn a_connection_that_sends_nothing_is_closed_after_10_s() {
    let service = Service::start(&[]);
    let mut silent = connect(&service);
    let started = Instant::now();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 16];
    let read = std::io::Read::read(&mut silent, &mut buf);
    let waited = started.elapsed();
    assert!(matches!(read, Ok(0)), "{read:?}");
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(13),
        "{waited:?}"
    );
    assert!(
        metric(&service, "ladder_connection_first_bytes_timeouts_total")
            .parse::<f64>()
            .unwrap()
            >= 1.0
    );
}

/// The sequence the service's state is at (GET /admin/state-hash).
fn state_seq(service: &Service) -> u64 {
    service.admin("GET", "/admin/state-hash", None).json()["seq"]
        .as_u64()
        .expect("a seq")
}

/// A DELETE /orders body of `n` cancels signed by `trader`, of order ids `from..from + n`.
fn signed_cancels(trader: &ladder_client::Trader, from: u64, n: u64) -> String {
    let requests: Vec<_> = (from..from + n)
        .map(|id| {
            cancel_order_request(
                &trader.wallet,
                &trader.exchange,
                id,
                market(),
                SignatureType::SmartAccount,
            )
        })
        .collect();
    ladder_client::cancel_orders_body(&requests)
}

#[test]
fn a_batch_of_1000_cancels_of_absent_orders_costs_1000_tokens_and_journals_nothing() {
    let service = Service::start(&["--rate-limit-key", "1500"]);
    let mut alice = service.trader(0);
    let (thousand, another_thousand, four_hundred) = (
        signed_cancels(&alice, 900_000, 1000),
        signed_cancels(&alice, 800_000, 1000),
        signed_cancels(&alice, 700_000, 400),
    );
    let seq_before = state_seq(&service);

    let r = alice.send("DELETE", "/orders", Some(&thousand)).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let result = r.json();
    assert_eq!(result["canceled"], json!([]));
    let reasons = result["notCanceled"].as_object().unwrap();
    assert_eq!(reasons.len(), 1000);
    assert!(reasons.values().all(|why| why == "not found"), "{result}");
    assert_eq!(state_seq(&service), seq_before, "nothing was journaled");
    assert!(
        metric(&service, "ladder_unjournaled_cancels_total")
            .parse::<f64>()
            .unwrap()
            >= 1000.0
    );

    // The key paid 1,000 of its 1,500 tokens: another 1,000 is refused and spends nothing,
    // 400 pass.
    let r = alice
        .send("DELETE", "/orders", Some(&another_thousand))
        .unwrap();
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.header("retry-after").is_some());
    let r = alice
        .send("DELETE", "/orders", Some(&four_hundred))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(state_seq(&service), seq_before);
}

#[test]
fn a_batch_larger_than_the_key_bucket_costs_the_whole_bucket_and_passes_when_it_is_full() {
    let service = Service::start(&["--rate-limit-key", "500"]);
    let mut alice = service.trader(0);
    let body = signed_cancels(&alice, 600_000, 1000);
    let r = alice.send("DELETE", "/orders", Some(&body)).unwrap();
    assert_eq!(r.status, 200, "a full bucket lets it pass: {}", r.body);
    let r = alice.send("DELETE", "/orders", Some(&body)).unwrap();
    assert_eq!(r.status, 429, "the bucket is empty now");
}

#[test]
fn a_request_for_many_books_costs_a_token_per_book() {
    let service = Service::start(&["--rate-limit-ip", "100"]);
    let yes_token = yes().to_string();
    let body = serde_json::to_string(&vec![json!({ "token_id": yes_token }); 90]).unwrap();
    let r = public(&service, "POST", "/books", Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json().as_array().map(Vec::len), Some(90));
    // 90 of 100 spent (the readiness probe and this test's reads spend a few more): 90 more
    // books are refused at once.
    let r = public(&service, "POST", "/books", Some(&body));
    assert_eq!(r.status, 429, "{}", r.body);
}

#[test]
fn refused_key_creations_and_stops_of_idle_heartbeats_journal_nothing() {
    let service = Service::start(&[]);
    let mut alice = service.trader(0);
    let seq_before = state_seq(&service);
    // Anyone can sign L1 headers naming alice's account with a key of their own: the engine
    // refuses them (the signer does not control the account), and nothing is journaled.
    let mut impostor =
        ladder_client::Trader::new(&service.url, ladder_client::Wallet::random(), alice.account)
            .unwrap();
    for nonce in 0..20 {
        let r = impostor.create_api_key(nonce).unwrap();
        assert_eq!(r.status, 401, "{}", r.body);
    }
    // Stopping heartbeats that do not run stops nothing.
    for _ in 0..5 {
        let r = alice.send("DELETE", "/heartbeats", None).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert_eq!(state_seq(&service), seq_before, "nothing was journaled");
}

/// The sample of `ladder_http_requests_total` for `route` and `status` (0 when absent).
fn requests_counted(service: &Service, route: &str, status: u16) -> u64 {
    let r = public(service, "GET", "/metrics", None);
    let prefix = format!("ladder_http_requests_total{{route=\"{route}\",status=\"{status}\"}} ");
    r.body
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map_or(0, |v| v.trim().parse().expect("a count"))
}

/// Every answer carries a `Date` (RFC 9110 6.6.1) and is counted in
/// `ladder_http_requests_total`, those the service could not read and refusals included; a
/// later HTTP/1 minor version is served as HTTP/1.1; reads are no journal group commit.
#[test]
fn every_answer_is_dated_and_counted_and_http_1_2_is_served() {
    let service = Service::start(&["--rate-limit-ip", "40"]);
    let r = raw_status(&service, b"GET /time HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 200, "{r:?}");
    let date = r.header("date").expect("a Date header");
    assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
    let r = raw_status(&service, b"GET /time HTTP/1.1\r\nX-Bytes: \xff\r\n\r\n");
    assert_raw_error(&r, 400);
    assert!(r.header("date").is_some(), "an error is dated too");

    let unread_400 = requests_counted(&service, "unread", 400);
    let unread_413 = requests_counted(&service, "unread", 413);
    raw_status(&service, b"GET /time HTTP/1.1\r\nX-Bytes: \xff\r\n\r\n");
    let body = format!("[{}]", vec!["{\"token_id\":\"1\"}"; 5_000].join(","));
    assert_raw_error(
        &raw_request(&service, "POST", "/books", &[], body.as_bytes()),
        413,
    );
    assert_eq!(requests_counted(&service, "unread", 400), unread_400 + 1);
    assert_eq!(requests_counted(&service, "unread", 413), unread_413 + 1);

    let r = raw_status(&service, b"GET /time HTTP/1.2\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 200, "HTTP/1.2 is read as HTTP/1.1: {r:?}");

    let batches = metric(&service, "ladder_journal_batches_total");
    for _ in 0..5 {
        assert_eq!(public(&service, "GET", "/markets", None).status, 200);
    }
    assert_eq!(
        metric(&service, "ladder_journal_batches_total"),
        batches,
        "reads are no group commit"
    );

    // Past the IP limit: the 429s are counted under their route.
    let mut limited = 0;
    for _ in 0..60 {
        if public(&service, "GET", "/time", None).status == 429 {
            limited += 1;
        }
    }
    assert!(limited > 0);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(requests_counted(&service, "/time", 429) >= limited);
}

/// A chunked request body (RFC 9112 7.1) is read as its decoded bytes, on a kept-alive
/// connection with a request pipelined behind it; another coding is a 501.
#[test]
fn a_chunked_body_is_served_and_another_coding_is_501() {
    use std::io::{Read, Write};
    let service = Service::start(&[]);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", service.port())).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let body = format!(r#"[{{"token_id":"{YES}"}}]"#);
    let (first, rest) = body.split_at(5);
    let request = format!(
        "POST /books HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x};note=1\r\n{first}\r\n{:x}\r\n{rest}\r\n0\r\nX-Trailer: t\r\n\r\n\
         GET /time HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        first.len(),
        rest.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answers = String::new();
    stream.read_to_string(&mut answers).unwrap();
    assert_eq!(answers.matches("HTTP/1.1 ").count(), 2, "{answers}");
    assert_eq!(
        answers.matches("HTTP/1.1 200 OK\r\n").count(),
        2,
        "{answers}"
    );
    assert!(
        answers.contains(&format!(r#""asset_id":"{YES}""#)),
        "{answers}"
    );

    let r = raw_status(
        &service,
        b"POST /books HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
    );
    assert_raw_error(&r, 501);
    serves(&service);
}

/// A client that pipelines requests as fast as it can and never reads its answers (CONTRACT
/// 18: other connections are never slowed by such a client). The service stops parsing its
/// requests once its unread answers pile up, serves everyone else meanwhile, and closes it
/// once its answers have waited 10 s unread. Before, one loop thread answered it without
/// end, and requests of other clients on that thread waited 9 to 26 s.
#[test]
fn a_client_that_pipelines_and_never_reads_slows_no_one_and_is_closed() {
    let service = Service::start(&["--rate-limit-ip", "0", "--rate-limit-key", "0"]);
    let mut flooder = connect(&service);
    let sending = std::thread::spawn(move || {
        let burst = b"GET /time HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2_000);
        let started = Instant::now();
        while flooder.write_all(&burst).is_ok() {
            if started.elapsed() > Duration::from_secs(60) {
                return None;
            }
        }
        Some(started.elapsed())
    });
    // Fresh connections, spread over the service's loop threads: each answered at once.
    std::thread::sleep(Duration::from_millis(300));
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        serves(&service);
        slowest = slowest.max(started.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a request waited {slowest:?} behind the flood"
    );
    let ended = sending.join().expect("the flooding thread");
    let ended = ended.expect("the flooding connection was never closed");
    assert!(
        ended < Duration::from_secs(30),
        "closed after {ended:?}, not about 10 s"
    );
    serves(&service);
}

/// CPU seconds the service's process has used (user and system, from /proc).
fn process_cpu_s(service: &Service) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", service.pid().unwrap())).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// A request whose first bytes wait for the rest: the loop sleeps meanwhile (no busy turn
/// for its waiting bytes), and it is answered 408 after 10 s, also when it came behind a
/// pipelined burst that made parsing wait for the client to read.
#[test]
fn a_partial_request_costs_no_cpu_while_it_waits_and_gets_its_408_after_a_pause() {
    let service = Service::start(&["--rate-limit-ip", "0"]);
    let mut partial = connect(&service);
    partial.write_all(b"GET /time HTTP/1.1\r\nHo").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = process_cpu_s(&service);
    std::thread::sleep(Duration::from_secs(2));
    let spent = process_cpu_s(&service) - before;
    assert!(
        spent < 0.5,
        "the service spent {spent} s of CPU in 2 s idle"
    );
    drop(partial);

    // 70 whole requests (past the 64 in flight), then a partial one; the answers are read.
    let mut stream = connect(&service);
    let mut burst = b"GET /time HTTP/1.1\r\nHost: x\r\n\r\n".repeat(70);
    burst.extend_from_slice(b"GET /time HTTP/1.1\r\nHo");
    stream.write_all(&burst).unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    for i in 0..70 {
        let r = read_response(&mut stream, &mut buf).unwrap_or_else(|| panic!("answer {i}"));
        assert_eq!(r.status, 200, "{r:?}");
    }
    let r = read_response(&mut stream, &mut buf).expect("the partial request's answer");
    assert_eq!(r.status, 408, "{r:?}");
    let waited = started.elapsed();
    assert!(
        waited > Duration::from_secs(9) && waited < Duration::from_secs(14),
        "408 after {waited:?}"
    );
}

/// A client that pipelines many requests and then closes its sending side (`nc -N`) gets
/// every answer before the connection closes, also past the 64 in flight.
#[test]
fn a_half_closed_pipelining_client_gets_every_answer() {
    let service = Service::start(&["--rate-limit-ip", "0"]);
    let mut stream = connect(&service);
    stream
        .write_all(&b"GET /time HTTP/1.1\r\nHost: x\r\n\r\n".repeat(200))
        .unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut buf = Vec::new();
    for i in 0..200 {
        let r = read_response(&mut stream, &mut buf).unwrap_or_else(|| panic!("answer {i}"));
        assert_eq!(r.status, 200, "{r:?}");
    }
    let mut rest = Vec::new();
    use std::io::Read;
    assert_eq!(
        stream.read_to_end(&mut rest).unwrap_or(0),
        0,
        "then the end"
    );
}
