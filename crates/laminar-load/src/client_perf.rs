//! Client-side load for the brief's scenarios, through librdkafka, against any
//! Kafka-compatible bootstrap address (Laminar or Apache Kafka), so one run can measure both:
//!
//! - `fill`: produce as fast as possible into a topic (the catch-up data of S1 and S2);
//! - `latency`: produce at a fixed rate and measure each record's produce latency (send to
//!   delivery report), optionally while a consumer reads another topic from its start (the
//!   lagging or catching-up consumer), and report that consumer's MB/s. With `--series-out`
//!   it also saves the run's latency over time and by percentile for `laminar perf plot`.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use laminar_metrics::{new_histogram, Histogram, Percentiles};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;

use laminar_perf::plot::{Series, TimeSeries, OVER_TIME_BUCKET};

/// How long the producer waits for outstanding deliveries at the end.
pub(crate) const FLUSH_TIMEOUT_S: u64 = 60;

/// `laminar-load fill`'s options (flattened into the command line).
#[derive(Debug, Clone, Serialize, clap::Args)]
pub struct FillConfig {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long)]
    pub topic: String,
    /// Bytes of record values to write in total.
    #[arg(long)]
    pub bytes: u64,
    #[arg(long, default_value_t = 1024)]
    pub record_bytes: usize,
}

#[derive(Debug, Serialize)]
pub struct FillReport {
    pub config: FillConfig,
    pub records: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
}

