//! libFuzzer target: see `ladder_fuzz::replication_handshake` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ladder_fuzz::replication_handshake::check(data));
