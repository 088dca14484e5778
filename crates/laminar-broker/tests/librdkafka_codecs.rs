//! Issue 3, acceptance 1: 100,000 records with each codec come back identical through
//! librdkafka: keys, values, headers and timestamps, with contiguous offsets.

mod common;

use std::time::Duration;

use common::*;

const RECORDS: u64 = 100_000;

#[test]
fn every_codec_round_trips_100k_records() {
    let b = TestBroker::start();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        let p = producer(
            &b.addr,
            &[("compression.type", codec), ("batch.num.messages", "1000")],
        );
        for i in 0..RECORDS {
            send(&p, &topic, Some(0), &make_record(i));
        }
        flush(&p);
        let got = consume(&b.addr, &topic, 0, RECORDS as usize, Duration::from_secs(120));
        assert_eq!(got.len(), RECORDS as usize, "{codec}: all records back");
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r, &make_record(i as u64), "{codec}: record {i}");
        }
    }
}
