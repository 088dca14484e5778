//! Kafka's listeners: `listeners = NAME://host:port,...`, `listener.security.protocol.map`,
//! `advertised.listeners` and `inter.broker.listener.name`. A client is told the endpoints of
//! the listener it came in on, on a single node and across a cluster whose brokers replicate
//! over another listener. librdkafka clients throughout.

mod common;

use std::time::Duration;

use common::{free_port, try_serve_with, Serve};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// The (host, port) of every broker a client bootstrapped at `addr` is told of.
fn brokers_seen_from(addr: &str) -> Vec<(String, u16)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    let md = c.fetch_metadata(None, Duration::from_secs(30)).unwrap();
    let mut out: Vec<(String, u16)> = md
        .brokers()
        .iter()
        .map(|b| (b.host().to_string(), b.port() as u16))
        .collect();
    out.sort();
    out
}

/// The settings of a broker with a PLAINTEXT listener at `internal` (the one brokers use)
/// and an EXTERNAL one at `external`, advertised as `localhost`.
fn two_listeners(internal: u16, external: u16) -> Vec<String> {
    [
        format!("listeners=PLAINTEXT://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}"),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT".into(),
        format!("advertised.listeners=EXTERNAL://localhost:{external}"),
        "inter.broker.listener.name=PLAINTEXT".into(),
    ]
    .into_iter()
    .flat_map(|s| ["--set".to_string(), s])
    .collect()
}

fn start(dir: &std::path::Path, internal: u16, args: &[String]) -> Option<Serve> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    try_serve_with(dir, &format!("127.0.0.1:{internal}"), &args)
}

/// `n` records written to `topic` through `write_at` (idempotent, acks=all) are all read
/// back through `read_at`.
fn write_and_read(write_at: &str, read_at: &str, topic: &str, partitions: i32, n: usize) {
    let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    common::produce_values(write_at, topic, partitions, values.clone());
    let mut read: Vec<String> = common::read_to_end(read_at, topic, partitions, "read_committed")
        .into_iter()
        .map(|(_, _, v)| String::from_utf8(v).unwrap())
        .collect();
    read.sort();
    let mut want = values;
    want.sort();
    assert_eq!(read, want);
}

#[test]
fn a_client_is_told_the_endpoints_of_the_listener_it_came_in_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (broker, internal, external) = (0..5)
        .find_map(|_| {
            let (i, e) = (free_port(), free_port());
            start(&tmp.path().join(format!("d{i}")), i, &two_listeners(i, e)).map(|b| (b, i, e))
        })
        .expect("two free ports in five tries");
    let (via_internal, via_external) = (format!("127.0.0.1:{internal}"), format!("127.0.0.1:{external}"));
    assert_eq!(
        brokers_seen_from(&via_internal),
        [("127.0.0.1".to_string(), internal)]
    );
    assert_eq!(
        brokers_seen_from(&via_external),
        [("localhost".to_string(), external)]
    );

    // Written through one listener, read in a group (its coordinator found) through the other.
    common::create_topic(&via_external, "both", 2);
    write_and_read(&via_external, &via_internal, "both", 2, 200);
    broker.terminate();
}

#[test]
fn brokers_replicate_on_the_inter_broker_listener_and_clients_see_theirs() {
    let tmp = tempfile::tempdir().unwrap();
    let nodes = 'found: {
        for _ in 0..5 {
            let ports: Vec<(u16, u16, u16)> =
                (0..3).map(|_| (free_port(), free_port(), free_port())).collect();
            let voters = ports
                .iter()
                .enumerate()
                .map(|(i, (_, _, v))| format!("{}@127.0.0.1:{v}", i + 1))
                .collect::<Vec<_>>()
                .join(",");
            let mut started = Vec::new();
            for (i, &(internal, external, _)) in ports.iter().enumerate() {
                let mut args = two_listeners(internal, external);
                for s in [
                    format!("node.id={}", i + 1),
                    format!("controller.quorum.voters={voters}"),
                    "min.insync.replicas=2".into(),
                ] {
                    args.extend(["--set".to_string(), s]);
                }
                let dir = tmp.path().join(format!("node{}-{internal}", i + 1));
                match start(&dir, internal, &args) {
                    Some(s) => started.push((s, internal, external)),
                    None => break,
                }
            }
            if started.len() == 3 {
                break 'found started;
            }
            started.into_iter().for_each(|(s, _, _)| s.terminate());
        }
        panic!("no free ports for three brokers in five tries");
    };
    let external_bootstrap = nodes
        .iter()
        .map(|(_, _, e)| format!("127.0.0.1:{e}"))
        .collect::<Vec<_>>()
        .join(",");
    let internal_bootstrap = format!("127.0.0.1:{}", nodes[0].1);
    // Every broker registered, each seen at its EXTERNAL endpoint by EXTERNAL clients.
    let mut want: Vec<(String, u16)> = nodes
        .iter()
        .map(|(_, _, e)| ("localhost".to_string(), *e))
        .collect();
    want.sort();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while brokers_seen_from(&external_bootstrap) != want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(brokers_seen_from(&external_bootstrap), want);
    let mut internal: Vec<(String, u16)> = nodes
        .iter()
        .map(|(_, i, _)| ("127.0.0.1".to_string(), *i))
        .collect();
    internal.sort();
    assert_eq!(brokers_seen_from(&internal_bootstrap), internal);

    // acks=all through EXTERNAL needs the followers, which fetch over PLAINTEXT.
    common::laminar(&[
        "topics",
        "create",
        "replicated",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--bootstrap",
        &external_bootstrap,
    ]);
    write_and_read(&external_bootstrap, &external_bootstrap, "replicated", 3, 300);
    for (s, _, _) in nodes {
        s.terminate();
    }
}
