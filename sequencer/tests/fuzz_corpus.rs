//! Runs the seed corpora of the `replication_handshake` and `engine_commands` fuzz targets
//! (`fuzz/corpus/<target>/`) through the same checks the fuzzer runs (`fuzz/src/<target>.rs`),
//! so they are exercised on every test run, with or without cargo-fuzz.

use std::path::PathBuf;

#[path = "../../fuzz/src/engine_commands.rs"]
mod engine_commands;
#[path = "../../fuzz/src/replication_handshake.rs"]
mod replication_handshake;

#[test]
fn the_replication_handshake_corpus_passes_the_fuzz_checks() {
    run_corpus("replication_handshake", replication_handshake::check);
}

#[test]
fn the_engine_commands_corpus_passes_the_fuzz_checks() {
    run_corpus("engine_commands", engine_commands::check);
}

/// Runs `check` on every file of `fuzz/corpus/<target>/`, naming the file that fails.
fn run_corpus(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "{}: only {} files",
        dir.display(),
        files.len()
    );
    for path in files {
        let data = std::fs::read(&path).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{}: {message}", path.display());
        }
    }
}

#[test]
fn a_hello_line_of_the_corpus_parses_and_the_old_plain_handshake_does_not() {
    use ladder_sequencer::replication::Hello;
    let corpus =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/replication_handshake");
    let read = |name: &str| std::fs::read_to_string(corpus.join(name)).unwrap();
    let hello = Hello::parse(&read("hello_resume.txt")).expect("a resume hello");
    assert_eq!(hello.from_seq, 42);
    assert_eq!(hello.node_id, "1799ced7-62ce-4984-9570-1106faaeddd3");
    assert!(Hello::parse(&read("old_plain_handshake.txt")).is_err());
    assert!(Hello::parse(&read("hello_wrong_mark.txt")).is_err());
}
