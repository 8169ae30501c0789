//! libFuzzer target: see `ladder_fuzz::bundler_request` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ladder_fuzz::bundler_request::check(data));
