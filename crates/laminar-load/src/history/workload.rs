//! The workload whose history [`super::check`] reads: plain producers (idempotent,
//! `acks=all`), transactional producers that commit most transactions and abort some on
//! purpose, and consumers in one group (`read_committed`, committing as they go), all through
//! librdkafka, for a fixed time while something outside breaks the broker. Then it makes sure
//! no transaction is left open, writes one fence record to each partition, and reads every
//! partition back to its fence.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;

use super::{
    check, parse, payload, value_of, Event, Outcome, Report, Value, Writer, FENCE_WRITER, HEADER_BYTES,
    REREAD_CONSUMER,
};
use crate::verify::{ensure_topic_replicated, BROKER_WAIT};

#[derive(Debug, Clone, Serialize, clap::Args)]
pub struct WorkloadConfig {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Created if it does not exist; use a fresh topic per run.
    #[arg(long)]
    pub topic: String,
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i32,
    /// Plain producers: idempotent, acks=all, records round-robin over the partitions.
    #[arg(long, default_value_t = 2)]
    pub producers: u32,
    /// Records per second of each plain producer.
    #[arg(long, default_value_t = 300)]
    pub records_per_s: u64,
    /// Transactional producers, each with its own transactional id.
    #[arg(long, default_value_t = 1)]
    pub txn_producers: u32,
    /// Transactions per second of each transactional producer.
    #[arg(long, default_value_t = 10)]
    pub txns_per_s: u64,
    /// Records per transaction, over consecutive partitions.
    #[arg(long, default_value_t = 3)]
    pub txn_records: u32,
    /// Every this-many-th transaction is aborted on purpose (0: none).
    #[arg(long, default_value_t = 4)]
    pub abort_every: u64,
    /// Consumers in one group, read_committed.
    #[arg(long, default_value_t = 2)]
    pub consumers: u32,
    #[arg(long, default_value_t = 10)]
    pub duration_s: u64,
    #[arg(long, default_value_t = 64)]
    pub record_bytes: usize,
    /// How long a plain producer's record may wait for its acknowledgement.
    #[arg(long, default_value_t = 60_000)]
    pub message_timeout_ms: u64,
    /// librdkafka's transaction.timeout.ms: how long the broker lets a transaction whose
    /// producer went silent stay open.
    #[arg(long, default_value_t = 20_000)]
    pub transaction_timeout_ms: u64,
    /// Where to write the history (one JSON event per line).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct WorkloadReport {
    pub seconds: f64,
    /// Producers re-created after a fatal error.
    pub producer_restarts: u64,
    #[serde(flatten)]
    pub check: Report,
}

type Sink = Arc<Mutex<Vec<Event>>>;

fn push(sink: &Sink, e: Event) {
    sink.lock().unwrap().push(e);
}

#[derive(Clone)]
struct Deliveries {
    writer: Writer,
    sink: Sink,
}

impl ClientContext for Deliveries {}
impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<(i32, Value)>;
    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<(i32, Value)>) {
        let (partition, value) = *sent;
        let writer = self.writer;
        push(
            &self.sink,
            match result {
                Ok(m) => Event::Acked {
                    writer,
                    partition: m.partition(),
                    offset: m.offset(),
                    value,
                },
                Err(_) => Event::Unacked {
                    writer,
                    partition,
                    value,
                },
            },
        );
    }
}

struct Rebalances {
    consumer: u32,
    sink: Sink,
}

fn partitions_of(tpl: &TopicPartitionList) -> Vec<i32> {
    tpl.elements().iter().map(|e| e.partition()).collect()
}

impl ClientContext for Rebalances {}
impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            push(
                &self.sink,
                Event::Revoked {
                    consumer: self.consumer,
                    partitions: partitions_of(tpl),
                },
            );
        }
    }
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            push(
                &self.sink,
                Event::Assigned {
                    consumer: self.consumer,
                    partitions: partitions_of(tpl),
                },
            );
        }
    }
}

struct Run {
    cfg: WorkloadConfig,
    run: u64,
    restarts: AtomicU64,
}

impl Run {
    fn payload(&self, value: Value, partition: i32) -> Vec<u8> {
        payload(self.run, value, partition, self.cfg.record_bytes)
    }

