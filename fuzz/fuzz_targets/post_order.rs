//! libFuzzer target: see `ladder_fuzz::post_order` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ladder_fuzz::post_order::check(data));
