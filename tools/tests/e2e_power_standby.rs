//! Power loss under replication (issue 30): a primary with `--replicas 1` and its standby, each
//! on its own `ladder-powercut` filesystem, under a stream of deposits. At random moments one
//! of them is killed and its power cut (plainly or torn), then started again, unattended:
//! - a standby that lost its unsynced tail resumes after the last record it holds (it
//!   acknowledged only what was durable);
//! - a primary that lost an unanswered tail comes back shorter than its standby (records go
//!   to standbys as soon as they are written), and the standby cuts its extra records by
//!   itself and follows;
//! - after each cycle the two reach the same state hash, and the credited balance lies
//!   between the acknowledged deposits and the attempted ones: nothing acknowledged is lost.
//!
//! `LADDER_POWER_CYCLES=N` sets the cycles (default 6), `LADDER_CRASH_SEED=S` replays a run.

mod helpers;
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use helpers::balance;
use ladder_client::HttpClient;
use ladder_powercut::harness::{fuse_or_skip, Mounted, PLAIN_CUT, TORN_CUT};
use serde_json::json;
use support::*;

/// Deposits one unit at a time into `account` until `stop`: (acknowledged, attempted).
fn deposit_until(url: &str, account: &str, stop: &AtomicBool, acked: &AtomicU64, sent: &AtomicU64) {
    let headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
    let body = json!({ "address": account, "asset": "COLLATERAL", "amount": "1" }).to_string();
    while !stop.load(Ordering::Acquire) {
        let Ok(mut http) = HttpClient::new(url) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        sent.fetch_add(1, Ordering::AcqRel);
        match http.request("POST", "/admin/deposits", &headers, Some(&body)) {
            Ok(r) if r.status == 200 => {
                acked.fetch_add(1, Ordering::AcqRel);
            }
            // Refused (no standby yet: nothing applied), or cut off.
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Waits until the standby holds the primary's state.
fn caught_up(standby: &Standby, primary: &Service) {
    let (_, hash) = admin_at(&primary.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &hash);
}

#[test]
fn power_cuts_of_a_primary_and_its_standby_lose_nothing_acknowledged() {
    if !fuse_or_skip("e2e_power_standby") {
        return;
    }
    let cycles = env_u64("LADDER_POWER_CYCLES").unwrap_or(6).max(1);
    let seed = crash_seed();
    println!(
        "e2e_power_standby: seed {seed} (LADDER_CRASH_SEED={seed} replays it), {cycles} cycles"
    );
    let mut rng = Rng(seed);
    let seed_arg = seed.to_string();
    let binary = powercut_binary();
    let primary_disk = Mounted::start(&binary, &["--seed", &seed_arg]);
    let standby_disk = Mounted::start(&binary, &["--seed", &seed_arg]);
    let replication = free_port();
    let listen = format!("127.0.0.1:{replication}");
    let mut primary = Service::start_on(
        &primary_disk.on_mount("data"),
        &[
            "--replication-listen",
            &listen,
            "--replicas",
            "1",
            "--segment-size-kb",
            "1024",
        ],
    );
    let standby_dir = standby_disk.on_mount("data");
    let standby_args = ["--segment-size-kb", "1024"];
    let mut standby = Some(start_standby_with(replication, &standby_dir, &standby_args));
    // Writes wait for (or, without one, are refused for want of) a standby: it must follow first.
    caught_up(standby.as_ref().expect("a standby"), &primary);
    let mut trader = primary.trader(0);
    let account = trader.account.to_string();
    let units = |trader: &mut ladder_client::Trader| -> u64 {
        let b = balance(trader, "asset_type=COLLATERAL");
        b["balance"]
            .as_str()
            .expect("balance")
            .parse()
            .expect("units")
    };
    let start_units = units(&mut trader);
    let (acked, sent) = (AtomicU64::new(0), AtomicU64::new(0));
    let (mut primary_cuts, mut standby_cuts, mut torn) = (0u64, 0u64, 0u64);
    let started = Instant::now();

    for cycle in 1..=cycles {
        let label = format!("seed {seed}, cycle {cycle}");
        let cut_primary = rng.below(2) == 0;
        let load = Duration::from_millis(20 + rng.below(200));
        let how = if rng.below(2) == 0 {
            PLAIN_CUT
        } else {
            TORN_CUT
        };
        torn += u64::from(how == TORN_CUT);
        let stop = AtomicBool::new(false);
        let url = primary.url.clone();
        std::thread::scope(|s| {
            let writer = s.spawn(|| deposit_until(&url, &account, &stop, &acked, &sent));
            std::thread::sleep(load);
            if cut_primary {
                primary.kill();
                primary_disk.cut(how);
                primary_cuts += 1;
            } else {
                // Killed (and reaped) as it is dropped.
                drop(standby.take());
                standby_disk.cut(how);
                standby_cuts += 1;
            }
            stop.store(true, Ordering::Release);
            writer.join().expect("writer");
        });
        if cut_primary {
            primary.restart();
        } else {
            standby = Some(start_standby_with(replication, &standby_dir, &standby_args));
        }
        caught_up(standby.as_ref().expect("a standby"), &primary);
        let mut trader = trader_on(&primary.url, 0, &trader);
        let credited = units(&mut trader) - start_units;
        let (acked, sent) = (acked.load(Ordering::Acquire), sent.load(Ordering::Acquire));
        assert!(
            credited >= acked && credited <= sent,
            "{label}: credited {credited}, acknowledged {acked}, attempted {sent}"
        );
    }
    println!(
        "e2e_power_standby: seed {seed}: {cycles} cycles, {primary_cuts} primary and \
         {standby_cuts} standby power cuts ({torn} torn), {} of {} deposits acknowledged, in {:.1?}",
        acked.load(Ordering::Acquire),
        sent.load(Ordering::Acquire),
        started.elapsed()
    );
}
