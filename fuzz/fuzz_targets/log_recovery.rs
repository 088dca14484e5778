#![no_main]

include!("../bodies.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| log_recovery(data));
