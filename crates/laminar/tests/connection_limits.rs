//! Issue 41, hole 4: clients nobody knows cannot take what the others need. Connections
//! from one address are bounded (`max.connections.per.ip`, with per-address overrides, as
//! Kafka's), and connections that have not authenticated hold their partial frames in a
//! budget of their own (`queued.max.unauthenticated.request.bytes`), not in the one
//! authenticated clients need. (Before: about 520 connections each sending 510 KiB of a
//! frame held the whole 256 MiB for 10 s, and no address was limited.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Whether the broker closed `s` (at accept) rather than keeping it open and silent.
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0))
        || matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

#[test]
fn connections_from_one_address_are_bounded_but_for_its_override() {
    let tmp = tempfile::tempdir().unwrap();
    let (broker, _plain, _second) = common::serve_plaintext_and(
        &tmp.path().join("a"),
        "SASL_PLAINTEXT",
        &[
            "max.connections.per.ip=3",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
        ],
    );
    // The test's own clients come from 127.0.0.1: three may stay, a fourth is closed.
    let mut open: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(&broker.addr).unwrap())
        .collect();
    let mut fourth = TcpStream::connect(&broker.addr).unwrap();
    assert!(
        closed(&mut fourth),
        "a fourth connection from 127.0.0.1 is closed"
    );
    assert!(!closed(&mut open[0]), "the first three stay");
    // One ends: another may come.
    drop(open.pop());
    std::thread::sleep(Duration::from_millis(300));
    let mut again = TcpStream::connect(&broker.addr).unwrap();
    assert!(!closed(&mut again), "a place freed is taken again");
    drop((open, again));
    broker.terminate();

    let (broker, _plain, _second) = common::serve_plaintext_and(
        &tmp.path().join("b"),
        "SASL_PLAINTEXT",
        &[
            "max.connections.per.ip=3",
            "max.connections.per.ip.overrides=127.0.0.1:5",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
        ],
    );
    let mut open: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(&broker.addr).unwrap())
        .collect();
    assert!(!closed(&mut open[4]), "its override lets 127.0.0.1 have five");
    let mut sixth = TcpStream::connect(&broker.addr).unwrap();
    assert!(closed(&mut sixth), "not six");
    drop(open);
    broker.terminate();
}

#[test]
fn partial_frames_of_unauthenticated_clients_do_not_stall_authenticated_ones() {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let tmp = tempfile::tempdir().unwrap();
    // A 4 MiB request budget, 1 MiB of it for connections that have not authenticated.
    let (broker, plain, sasl) = common::serve_plaintext_and(
        &tmp.path().join("data"),
        "SASL_PLAINTEXT",
        &[
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "socket.request.max.bytes=1048576",
            "queued.max.request.bytes=4194304",
            "queued.max.unauthenticated.request.bytes=1048576",
        ],
    );
    common::create_topic(&plain, "served", 1);
    // Twenty clients on the SASL listener each send most of a 500 KiB frame and stop: 10 MB
    // asked, more than the whole 4 MiB budget.
    let frame_bytes = 500 << 10;
    let attackers: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(&sasl).unwrap();
            s.set_write_timeout(Some(Duration::from_millis(300))).unwrap();
            let _ = s.write_all(&(frame_bytes as i32).to_be_bytes());
            let _ = s.write_all(&vec![0u8; frame_bytes - 1024]);
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // A client that needs no authentication (PLAINTEXT) is served meanwhile, at once.
    let started = Instant::now();
    let p: ThreadedProducer<_> = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &plain)
        .set("message.timeout.ms", "5000")
        .create::<ThreadedProducer<rdkafka::producer::DefaultProducerContext>>()
        .unwrap();
    for i in 0..20 {
        let v = format!("r{i}");
        p.send(BaseRecord::<(), _>::to("served").payload(&v)).unwrap();
    }
    p.flush(Duration::from_secs(10)).unwrap();
    let took = started.elapsed();
    assert_eq!(
        common::high_watermark(&plain, "served"),
        20,
        "every record delivered"
    );
    assert!(
        took < Duration::from_secs(3),
        "served while the frames hang: {took:?}"
    );
    drop(attackers);
    broker.terminate();
}
