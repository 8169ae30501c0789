//! `ladder loadgen` end to end (API.md §19): against a fresh service it sets up its own
//! market and accounts, drives it, and prints one JSON line last whose first fields are
//! `{offered_rate, achieved_rate, ok, errors, p50_us, p90_us, p99_us, p999_us, max_us}`;
//! with `--out` it writes `result.json` and `latency.svg`.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use support::*;

/// The binding fields of the stdout line, in order.
const CONTRACT_KEYS: [&str; 9] = [
    "offered_rate",
    "achieved_rate",
    "ok",
    "errors",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "max_us",
];

fn loadgen(service: &Service, flags: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args([
            "loadgen",
            "--url",
            &service.url,
            "--admin-token",
            ADMIN_TOKEN,
        ])
        .args(flags)
        .arg("--out")
        .arg(out)
        .args(["--log", "warn"])
        .output()
        .expect("run ladder loadgen")
}

/// The last stdout line as JSON, after checking the exit status and the key order.
fn result_line(output: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "loadgen failed: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().expect("a result line");
    let line: Value = serde_json::from_str(last).expect("the last line is JSON");
    let keys: Vec<&str> = line
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(&keys[..CONTRACT_KEYS.len()], CONTRACT_KEYS, "{last}");
    assert!(
        stderr.contains("ok ") && stderr.contains("p99"),
        "a progress line: {stderr}"
    );
    line
}

