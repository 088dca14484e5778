//! Invariant 3's quotas: `consumer_byte_rate` and `producer_byte_rate` per client-id, set
//! with `laminar quotas alter` (AlterClientQuotas, as `kafka-configs.sh` sends it), survive a
//! restart, and throttle only the client they name; per user, set with Kafka's
//! `kafka-configs --entity-type users`, they throttle that user on any client-id. librdkafka sees the broker's
//! `throttle_time_ms` in its statistics.

mod common;

use common::laminar;

use std::process::Command;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// 100 KB/s: the first padded 10 s window lets a client through 1 MB before it is throttled.
const QUOTA_BYTES_PER_S: u64 = 100_000;
const RECORD_BYTES: usize = 1000;
const RECORDS: usize = 3000;

/// Remembers the largest throttle time librdkafka reported in any statistics interval.
#[derive(Clone, Default)]
struct ThrottleSeen(Arc<AtomicI64>);

impl ClientContext for ThrottleSeen {
    fn stats(&self, stats: Statistics) {
        for b in stats.brokers.values() {
            if let Some(t) = &b.throttle {
                self.0.fetch_max(t.max, Ordering::Relaxed);
            }
        }
    }
}
impl ConsumerContext for ThrottleSeen {}

/// Reads the topic from the start as `client_id` for at most `for_how_long`; returns the
/// records read and the largest throttle time seen.
fn read(addr: &str, client_id: &str, for_how_long: Duration) -> (usize, i64) {
    read_as(ClientConfig::new(), addr, client_id, for_how_long)
}

