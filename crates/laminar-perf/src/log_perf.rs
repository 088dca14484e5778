//! `laminar perf log`: the log performance suite that KAFKA-545 asked for.
//!
//! It drives the storage engine in-process, with no network: writer threads append
//! batches round-robin over the partitions while reader threads follow every partition
//! from its start and verify each batch's CRC. Flushing runs on the store's own flusher
//! threads, exactly as in the broker, so its interference with appends is what is measured.
//! With `series_out` it also saves the append (and durable) latency over time and by
//! percentile, for `laminar perf plot`.

use std::collections::VecDeque;
use std::fs::File;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use laminar_records::{validate_batches, BatchBuilder, Compression, RecordSpec};
use laminar_storage::backend::{read_exact_at, RealStorage};
use laminar_storage::{FlushWait, Log, LogConfig, LogId, Offset, Store, StoreConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use laminar_metrics::{new_histogram, Histogram, Percentiles};

use crate::plot::{self, Series, TimeSeries, OVER_TIME_BUCKET};

/// Distinct pre-built batches per writer; appends cycle through them.
const BATCHES_PER_WRITER: usize = 8;
/// How long a reader that has caught up waits before polling again.
const READER_IDLE_WAIT_US: u64 = 100;
const PROGRESS_INTERVAL_MS: u64 = 500;

#[derive(Debug, Clone, Serialize)]
pub struct LogPerfConfig {
    pub dir: PathBuf,
    pub partitions: u32,
    pub message_size: usize,
    pub set_size: usize,
    #[serde(serialize_with = "ser_compression")]
    pub compression: Compression,
    pub messages: u64,
    pub readers: usize,
    pub writers: usize,
    pub read_bytes: u64,
    /// Open-loop target rate over all writers; `None` appends as fast as possible.
    pub records_per_s: Option<u64>,
    pub flush_interval_ms: Option<u64>,
    pub flush_messages: Option<u64>,
    pub segment_bytes: u64,
    pub preallocate_bytes: u64,
    /// Durable mode: every append waits for the fsync that covers it, as `acks=all` does,
    /// with at most this many appends per writer waiting at once (a producer's
    /// `max.in.flight.requests.per.connection`). `None`: appends wait for nothing.
    pub durable_inflight: Option<usize>,
    /// The store's flusher threads (shared by every partition).
    pub flush_threads: usize,
    pub keep: bool,
    /// Also write the append latency (and in durable mode the durable latency) over time
    /// (max per 100 ms, by start or due time) and by percentile to this file, as series
    /// (JSON) for `laminar perf plot`.
    // Not in the report: scripts parse its config, which stays as it was.
    #[serde(skip)]
    pub series_out: Option<PathBuf>,
    /// The append series' legend; the durable one is "LABEL durable". Default:
    /// [`LogPerfConfig::default_label`].
    #[serde(skip)]
    pub label: Option<String>,
}

/// The store's default number of flusher threads, the broker's too.
pub fn default_flush_threads() -> usize {
    StoreConfig::default().flush_threads
}

impl LogPerfConfig {
    /// "perf log 4p 1000000/s flush 100ms": partitions, rate (or "max") and flushing
    /// (interval, record count or "off"); in durable mode also "inflight N" (not "durable",
    /// which the durable series adds: "perf log 4p max flush off inflight 5 durable").
    pub fn default_label(&self) -> String {
        let rate = match self.records_per_s {
            Some(r) => format!("{r}/s"),
            None => "max".to_string(),
        };
        let flush = match (self.flush_interval_ms, self.flush_messages) {
            (None, None) => "off".to_string(),
            (Some(ms), None) => format!("{ms}ms"),
            (None, Some(n)) => format!("every {n} records"),
            (Some(ms), Some(n)) => format!("{ms}ms or {n} records"),
        };
        let durable = match self.durable_inflight {
            Some(n) => format!(" inflight {n}"),
            None => String::new(),
        };
        format!("perf log {}p {rate} flush {flush}{durable}", self.partitions)
    }
}

fn ser_compression<S: serde::Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.name())
}

#[derive(Debug, Serialize)]
pub struct PhaseReport {
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    pub latency_us: Percentiles,
}

