//! libFuzzer target: see `ladder_fuzz::engine_commands` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ladder_fuzz::engine_commands::check(data));
