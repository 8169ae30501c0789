//! The replication link's security over real sockets (API.md §19): a peer without the
//! replication secret gets not one byte (no greeting, no master key, no journal), a standby
//! with the secret follows, a forged acknowledgement never releases an answer, and one node
//! holds one session.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladder_client::{HttpClient, Trader, Wallet};
use ladder_protocol::Address;
use ladder_sequencer::replication::secure::{self, SecureReader, SecureWriter};
use ladder_sequencer::replication::{Hello, LinkSecret};
use serde_json::Value;

use support::*;

const SECRET: &str = "e2e replication secret: 7f3a9c0d51e2b84a\n";

fn secret_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn admin(url: &str, path: &str) -> Value {
    let mut http = HttpClient::new(url).unwrap();
    let headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
    http.request("GET", path, &headers, None).unwrap().json()
}

/// A primary that requires the secret, with `replicas` standbys per answer.
fn primary(dir: &Path, replicas: u32) -> (Service, u16) {
    let replication = free_port();
    let secret = secret_file(dir, "primary.secret", SECRET);
    let service = Service::start(&[
        "--replication-listen",
        &format!("127.0.0.1:{replication}"),
        "--replication-secret-file",
        secret.to_str().unwrap(),
        "--replicas",
        &replicas.to_string(),
    ]);
    (service, replication)
}

/// Everything a connection receives until the peer closes it (or 15 s pass).
fn everything_received(mut stream: TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    received
}

/// A standby in `dir/standby` following `replication` with the primary's secret.
fn standby_with_the_secret(dir: &Path, replication: u16) -> Standby {
    let secret = secret_file(dir, "standby.secret", SECRET);
    start_standby_with(
        replication,
        &dir.join("standby"),
        &["--replication-secret-file", secret.to_str().unwrap()],
    )
}

