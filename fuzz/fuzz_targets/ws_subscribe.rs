//! libFuzzer target: see `ladder_fuzz::ws_subscribe` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ladder_fuzz::ws_subscribe::check(data));
