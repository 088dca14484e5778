//! A broker per test: its own ephemeral port on 127.0.0.1 and its own temporary data
//! directory, stopped when the test ends.
#![allow(dead_code)]

pub mod raw;

use std::path::PathBuf;
use std::time::Duration;

use laminar_broker::{BrokerConfig, RunningBroker, Wiring};

pub struct TestBroker {
    pub addr: String,
    /// host:port of the Prometheus endpoint.
    pub metrics_addr: String,
    pub dir: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
    broker: Option<RunningBroker>,
    _tmp: Option<tempfile::TempDir>,
}

impl TestBroker {
    pub fn start() -> TestBroker {
        Self::start_with(|_| {})
    }

    pub fn start_with(f: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        Self::start_wired(f, Wiring::default())
    }

    /// Like [`TestBroker::start_with`], with parts of the broker swapped ([`Wiring`]).
    pub fn start_wired(f: impl FnOnce(&mut BrokerConfig), wiring: Wiring) -> TestBroker {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut b = Self::start_in_wired(dir, f, wiring);
        b._tmp = Some(tmp);
        b
    }

    pub fn start_in(dir: PathBuf, f: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        Self::start_in_wired(dir, f, Wiring::default())
    }

    pub fn start_in_wired(dir: PathBuf, f: impl FnOnce(&mut BrokerConfig), wiring: Wiring) -> TestBroker {
        let mut config = BrokerConfig {
            listeners: laminar_broker::listeners::ListenerSettings::plaintext("127.0.0.1:0".parse().unwrap()),
            metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
            data_dir: dir.clone(),
            ..Default::default()
        };
        f(&mut config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.num_network_threads)
            .enable_all()
            .build()
            .unwrap();
        let broker = runtime
            .block_on(RunningBroker::start_wired(config, wiring))
            .expect("broker starts");
        let addr = broker.local_addr().to_string();
        let metrics_addr = broker.metrics_addr().map(|a| a.to_string()).unwrap_or_default();
        TestBroker {
            addr,
            metrics_addr,
            dir,
            runtime: Some(runtime),
            broker: Some(broker),
            _tmp: None,
        }
    }

    /// Clean shutdown, keeping the data directory (for restart tests).
    pub fn stop(mut self) -> (PathBuf, Option<tempfile::TempDir>) {
        self.shutdown();
        (self.dir.clone(), self._tmp.take())
    }

    fn shutdown(&mut self) {
        if let (Some(rt), Some(b)) = (self.runtime.as_ref(), self.broker.take()) {
            rt.block_on(b.shutdown()).expect("clean shutdown");
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

pub type TestProducer = ThreadedProducer<DefaultProducerContext>;

pub fn producer(addr: &str, extra: &[(&str, &str)]) -> TestProducer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", addr)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    c.create().expect("producer")
}

/// One record as a test produces it and expects it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Rec {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_ms: i64,
}

pub fn make_record(i: u64) -> Rec {
    let value = format!("value-{i}-{}", "laminar".repeat((i % 23) as usize)).into_bytes();
    Rec {
        key: if i.is_multiple_of(10) {
            None
        } else {
            Some(format!("key-{i}").into_bytes())
        },
        value: Some(value),
        headers: if i.is_multiple_of(3) {
            vec![("h1".into(), Some(vec![i as u8; 3])), ("h2".into(), None)]
        } else {
            vec![]
        },
        timestamp_ms: 1_700_000_000_000 + i as i64,
    }
}

pub fn send(p: &TestProducer, topic: &str, partition: Option<i32>, r: &Rec) {
    let mut headers = OwnedHeaders::new();
    for (k, v) in &r.headers {
        headers = headers.insert(Header {
            key: k,
            value: v.as_deref(),
        });
    }
    let mut rec: BaseRecord<'_, [u8], [u8]> =
        BaseRecord::to(topic).timestamp(r.timestamp_ms).headers(headers);
    if let Some(k) = &r.key {
        rec = rec.key(k);
    }
    if let Some(v) = &r.value {
        rec = rec.payload(v);
    }
    if let Some(p) = partition {
        rec = rec.partition(p);
    }
    let mut rec = rec;
    loop {
        match p.send(rec) {
            Ok(()) => return,
            Err((
                rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                back,
            )) => {
                rec = back;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err((e, _)) => panic!("send failed: {e}"),
        }
    }
}

pub fn consumer(addr: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "laminar-test-unused")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .expect("consumer")
}

/// Reads `n` records of one partition from offset 0; checks offsets are contiguous.
pub fn consume(addr: &str, topic: &str, partition: i32, n: usize, timeout: Duration) -> Vec<Rec> {
    let c = consumer(addr);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::with_capacity(n);
    let deadline = std::time::Instant::now() + timeout;
    while out.len() < n && std::time::Instant::now() < deadline {
        let Some(m) = c.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("consume");
        assert_eq!(m.offset(), out.len() as i64, "offsets are contiguous");
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Rec {
            key: m.key().map(|k| k.to_vec()),
            value: m.payload().map(|v| v.to_vec()),
            headers,
            timestamp_ms: m.timestamp().to_millis().unwrap_or(-1),
        });
    }
    out
}

/// Runs an async client call (an admin request, a future producer's send) to completion.
pub fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub fn flush(p: &TestProducer) {
    p.flush(Duration::from_secs(60)).expect("flush");
}

/// `GET path` on the broker's metrics endpoint: (status line, body).
pub fn http_get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// The value of one sample (`name{labels}` exactly as exported) in a Prometheus text body.
pub fn metric(body: &str, sample: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{sample} is not in the metrics"))
        .trim()
        .parse()
        .unwrap()
}
