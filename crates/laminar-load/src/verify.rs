//! `laminar-load verify`: a delivery verifier, after Kafka's `validate_delivery`. It produces
//! at a fixed rate with the idempotent producer at `acks=all`, remembers every acknowledged
//! (partition, offset, sequence number), then reads every partition back and counts what
//! came back wrong:
//!
//! - **lost**: acknowledged, and not in the partition at all;
//! - **duplicated**: one sequence number at more than one offset;
//! - **reordered**: a record after a later-sent one in its partition (each partition's
//!   records are sent in sequence order, which the idempotent producer keeps);
//! - **corrupted**: a record of this run whose payload is not what was sent.
//!
//! Each record's payload is derived from its sequence number, so a record is checked without
//! storing what was sent. A run id in every payload keeps earlier runs' records out of the
//! count. It works against any Kafka-compatible broker, and rides out a broker that dies and
//! comes back: the producer retries (and is re-created after a fatal idempotence error), and
//! the read-back waits for the broker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;

use crate::history::HEADER_BYTES;

const MAGIC: &[u8; 4] = b"LMV1";
/// How long the read-back and the start wait for a broker that is down.
pub(crate) const BROKER_WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Serialize, clap::Args)]
pub struct VerifyConfig {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long)]
    pub topic: String,
    /// Created with this many partitions if it does not exist; records go round-robin.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1000)]
    pub records_per_s: u64,
    #[arg(long, default_value_t = 10)]
    pub duration_s: u64,
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,
    /// How long a record may wait for its acknowledgement (librdkafka's message.timeout.ms)
    /// before it counts as not acknowledged.
    #[arg(long, default_value_t = 60_000)]
    pub message_timeout_ms: u64,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct VerifyReport {
    pub sent: u64,
    pub acked: u64,
    /// Not acknowledged (timed out, or failed with an error); they may or may not be in the log.
    pub not_acked: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// Acknowledged at one offset and found at another (on a log that was truncated and
    /// rewritten): not lost, but the acknowledgement named the wrong offset.
    pub moved: u64,
    /// Not acknowledged, and in the log anyway.
    pub not_acked_present: u64,
    /// Records of this run read back.
    pub read: u64,
    /// Producers re-created after a fatal error (an idempotence sequence the broker lost).
    pub producer_restarts: u64,
    pub seconds: f64,
    /// The first few duplicated sequence numbers, each with where it was found (partition,
    /// offset) and where it was acknowledged, to look for in the brokers' logs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<Duplicate>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Duplicate {
    pub seq: u64,
    pub found: Vec<(i32, i64)>,
    pub acked: Option<(i32, i64)>,
}

/// Duplicates shown in a report with where they were found.
const DUPLICATES_SHOWN: usize = 10;

fn payload(run: u64, seq: u64, partition: i32, bytes: usize) -> Vec<u8> {
    crate::history::framed(MAGIC, run, seq, partition, bytes)
}

/// The (run, sequence number, partition) a payload claims, if it is one of ours at all.
fn parse(v: &[u8]) -> Option<(u64, u64, i32)> {
    crate::history::unframe(MAGIC, v)
}

/// Per partition, (offset, sequence number) of each acknowledged record.
type AckedByPartition = HashMap<i32, Vec<(i64, u64)>>;
/// Per partition, (offset, payload) of each record read back, in offset order.
type LogByPartition = HashMap<i32, Vec<(i64, Vec<u8>)>>;

/// What the delivery reports said.
#[derive(Clone, Default)]
struct Acks {
    acked: Arc<Mutex<AckedByPartition>>,
    failed: Arc<AtomicU64>,
}

