//! A kernel without cachestat(2) (before Linux 6.5), simulated with LAMINAR_RESIDENCY=nowait
//! (this test binary's only test, so it is set before anything asks): hot data must still go
//! out with sendfile, probed with preadv2(RWF_NOWAIT), not through the I/O pool.

mod common;

use std::time::Duration;

use common::*;
use laminar_storage::residency::{method, Method, METHOD_ENV};

#[test]
fn without_cachestat_hot_fetches_are_still_sent_from_the_page_cache() {
    std::env::set_var(METHOD_ENV, "nowait");
    assert_eq!(method(), Method::NowaitProbe);
    let broker = TestBroker::start();
    let p = producer(&broker.addr, &[]);
    for i in 0..200 {
        send(&p, "hot", Some(0), &make_record(i));
    }
    flush(&p);
    let got = consume(&broker.addr, "hot", 0, 200, Duration::from_secs(30));
    assert_eq!(got.len(), 200);
    let (_, metrics) = http_get(&broker.metrics_addr, "/metrics");
    let cold = metric(&metrics, "laminar_disk_call_seconds_count{call=\"cold_read\"}");
    let sent = metric(&metrics, "laminar_disk_call_seconds_count{call=\"sendfile\"}");
    assert_eq!(cold, 0.0, "hot data read through the I/O pool");
    assert!(sent > 0.0, "sent with sendfile");
}
