//! Issue 3, acceptance 6: malformed, oversized and adversarial requests get an error or a
//! closed connection; the broker stays up and a librdkafka producer on the same broker is
//! undisturbed throughout.

mod common;

use std::time::Duration;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::raw::*;
use common::*;
use laminar_records::{BatchBuilder, Compression, RecordSpec};

fn batch(compression: Compression, value_bytes: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(compression, 1_700_000_000_000);
    b.push(RecordSpec {
        timestamp_ms: 1_700_000_000_000,
        key: None,
        value: Some(vec![0u8; value_bytes]),
        headers: vec![],
    });
    b.build().unwrap()
}

#[test]
fn adversarial_requests_are_refused_and_the_broker_carries_on() {
    let b = TestBroker::start();
    // Create the target topic with a good produce first.
    let p = producer(&b.addr, &[]);
    send(&p, "victim", Some(0), &make_record(0));
    flush(&p);

    // A librdkafka producer keeps producing throughout.
    let addr = b.addr.clone();
    let background = std::thread::spawn(move || {
        let p = producer(&addr, &[]);
        for i in 0..2000 {
            send(&p, "bystander", Some(0), &make_record(i));
            if i % 100 == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        flush(&p);
    });

    // 1. A frame over socket.request.max.bytes (100 MiB): closed before any allocation.
    assert_eq!(exchange(&b.addr, &(200i32 << 20).to_be_bytes()), None);
    // 2. A negative length.
    assert_eq!(exchange(&b.addr, &(-1i32).to_be_bytes()), None);
    // 3. An array count far larger than the frame: Metadata v1 claiming 2^30 topics.
    let mut m = header(3, 1, 5);
    m.extend_from_slice(&(1i32 << 30).to_be_bytes());
    assert_eq!(exchange(&b.addr, &frame(&m)), None);
    // 4. An unknown API key.
    assert_eq!(exchange(&b.addr, &frame(&header(999, 0, 6))), None);
    // ... and an unsupported version of ApiVersions gets UNSUPPORTED_VERSION (35) in v0.
    let body = exchange(&b.addr, &frame(&header(18, 99, 7))).expect("an answer");
    assert_eq!(&body[..4], &7i32.to_be_bytes());
    assert_eq!(i16::from_be_bytes([body[4], body[5]]), 35);

    // 5. A truncated record batch: CORRUPT_MESSAGE (2).
    let good = batch(Compression::None, 100);
    let body = exchange(&b.addr, &produce_v3("victim", &good[..good.len() - 10])).expect("an answer");
    assert_eq!(produce_error(&body, "victim"), 2);
    // 6. A batch with a bad CRC.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    let body = exchange(&b.addr, &produce_v3("victim", &bad)).expect("an answer");
    assert_eq!(produce_error(&body, "victim"), 2);
    // 7. A decompression bomb: 100 MiB of zeros in a ~100 KiB gzip batch.
    let bomb = batch(Compression::Gzip, 100 << 20);
    assert!(bomb.len() < 1 << 20);
    let body = exchange(&b.addr, &produce_v3("victim", &bomb)).expect("an answer");
    assert_eq!(produce_error(&body, "victim"), 2);
    // 8. A batch that expands past the 4 MiB a storage thread decompresses, within 64 MiB:
    // validated on the large-batch thread, then appended.
    let large = batch(Compression::Gzip, 8 << 20);
    let body = exchange(&b.addr, &produce_v3("victim", &large)).expect("an answer");
    assert_eq!(produce_error(&body, "victim"), 0);
    let (_, metrics) = http_get(&b.metrics_addr, "/metrics");
    let large_batches = metric(&metrics, "laminar_produce_large_batches_total");
    assert!(
        large_batches >= 2.0,
        "the bomb and the large batch went apart: {large_batches}"
    );
    // 9. zstd in a Produce older than v7: UNSUPPORTED_COMPRESSION_TYPE (76), as Kafka answers.
    let zstd = batch(Compression::Zstd, 100);
    let body = exchange(&b.addr, &produce_v3("victim", &zstd)).expect("an answer");
    assert_eq!(produce_error(&body, "victim"), 76);
    // A good batch on a raw connection still works: error 0.
    let body = exchange(&b.addr, &produce_v3("victim", &good)).expect("an answer");
    assert_eq!(produce_error(&body, "victim"), 0);

    background.join().unwrap();
    let got = consume(&b.addr, "bystander", 0, 2000, Duration::from_secs(60));
    assert_eq!(got.len(), 2000, "the bystander producer lost nothing");
    // Only the three good batches reached the victim topic.
    let victim = consume(&b.addr, "victim", 0, 3, Duration::from_secs(30));
    assert_eq!(victim.len(), 3);
}

#[test]
fn connections_over_max_connections_are_closed() {
    let b = TestBroker::start_with(|c| c.max_connections = 2);
    let api_versions = frame(&header(18, 0, 1));
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(&b.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&api_versions).unwrap();
        let mut size = [0u8; 4];
        s.read_exact(&mut size).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        s.read_exact(&mut body).unwrap();
        held.push(s);
    }
    // The third is accepted and closed at once, with a logged reason.
    assert_eq!(exchange(&b.addr, &api_versions), None);
    drop(held.pop());
    // A slot is free again once a connection closes.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while exchange(&b.addr, &api_versions).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "no connection accepted after one closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn max_connection_creation_rate_holds_a_flood_in_the_backlog() {
    let b = TestBroker::start_with(|c| c.max_connection_creation_rate = Some(20));
    let api_versions = frame(&header(18, 0, 1));
    let started = std::time::Instant::now();
    // A burst of 20 goes at once; the next 40 at 20 a second: about 2 s.
    for _ in 0..60 {
        assert!(
            exchange(&b.addr, &api_versions).is_some(),
            "every connection is answered"
        );
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "60 connections at 20/s took only {took:?}"
    );
    // Closing connections must not spend the accept budget: 60 at 20/s, not 120.
    assert!(
        took < Duration::from_millis(4000),
        "60 connections at 20/s took {took:?}"
    );
    let (_, metrics) = http_get(&b.metrics_addr, "/metrics");
    assert!(metric(&metrics, "laminar_connection_accept_throttled_seconds_total") >= 1.0);
}

#[test]
fn an_idle_connection_holds_one_task() {
    let b = TestBroker::start();
    let tasks = || {
        let (_, metrics) = http_get(&b.metrics_addr, "/metrics");
        metric(&metrics, "laminar_runtime_tasks")
    };
    let before = tasks();
    let idle: Vec<TcpStream> = (0..500).map(|_| TcpStream::connect(&b.addr).unwrap()).collect();
    // The broker accepts them in its own time.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, metrics) = http_get(&b.metrics_addr, "/metrics");
        if metric(&metrics, "laminar_connections_open") >= 500.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "500 connections accepted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let per_connection = (tasks() - before) / 500.0;
    assert!(
        per_connection < 1.2,
        "an idle connection holds {per_connection} tasks"
    );
    // One that sends a request is served as before.
    let api_versions = frame(&header(18, 0, 1));
    assert!(exchange(&b.addr, &api_versions).is_some());
    drop(idle);
}
