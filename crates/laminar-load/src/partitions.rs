//! `laminar-load partitions`: one producer per partition, each at a fixed rate on its own
//! connection, and one consumer that reads every partition from its end, against any
//! Kafka-compatible broker (scenario S4: a disk that stalls one partition's writes).
//!
//! It reports, per partition and for the partitions other than `--watch-partition` taken
//! together: the produce latency (send to delivery report) and the end-to-end latency (the
//! send time carried in each payload to its arrival at the consumer: how soon hot data can be
//! fetched). One producer per partition keeps a stalled partition's Produce responses from
//! delaying the others in the client: a Kafka Produce request answers all its partitions at
//! once, so a client that mixes partitions in one request would wait for the slowest.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use laminar_metrics::{new_histogram, Histogram, Percentiles};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::client_perf::{payload, send_retrying, timed_producer, Recorded, FLUSH_TIMEOUT_S};
use laminar_perf::plot::{write_series_json_to, Series, TimeSeries, OVER_TIME_BUCKET};

#[derive(Debug, Clone, Serialize, clap::Args)]
pub struct PartitionsConfig {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long)]
    pub topic: String,
    /// Created with this many partitions if it does not exist; one producer each.
    #[arg(long, default_value_t = 8)]
    pub partitions: i32,
    /// In total, spread evenly over the partitions.
    #[arg(long, default_value_t = 4000)]
    pub records_per_s: u64,
    #[arg(long, default_value_t = 512)]
    pub record_bytes: usize,
    #[arg(long, default_value_t = 30)]
    pub duration_s: u64,
    /// 0, 1 or all.
    #[arg(long, default_value = "1")]
    pub acks: String,
    /// A partition reported apart from the others (the one whose disk stalls).
    #[arg(long)]
    pub watch_partition: Option<i32>,
    /// Write the series (the other partitions' produce and end-to-end latency, and the
    /// watched partition's produce latency) to this file for `laminar perf plot`.
    #[arg(long)]
    #[serde(skip)]
    pub series_out: Option<PathBuf>,
    /// Legend prefix in the charts. Default: the bootstrap address.
    #[arg(long)]
    #[serde(skip)]
    pub label: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct PartitionLatency {
    pub partition: i32,
    pub delivered: u64,
    pub failed: u64,
    pub produce_us: Percentiles,
    pub end_to_end_us: Percentiles,
}

#[derive(Debug, Serialize)]
pub struct PartitionsReport {
    pub config: PartitionsConfig,
    pub sent: u64,
    pub delivered: u64,
    pub failed: u64,
    /// The partitions other than the watched one, taken together.
    pub others_produce_us: Percentiles,
    pub others_end_to_end_us: Percentiles,
    pub watched_produce_us: Option<Percentiles>,
    pub watched_end_to_end_us: Option<Percentiles>,
    pub partitions: Vec<PartitionLatency>,
}

const SEND_TIME_BYTES: usize = 8;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros() as u64
}

/// What the consumer saw, per partition: end-to-end latency.
struct EndToEnd {
    by_partition: BTreeMap<i32, Histogram<u64>>,
    others_over_time: TimeSeries,
}

fn consume(
    cfg: &PartitionsConfig,
    start: Instant,
    stop: &AtomicBool,
    ready: &AtomicBool,
) -> anyhow::Result<EndToEnd> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.bootstrap)
        .set("group.id", "laminar-perf-partitions")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .context("create consumer")?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..cfg.partitions {
        tpl.add_partition_offset(&cfg.topic, p, Offset::End)?;
    }
    c.assign(&tpl)?;
    let mut out = EndToEnd {
        by_partition: (0..cfg.partitions).map(|p| (p, new_histogram())).collect(),
        others_over_time: TimeSeries::with_expected(OVER_TIME_BUCKET, Duration::from_secs(cfg.duration_s)),
    };
    let mut first_poll = true;
    while !stop.load(Ordering::Relaxed) {
        let m = c.poll(Duration::from_millis(100));
        if first_poll {
            first_poll = false;
            ready.store(true, Ordering::Relaxed);
        }
        let Some(Ok(m)) = m else { continue };
        let Some(v) = m.payload().filter(|v| v.len() >= SEND_TIME_BYTES) else {
            continue;
        };
        let sent_us = u64::from_be_bytes(v[..SEND_TIME_BYTES].try_into().unwrap());
        let us = now_us().saturating_sub(sent_us).max(1);
        if let Some(h) = out.by_partition.get_mut(&m.partition()) {
            h.saturating_record(us);
        }
        if Some(m.partition()) != cfg.watch_partition {
            // By arrival time since the consumer started.
            out.others_over_time
                .record(Instant::now().saturating_duration_since(start), us);
        }
    }
    Ok(out)
}