    fn plain_producer(&self, ctx: &Deliveries) -> anyhow::Result<ThreadedProducer<Deliveries>> {
        ClientConfig::new()
            .set("bootstrap.servers", &self.cfg.bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "1")
            .set("message.timeout.ms", self.cfg.message_timeout_ms.to_string())
            .set("reconnect.backoff.max.ms", "500")
            .create_with_context(ctx.clone())
            .context("create producer")
    }

    /// One plain producer: records round-robin over the partitions at a fixed rate, a new
    /// producer after a fatal error (the broker lost this one's sequence state).
    fn produce(&self, writer: Writer, sink: &Sink) -> anyhow::Result<()> {
        let ctx = Deliveries {
            writer,
            sink: sink.clone(),
        };
        let mut p = self.plain_producer(&ctx)?;
        let interval = Duration::from_secs_f64(1.0 / self.cfg.records_per_s as f64);
        let total = self.cfg.records_per_s * self.cfg.duration_s;
        let started = Instant::now();
        for seq in 0..total {
            let due = started + interval.mul_f64(seq as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if seq % 64 == 0 && p.client().fatal_error().is_some() {
                let _ = p.flush(Duration::from_secs(1));
                p = self.plain_producer(&ctx)?;
                self.restarts.fetch_add(1, Ordering::Relaxed);
            }
            let partition = (seq % self.cfg.partitions as u64) as i32;
            let value = value_of(writer, seq);
            let bytes = self.payload(value, partition);
            let mut rec = BaseRecord::<(), [u8], Box<(i32, Value)>>::with_opaque_to(
                &self.cfg.topic,
                Box::new((partition, value)),
            )
            .partition(partition)
            .payload(&bytes);
            loop {
                match p.send(rec) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        rec = back;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(_) => {
                        push(
                            sink,
                            Event::Unacked {
                                writer,
                                partition,
                                value,
                            },
                        );
                        break;
                    }
                }
            }
        }
        // Every record is acknowledged, fails, or times out.
        let _ = p.flush(Duration::from_millis(self.cfg.message_timeout_ms + 10_000));
        Ok(())
    }

    fn txn_producer(&self, id: &str) -> anyhow::Result<ThreadedProducer<DefaultProducerContext>> {
        // Retried until the broker answers: it may be down, or still ending this id's last
        // transaction; a producer that hit a fatal error is made again.
        let deadline = Instant::now() + BROKER_WAIT;
        loop {
            let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
                .set("bootstrap.servers", &self.cfg.bootstrap)
                .set("transactional.id", id)
                .set(
                    "transaction.timeout.ms",
                    self.cfg.transaction_timeout_ms.to_string(),
                )
                .set("message.timeout.ms", self.cfg.transaction_timeout_ms.to_string())
                .set("linger.ms", "1")
                .set("reconnect.backoff.max.ms", "500")
                .create()
                .context("create transactional producer")?;
            loop {
                match p.init_transactions(Duration::from_secs(30)) {
                    Ok(()) => return Ok(p),
                    Err(e) if Instant::now() > deadline => bail!("init_transactions for {id}: {e}"),
                    Err(e) if is_fatal(&e) => break,
                    Err(_) => std::thread::sleep(Duration::from_millis(500)),
                }
            }
        }
    }