fn int(line: &Value, key: &str) -> u64 {
    line[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {line}"))
}

#[test]
fn an_open_loop_mm_run_keeps_the_offered_rate_without_errors_and_writes_its_plot() {
    let service = Service::start(&[]);
    let out = tempfile::tempdir().expect("temp dir");
    let flags = [
        "--rate",
        "200",
        "--duration",
        "2",
        "--connections",
        "2",
        "--scenario",
        "mm",
    ];
    let output = loadgen(&service, &flags, out.path());
    let line = result_line(&output);
    assert_eq!(line["offered_rate"], 200, "{line}");
    // The makers beat their dead-man switch all along, none refused, and stopped it after.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let beats = stderr
        .lines()
        .find(|l| l.starts_with("loadgen: heartbeats of 2 makers"))
        .unwrap_or_else(|| panic!("no heartbeat line: {stderr}"));
    assert!(beats.ends_with(", 0 refused or lost"), "{beats}");
    let public_metrics = service
        .http()
        .request("GET", "/metrics", &[], None)
        .unwrap()
        .body;
    assert!(
        public_metrics.contains("ladder_heartbeats_running 0"),
        "stopped at the end"
    );
    assert!(public_metrics.contains("ladder_heartbeat_expiries_total 0"));
    assert_eq!(int(&line, "errors"), 0, "{line}");
    assert_eq!(
        int(&line, "ok"),
        400,
        "every planned request answered: {line}"
    );
    let achieved = line["achieved_rate"].as_f64().expect("achieved_rate");
    assert!((170.0..=230.0).contains(&achieved), "{line}");
    // The service's CPU over the run, per request and against one signature recovery.
    let cpu = line["service_cpu_s"].as_f64().expect("service_cpu_s");
    let per_request = line["service_cpu_us_per_request"]
        .as_f64()
        .expect("per request");
    let recovery = line["recovery_cpu_us"].as_f64().expect("recovery_cpu_us");
    assert!(cpu > 0.0 && recovery > 0.0, "{line}");
    assert!((per_request - cpu * 1e6 / 400.0).abs() <= 0.1, "{line}");
    let ratio = line["cpu_per_request_over_recovery"]
        .as_f64()
        .expect("ratio");
    assert!((ratio - per_request / recovery).abs() <= 0.01, "{line}");
    let percentiles: Vec<u64> = CONTRACT_KEYS[4..].iter().map(|k| int(&line, k)).collect();
    assert!(percentiles[0] > 0, "{line}");
    assert!(percentiles.windows(2).all(|w| w[0] <= w[1]), "{line}");
    // The arrival at the socket (kernel timestamps, Linux) comes before the read that
    // completes a request, and after its planned send.
    if cfg!(target_os = "linux") {
        for (arrival, read) in [("arrival_p50_us", "p50_us"), ("arrival_p99_us", "p99_us")] {
            let (arrival, read) = (int(&line, arrival), int(&line, read));
            assert!(arrival > 0 && arrival <= read, "{line}");
        }
    }

    let full: Value = serde_json::from_slice(
        &std::fs::read(out.path().join("result.json")).expect("result.json"),
    )
    .expect("result.json is JSON");
    assert_eq!(full["ok"], line["ok"]);
    assert!(
        full["cancels"]["canceled"].as_u64() > Some(0),
        "cancels of quotes learnt on /ws/user: {full}"
    );
    assert!(
        full["latency_percentiles"]
            .as_array()
            .is_some_and(|p| p.len() > 10),
        "{full}"
    );
    let svg = std::fs::read_to_string(out.path().join("latency.svg")).expect("latency.svg");
    assert!(
        svg.starts_with("<svg") && svg.contains("<polyline"),
        "{svg}"
    );
}

#[test]
fn a_closed_loop_burst_run_reports_no_offered_rate_and_fills_takers() {
    // Closed loop sends as fast as the machine allows: on a fast one that passes the
    // default per-IP rate limit within the second, so the limits are off (as loadgen's own
    // advice for measuring capacity says).
    let service = Service::start(&["--rate-limit-key", "0", "--rate-limit-ip", "0"]);
    let out = tempfile::tempdir().expect("temp dir");
    let flags = [
        "--duration",
        "1",
        "--connections",
        "2",
        "--scenario",
        "burst",
    ];
    let line = result_line(&loadgen(&service, &flags, out.path()));
    assert_eq!(line["offered_rate"], Value::Null, "{line}");
    assert_eq!(line["mode"], "closed", "{line}");
    assert_eq!(int(&line, "errors"), 0, "{line}");
    assert!(int(&line, "ok") > 0, "{line}");
    assert!(int(&line, "fill_notify_count") > 0, "{line}");
    assert!(out.path().join("latency.svg").exists());
}

/// `ladder bench soak` starts its own service, drives it in loadgen chunks, and prints a line
/// per checkpoint (memory, snapshot, data directory, what the engine holds; the first and last
/// with a timed restart) and a summary comparing the last with the first.
#[test]
fn bench_soak_prints_its_checkpoints_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["bench", "soak", "--commands", "1200", "--every", "600"])
        .args(["--rate", "300", "--chunk-s", "3", "--snapshot-every", "300"])
        .arg("--dir")
        .arg(dir.path().join("data"))
        .args(["--log", "warn"])
        .output()
        .expect("run ladder bench soak");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let (summary, checkpoints) = lines.split_last().expect("lines");
    assert_eq!(summary["summary"], Value::Bool(true), "{summary}");
    // One chunk may pass both thresholds (a checkpoint is taken between chunks).
    assert!(!checkpoints.is_empty(), "{stdout}");
    for line in checkpoints {
        for key in [
            "commands",
            "rss_mb",
            "snapshot_mb",
            "data_dir_mb",
            "orders_held",
        ] {
            assert!(line[key].is_number(), "{key} in {line}");
        }
    }
    let first = &checkpoints[0];
    let last = &checkpoints[checkpoints.len() - 1];
    assert!(first["commands"].as_u64().unwrap() >= 600);
    assert_eq!(summary["commands_last"], last["commands"]);
    assert!(last["commands"].as_u64().unwrap() >= 1200);
    assert!(first["restart_s"].as_f64().unwrap() > 0.0);
    assert!(last["restart_s"].as_f64().unwrap() > 0.0);
    assert!(
        first["snapshot_mb"].as_f64().unwrap() > 0.0,
        "snapshots every 300"
    );
    assert!(summary["rss_ratio"].is_number());
}