#[derive(Debug, Serialize)]
pub struct FlushReport {
    /// Flushes that had data to sync (one per log per flush).
    pub count: u64,
    /// Latency of each `fdatasync` of a segment data file.
    pub latency_us: Percentiles,
}

/// Latency of each kind of disk call the storage engine made during the run.
#[derive(Debug, Serialize)]
pub struct DiskReport {
    pub write_us: Percentiles,
    pub allocate_us: Percentiles,
    pub allocate_count: u64,
    pub fsync_us: Percentiles,
    pub metadata_fsync_us: Percentiles,
}

#[derive(Debug, Serialize)]
pub struct LogPerfReport {
    pub config: serde_json::Value,
    /// The append calls: latency from the call (or, at a fixed rate, from when it was due)
    /// to its return. In durable mode the rate counts until the last append was durable.
    pub append: PhaseReport,
    /// Durable mode only: latency from the append call (or when it was due) to the end of
    /// the fsync that covered it, which is what an `acks=all` producer waits for.
    pub durable: Option<PhaseReport>,
    pub read: PhaseReport,
    pub flush: FlushReport,
    pub disk: DiskReport,
}

/// A message value that is about half compressible: the first half random bytes, the
/// second half a repeated 16-byte pattern.
fn message_value(rng: &mut SmallRng, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    let half = size / 2;
    rng.fill(&mut v[..half]);
    for (i, b) in v[half..].iter_mut().enumerate() {
        *b = b"laminar-perf-log"[i % 16];
    }
    v
}

fn build_batches(cfg: &LogPerfConfig, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let now = laminar_storage::now_ms();
    (0..BATCHES_PER_WRITER)
        .map(|_| {
            let mut b = BatchBuilder::new(cfg.compression, now);
            for _ in 0..cfg.set_size {
                b.push(RecordSpec {
                    timestamp_ms: now,
                    key: None,
                    value: Some(message_value(&mut rng, cfg.message_size)),
                    headers: vec![],
                });
            }
            b.build().expect("batch builds")
        })
        .collect()
}

struct WriterResult {
    latency: Histogram<u64>,
    durable_latency: Histogram<u64>,
    /// Append latency by start (or due) time since the run started.
    over_time: TimeSeries,
    /// Durable latency by the same time.
    durable_over_time: TimeSeries,
    records: u64,
    bytes: u64,
    finished: Instant,
}

struct ReaderResult {
    latency: Histogram<u64>,
    records: u64,
    bytes: u64,
    elapsed: Duration,
}

/// One writer's latencies of one kind: a histogram, and a time series by start time since
/// `run_start`. Recording is a clock subtraction, a histogram record and a bucket max.
struct Recorder {
    latency: Histogram<u64>,
    over_time: TimeSeries,
    run_start: Instant,
}

impl Recorder {
    fn new(run_start: Instant, expected: Option<Duration>) -> Recorder {
        Recorder {
            latency: new_histogram(),
            over_time: match expected {
                Some(e) => TimeSeries::with_expected(OVER_TIME_BUCKET, e),
                None => TimeSeries::new(OVER_TIME_BUCKET),
            },
            run_start,
        }
    }

    /// An operation that started (or was due) at `started` took until `done`.
    #[inline]
    fn record(&mut self, started: Instant, done: Instant) {
        let us = (done.saturating_duration_since(started).as_micros() as u64).max(1);
        self.latency.saturating_record(us);
        self.over_time
            .record(started.saturating_duration_since(self.run_start), us);
    }
}