    /// One transactional producer: transactions of `txn_records` records over consecutive
    /// partitions at a fixed rate; every `abort_every`-th aborted on purpose. What the
    /// producer was told decides the outcome recorded; anything short of a success is
    /// `Unknown`, and the producer is made again (which fences and ends the old one).
    fn transact(&self, writer: Writer, sink: &Sink) -> anyhow::Result<()> {
        let id = format!("{}-txn-{writer}", self.cfg.topic);
        let mut p = self.txn_producer(&id)?;
        let interval = Duration::from_secs_f64(1.0 / self.cfg.txns_per_s as f64);
        let total = self.cfg.txns_per_s * self.cfg.duration_s;
        let started = Instant::now();
        let mut seq = 0u64;
        for n in 0..total {
            let due = started + interval.mul_f64(n as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if p.begin_transaction().is_err() {
                p = self.txn_producer(&id)?;
                self.restarts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let mut records = Vec::new();
            for k in 0..self.cfg.txn_records {
                let partition = ((n + u64::from(k)) % self.cfg.partitions as u64) as i32;
                let value = value_of(writer, seq);
                seq += 1;
                let bytes = self.payload(value, partition);
                let mut rec = BaseRecord::<(), [u8]>::to(&self.cfg.topic)
                    .partition(partition)
                    .payload(&bytes);
                loop {
                    match p.send(rec) {
                        Ok(()) => {
                            records.push((partition, value));
                            break;
                        }
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            rec = back;
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        Err(_) => break,
                    }
                }
            }
            let abort = self.cfg.abort_every > 0 && n % self.cfg.abort_every == self.cfg.abort_every - 1;
            let outcome = end_transaction(&p, abort);
            push(
                sink,
                Event::Txn {
                    writer,
                    records,
                    outcome,
                },
            );
            if outcome == Outcome::Unknown {
                p = self.txn_producer(&id)?;
                self.restarts.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// One consumer in the group until `stop`: every record it polls, and every assignment,
    /// in its order; offsets committed twice a second.
    fn consume(&self, consumer: u32, stop: &AtomicBool) -> anyhow::Result<Vec<Event>> {
        let sink: Sink = Arc::default();
        let c: BaseConsumer<Rebalances> = ClientConfig::new()
            .set("bootstrap.servers", &self.cfg.bootstrap)
            .set("group.id", format!("{}-group", self.cfg.topic))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "10000")
            .set("reconnect.backoff.max.ms", "500")
            .create_with_context(Rebalances {
                consumer,
                sink: sink.clone(),
            })
            .context("create consumer")?;
        c.subscribe(&[&self.cfg.topic])?;
        let mut committed = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
                let value = parse(self.run, m.partition(), m.payload().unwrap_or_default());
                push(
                    &sink,
                    Event::Polled {
                        consumer,
                        partition: m.partition(),
                        offset: m.offset(),
                        value,
                    },
                );
            }
            if committed.elapsed() > Duration::from_millis(500) {
                let _ = c.commit_consumer_state(CommitMode::Async);
                committed = Instant::now();
            }
        }
        drop(c);
        let events = std::mem::take(&mut *sink.lock().unwrap());
        Ok(events)
    }

    /// Writes one fence record to each partition and returns the offset each was acknowledged
    /// at; every record written before it is below it.
    fn fence(&self) -> anyhow::Result<Vec<i64>> {
        let sink: Sink = Arc::default();
        let ctx = Deliveries {
            writer: FENCE_WRITER,
            sink: sink.clone(),
        };
        let p = self.plain_producer(&ctx)?;
        let deadline = Instant::now() + BROKER_WAIT;
        let mut fences = vec![None; self.cfg.partitions as usize];
        while fences.iter().any(Option::is_none) {
            if Instant::now() > deadline {
                bail!("fence records not acknowledged: {fences:?}");
            }
            for (partition, _) in fences.iter().enumerate().filter(|(_, f)| f.is_none()) {
                let partition = partition as i32;
                let value = value_of(FENCE_WRITER, partition as u64);
                let bytes = self.payload(value, partition);
                let rec = BaseRecord::<(), [u8], Box<(i32, Value)>>::with_opaque_to(
                    &self.cfg.topic,
                    Box::new((partition, value)),
                )
                .partition(partition)
                .payload(&bytes);
                let _ = p.send(rec);
            }
            let _ = p.flush(Duration::from_secs(30));
            for e in sink.lock().unwrap().drain(..) {
                if let Event::Acked {
                    partition, offset, ..
                } = e
                {
                    // Acknowledged without its offset (librdkafka's implicit ack): sent again.
                    if offset >= 0 {
                        fences[partition as usize] = Some(offset);
                    }
                }
            }
        }
        Ok(fences.into_iter().map(Option::unwrap).collect())
    }
}

/// Every partition of `topic` read from its start to its fence, read_committed.
fn read_final(bootstrap: &str, topic: &str, run: u64, fences: &[i64]) -> anyhow::Result<Vec<Event>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("{topic}-final"))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .context("create the final reader")?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..fences.len() as i32 {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    let deadline = Instant::now() + BROKER_WAIT;
    let mut next = vec![0i64; fences.len()];
    let mut events = Vec::new();
    while next.iter().zip(fences).any(|(n, f)| n <= f) {
        if Instant::now() > deadline {
            // A log that ends before its fence no longer holds what was acknowledged there:
            // the read is as final as it gets, and the check counts what it misses as lost.
            // A log that holds its fence but could not be read to it is an error.
            let ends: Vec<i64> = (0..fences.len() as i32)
                .map(|p| {
                    c.fetch_watermarks(topic, p, Duration::from_secs(10))
                        .map_or(i64::MAX, |(_, high)| high)
                })
                .collect();
            if shortened(fences, &next, &ends) {
                eprintln!(
                    "the final read stops short of the fences {fences:?} (at {next:?}): the log ends at {ends:?}"
                );
                return Ok(events);
            }
            bail!(
                "the final read did not reach the fences {fences:?} (at {next:?}; the log ends at {ends:?})"
            );
        }
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            let partition = m.partition();
            next[partition as usize] = m.offset() + 1;
            let value = parse(run, partition, m.payload().unwrap_or_default());
            events.push(Event::Final {
                partition,
                offset: m.offset(),
                value,
            });
        }
    }
    Ok(events)
}