/// As `read`, with `config`'s settings (a SASL user's) too.
fn read_as(mut config: ClientConfig, addr: &str, client_id: &str, for_how_long: Duration) -> (usize, i64) {
    let seen = ThrottleSeen::default();
    let c: BaseConsumer<ThrottleSeen> = config
        .set("bootstrap.servers", addr)
        .set("client.id", client_id)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .set("max.partition.fetch.bytes", "65536")
        .set("statistics.interval.ms", "100")
        .create_with_context(seen.clone())
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("metered", 0, Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let until = Instant::now() + for_how_long;
    let mut n = 0;
    while n < RECORDS && Instant::now() < until {
        if let Some(m) = c.poll(Duration::from_millis(50)) {
            m.unwrap();
            n += 1;
        }
    }
    // One more interval, for the last statistics.
    let _ = c.poll(Duration::from_millis(300));
    (n, seen.0.load(Ordering::Relaxed))
}

/// 3 MB into `metered`, in 1 KB records.
fn fill(addr: &str) {
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let value = vec![b'q'; RECORD_BYTES];
    for _ in 0..RECORDS {
        p.send(BaseRecord::<(), _>::to("metered").partition(0).payload(&value))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
}

#[test]
fn byte_rate_quotas_throttle_only_the_client_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::serve(dir.path());
    fill(&b.addr);

    let rate = QUOTA_BYTES_PER_S.to_string();
    laminar(&[
        "quotas",
        "alter",
        "--client-id",
        "metered-reader",
        "--add-config",
        &format!("consumer_byte_rate={rate}"),
        "--bootstrap",
        &b.addr,
    ]);
    laminar(&[
        "quotas",
        "alter",
        "--default",
        "--add-config",
        "producer_byte_rate=5000000",
        "--bootstrap",
        &b.addr,
    ]);
    // Quotas are durable: they survive a clean restart.
    b.terminate();
    let b = common::serve(dir.path());
    let described = laminar(&["quotas", "describe", "--bootstrap", &b.addr]);
    assert!(
        described.contains("client-id metered-reader: consumer_byte_rate=100000"),
        "{described}"
    );
    assert!(
        described.contains("client-id <default>: producer_byte_rate=5000000"),
        "{described}"
    );

    // 3 MB against 100 KB/s: throttled once past the first window's 1 MB.
    let (n, throttle_ms) = read(&b.addr, "metered-reader", Duration::from_secs(8));
    assert!(
        throttle_ms > 0,
        "the metered reader was never throttled ({n} records read)"
    );
    assert!(
        n < RECORDS,
        "the metered reader read all 3 MB in 8 s despite 100 KB/s"
    );
    // Another client-id has no consumer quota: it reads everything, never throttled.
    let (n, throttle_ms) = read(&b.addr, "free-reader", Duration::from_secs(30));
    assert_eq!(n, RECORDS);
    assert_eq!(throttle_ms, 0, "a client without a quota was throttled");

    laminar(&[
        "quotas",
        "alter",
        "--client-id",
        "metered-reader",
        "--delete-config",
        "consumer_byte_rate",
        "--bootstrap",
        &b.addr,
    ]);
    let described = laminar(&["quotas", "describe", "--bootstrap", &b.addr]);
    assert!(!described.contains("metered-reader"), "{described}");
    let bad = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args([
            "quotas",
            "alter",
            "--client-id",
            "x",
            "--add-config",
            "request_percentage=50",
        ])
        .args(["--bootstrap", &b.addr])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not supported"));
    b.terminate();
}

/// Issue 30: quotas per user, set with Kafka's own `kafka-configs --entity-type users`. Alice
/// (PLAIN, over SASL_PLAINTEXT) is throttled whatever her client-id; bob, under no quota, is
/// not; and the default user's quota, once set, applies to bob too.
#[test]
fn user_quotas_set_with_kafka_configs_throttle_that_user_on_every_client_id() {
    use common::tools::Tools;
    let dir = tempfile::tempdir().unwrap();
    let (b, plain, sasl) = common::serve_plaintext_and(
        &dir.path().join("data"),
        "SASL_PLAINTEXT",
        &[
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\" user_bob=\"bob-secret\";",
        ],
    );
    fill(&plain);
    let tools = Tools::new(&plain, dir.path());
    let configs = |args: &[&str]| tools.ok("kafka.admin.ConfigCommand", args);
    let rate = format!("consumer_byte_rate={QUOTA_BYTES_PER_S}");
    let limit = |entity: &[&str]| {
        let mut args = vec!["--alter", "--add-config", rate.as_str(), "--entity-type", "users"];
        args.extend_from_slice(entity);
        configs(&args)
    };
    limit(&["--entity-name", "alice"]);
    let described = configs(&["--describe", "--entity-type", "users", "--entity-name", "alice"]);
    assert!(
        described.contains("user-principal 'alice'") && described.contains("consumer_byte_rate=100000"),
        "{described}"
    );
    let user = |name: &str| {
        let mut c = ClientConfig::new();
        c.set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "PLAIN")
            .set("sasl.username", name)
            .set("sasl.password", format!("{name}-secret"));
        c
    };
    let (n, throttle_ms) = read_as(user("alice"), &sasl, "any-client", Duration::from_secs(8));
    assert!(
        throttle_ms > 0 && n < RECORDS,
        "alice: {n} records, throttled {throttle_ms} ms"
    );
    let (n, throttle_ms) = read_as(user("bob"), &sasl, "any-client", Duration::from_secs(30));
    assert_eq!((n, throttle_ms), (RECORDS, 0), "bob has no quota");
    // The default user's quota: bob's now, in a window of his own.
    limit(&["--entity-default"]);
    let (n, throttle_ms) = read_as(user("bob"), &sasl, "other-client", Duration::from_secs(8));
    assert!(
        throttle_ms > 0 && n < RECORDS,
        "bob under the default: {n} records, throttled {throttle_ms} ms"
    );
    let listed = laminar(&["quotas", "describe", "--bootstrap", &plain]);
    assert!(
        listed.contains("user alice: consumer_byte_rate=100000"),
        "{listed}"
    );
    assert!(
        listed.contains("user <default>: consumer_byte_rate=100000"),
        "{listed}"
    );
    b.terminate();
}