fn run_writer(
    logs: &[Arc<Log>],
    cfg: &LogPerfConfig,
    writer: usize,
    appends: u64,
    progress: &AtomicU64,
    run_start: Instant,
) -> anyhow::Result<WriterResult> {
    let mut batches = build_batches(cfg, writer as u64);
    // At a fixed rate the run's length is known: room for it up front.
    let expected = cfg
        .records_per_s
        .map(|rate| Duration::from_secs_f64(cfg.messages as f64 / rate.max(1) as f64));
    let mut appended = Recorder::new(run_start, expected);
    let mut durable = Recorder::new(run_start, expected.filter(|_| cfg.durable_inflight.is_some()));
    // Appends whose fsync has not been seen yet, oldest first (their offsets, and so their
    // fsyncs, complete in this order).
    let mut waiting: VecDeque<(Instant, FlushWait)> = VecDeque::new();
    let (mut records, mut bytes) = (0u64, 0u64);
    // With a target rate each writer appends on its own fixed schedule (open loop). An
    // append that starts late counts its latency from when it was due, so a writer that
    // falls behind reports its lateness instead of hiding it (no coordinated omission).
    let append_interval = cfg
        .records_per_s
        .map(|rate| Duration::from_secs_f64(cfg.set_size as f64 * cfg.writers as f64 / rate.max(1) as f64));
    if append_interval.is_some() {
        // Sleeps of ~100 µs would otherwise overshoot by the default 50 µs timer slack.
        // SAFETY: prctl with integer arguments only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    }
    let schedule_start = Instant::now();
    for i in 0..appends {
        // Writers interleave so that together they cover the partitions round-robin.
        let log = &logs[((i as usize) * cfg.writers + writer) % logs.len()];
        let batch = &mut batches[i as usize % BATCHES_PER_WRITER];
        let t = match append_interval {
            None => Instant::now(),
            Some(interval) => {
                let due = schedule_start + interval.mul_f64(i as f64);
                let now = Instant::now();
                if due > now {
                    // On time: the append starts when the sleep ends, and the sleep's own
                    // overshoot is not the log's latency.
                    std::thread::sleep(due - now);
                    Instant::now()
                } else {
                    due
                }
            }
        };
        let info = log
            .append(batch)
            .with_context(|| format!("append to {}", log.name()))?;
        appended.record(t, Instant::now());
        records += info.records;
        bytes += batch.len() as u64;
        progress.fetch_add(info.records, Ordering::Relaxed);
        if let Some(inflight) = cfg.durable_inflight {
            waiting.push_back((t, log.wait_flushed(info.last_offset)));
            while waiting.len() >= inflight.max(1) {
                let (t, wait) = waiting.pop_front().expect("not empty");
                record_durable(&mut durable, t, wait, log.name())?;
            }
        }
    }
    while let Some((t, wait)) = waiting.pop_front() {
        record_durable(&mut durable, t, wait, "perf")?;
    }
    Ok(WriterResult {
        latency: appended.latency,
        durable_latency: durable.latency,
        over_time: appended.over_time,
        durable_over_time: durable.over_time,
        records,
        bytes,
        finished: Instant::now(),
    })
}

/// Waits for one append's fsync and records its latency up to when the fsync completed.
fn record_durable(
    durable: &mut Recorder,
    started: Instant,
    wait: FlushWait,
    log: &str,
) -> anyhow::Result<()> {
    let (result, done) = wait.wait_completed_at();
    result.with_context(|| format!("fsync of {log}"))?;
    durable.record(started, done);
    Ok(())
}

/// Follows every partition from its start until `expected_records` have been read.
fn run_reader(
    logs: &[Arc<Log>],
    cfg: &LogPerfConfig,
    expected_records: u64,
    writers_done: &AtomicBool,
) -> anyhow::Result<ReaderResult> {
    let started = Instant::now();
    let mut latency = new_histogram();
    let mut next: Vec<Offset> = logs.iter().map(|l| l.log_start()).collect();
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut buf = Vec::new();
    while records < expected_records {
        let mut progressed = false;
        for (i, log) in logs.iter().enumerate() {
            let t = Instant::now();
            let read = log.read(next[i], cfg.read_bytes, true)?;
            let Some(range) = read.range else { continue };
            buf.resize(range.len as usize, 0);
            read_exact_at(range.file.as_ref(), &mut buf, range.position.0).context("read segment")?;
            latency.saturating_record((t.elapsed().as_micros() as u64).max(1));
            // Verification is the reader's own cost, outside the measured read.
            for (h, _, _) in validate_batches(&buf).context("reader found a corrupt batch")? {
                if h.base_offset != next[i].0 {
                    bail!(
                        "partition {i}: expected offset {}, found batch at {}",
                        next[i],
                        h.base_offset
                    );
                }
                records += h.last_offset_delta as u64 + 1;
                next[i] = Offset(h.next_offset());
            }
            bytes += range.len;
            progressed = true;
        }
        if !progressed {
            if writers_done.load(Ordering::Acquire) && logs.iter().zip(&next).all(|(l, n)| l.log_end() == *n)
            {
                bail!("reader stopped at {records} of {expected_records} records");
            }
            std::thread::sleep(Duration::from_micros(READER_IDLE_WAIT_US));
        }
    }
    Ok(ReaderResult {
        latency,
        records,
        bytes,
        elapsed: started.elapsed(),
    })
}

fn phase(records: u64, bytes: u64, elapsed: Duration, latency: &Histogram<u64>) -> PhaseReport {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    PhaseReport {
        records,
        bytes,
        seconds,
        records_per_s: records as f64 / seconds,
        mb_per_s: bytes as f64 / seconds / 1e6,
        latency_us: Percentiles::of(latency),
    }
}

pub fn run(cfg: &LogPerfConfig) -> anyhow::Result<LogPerfReport> {
    if cfg.partitions == 0 || cfg.set_size == 0 || cfg.writers == 0 || cfg.messages == 0 {
        bail!("--partitions, --set-size, --writers and --messages must be positive");
    }
    if cfg.records_per_s == Some(0) {
        bail!("--records-per-s must be positive");
    }
    let dir_existed = cfg.dir.exists();
    if dir_existed && std::fs::read_dir(&cfg.dir)?.next().is_some() {
        bail!(
            "{} is not empty: perf log needs an empty or new directory",
            cfg.dir.display()
        );
    }
    let log_config = LogConfig {
        segment_bytes: cfg.segment_bytes,
        preallocate_bytes: cfg.preallocate_bytes,
        flush_interval_ms: cfg.flush_interval_ms,
        flush_messages: cfg.flush_messages,
        retention_ms: None,
        ..LogConfig::default()
    };
    log_config.validate().map_err(anyhow::Error::msg)?;
    // Open it now: a bad path should fail before the run, not after it.
    let series_file = match &cfg.series_out {
        Some(path) => Some(File::create(path).with_context(|| format!("create {}", path.display()))?),
        None => None,
    };
    let store = Store::open(
        &cfg.dir,
        RealStorage::new(),
        StoreConfig {
            default_log: log_config.clone(),
            flush_threads: cfg.flush_threads,
            ..StoreConfig::default()
        },
    )?;
    let logs: Vec<Arc<Log>> = (0..cfg.partitions)
        .map(|p| store.create_log(&LogId::new("perf", p), log_config.clone()))
        .collect::<Result<_, _>>()?;

    let appends_total = cfg.messages.div_ceil(cfg.set_size as u64);
    let expected_records = appends_total * cfg.set_size as u64;
    let progress = AtomicU64::new(0);
    let writers_done = AtomicBool::new(false);
    let started = Instant::now();
    let (writer_results, reader_results, append_elapsed) = std::thread::scope(|s| -> anyhow::Result<_> {
        let readers: Vec<_> = (0..cfg.readers)
            .map(|r| {
                let (logs, writers_done) = (&logs, &writers_done);
                std::thread::Builder::new()
                    .name(format!("perf-reader-{r}"))
                    .spawn_scoped(s, move || run_reader(logs, cfg, expected_records, writers_done))
                    .expect("spawn reader")
            })
            .collect();
        let writers: Vec<_> = (0..cfg.writers)
            .map(|w| {
                let share = appends_total / cfg.writers as u64
                    + u64::from((w as u64) < appends_total % cfg.writers as u64);
                let (logs, progress) = (&logs, &progress);
                std::thread::Builder::new()
                    .name(format!("perf-writer-{w}"))
                    .spawn_scoped(s, move || run_writer(logs, cfg, w, share, progress, started))
                    .expect("spawn writer")
            })
            .collect();
        let tty = std::io::stderr().is_terminal();
        while writers.iter().any(|w| !w.is_finished()) {
            std::thread::sleep(Duration::from_millis(PROGRESS_INTERVAL_MS.min(50)));
            if tty && started.elapsed().as_millis() as u64 % PROGRESS_INTERVAL_MS < 50 {
                let done = progress.load(Ordering::Relaxed);
                eprint!(
                    "\r{:>5.1}%  {done} of {expected_records} records appended, {:.1} s   ",
                    100.0 * done as f64 / expected_records as f64,
                    started.elapsed().as_secs_f64()
                );
            }
        }
        writers_done.store(true, Ordering::Release);
        let writer_results = writers
            .into_iter()
            .map(|w| w.join().expect("writer panicked"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let append_elapsed = writer_results
            .iter()
            .map(|w| w.finished - started)
            .max()
            .unwrap_or_default();
        if tty {
            eprint!(
                "\rappends done in {:.1} s; waiting for readers...               ",
                append_elapsed.as_secs_f64()
            );
        }
        let reader_results = readers
            .into_iter()
            .map(|r| r.join().expect("reader panicked"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if tty {
            eprintln!();
        }
        Ok((writer_results, reader_results, append_elapsed))
    })?;

    // Snapshot flush figures before close, whose final flush would count otherwise.
    let flush_hist = store.metrics().log_flush_us.snapshot();
    let fsync_hist = store.metrics().segment_fsync_us.snapshot();
    let m = store.metrics();
    let allocate_hist = m.segment_allocate_us.snapshot();
    let disk = DiskReport {
        write_us: Percentiles::of(&m.segment_write_us.snapshot()),
        allocate_us: Percentiles::of(&allocate_hist),
        allocate_count: allocate_hist.len(),
        fsync_us: Percentiles::of(&fsync_hist),
        metadata_fsync_us: Percentiles::of(&m.metadata_fsync_us.snapshot()),
    };
    store.close()?;
    drop(logs);
    if !cfg.keep {
        // Remove what we wrote; a directory the user made (a mount point, say) stays.
        let doomed: Vec<PathBuf> = if dir_existed {
            std::fs::read_dir(&cfg.dir)?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()?
        } else {
            vec![cfg.dir.clone()]
        };
        for path in doomed {
            if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            }
            .with_context(|| format!("remove {}", path.display()))?;
        }
    }

    let mut append_latency = new_histogram();
    let mut durable_latency = new_histogram();
    let mut append_over_time = TimeSeries::new(OVER_TIME_BUCKET);
    let mut durable_over_time = TimeSeries::new(OVER_TIME_BUCKET);
    let (mut append_records, mut append_bytes) = (0, 0);
    for w in &writer_results {
        append_latency.add(&w.latency).expect("same bounds");
        durable_latency.add(&w.durable_latency).expect("same bounds");
        append_over_time.merge(&w.over_time);
        durable_over_time.merge(&w.durable_over_time);
        append_records += w.records;
        append_bytes += w.bytes;
    }
    let mut read_latency = new_histogram();
    let (mut read_records, mut read_bytes, mut read_elapsed) = (0, 0, Duration::ZERO);
    for r in &reader_results {
        read_latency.add(&r.latency).expect("same bounds");
        read_records += r.records;
        read_bytes += r.bytes;
        read_elapsed = read_elapsed.max(r.elapsed);
    }
    if let Some(file) = series_file {
        let path = cfg.series_out.as_ref().expect("opened from series_out");
        let series = latency_series(
            cfg,
            (&append_latency, &append_over_time),
            (&durable_latency, &durable_over_time),
        );
        plot::write_series_json_to(&series, file).with_context(|| format!("write {}", path.display()))?;
    }
    let mut config = serde_json::to_value(cfg)?;
    config["laminar_version"] = env!("CARGO_PKG_VERSION").into();
    config["kernel"] = kernel_release().into();
    config["cpus"] = std::thread::available_parallelism().map_or(0, |n| n.get()).into();
    Ok(LogPerfReport {
        config,
        append: phase(append_records, append_bytes, append_elapsed, &append_latency),
        durable: cfg
            .durable_inflight
            .map(|_| phase(append_records, append_bytes, append_elapsed, &durable_latency)),
        // With several readers, each reads everything: the rate is their sum.
        read: phase(read_records, read_bytes, read_elapsed, &read_latency),
        flush: FlushReport {
            count: flush_hist.len(),
            latency_us: Percentiles::of(&fsync_hist),
        },
        disk,
    })
}

/// The append series and, in durable mode, the durable one ("LABEL durable").
fn latency_series(
    cfg: &LogPerfConfig,
    append: (&Histogram<u64>, &TimeSeries),
    durable: (&Histogram<u64>, &TimeSeries),
) -> Vec<Series> {
    let label = cfg.label.clone().unwrap_or_else(|| cfg.default_label());
    let started = match cfg.records_per_s {
        Some(rate) => format!("when the append was due (at {rate} records/s)"),
        None => "the append call".to_string(),
    };
    let bucket_ms = OVER_TIME_BUCKET.as_millis();
    let mut series = vec![Series::from_histogram(label.clone(), append.0)
        .with_over_time(append.1)
        .with_unit_note(format!(
            "append latency: from {started} to its return; over time: max per {bucket_ms} ms by start"
        ))];
    if cfg.durable_inflight.is_some() {
        series.push(
            Series::from_histogram(format!("{label} durable"), durable.0)
                .with_over_time(durable.1)
                .with_unit_note(format!(
                    "durable latency: from {started} to the end of the fsync that covers it; over time: max per {bucket_ms} ms by start"
                )),
        );
    }
    series
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl LogPerfReport {
    pub fn print_table(&self) {
        let c = &self.config;
        println!(
            "laminar perf log {} on Linux {} ({} CPUs)",
            c["laminar_version"].as_str().unwrap_or(""),
            c["kernel"].as_str().unwrap_or(""),
            c["cpus"]
        );
        println!(
            "  dir {}  partitions {}  message {} B  set {}  compression {}  messages {}  writers {}  readers {}",
            c["dir"].as_str().unwrap_or(""),
            c["partitions"],
            c["message_size"],
            c["set_size"],
            c["compression"].as_str().unwrap_or(""),
            c["messages"],
            c["writers"],
            c["readers"]
        );
        println!(
            "  flush_interval_ms {}  flush_messages {}  segment_bytes {}  preallocate_bytes {}  read_bytes {}",
            c["flush_interval_ms"], c["flush_messages"], c["segment_bytes"], c["preallocate_bytes"], c["read_bytes"]
        );
        println!(
            "  records_per_s {}  durable_inflight {}  flush_threads {}",
            c["records_per_s"], c["durable_inflight"], c["flush_threads"]
        );
        println!();
        println!(
            "{:<8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "", "records/s", "MB/s", "p50 us", "p99 us", "p99.9 us", "max us"
        );
        let durable = self.durable.as_ref().map(|d| ("durable", d));
        for (name, p) in [("append", &self.append)]
            .into_iter()
            .chain(durable)
            .chain([("read", &self.read)])
        {
            let l = &p.latency_us;
            println!(
                "{name:<8} {:>12.0} {:>10.1} {:>10} {:>10} {:>10} {:>10}",
                p.records_per_s, p.mb_per_s, l.p50, l.p99, l.p999, l.max
            );
        }
        let l = &self.flush.latency_us;
        println!(
            "{:<8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "fsync",
            format!("{} flushes", self.flush.count),
            "",
            l.p50,
            l.p99,
            l.p999,
            l.max
        );
        println!();
        println!(
            "{:<21} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "disk calls", "count", "p50 us", "p99 us", "p99.9 us", "max us"
        );
        let d = &self.disk;
        for (name, n, l) in [
            ("pwrite", 0, &d.write_us),
            ("fallocate", d.allocate_count, &d.allocate_us),
            ("fdatasync", 0, &d.fsync_us),
            ("checkpoint/index/dir", 0, &d.metadata_fsync_us),
        ] {
            let n = if n == 0 { String::new() } else { n.to_string() };
            println!(
                "  {name:<19} {n:>10} {:>10} {:>10} {:>10} {:>10}",
                l.p50, l.p99, l.p999, l.max
            );
        }
    }
}
