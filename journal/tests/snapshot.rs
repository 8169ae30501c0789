//! Snapshots: durable write, newest valid read back, broken ones skipped, pruning.

mod common;

use std::fs;

use common::flip_byte;
use ladder_journal::snapshot::{snapshot_path, SNAPSHOT_HEADER_BYTES};
use ladder_journal::{latest_valid_snapshot, prune_snapshots, write_snapshot, Snapshot};

#[test]
fn newest_snapshot_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(dir.path(), 10, b"state at ten").unwrap();
    write_snapshot(dir.path(), 250, b"state at 250").unwrap();
    write_snapshot(dir.path(), 99, b"state at 99").unwrap();

    let latest = latest_valid_snapshot(dir.path()).unwrap();

    assert_eq!(
        latest,
        Some(Snapshot {
            seq: 250,
            payload: b"state at 250".to_vec()
        })
    );
    let name = snapshot_path(dir.path(), 250);
    assert!(name.ends_with("snapshots/snapshot-00000000000000000250.snap"));
}

#[test]
fn no_snapshot_directory_means_no_snapshot() {
    let dir = tempfile::tempdir().unwrap();

    assert_eq!(latest_valid_snapshot(dir.path()).unwrap(), None);
}

#[test]
fn corrupt_newest_snapshot_is_skipped_for_the_previous_one() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(dir.path(), 10, b"older state").unwrap();
    let newest = write_snapshot(dir.path(), 20, b"newer state").unwrap();
    flip_byte(&newest, SNAPSHOT_HEADER_BYTES as u64 + 2);

    let latest = latest_valid_snapshot(dir.path()).unwrap().unwrap();

    assert_eq!(latest.seq, 10);
    assert_eq!(latest.payload, b"older state");
}

#[test]
fn truncated_or_mislabelled_snapshots_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(dir.path(), 5, b"good").unwrap();
    let truncated = write_snapshot(dir.path(), 6, b"will be cut short").unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(&truncated)
        .unwrap()
        .set_len(SNAPSHOT_HEADER_BYTES as u64 + 3)
        .unwrap();
    let copied = write_snapshot(dir.path(), 7, b"renamed").unwrap();
    fs::rename(&copied, snapshot_path(dir.path(), 8)).unwrap();

    assert_eq!(latest_valid_snapshot(dir.path()).unwrap().unwrap().seq, 5);
}

#[test]
fn prune_keeps_the_newest_valid_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    for seq in [100, 200, 300, 400] {
        write_snapshot(dir.path(), seq, format!("state {seq}").as_bytes()).unwrap();
    }
    flip_byte(
        &snapshot_path(dir.path(), 400),
        SNAPSHOT_HEADER_BYTES as u64,
    );

    let removed = prune_snapshots(dir.path(), 2, u64::MAX).unwrap();

    assert_eq!(removed, vec![snapshot_path(dir.path(), 100)]);
    assert!(snapshot_path(dir.path(), 400).exists());
    assert_eq!(latest_valid_snapshot(dir.path()).unwrap().unwrap().seq, 300);
}

#[test]
fn prune_keeps_the_snapshot_a_lagging_reader_starts_from() {
    let dir = tempfile::tempdir().unwrap();
    for seq in [100, 200, 300, 400, 500] {
        write_snapshot(dir.path(), seq, format!("state {seq}").as_bytes()).unwrap();
    }
    // A reader stands at 250: it needs snapshot 200, older than the newest two.
    let removed = prune_snapshots(dir.path(), 2, 250).unwrap();
    assert_eq!(removed, vec![snapshot_path(dir.path(), 100)]);
    for kept in [200, 300, 400, 500] {
        assert!(snapshot_path(dir.path(), kept).exists(), "{kept}");
    }
    // Once it stands past the newest two, they alone stay.
    let removed = prune_snapshots(dir.path(), 2, 450).unwrap();
    assert_eq!(
        removed,
        vec![
            snapshot_path(dir.path(), 200),
            snapshot_path(dir.path(), 300)
        ]
    );
}
