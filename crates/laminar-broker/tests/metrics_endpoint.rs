//! Invariant 5: the Prometheus endpoint shows each request's phases and each disk call,
//! driven by a real client (librdkafka).

mod common;

use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

#[test]
fn metrics_show_request_phases_and_disk_calls() {
    let b = TestBroker::start_with(|c| c.group_initial_rebalance_delay_ms = 300);
    let p = producer(&b.addr, &[("acks", "all")]);
    for i in 0..500 {
        send(&p, "observed", Some(0), &make_record(i));
    }
    flush(&p);
    let got = consume(&b.addr, "observed", 0, 500, Duration::from_secs(30));
    assert_eq!(got.len(), 500);
    // A group member's first JoinGroup waits out the initial rebalance delay.
    let member: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b.addr)
        .set("group.id", "observers")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    member.subscribe(&["observed"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while member.poll(Duration::from_millis(100)).is_none() {
        assert!(Instant::now() < deadline, "the group member got no record");
    }

    let (status, body) = http_get(&b.metrics_addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let phase = |api: &str, phase: &str, what: &str| {
        metric(
            &body,
            &format!("laminar_request_phase_seconds_{what}{{api=\"{api}\",phase=\"{phase}\"}}"),
        )
    };
    let produces = phase("Produce", "total", "count");
    assert!(produces >= 1.0, "Produce requests counted: {produces}");
    for ph in ["request_queue", "local", "wait", "response_queue", "send"] {
        assert_eq!(
            phase("Produce", ph, "count"),
            produces,
            "every phase of every Produce: {ph}"
        );
    }
    assert!(phase("Produce", "total", "sum") >= phase("Produce", "wait", "sum"));
    assert!(phase("Fetch", "total", "count") >= 1.0);
    assert!(phase("Metadata", "total", "count") >= 1.0);
    // The rebalance delay is JoinGroup's wait phase, not its local work.
    let join_wait_s = phase("JoinGroup", "wait", "sum");
    assert!(join_wait_s >= 0.25, "JoinGroup waited {join_wait_s} s");
    assert!(phase("JoinGroup", "local", "sum") < join_wait_s);
    assert_eq!(
        phase("DeleteTopics", "total", "count"),
        0.0,
        "no topic was deleted"
    );

    let disk = |call: &str| {
        metric(
            &body,
            &format!("laminar_disk_call_seconds_count{{call=\"{call}\"}}"),
        )
    };
    assert!(disk("pwrite") >= 1.0);
    assert!(disk("fdatasync") >= 1.0, "acks=all fsyncs");
    assert!(disk("sendfile") >= 1.0, "hot data goes out with sendfile");
    assert!(metric(&body, "laminar_log_flush_seconds_count") >= 1.0);
    // The probe wakes every 10 ms from startup.
    assert!(metric(&body, "laminar_event_loop_lateness_seconds_count") >= 1.0);
    assert!(
        metric(&body, "laminar_connections_open") >= 1.0,
        "the metrics scrape is not a client"
    );
    assert_eq!(metric(&body, "laminar_logs_offline"), 0.0);
    let observed = "{topic=\"observed\",partition=\"0\"}";
    assert_eq!(
        metric(&body, &format!("laminar_partition_log_end_offset{observed}")),
        500.0
    );
    assert_eq!(
        metric(&body, &format!("laminar_partition_log_start_offset{observed}")),
        0.0
    );
    assert_eq!(
        metric(&body, &format!("laminar_partition_unflushed_offsets{observed}")),
        0.0,
        "acks=all: everything acknowledged is flushed"
    );

    assert_eq!(http_get(&b.metrics_addr, "/other").0, "HTTP/1.1 404 Not Found");
}