/// The standby's state hash once it equals the primary's, within 20 s.
fn wait_until_caught_up(primary: &Service, standby_url: &str) {
    let want = admin(&primary.url, "/admin/state-hash");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = admin(standby_url, "/admin/state-hash");
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "standby at {got}, primary at {want}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How a test steers a [`HandmadeStandby`] acknowledging in the background.
#[derive(Default)]
struct AckControl {
    /// Hold acknowledgements back.
    withhold: AtomicBool,
    /// Hang up (while withholding).
    quit: AtomicBool,
    /// The last record read.
    read: AtomicU64,
}

/// A peer that holds the secret and speaks the protocol by hand.
struct HandmadeStandby {
    reader: BufReader<SecureReader>,
    writer: SecureWriter,
    master_key: [u8; 32],
}

impl HandmadeStandby {
    fn connect(replication: u16, node_id: &str) -> HandmadeStandby {
        let stream = TcpStream::connect(("127.0.0.1", replication)).unwrap();
        let secret = LinkSecret::from_bytes(SECRET.as_bytes()).unwrap();
        let hello = Hello {
            from_seq: 1,
            last: None,
            node_id: node_id.to_string(),
        };
        let (answer, (reader, mut writer)) =
            secure::connect(&stream, &secret, hello.line().as_bytes()).unwrap();
        assert_eq!(answer, b"OK");
        writer
            .write_all(ladder_sequencer::replication::READY)
            .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reader = BufReader::new(reader);
        let mut master_key = [0u8; 32];
        reader.read_exact(&mut master_key).unwrap();
        HandmadeStandby {
            reader,
            writer,
            master_key,
        }
    }

    /// The next record's sequence number.
    fn next_record(&mut self) -> std::io::Result<u64> {
        let mut head = [0u8; 22];
        self.reader.read_exact(&mut head)?;
        let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
        let mut payload = vec![0u8; len];
        self.reader.read_exact(&mut payload)?;
        Ok(u64::from_be_bytes(head[4..12].try_into().unwrap()))
    }

    /// Reads records up to `seq`.
    fn read_through(&mut self, seq: u64) {
        while self.next_record().unwrap() < seq {}
    }

    /// Acknowledges every record it reads on a thread of its own, noting the last one read
    /// in `ack.read`; while `ack.withhold` is set it holds the acknowledgement back, and if
    /// `ack.quit` is set meanwhile it hangs up.
    fn acknowledge_in_background(mut self, ack: Arc<AckControl>) {
        std::thread::spawn(move || {
            while let Ok(seq) = self.next_record() {
                ack.read.store(seq, Ordering::Release);
                while ack.withhold.load(Ordering::Acquire) {
                    if ack.quit.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                if self
                    .writer
                    .write_all(format!("ACK {seq}\n").as_bytes())
                    .is_err()
                {
                    return;
                }
            }
        });
    }

    /// Whether the primary ended the session (the link reads to its end or fails).
    fn was_cut(&mut self) -> bool {
        loop {
            match self.next_record() {
                Ok(_) => continue,
                Err(_) => return true,
            }
        }
    }
}

#[test]
fn a_peer_without_the_secret_gets_nothing_and_a_standby_with_it_follows() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, replication) = primary(dir.path(), 0);

    // The old plain-text handshake: no OK, no master key, no record. Not one byte.
    let mut plain = TcpStream::connect(("127.0.0.1", replication)).unwrap();
    plain.write_all(b"LADDER-REPL 2 FROM 1 AFTER -\n").unwrap();
    assert_eq!(everything_received(plain), b"");

    // A Noise handshake under another secret: refused, and nothing to read either.
    let stream = TcpStream::connect(("127.0.0.1", replication)).unwrap();
    let wrong = LinkSecret::from_bytes(b"a secret the primary does not hold").unwrap();
    let hello = Hello {
        from_seq: 1,
        last: None,
        node_id: "intruder".into(),
    };
    let refused = secure::connect(&stream, &wrong, hello.line().as_bytes()).err();
    assert!(refused.is_some_and(|why| why.contains("handshake answer")));
    assert_eq!(everything_received(stream), b"");

    // Idle connections that never speak hold a handshake slot for 5 s at most: the real
    // standby, with the secret, gets in and catches up while they sit there.
    let idle: Vec<TcpStream> = (0..12)
        .map(|_| TcpStream::connect(("127.0.0.1", replication)).unwrap())
        .collect();
    let standby = standby_with_the_secret(dir.path(), replication);
    wait_until_caught_up(&primary, &standby.url);
    let master = std::fs::read(primary.data_dir().join("master.key")).unwrap();
    let standby_master = std::fs::read(dir.path().join("standby").join("master.key")).unwrap();
    assert_eq!(
        standby_master, master,
        "the standby holds the primary's master key"
    );
    for stream in idle {
        assert_eq!(everything_received(stream), b"", "an idle peer got bytes");
    }

    // A standby started with another secret never follows.
    let other = secret_file(
        dir.path(),
        "other.secret",
        "not the primary's secret, at all",
    );
    let lost = start_standby_with(
        replication,
        &dir.path().join("lost"),
        &["--replication-secret-file", other.to_str().unwrap()],
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(admin(&lost.url, "/admin/state-hash")["seq"], 0);
    assert!(
        !dir.path().join("lost").join("master.key").exists() || {
            let lost_master = std::fs::read(dir.path().join("lost").join("master.key")).unwrap();
            lost_master != master
        }
    );
}

#[test]
fn a_forged_acknowledgement_never_releases_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, replication) = primary(dir.path(), 1);
    let last = admin(&primary.url, "/admin/state-hash")["seq"]
        .as_u64()
        .unwrap();
    let mut fake = HandmadeStandby::connect(replication, "forger");
    let master = std::fs::read(primary.data_dir().join("master.key")).unwrap();
    assert_eq!(fake.master_key.as_slice(), master.as_slice());
    fake.read_through(last);

    // A write waits for the standby; the forger claims far more than it was sent.
    let url = primary.url.clone();
    let write = std::thread::spawn(move || {
        let (key, account) = KEYS[0];
        let mut trader = Trader::new(
            &url,
            Wallet::from_hex(key).unwrap(),
            Address::parse(account).unwrap(),
        )
        .unwrap();
        let r = trader.create_api_key(0).unwrap();
        (r.status, r.json())
    });
    assert_eq!(fake.next_record().unwrap(), last + 1, "the key's record");
    fake.writer
        .write_all(format!("ACK {}\n", last + 1_000_000).as_bytes())
        .unwrap();
    let (status, body) = write.join().unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body["error"],
        "replica lost: applied on the primary, not confirmed by a standby"
    );
    assert!(fake.was_cut(), "the primary ended the forger's session");

    // A real standby then releases writes as before.
    let standby = standby_with_the_secret(dir.path(), replication);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (key, account) = KEYS[1];
    let mut trader = Trader::new(
        &primary.url,
        Wallet::from_hex(key).unwrap(),
        Address::parse(account).unwrap(),
    )
    .unwrap();
    loop {
        let r = trader.create_api_key(1).unwrap();
        if r.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "writes stay refused: {}", r.body);
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_until_caught_up(&primary, &standby.url);
}