/// Whether a final read that stopped at `next` (per partition, the offset after the last
/// record read) stopped because the log no longer holds its fences: every partition it did
/// not read to its fence ends (`ends`, its high watermark) at or before the fence. The fence
/// was acknowledged, so that log lost records; what the read missed below its end (a record
/// the leader can no longer serve) is counted lost with them.
fn shortened(fences: &[i64], next: &[i64], ends: &[i64]) -> bool {
    fences
        .iter()
        .zip(next)
        .zip(ends)
        .filter(|((f, n), _)| **n <= **f)
        .all(|((f, _), e)| *e <= *f)
}

/// Checks a history against its topic's log as it stands now (after later faults): the
/// topic is read again to the fences the run wrote, the earlier final read counts as a
/// consumer's polls ([`REREAD_CONSUMER`]), and the new read is the final one. A record the
/// earlier read found and the log no longer holds is lost; an offset that now holds another
/// record is inconsistent.
pub fn reread(bootstrap: &str, events: Vec<Event>) -> anyhow::Result<Report> {
    let Some((topic, run, partitions)) = events.iter().find_map(|e| match e {
        Event::Began {
            topic,
            run,
            partitions,
        } => Some((topic.clone(), *run, *partitions)),
        _ => None,
    }) else {
        bail!("the history does not say which run it is (no `began` event)");
    };
    let mut fences = vec![-1i64; partitions as usize];
    for e in &events {
        if let Event::Final {
            partition,
            offset,
            value: Some(v),
        } = e
        {
            if super::writer_of(*v) == FENCE_WRITER {
                let f = &mut fences[*partition as usize];
                *f = (*f).max(*offset);
            }
        }
    }
    if fences.contains(&-1) {
        bail!("the history's final read has no fence in some partition: {fences:?}");
    }
    let mut again = vec![Event::Assigned {
        consumer: REREAD_CONSUMER,
        partitions: (0..partitions).collect(),
    }];
    for e in events {
        again.push(match e {
            Event::Final {
                partition,
                offset,
                value,
            } => Event::Polled {
                consumer: REREAD_CONSUMER,
                partition,
                offset,
                value,
            },
            e => e,
        });
    }
    again.extend(read_final(bootstrap, &topic, run, &fences)?);
    Ok(check(&again))
}

fn is_fatal(e: &KafkaError) -> bool {
    match e {
        KafkaError::Transaction(e) => e.is_fatal(),
        _ => false,
    }
}

/// Commits or aborts, retrying what librdkafka calls retriable; `Unknown` unless the producer
/// was told the transaction ended as asked (or aborted, when a commit had to abort).
fn end_transaction(p: &ThreadedProducer<DefaultProducerContext>, abort: bool) -> Outcome {
    let timeout = Duration::from_secs(30);
    let mut abort = abort;
    for _ in 0..5 {
        let result = if abort {
            p.abort_transaction(timeout)
        } else {
            p.commit_transaction(timeout)
        };
        match result {
            Ok(()) if abort => return Outcome::Aborted,
            Ok(()) => return Outcome::Committed,
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() && !abort => abort = true,
            Err(KafkaError::Transaction(e)) if e.is_retriable() => {}
            Err(_) => return Outcome::Unknown,
        }
    }
    Outcome::Unknown
}