pub fn run(cfg: &PartitionsConfig) -> anyhow::Result<PartitionsReport> {
    if cfg.partitions <= 0 || cfg.records_per_s == 0 || cfg.duration_s == 0 {
        bail!("--partitions, --records-per-s and --duration-s must be positive");
    }
    if cfg.record_bytes < SEND_TIME_BYTES {
        bail!("--record-bytes must be at least {SEND_TIME_BYTES}");
    }
    crate::verify::ensure_topic(&cfg.bootstrap, &cfg.topic, cfg.partitions)?;
    let series_file = match &cfg.series_out {
        Some(path) => {
            Some(std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?)
        }
        None => None,
    };
    let duration = Duration::from_secs(cfg.duration_s);
    let per_partition_rate = (cfg.records_per_s as f64 / cfg.partitions as f64).max(0.001);
    let filler = payload(cfg.record_bytes - SEND_TIME_BYTES);

    let producers = (0..cfg.partitions)
        .map(|_| timed_producer(&cfg.bootstrap, &cfg.acks, duration, &[]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Connect and learn metadata before the clock starts.
    for (partition, (p, _)) in producers.iter().enumerate() {
        let mut v = now_us().to_be_bytes().to_vec();
        v.extend_from_slice(&filler);
        send_retrying(
            p,
            BaseRecord::with_opaque_to(&cfg.topic, Box::new(Instant::now()))
                .partition(partition as i32)
                .payload(&v[..]),
        );
    }
    for (p, _) in &producers {
        p.flush(Duration::from_secs(FLUSH_TIMEOUT_S))
            .context("first records")?;
    }

    let stop = AtomicBool::new(false);
    let ready = AtomicBool::new(false);
    let start = Instant::now();
    let (sent, end_to_end) = std::thread::scope(|s| -> anyhow::Result<_> {
        let consumer = s.spawn(|| consume(cfg, start, &stop, &ready));
        while !ready.load(Ordering::Relaxed) && !consumer.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(500));
        let start = Instant::now();
        for (_, ctx) in &producers {
            *ctx.recorded.lock().unwrap() = Recorded::new(start, duration);
        }
        let senders: Vec<_> = producers
            .iter()
            .enumerate()
            .map(|(partition, (p, _))| {
                let filler = &filler;
                s.spawn(move || {
                    let interval = Duration::from_secs_f64(1.0 / per_partition_rate);
                    let total = (per_partition_rate * duration.as_secs_f64()) as u64;
                    for i in 0..total {
                        let due = start + interval.mul_f64(i as f64);
                        let now = Instant::now();
                        if due > now {
                            std::thread::sleep(due - now);
                        }
                        let mut v = now_us().to_be_bytes().to_vec();
                        v.extend_from_slice(filler);
                        send_retrying(
                            p,
                            BaseRecord::with_opaque_to(&cfg.topic, Box::new(Instant::now()))
                                .partition(partition as i32)
                                .payload(&v[..]),
                        );
                    }
                    total
                })
            })
            .collect();
        let mut sent = 0;
        for h in senders {
            sent += h.join().expect("sender thread");
        }
        for (p, _) in &producers {
            let _ = p.flush(Duration::from_secs(FLUSH_TIMEOUT_S));
        }
        // Let the consumer see the last records.
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        let e2e = consumer.join().expect("consumer thread")?;
        Ok((sent, e2e))
    })?;

    let mut others_produce = new_histogram();
    let mut others_e2e = new_histogram();
    let mut others_over_time = TimeSeries::with_expected(OVER_TIME_BUCKET, duration);
    let mut partitions = Vec::new();
    let (mut delivered, mut failed) = (0, 0);
    let mut watched: Option<(Histogram<u64>, TimeSeries, Histogram<u64>)> = None;
    for (partition, (_, ctx)) in producers.iter().enumerate() {
        let partition = partition as i32;
        let r = ctx.recorded.lock().unwrap();
        let e2e = &end_to_end.by_partition[&partition];
        let d = ctx.delivered.load(Ordering::Relaxed).saturating_sub(1);
        let f = ctx.failed.load(Ordering::Relaxed);
        delivered += d;
        failed += f;
        if Some(partition) == cfg.watch_partition {
            watched = Some((r.latency_us.clone(), r.over_time.clone(), e2e.clone()));
        } else {
            others_produce.add(&r.latency_us).ok();
            others_e2e.add(e2e).ok();
            others_over_time.merge(&r.over_time);
        }
        partitions.push(PartitionLatency {
            partition,
            delivered: d,
            failed: f,
            produce_us: Percentiles::of(&r.latency_us),
            end_to_end_us: Percentiles::of(e2e),
        });
    }
    if let Some(file) = series_file {
        let label = cfg.label.clone().unwrap_or_else(|| cfg.bootstrap.clone());
        let note = format!(
            "{} records/s of {} B over {} partitions, one producer each, acks={}",
            cfg.records_per_s, cfg.record_bytes, cfg.partitions, cfg.acks
        );
        let mut series = vec![
            Series::from_histogram(format!("{label} produce, other partitions"), &others_produce)
                .with_over_time(&others_over_time)
                .with_unit_note(format!("produce latency (send to delivery report); {note}")),
            Series::from_histogram(format!("{label} end-to-end, other partitions"), &others_e2e)
                .with_over_time(&end_to_end.others_over_time)
                .with_unit_note(format!("send to consumer (fetch of hot data); {note}")),
        ];
        if let Some((h, t, _)) = &watched {
            series.push(
                Series::from_histogram(format!("{label} produce, stalled partition"), h)
                    .with_over_time(t)
                    .with_unit_note(format!("produce latency of the watched partition; {note}")),
            );
        }
        write_series_json_to(&series, file)?;
    }
    Ok(PartitionsReport {
        config: cfg.clone(),
        sent,
        delivered,
        failed,
        others_produce_us: Percentiles::of(&others_produce),
        others_end_to_end_us: Percentiles::of(&others_e2e),
        watched_produce_us: watched.as_ref().map(|(h, _, _)| Percentiles::of(h)),
        watched_end_to_end_us: watched.as_ref().map(|(_, _, e)| Percentiles::of(e)),
        partitions,
    })
}