#[test]
fn a_node_holds_one_session_and_its_reconnection_ends_the_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, replication) = primary(dir.path(), 0);
    let last = admin(&primary.url, "/admin/state-hash")["seq"]
        .as_u64()
        .unwrap();
    let mut first = HandmadeStandby::connect(replication, "node-a");
    first.read_through(last);
    let mut other = HandmadeStandby::connect(replication, "node-b");
    other.read_through(last);
    let mut again = HandmadeStandby::connect(replication, "node-a");
    again.read_through(last);
    assert!(first.was_cut(), "node-a's older session goes on");
    // node-b's session is untouched: it receives the next record.
    let _alice = primary.trader(0);
    assert_eq!(other.next_record().unwrap(), last + 1);
    assert_eq!(again.next_record().unwrap(), last + 1);
}

#[test]
fn a_replayed_first_message_takes_no_session_and_gets_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, replication) = primary(dir.path(), 0);
    let last = admin(&primary.url, "/admin/state-hash")["seq"]
        .as_u64()
        .unwrap();
    let mut real = HandmadeStandby::connect(replication, "node-a");
    real.read_through(last);

    // A first message as an eavesdropper recorded it, sent again: it opens (Noise NNpsk0
    // cannot tell), but without the session's keys the replayer cannot confirm, so the
    // primary sends no key, takes no session and leaves the real one alone.
    let secret = LinkSecret::from_bytes(SECRET.as_bytes()).unwrap();
    let hello = Hello {
        from_seq: 1,
        last: None,
        node_id: "node-a".into(),
    };
    let recorded = secure::first_message(&secret, hello.line().as_bytes()).unwrap();
    let mut replay = TcpStream::connect(("127.0.0.1", replication)).unwrap();
    replay
        .write_all(&(recorded.len() as u16).to_be_bytes())
        .unwrap();
    replay.write_all(&recorded).unwrap();
    let received = everything_received(replay);
    // Only the primary's handshake answer (one frame of its own ephemeral key and a tag).
    assert!(received.len() < 100, "{} bytes", received.len());
    let _alice = primary.trader(0);
    assert_eq!(
        real.next_record().unwrap(),
        last + 1,
        "the real session goes on"
    );
}

