//! The operator surface's exit codes and output shapes (API.md §19): bad usage exits 2 with
//! a reason on stderr before anything runs; `bench engine` prints its keys at the top level.

use std::process::{Command, Output};

use serde_json::Value;

fn ladder(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(args)
        .env_remove("LADDER_ADMIN_TOKEN")
        .output()
        .expect("run ladder")
}

#[test]
fn bad_usage_exits_2_naming_the_flag() {
    let dir = std::env::temp_dir().join(format!("ladder-cli-usage-{}", std::process::id()));
    let data_dir = dir.to_string_lossy().to_string();
    let short = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(short.path(), "too short\n").expect("write");
    let short_secret = short.path().to_string_lossy().to_string();
    let cases: [(&[&str], &str); 57] = [
        (&["serve", "--durability", "fast"], "--durability"),
        (&["standby"], "--primary"),
        (
            &["serve", "--coordinator", "127.0.0.1:2379"],
            "--coordinator",
        ),
        (
            &[
                "standby",
                "--coordinator",
                "http://127.0.0.1:2379",
                "--replicas",
                "1",
            ],
            "--replication-listen",
        ),
        (&["serve", "--lease-ms", "10"], "--lease-ms"),
        (&["serve", "--cluster", "a/b"], "--cluster"),
        (&["serve", "--replicas", "1"], "--replication-listen"),
        (&["serve", "--listen", "bogus"], "--listen"),
        (&["serve", "--listen", "127.0.0.1:99999"], "--listen"),
        (&["standby", "--primary", "nowhere"], "--primary"),
        (&["promote"], "--admin-token"),
        (&["loadgen"], "--admin-token"),
        (
            &["loadgen", "--admin-token", "t", "--scenario", "weird"],
            "--scenario",
        ),
        (
            &["loadgen", "--admin-token", "t", "--connections", "0"],
            "--connections",
        ),
        (
            &[
                "loadgen",
                "--admin-token",
                "t",
                "--rate",
                "200000",
                "--duration",
                "10",
            ],
            "--rate",
        ),
        (&["bench", "engine", "--commands", "0"], "--commands"),
        (
            &["bench", "engine", "--commands", "1000000000000"],
            "--commands",
        ),
        (
            &["bench", "sequencer", "--commands", "18446744073709551615"],
            "--commands",
        ),
        (&["bench", "engine", "--rate", "0"], "--rate"),
        (
            &["bench", "sequencer", "--producers", "100000"],
            "--producers",
        ),
        (
            &["bench", "snapshot", "--open-orders", "100000000000"],
            "--open-orders",
        ),
        (&["bench", "flush", "--seconds", "0"], "--seconds"),
        (
            &["bench", "flush", "--record-bytes", "1000000000000"],
            "--record-bytes",
        ),
        (&["bench", "standby", "--rate", "0"], "--rate"),
        (&["journal", "verify", "--no-such-flag"], "--no-such-flag"),
        (
            &["serve", "--settlement-fail-percent", "150"],
            "--settlement-fail-percent",
        ),
        (&["serve", "--exchange-address", "zz"], "--exchange-address"),
        (&["loadgen", "--admin-token", "t", "--url", "foo"], "--url"),
        (
            &[
                "client", "--trader", "0", "order", "--token", "yes", "--side", "up", "--price",
                "0.5", "--size", "1",
            ],
            "--side",
        ),
        (
            &[
                "client", "--trader", "0", "order", "--token", "yes", "--side", "buy", "--price",
                "abc", "--size", "1",
            ],
            "--price",
        ),
        (&["client", "--trader", "7", "orders"], "--trader"),
        (&["client", "orders"], "--private-key"),
        (
            &["client", "--url", "foo", "--trader", "0", "orders"],
            "--url",
        ),
        (
            &["client", "--private-key", "zz", "orders"],
            "--private-key",
        ),
        (
            &["client", "--trader", "0", "--account", "zz", "orders"],
            "--account",
        ),
        (
            &["client", "--trader", "0", "balance", "--token", "bogus"],
            "--token",
        ),
        (&["serve", "--gateway-threads", "0"], "--gateway-threads"),
        (&["serve", "--chain-from", "zz"], "--chain-from"),
        (
            &["serve", "--chain-confirmations", "0"],
            "--chain-confirmations",
        ),
        (&["bench", "fanout", "--url", "foo"], "--url"),
        (
            &[
                "client", "--trader", "0", "cancel", "--id", "1", "--market", "zz",
            ],
            "--market",
        ),
        (&["journal", "dump", "--type", "nosuchtype"], "--type"),
        (&["journal", "dump", "--from", "10", "--to", "5"], "--from"),
        (
            &[
                "serve",
                "--replication-listen",
                "127.0.0.1:9",
                "--replicas",
                "1",
                "--durability",
                "async",
            ],
            "--durability async",
        ),
        // The replication link leaves loopback only with a secret.
        (
            &["serve", "--replication-listen", "0.0.0.0:9090"],
            "--replication-secret-file",
        ),
        (
            &["standby", "--primary", "192.0.2.7:9090"],
            "--replication-secret-file",
        ),
        (
            &["serve", "--replication-secret-file", "/no/such/secret"],
            "/no/such/secret",
        ),
        (
            &["serve", "--bundler-url", "http://127.0.0.1:4337"],
            "--bundler-url",
        ),
        (
            &["serve", "--replication-secret-file", &short_secret],
            "at least 16 bytes",
        ),
        (&["serve", "--rpc-url", "notaurl"], "--rpc-url"),
        (&["serve", "--rpc-url", "http://a b"], "--rpc-url"),
        (&["serve", "--rpc-url", "http://[::1"], "--rpc-url"),
        (&["serve", "--rpc-url", "http://h:99999"], "--rpc-url"),
        (
            &[
                "serve",
                "--rpc-url",
                "http://127.0.0.1:8545",
                "--bundler-url",
                "notaurl",
            ],
            "--bundler-url",
        ),
        // Flags that apply only with a coordinator.
        (&["serve", "--lease-ms", "1000"], "--coordinator"),
        (&["serve", "--cluster", "foo"], "--coordinator"),
        (&["serve", "--node-id", "a"], "--coordinator"),
    ];
    for (args, named) in cases {
        let mut with_dir = args.to_vec();
        if args[0] == "serve" {
            with_dir.extend(["--data-dir", &data_dir]);
        }
        let out = ladder(&with_dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(named),
            "{args:?} does not name {named}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    }
    assert!(
        !dir.exists(),
        "bad usage must not create the data directory"
    );
}

#[test]
fn bench_engine_prints_the_contract_keys_at_the_top_level() {
    for rate in [None, Some("500000")] {
        let mut args = vec!["bench", "engine", "--commands", "20000"];
        if let Some(rate) = rate {
            args.extend(["--rate", rate]);
        }
        let out = ladder(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
        assert_eq!(line["commands"].as_u64(), Some(20_000), "{line}");
        // Its progress is logged on stderr, a pipe here: plain text, no colour codes.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("generating the stream"), "{stderr}");
        assert!(
            !stderr.contains('\u{1b}'),
            "colour codes in a pipe: {stderr}"
        );
        for key in ["ops_per_sec", "p50_ns", "p99_ns", "p999_ns", "max_ns"] {
            assert!(line[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {line}");
        }
        let (p50, p99, max) = (
            line["p50_ns"].as_u64(),
            line["p99_ns"].as_u64(),
            line["max_ns"].as_u64(),
        );
        assert!(p50 <= p99 && p99 <= max, "{line}");
    }
}

#[test]
fn serve_on_a_port_in_use_writes_nothing_into_a_new_data_dir() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let port = holder.local_addr().expect("address").port();
    let parent = tempfile::tempdir().expect("temp dir");
    let data_dir = parent.path().join("data");
    let listen = format!("127.0.0.1:{port}");
    let data = data_dir.to_string_lossy().to_string();
    for args in [
        vec!["serve", "--listen", &listen, "--data-dir", &data],
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--replication-listen",
            &listen,
            "--data-dir",
            &data,
        ],
        vec![
            "standby",
            "--primary",
            "127.0.0.1:1",
            "--listen",
            &listen,
            "--data-dir",
            &data,
        ],
    ] {
        let out = ladder(&args);
        assert!(!out.status.success(), "{args:?} ran on a held port");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("address in use"), "stderr: {stderr}");
        assert!(
            !data_dir.exists(),
            "{args:?} created its data directory (and its master key or node id)"
        );
    }
}

#[test]
fn version_names_the_interface_version() {
    let out = ladder(&["--version"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("ladder ") && stdout.contains("(interface 1.0.0"),
        "stdout: {stdout}"
    );
}

#[test]
fn a_default_node_id_that_cannot_be_is_refused_before_anything_is_written() {
    let parent = tempfile::tempdir().expect("temp dir");
    let data_dir = parent.path().join("data");
    let long_host = "h".repeat(70);
    let out = ladder(&[
        "serve",
        "--coordinator",
        "http://127.0.0.1:1",
        "--listen",
        "0.0.0.0:0",
        "--advertise-host",
        &long_host,
        "--data-dir",
        &data_dir.to_string_lossy(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("give --node-id"), "stderr: {stderr}");
    assert!(
        !data_dir.exists(),
        "the refused node created its data directory"
    );
}
