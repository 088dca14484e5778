#![no_main]

include!("../bodies.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| record_batches(data));