/// With `--replicas 1`, a trade no standby holds yet is neither answered nor settled (its
/// settlement journals nothing; meanwhile the sequencer waits, so admin reads wait too); once
/// a standby acknowledges the batch, the answer leaves and settlement goes on.
#[test]
fn a_trade_no_standby_holds_yet_waits_unanswered_and_unsettled_then_settles() {
    use ladder_protocol::wire::OrderType;
    use ladder_protocol::Side;

    let dir = tempfile::tempdir().unwrap();
    let replication = free_port();
    let secret = secret_file(dir.path(), "primary.secret", SECRET);
    let primary = Service::start(&[
        "--replication-listen",
        &format!("127.0.0.1:{replication}"),
        "--replication-secret-file",
        secret.to_str().unwrap(),
        "--replicas",
        "1",
        "--settlement-delay-ms",
        "20",
    ]);
    // A standby that reads every record and acknowledges it, unless told to withhold.
    let ack = Arc::new(AckControl::default());
    HandmadeStandby::connect(replication, "withholder").acknowledge_in_background(ack.clone());
    let mut alice = primary.trader(0);
    let bob = primary.trader(1);
    let r = alice
        .place(yes(), Side::Buy, 5_000, 10, OrderType::Gtc)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let seq_now = || {
        admin(&primary.url, "/admin/state-hash")["seq"]
            .as_u64()
            .unwrap()
    };
    // Settlement of nothing pending: the sequence stands still.
    let before = seq_now();

    ack.withhold.store(true, Ordering::Release);
    let taker = std::thread::spawn(move || {
        let mut bob = bob;
        let r = bob
            .place(yes(), Side::Sell, 5_000, 4, OrderType::Fak)
            .unwrap();
        (r.status, r.json())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while ack.read.load(Ordering::Acquire) <= before {
        assert!(Instant::now() < deadline, "the trade's record never left");
        std::thread::sleep(Duration::from_millis(5));
    }
    let matched_at = ack.read.load(Ordering::Acquire);
    // Well past the settlement delay: still nothing settled (a settlement record would be
    // sent to the standby as soon as it was written), and no answer.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        ack.read.load(Ordering::Acquire),
        matched_at,
        "settlement journaled before a standby held the trade"
    );
    assert!(
        !taker.is_finished(),
        "answered before a standby held the batch"
    );

    ack.withhold.store(false, Ordering::Release);
    let (status, body) = taker.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "matched", "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while seq_now() == matched_at {
        assert!(
            Instant::now() < deadline,
            "settlement never went on once the standby held the trade"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

type MarketWs = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

/// A `/ws/market` subscription to the Yes token, past its first `book`.
fn market_ws(url: &str) -> MarketWs {
    let (mut ws, _) =
        tungstenite::connect(format!("{}/ws/market", url.replace("http://", "ws://"))).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
    }
    let subscribe = serde_json::json!({ "type": "market", "assets_ids": [YES] });
    ws.send(tungstenite::Message::text(subscribe.to_string()))
        .unwrap();
    assert!(next_event(&mut ws, "book", Duration::from_secs(5)).is_some());
    ws
}

/// The next event of type `event_type` on `ws` within `within`, if one comes.
fn next_event(ws: &mut MarketWs, event_type: &str, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let Ok(tungstenite::Message::Text(text)) = ws.read() else {
            continue;
        };
        let value: Value = serde_json::from_str(text.as_str()).unwrap();
        let events = match value {
            Value::Array(list) => list,
            one => vec![one],
        };
        if let Some(event) = events.into_iter().find(|e| e["event_type"] == event_type) {
            return Some(event);
        }
    }
    None
}

/// With `--replicas 1`, a batch its standby did not live to hold is answered as lost and its
/// events stay off the feeds (CONTRACT 18 (17): the feeds see a batch only once the standbys
/// hold it); a standby that comes back and holds it lets them out.
#[test]
fn a_batch_no_standby_held_reaches_the_feeds_only_once_a_standby_holds_it() {
    use ladder_protocol::wire::OrderType;
    use ladder_protocol::Side;

    let dir = tempfile::tempdir().unwrap();
    let (primary, replication) = primary(dir.path(), 1);
    // A standby that acknowledges every record, until told to withhold; told to quit while
    // withholding, it hangs up.
    let ack = Arc::new(AckControl::default());
    HandmadeStandby::connect(replication, "leaver").acknowledge_in_background(ack.clone());
    let alice = primary.trader(0);
    let mut ws = market_ws(&primary.url);
    let before = ack.read.load(Ordering::Acquire);

    ack.withhold.store(true, Ordering::Release);
    let placing = std::thread::spawn(move || {
        let mut alice = alice;
        let r = alice
            .place(yes(), Side::Buy, 4_000, 10, OrderType::Gtc)
            .unwrap();
        (r.status, r.json())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while ack.read.load(Ordering::Acquire) <= before {
        assert!(Instant::now() < deadline, "the order's record never left");
        std::thread::sleep(Duration::from_millis(5));
    }
    ack.quit.store(true, Ordering::Release);
    let (status, body) = placing.join().unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        serde_json::json!({ "error": "replica lost: applied on the primary, not confirmed by a standby" })
    );
    assert_eq!(
        next_event(&mut ws, "price_change", Duration::from_secs(1)),
        None,
        "the feed showed a batch no standby holds"
    );

    // A standby comes back and acknowledges everything: the level change goes out.
    HandmadeStandby::connect(replication, "returner")
        .acknowledge_in_background(Arc::new(AckControl::default()));
    let change = next_event(&mut ws, "price_change", Duration::from_secs(10))
        .expect("the withheld level change, once a standby holds it");
    assert!(change.to_string().contains("\"0.4\""), "{change}");
}

/// A connection to the replication port from `source` (a loopback address).
fn connect_from(source: &str, replication: u16) -> Option<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    let from: std::net::SocketAddr = format!("{source}:0").parse().ok()?;
    socket.bind(&from.into()).ok()?;
    let target: std::net::SocketAddr = format!("127.0.0.1:{replication}").parse().ok()?;
    socket.connect(&target.into()).ok()?;
    Some(socket.into())
}

/// Peers without the secret hold every handshake place from 8 addresses (4 each, the most
/// allowed) and reopen each connection the moment the primary closes it. A standby that
/// restarts meanwhile still gets in: a newcomer takes the place of the oldest handshake of the
/// address that holds the most. Before, it was refused for as long as the peers kept it up,
/// and with `--replicas 1` every write waited.
#[test]
fn silent_peers_holding_every_handshake_place_cannot_keep_a_standby_out() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, replication) = primary(dir.path(), 0);
    let stop = Arc::new(AtomicBool::new(false));
    let holders: Vec<_> = (2..10)
        .map(|last| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let source = format!("127.0.0.{last}");
                let mut held: Vec<TcpStream> = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    // Drop what the primary closed, open again up to 4.
                    held.retain(|stream| {
                        let mut byte = [0u8; 1];
                        let _ = stream.set_nonblocking(true);
                        matches!((&*stream).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                    });
                    while held.len() < 4 {
                        match connect_from(&source, replication) {
                            Some(stream) => held.push(stream),
                            None => break,
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let standby = standby_with_the_secret(dir.path(), replication);
    wait_until_caught_up(&primary, &standby.url);
    stop.store(true, Ordering::Release);
    for holder in holders {
        holder.join().unwrap();
    }
}
