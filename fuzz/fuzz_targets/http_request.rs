//! libFuzzer target: see `ladder_fuzz::http_request` for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ladder_fuzz::http_request::check(data));