impl ClientContext for Acks {}
impl ProducerContext for Acks {
    type DeliveryOpaque = Box<u64>;
    fn delivery(&self, result: &DeliveryResult<'_>, seq: Box<u64>) {
        match result {
            Ok(m) => self
                .acked
                .lock()
                .unwrap()
                .entry(m.partition())
                .or_default()
                .push((m.offset(), *seq)),
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn producer(cfg: &VerifyConfig, acks: &Acks) -> anyhow::Result<ThreadedProducer<Acks>> {
    ClientConfig::new()
        .set("bootstrap.servers", &cfg.bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .set("message.timeout.ms", cfg.message_timeout_ms.to_string())
        .set("reconnect.backoff.max.ms", "500")
        .create_with_context(acks.clone())
        .context("create producer")
}

/// Creates `topic` with `partitions` partitions unless it exists, waiting for a broker that
/// is down.
pub(crate) fn ensure_topic(bootstrap: &str, topic_name: &str, partitions: i32) -> anyhow::Result<()> {
    ensure_topic_replicated(bootstrap, topic_name, partitions, 1)
}

/// [`ensure_topic`] with `replicas` replicas of each partition.
pub(crate) fn ensure_topic_replicated(
    bootstrap: &str,
    topic_name: &str,
    partitions: i32,
    replicas: i32,
) -> anyhow::Result<()> {
    ensure_topic_with(bootstrap, topic_name, partitions, replicas, &[])
}

/// [`ensure_topic_replicated`], the admin client with more librdkafka settings (`extra`).
pub(crate) fn ensure_topic_with(
    bootstrap: &str,
    topic_name: &str,
    partitions: i32,
    replicas: i32,
    extra: &[(String, String)],
) -> anyhow::Result<()> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (k, v) in extra {
        config.set(k, v);
    }
    let admin: AdminClient<DefaultClientContext> = config.create().context("create admin client")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("runtime for the admin client")?;
    let deadline = Instant::now() + BROKER_WAIT;
    loop {
        let topic = NewTopic::new(topic_name, partitions, TopicReplication::Fixed(replicas));
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        match rt.block_on(admin.create_topics([&topic], &opts)) {
            Ok(results) => match results.into_iter().next() {
                Some(Ok(_)) | Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => return Ok(()),
                Some(Err((_, e))) if Instant::now() > deadline => bail!("create {topic_name}: {e}"),
                None => return Ok(()),
                Some(Err(_)) => {}
            },
            Err(e) if Instant::now() > deadline => bail!("create {topic_name}: {e}"),
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn send(
    p: &ThreadedProducer<Acks>,
    topic: &str,
    partition: i32,
    value: &[u8],
    seq: u64,
) -> Result<(), KafkaError> {
    let mut rec = BaseRecord::<(), [u8], Box<u64>>::with_opaque_to(topic, Box::new(seq))
        .partition(partition)
        .payload(value);
    loop {
        match p.send(rec) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                rec = back;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Every record of this run in each partition, in offset order: (offset, payload).
fn read_back(cfg: &VerifyConfig) -> anyhow::Result<LogByPartition> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.bootstrap)
        .set("group.id", "laminar-perf-verify")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .context("create consumer")?;
    let deadline = Instant::now() + BROKER_WAIT;
    let mut ends = HashMap::new();
    for p in 0..cfg.partitions {
        let end = loop {
            match consumer.fetch_watermarks(&cfg.topic, p, Duration::from_secs(5)) {
                Ok((_, high)) => break high,
                Err(e) if Instant::now() > deadline => bail!("watermarks of {}-{p}: {e}", cfg.topic),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        };
        ends.insert(p, end);
    }
    let mut tpl = TopicPartitionList::new();
    for p in 0..cfg.partitions {
        tpl.add_partition_offset(&cfg.topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    let mut out: LogByPartition = HashMap::new();
    let mut next: HashMap<i32, i64> = HashMap::new();
    let done = |next: &HashMap<i32, i64>| {
        ends.iter()
            .all(|(p, &end)| end == 0 || next.get(p).is_some_and(|&n| n >= end))
    };
    while !done(&next) {
        if Instant::now() > deadline {
            bail!("read-back did not reach the high watermarks {ends:?} (at {next:?})");
        }
        // Errors (a broker that is down) are retried until the deadline.
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            next.insert(m.partition(), m.offset() + 1);
            out.entry(m.partition())
                .or_default()
                .push((m.offset(), m.payload().unwrap_or_default().to_vec()));
        }
    }
    Ok(out)
}

pub fn verify(cfg: &VerifyConfig) -> anyhow::Result<VerifyReport> {
    if cfg.partitions <= 0 || cfg.records_per_s == 0 || cfg.duration_s == 0 {
        bail!("--partitions, --records-per-s and --duration-s must be positive");
    }
    if cfg.record_bytes < HEADER_BYTES {
        bail!("--record-bytes must be at least {HEADER_BYTES}");
    }
    ensure_topic(&cfg.bootstrap, &cfg.topic, cfg.partitions)?;
    let run: u64 = rand::random();
    let acks = Acks::default();
    let mut p = producer(cfg, &acks)?;
    let mut report = VerifyReport::default();
    let interval = Duration::from_secs_f64(1.0 / cfg.records_per_s as f64);
    let total = cfg.records_per_s * cfg.duration_s;
    let started = Instant::now();
    for seq in 0..total {
        let due = started + interval.mul_f64(seq as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if seq % 64 == 0 && p.client().fatal_error().is_some() {
            // The broker lost this producer's sequence state (a crash took unsynced data with
            // it). Its in-flight records fail; a new producer carries on.
            let _ = p.flush(Duration::from_secs(1));
            p = producer(cfg, &acks)?;
            report.producer_restarts += 1;
        }
        let partition = (seq % cfg.partitions as u64) as i32;
        let value = payload(run, seq, partition, cfg.record_bytes);
        if send(&p, &cfg.topic, partition, &value, seq).is_err() {
            acks.failed.fetch_add(1, Ordering::Relaxed);
        }
        report.sent += 1;
    }
    // Waits for every delivery report: each record is acknowledged, fails, or times out.
    let _ = p.flush(Duration::from_millis(cfg.message_timeout_ms + 10_000));
    drop(p);
    report.seconds = started.elapsed().as_secs_f64();

    let log = read_back(cfg)?;
    let acked = std::mem::take(&mut *acks.acked.lock().unwrap());
    report.acked = acked.values().map(|v| v.len() as u64).sum();
    report.not_acked = report.sent - report.acked;
    let mut acked_seqs: HashMap<u64, (i32, i64)> = HashMap::new();
    for (&partition, list) in &acked {
        for &(offset, seq) in list {
            acked_seqs.insert(seq, (partition, offset));
        }
    }
    // Where each sequence number of this run was found.
    let mut found: HashMap<u64, Vec<(i32, i64)>> = HashMap::new();
    for (&partition, records) in &log {
        let mut last_seq: Option<u64> = None;
        for (offset, value) in records {
            let Some((r, seq, claimed)) = parse(value) else {
                continue;
            };
            if r != run {
                continue;
            }
            report.read += 1;
            if claimed != partition
                || *value != payload(run, seq, partition, value.len())
                || value.len() != cfg.record_bytes
            {
                report.corrupted += 1;
                continue;
            }
            if last_seq.is_some_and(|l| seq < l) {
                report.reordered += 1;
            }
            last_seq = Some(last_seq.map_or(seq, |l| l.max(seq)));
            found.entry(seq).or_default().push((partition, *offset));
        }
    }
    for (seq, places) in &found {
        report.duplicated += places.len() as u64 - 1;
        if places.len() > 1 && report.duplicates.len() < DUPLICATES_SHOWN {
            report.duplicates.push(Duplicate {
                seq: *seq,
                found: places.clone(),
                acked: acked_seqs.get(seq).copied(),
            });
        }
        match acked_seqs.get(seq) {
            Some(at) if !places.contains(at) => report.moved += 1,
            Some(_) => {}
            None => report.not_acked_present += 1,
        }
    }
    report.lost = acked_seqs.keys().filter(|s| !found.contains_key(s)).count() as u64;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_check_themselves() {
        let v = payload(7, 42, 3, 100);
        assert_eq!(v.len(), 100);
        assert_eq!(parse(&v), Some((7, 42, 3)));
        assert_eq!(payload(7, 42, 3, 100), v, "deterministic");
        assert_ne!(payload(7, 43, 3, 100)[HEADER_BYTES..], v[HEADER_BYTES..]);
        assert_eq!(parse(b"short"), None);
    }
}