pub fn run(cfg: &WorkloadConfig) -> anyhow::Result<WorkloadReport> {
    if cfg.partitions <= 0 || cfg.duration_s == 0 || cfg.records_per_s == 0 || cfg.txns_per_s == 0 {
        bail!("--partitions, --duration-s, --records-per-s and --txns-per-s must be positive");
    }
    if cfg.record_bytes < HEADER_BYTES {
        bail!("--record-bytes must be at least {HEADER_BYTES}");
    }
    ensure_topic_replicated(&cfg.bootstrap, &cfg.topic, cfg.partitions, cfg.replication_factor)?;
    let run = Arc::new(Run {
        cfg: cfg.clone(),
        run: rand::random(),
        restarts: AtomicU64::new(0),
    });
    let started = Instant::now();
    let sink: Sink = Arc::default();
    let began = Event::Began {
        topic: cfg.topic.clone(),
        run: run.run,
        partitions: cfg.partitions,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let consumers: Vec<_> = (0..cfg.consumers)
        .map(|c| {
            let (run, stop) = (run.clone(), stop.clone());
            std::thread::spawn(move || run.consume(c, &stop))
        })
        .collect();
    let producers: Vec<_> = (0..cfg.producers)
        .map(|w| {
            let (run, sink) = (run.clone(), sink.clone());
            std::thread::spawn(move || run.produce(w, &sink))
        })
        .chain((0..cfg.txn_producers).map(|t| {
            let (run, sink, writer) = (run.clone(), sink.clone(), cfg.producers + t);
            std::thread::spawn(move || run.transact(writer, &sink))
        }))
        .collect();
    let mut failed = None;
    for p in producers {
        if let Err(e) = p.join().expect("a producer thread panicked") {
            failed.get_or_insert(e);
        }
    }
    // The consumers read on a while, to catch up.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let mut events = vec![began];
    events.append(&mut sink.lock().unwrap());
    for c in consumers {
        match c.join().expect("a consumer thread panicked") {
            Ok(e) => events.extend(e),
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    // No transaction may be left open: a new producer per transactional id ends its last one.
    for t in 0..cfg.txn_producers {
        drop(run.txn_producer(&format!("{}-txn-{}", cfg.topic, cfg.producers + t))?);
    }
    // Written before the final read, so that a run whose final read fails leaves its history.
    let write = |events: &[Event]| -> anyhow::Result<()> {
        match &cfg.out {
            Some(path) => std::fs::write(path, super::write(events))
                .with_context(|| format!("write {}", path.display())),
            None => Ok(()),
        }
    };
    write(&events)?;
    let fences = run.fence()?;
    events.extend(read_final(&cfg.bootstrap, &cfg.topic, run.run, &fences)?);
    let seconds = started.elapsed().as_secs_f64();
    write(&events)?;
    Ok(WorkloadReport {
        seconds,
        producer_restarts: run.restarts.load(Ordering::Relaxed),
        check: check(&events),
    })
}

#[cfg(test)]
mod tests {
    use super::shortened;

    /// The whole rotation's lost partition: fences [2078, 2076, 2076], read to [427, 2077,
    /// 2077], partition 0's log ending at 428: a loss to count, not an error.
    #[test]
    fn a_log_that_ends_before_its_fence_makes_the_read_final() {
        assert!(shortened(
            &[2078, 2076, 2076],
            &[427, 2077, 2077],
            &[428, 2077, 2077]
        ));
        // The log still holds the fence: the read could not reach it, an error.
        assert!(!shortened(
            &[2078, 2076, 2076],
            &[427, 2077, 2077],
            &[2079, 2077, 2077]
        ));
        // Unknown ends (no answer) are never taken for a loss.
        assert!(!shortened(&[10], &[3], &[i64::MAX]));
    }
}