/// Counts deliveries and failures; `fill` needs no latencies.
#[derive(Default, Clone)]
struct Counted {
    delivered: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl ClientContext for Counted {}
impl ProducerContext for Counted {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => self.delivered.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

pub(crate) fn send_retrying<C: ProducerContext>(
    p: &ThreadedProducer<C>,
    mut rec: BaseRecord<'_, [u8], [u8], C::DeliveryOpaque>,
) {
    loop {
        match p.send(rec) {
            Ok(()) => return,
            Err((_, back)) => {
                // The local queue is full: let deliveries drain it.
                rec = back;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

pub fn fill(cfg: &FillConfig) -> anyhow::Result<FillReport> {
    if cfg.record_bytes == 0 {
        bail!("--record-bytes must be positive");
    }
    let ctx = Counted::default();
    let p: ThreadedProducer<Counted> = ClientConfig::new()
        .set("bootstrap.servers", &cfg.bootstrap)
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("acks", "1")
        .set("compression.type", "none")
        .create_with_context(ctx.clone())
        .context("create producer")?;
    let value = payload(cfg.record_bytes);
    let records = cfg.bytes.div_ceil(cfg.record_bytes as u64);
    let started = Instant::now();
    for _ in 0..records {
        send_retrying(&p, BaseRecord::to(&cfg.topic).payload(&value[..]));
    }
    p.flush(Duration::from_secs(FLUSH_TIMEOUT_S)).context("flush")?;
    let seconds = started.elapsed().as_secs_f64();
    let failed = ctx.failed.load(Ordering::Relaxed);
    if failed > 0 {
        bail!("{failed} records were not delivered");
    }
    Ok(FillReport {
        config: cfg.clone(),
        records,
        seconds,
        mb_per_s: records as f64 * cfg.record_bytes as f64 / seconds / 1e6,
    })
}

/// Incompressible enough not to flatter anyone: a repeating 251-byte pattern.
pub(crate) fn payload(bytes: usize) -> Vec<u8> {
    (0..bytes).map(|i| (i % 251) as u8).collect()
}

/// `laminar-load latency`'s options (flattened into the command line).
#[derive(Debug, Clone, Serialize, clap::Args)]
pub struct LatencyConfig {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long)]
    pub topic: String,
    /// 0: as fast as the producer's queue accepts.
    #[arg(long, default_value_t = 5000)]
    pub records_per_s: u64,
    #[arg(long, default_value_t = 512)]
    pub record_bytes: usize,
    #[arg(long, default_value_t = 30)]
    pub duration_s: u64,
    /// 0, 1 or all.
    #[arg(long, default_value = "1")]
    pub acks: String,
    /// Give the records keys, `key-0` to `key-(N-1)` in turn (a compacted topic refuses
    /// records without one); 0: no keys.
    #[arg(long, default_value_t = 0)]
    pub keys: u64,
    /// A topic for a consumer to read from its start while the producer runs.
    #[arg(long)]
    pub catch_up_topic: Option<String>,
    /// The consumer's fetch.max.bytes and max.partition.fetch.bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub fetch_max_bytes: u64,
    /// Also write the run's latency over time (max per 100 ms, by send time) and by
    /// percentile to this file, as a series (JSON) for `laminar perf plot`.
    // Not in the report: scripts parse its config, which stays as it was.
    #[arg(long)]
    #[serde(skip)]
    pub series_out: Option<PathBuf>,
    /// The series' legend in the charts. Default: "BOOTSTRAP acks=ACKS".
    #[arg(long)]
    #[serde(skip)]
    pub label: Option<String>,
    /// Also report latency apart for even and odd windows of this many seconds of the wall
    /// clock (window k covers UNIX time [k*W, (k+1)*W)), by send time: for A/B runs where a
    /// script switches something on and off at the same boundaries, so that both sides
    /// share the machine's slow drift. 0: no windows.
    #[arg(long, default_value_t = 0)]
    #[serde(skip_serializing_if = "is_zero")]
    pub window_s: u64,
    /// Leave out records sent in the first this many seconds of each window (the switch
    /// taking effect).
    #[arg(long, default_value_t = 0)]
    #[serde(skip_serializing_if = "is_zero")]
    pub window_skip_s: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Latency by the parity of the wall-clock window it was sent in (`--window-s`).
#[derive(Debug, Serialize)]
pub struct WindowsReport {
    pub window_s: u64,
    pub skip_s: u64,
    /// Records sent in even windows (UNIX time / window_s even), outside the skipped start.
    pub even_records: u64,
    pub even_latency_us: Percentiles,
    pub odd_records: u64,
    pub odd_latency_us: Percentiles,
}

/// Two histograms, for sends in even and odd wall-clock windows.
pub(crate) struct Windows {
    window: Duration,
    skip: Duration,
    /// Wall-clock time (since the UNIX epoch) at `Recorded::start`.
    start_unix: Duration,
    histograms: [Histogram<u64>; 2],
}

impl Windows {
    fn record(&mut self, since_start: Duration, us: u64) {
        let at = self.start_unix + since_start;
        let window_nanos = self.window.as_nanos();
        let into = Duration::from_nanos((at.as_nanos() % window_nanos) as u64);
        if into < self.skip {
            return;
        }
        let parity = (at.as_nanos() / window_nanos % 2) as usize;
        self.histograms[parity].saturating_record(us.max(1));
    }

    fn report(&self) -> WindowsReport {
        WindowsReport {
            window_s: self.window.as_secs(),
            skip_s: self.skip.as_secs(),
            even_records: self.histograms[0].len(),
            even_latency_us: Percentiles::of(&self.histograms[0]),
            odd_records: self.histograms[1].len(),
            odd_latency_us: Percentiles::of(&self.histograms[1]),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ConsumerReport {
    pub topic: String,
    pub records: u64,
    pub bytes: u64,
    pub mb_per_s: f64,
}

#[derive(Debug, Serialize)]
pub struct LatencyReport {
    pub config: LatencyConfig,
    pub sent: u64,
    pub delivered: u64,
    pub failed: u64,
    /// Delivered records over the time from the first send to the last delivery.
    pub records_per_s: f64,
    pub mb_per_s: f64,
    /// From the send call to the delivery report, in microseconds.
    pub latency_us: Percentiles,
    pub consumer: Option<ConsumerReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowsReport>,
}

/// What each delivery records, under one lock: one lock per delivery either way, and the
/// time series adds only a division and a max to it.
pub(crate) struct Recorded {
    pub(crate) latency_us: Histogram<u64>,
    /// By send time since `start`.
    pub(crate) over_time: TimeSeries,
    pub(crate) windows: Option<Windows>,
    start: Instant,
}

impl Recorded {
    pub(crate) fn new(start: Instant, expected: Duration) -> Recorded {
        Recorded {
            latency_us: new_histogram(),
            over_time: TimeSeries::with_expected(OVER_TIME_BUCKET, expected),
            windows: None,
            start,
        }
    }

    /// Also keep latency apart by wall-clock window parity (`--window-s`).
    pub(crate) fn with_windows(mut self, window: Duration, skip: Duration) -> Recorded {
        assert!(
            !window.is_zero() && skip < window,
            "a window longer than its skipped start"
        );
        let start_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .saturating_sub(self.start.elapsed());
        self.windows = Some(Windows {
            window,
            skip,
            start_unix,
            histograms: [new_histogram(), new_histogram()],
        });
        self
    }
}

/// Records each delivery's latency; the opaque is when the record was handed over.
#[derive(Clone)]
pub(crate) struct Timed {
    pub(crate) recorded: Arc<Mutex<Recorded>>,
    pub(crate) delivered: Arc<AtomicU64>,
    pub(crate) failed: Arc<AtomicU64>,
}

impl ClientContext for Timed {}
impl ProducerContext for Timed {
    type DeliveryOpaque = Box<Instant>;
    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<Instant>) {
        let us = sent.elapsed().as_micros() as u64;
        match result {
            Ok(_) => {
                let mut r = self.recorded.lock().unwrap();
                r.latency_us.saturating_record(us.max(1));
                let since_start = sent.saturating_duration_since(r.start);
                r.over_time.record(since_start, us);
                if let Some(w) = &mut r.windows {
                    w.record(since_start, us);
                }
                drop(r);
                self.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A producer that sends each record as soon as it can (linger.ms=0) and records each
/// delivery's latency, for a run of about `duration`; `extra`: more librdkafka settings
/// (a SASL listener's, say).
pub(crate) fn timed_producer(
    bootstrap: &str,
    acks: &str,
    duration: Duration,
    extra: &[(String, String)],
) -> anyhow::Result<(ThreadedProducer<Timed>, Timed)> {
    let ctx = Timed {
        recorded: Arc::new(Mutex::new(Recorded::new(Instant::now(), duration))),
        delivered: Arc::new(AtomicU64::new(0)),
        failed: Arc::new(AtomicU64::new(0)),
    };
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .set("acks", acks)
        .set("message.timeout.ms", "120000");
    for (k, v) in extra {
        config.set(k, v);
    }
    let p = config
        .create_with_context(ctx.clone())
        .context("create producer")?;
    Ok((p, ctx))
}

/// Sends one record and waits for it: the producer connects and learns the topic's metadata
/// before a run's clock starts.
pub(crate) fn send_first(p: &ThreadedProducer<Timed>, topic: &str, value: &[u8]) -> anyhow::Result<()> {
    send_retrying(
        p,
        BaseRecord::with_opaque_to(topic, Box::new(Instant::now())).payload(value),
    );
    p.flush(Duration::from_secs(FLUSH_TIMEOUT_S))
        .context("first record")?;
    Ok(())
}

fn catch_up(
    bootstrap: &str,
    topic: &str,
    fetch_max_bytes: u64,
    stop: &AtomicBool,
) -> anyhow::Result<ConsumerReport> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "laminar-perf-catch-up")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", fetch_max_bytes.to_string())
        .set("max.partition.fetch.bytes", fetch_max_bytes.to_string())
        .create()
        .context("create consumer")?;
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .context("metadata of the catch-up topic")?;
    let mut tpl = TopicPartitionList::new();
    for t in md.topics() {
        for p in t.partitions() {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)?;
        }
    }
    if tpl.count() == 0 {
        bail!("catch-up topic {topic} has no partitions");
    }
    c.assign(&tpl)?;
    let started = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.context("consume")?;
            records += 1;
            bytes += m.payload_len() as u64;
        }
    }
    Ok(ConsumerReport {
        topic: topic.to_string(),
        records,
        bytes,
        mb_per_s: bytes as f64 / started.elapsed().as_secs_f64() / 1e6,
    })
}

pub fn latency(cfg: &LatencyConfig) -> anyhow::Result<LatencyReport> {
    if cfg.record_bytes == 0 || cfg.duration_s == 0 {
        bail!("--record-bytes and --duration-s must be positive");
    }
    if cfg.window_s > 0 && cfg.window_skip_s >= cfg.window_s {
        bail!("--window-skip-s must be shorter than --window-s");
    }
    // Open it now: a bad path should fail before the run, not after it.
    let series_file = match &cfg.series_out {
        Some(path) => Some(File::create(path).with_context(|| format!("create {}", path.display()))?),
        None => None,
    };
    let duration = Duration::from_secs(cfg.duration_s);
    let (p, ctx) = timed_producer(&cfg.bootstrap, &cfg.acks, duration, &[])?;
    let value = payload(cfg.record_bytes);
    let key = |i: u64| (cfg.keys > 0).then(|| format!("key-{}", i % cfg.keys));
    match key(0) {
        None => send_first(&p, &cfg.topic, &value)?,
        Some(k) => {
            send_retrying(
                &p,
                BaseRecord::with_opaque_to(&cfg.topic, Box::new(Instant::now()))
                    .key(k.as_bytes())
                    .payload(&value[..]),
            );
            p.flush(Duration::from_secs(FLUSH_TIMEOUT_S))
                .context("first record")?;
        }
    }

    let stop = AtomicBool::new(false);
    let (sent, consumer, seconds) = std::thread::scope(|s| -> anyhow::Result<_> {
        let consumer = cfg.catch_up_topic.as_ref().map(|topic| {
            let stop = &stop;
            s.spawn(move || catch_up(&cfg.bootstrap, topic, cfg.fetch_max_bytes, stop))
        });
        if consumer.is_some() {
            // Let the consumer's first fetches start.
            std::thread::sleep(Duration::from_secs(1));
        }
        // A fixed rate, or with 0 as fast as the producer's queue accepts for the duration.
        let interval =
            (cfg.records_per_s > 0).then(|| Duration::from_secs_f64(1.0 / cfg.records_per_s as f64));
        let start = Instant::now();
        // Forget the first record; the time series counts from here.
        let mut recorded = Recorded::new(start, duration);
        if cfg.window_s > 0 {
            recorded = recorded.with_windows(
                Duration::from_secs(cfg.window_s),
                Duration::from_secs(cfg.window_skip_s),
            );
        }
        *ctx.recorded.lock().unwrap() = recorded;
        let mut total = 0u64;
        loop {
            match interval {
                Some(interval) => {
                    if total == cfg.records_per_s * cfg.duration_s {
                        break;
                    }
                    let due = start + interval.mul_f64(total as f64);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
                None if start.elapsed() >= duration => break,
                None => {}
            }
            total += 1;
            let rec = BaseRecord::with_opaque_to(&cfg.topic, Box::new(Instant::now())).payload(&value[..]);
            let k = key(total);
            match &k {
                None => send_retrying(&p, rec),
                Some(k) => send_retrying(&p, rec.key(k.as_bytes())),
            }
        }
        let sending = start.elapsed();
        p.flush(Duration::from_secs(FLUSH_TIMEOUT_S)).context("flush")?;
        let seconds = start.elapsed().max(sending).as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let consumer = match consumer {
            Some(h) => Some(h.join().expect("consumer thread")?),
            None => None,
        };
        Ok((total, consumer, seconds))
    })?;
    let recorded = ctx.recorded.lock().unwrap();
    let latency = recorded.latency_us.clone();
    let windows = recorded.windows.as_ref().map(Windows::report);
    if let Some(file) = series_file {
        let label = cfg
            .label
            .clone()
            .unwrap_or_else(|| format!("{} acks={}", cfg.bootstrap, cfg.acks));
        let path = cfg.series_out.as_ref().expect("opened from series_out");
        Series::from_histogram(label, &latency)
            .with_over_time(&recorded.over_time)
            .with_unit_note(format!(
                "produce latency, send to delivery report, {} of {} B records; over time: max per {} ms by send time",
                match cfg.records_per_s {
                    0 => "as many as the producer takes".to_string(),
                    rate => format!("{rate}/s"),
                },
                cfg.record_bytes,
                OVER_TIME_BUCKET.as_millis()
            ))
            .write_json_to(file)
            .with_context(|| format!("write {}", path.display()))?;
    }
    drop(recorded);
    let delivered = ctx.delivered.load(Ordering::Relaxed).saturating_sub(1);
    Ok(LatencyReport {
        config: cfg.clone(),
        sent,
        delivered,
        records_per_s: delivered as f64 / seconds,
        mb_per_s: delivered as f64 * cfg.record_bytes as f64 / seconds / 1e6,
        failed: ctx.failed.load(Ordering::Relaxed),
        latency_us: Percentiles::of(&latency),
        consumer,
        windows,
    })
}

impl LatencyReport {
    pub fn print_table(&self) {
        let c = &self.config;
        println!(
            "produce {} records/s of {} B to {} (acks={}) for {} s against {}",
            c.records_per_s, c.record_bytes, c.topic, c.acks, c.duration_s, c.bootstrap
        );
        let l = &self.latency_us;
        println!(
            "  delivered {} of {} ({} failed), {:.0} records/s, {:.1} MB/s; latency us p50 {} p99 {} p99.9 {} max {}",
            self.delivered, self.sent, self.failed, self.records_per_s, self.mb_per_s, l.p50, l.p99, l.p999, l.max
        );
        if let Some(r) = &self.consumer {
            println!(
                "  consumer of {} from the start: {} records, {:.1} MB/s",
                r.topic, r.records, r.mb_per_s
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_split_by_wall_clock_parity_and_skip_each_start() {
        let mut w = Windows {
            window: Duration::from_secs(10),
            skip: Duration::from_secs(2),
            // The run started 5 s into window 100 (even).
            start_unix: Duration::from_secs(1005),
            histograms: [new_histogram(), new_histogram()],
        };
        w.record(Duration::from_secs(1), 100); // 1006: even window
        w.record(Duration::from_millis(5_500), 7_000); // 1010.5: odd window, skipped start
        w.record(Duration::from_secs(8), 300); // 1013: odd window
        w.record(Duration::from_secs(9), 400); // 1014: odd window
        w.record(Duration::from_millis(16_900), 900); // 1021.9: even window, skipped
        w.record(Duration::from_secs(17), 500); // 1022: even window, just past the skip
        let r = w.report();
        assert_eq!((r.even_records, r.odd_records), (2, 2));
        assert_eq!(r.even_latency_us.max, 500);
        assert_eq!(r.odd_latency_us.max, 400);
        assert!(r.odd_latency_us.p50 >= 300 && r.odd_latency_us.p50 < 305);
    }
}
