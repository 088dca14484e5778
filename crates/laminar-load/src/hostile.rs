//! `laminar-load hostile`: hostile clients against any Kafka-compatible broker, one kind at a
//! time, while a well-behaved producer (librdkafka) sends at a fixed rate. For each phase it
//! reports the well-behaved producer's latency, the broker's resident memory (from
//! `/proc/PID/status`, given `--broker-pid`) and what the hostile clients saw: an answer with
//! an error code, a closed connection, or nothing.
//!
//! The kinds (issue 10, item 5): idle connections; consumers that send fetches and never read
//! the responses; a connection flood; frames that announce 100 MB and never send it;
//! decompression bombs; requests with huge counts. The hostile connections are opened before
//! a phase's clock starts, so a phase measures the broker while it holds them. Phases whose
//! remedy is a broker timeout (responses never read, frames never finished) last
//! `--long-phase-s`, long enough to see whether the broker ends them.
//!
//! A baseline phase (no hostile clients) runs first and after every attack, and with
//! `--cycles K` the attacks run K times over. Each attack is compared with the baselines
//! right before and after it, and `pooled` merges every occurrence of a kind (and of its
//! neighbouring baselines): on a small shared machine the latency drifts over minutes, and a
//! comparison with one baseline at the start measured that drift as much as the attack.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use laminar_metrics::{new_histogram, Histogram, Percentiles};
use laminar_records::varint::write_varint;
use laminar_records::{crc_of, BatchBuilder, Compression, RecordSpec};
use rdkafka::producer::{BaseRecord, Producer};
use serde::Serialize;

use crate::client_perf::{
    self, payload, send_first, send_retrying, timed_producer, Recorded, FLUSH_TIMEOUT_S,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// Connections that connect and send nothing.
    Idle,
    /// Consumers that send fetches of 1 MiB and never read a response.
    NonReading,
    /// Connect, ask ApiVersions (or not), close, as fast as possible.
    Flood,
    /// Frames whose size prefix announces --unfinished-frame-bytes and whose body never comes,
    /// and a few announcing more than any broker accepts.
    UnfinishedFrames,
    /// Produce requests whose compressed batches expand to 100 MiB (gzip) and 1 GiB (zstd).
    Bombs,
    /// Requests whose array counts and lengths claim far more than the frame holds.
    HugeCounts,
    /// Before authentication, at once: --unfinished-frames connections that each send
    /// --unfinished-frame-sent-bytes of a frame and stop, and the connection flood (at
    /// --flood-per-s): what a SASL listener takes from anyone who reaches it.
    Unauthenticated,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::Idle => "idle-connections",
            Attack::NonReading => "non-reading-consumers",
            Attack::Flood => "connection-flood",
            Attack::UnfinishedFrames => "unfinished-frames",
            Attack::Bombs => "decompression-bombs",
            Attack::HugeCounts => "huge-counts",
            Attack::Unauthenticated => "unauthenticated",
        }
    }
}

#[derive(Debug, Clone, Serialize, clap::Args)]
pub struct HostileConfig {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// The well-behaved producer's topic (one partition).
    #[arg(long, default_value = "hostile-bystander")]
    pub topic: String,
    /// Filled with --bulk-bytes first: what the non-reading consumers fetch.
    #[arg(long, default_value = "hostile-bulk")]
    pub bulk_topic: String,
    #[arg(long, default_value_t = 64 << 20)]
    pub bulk_bytes: u64,
    /// Where the bombs go, one partition per bomb thread.
    #[arg(long, default_value = "hostile-bombs")]
    pub bomb_topic: String,
    #[arg(long, default_value_t = 1000)]
    pub records_per_s: u64,
    #[arg(long, default_value_t = 512)]
    pub record_bytes: usize,
    /// 0, 1 or all: the well-behaved producer's acks.
    #[arg(long, default_value = "1")]
    pub acks: String,
    /// How long each phase is measured.
    #[arg(long, default_value_t = 30)]
    pub phase_s: u64,
    /// How long the phases of never-read responses and never-finished frames are measured.
    #[arg(long, default_value_t = 75)]
    pub long_phase_s: u64,
    /// The broker's process id, to sample its resident memory.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// The attacks, in order; a baseline phase runs first and after each of them.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [
        Attack::Idle, Attack::NonReading, Attack::Flood, Attack::Bombs, Attack::HugeCounts,
        Attack::UnfinishedFrames,
    ])]
    pub attacks: Vec<Attack>,
    #[arg(long, default_value_t = 10_000)]
    pub idle_connections: usize,
    #[arg(long, default_value_t = 1000)]
    pub non_reading_consumers: usize,
    /// Fetches each non-reading consumer sends before it stops reading.
    #[arg(long, default_value_t = 4)]
    pub fetches_per_consumer: usize,
    #[arg(long, default_value_t = 1)]
    pub flood_threads: usize,
    #[arg(long, default_value_t = 100)]
    pub unfinished_frames: usize,
    #[arg(long, default_value_t = 100_000_000)]
    pub unfinished_frame_bytes: i32,
    /// How much of each unfinished frame is sent (its header and a body of zeros).
    #[arg(long, default_value_t = 1024)]
    pub unfinished_frame_sent_bytes: usize,
    /// The flood's connections per second at most (0: as fast as it can).
    #[arg(long, default_value_t = 0)]
    pub flood_per_s: u64,
    /// More librdkafka settings for the well-behaved producer and the admin client that
    /// makes the topics (`security.protocol=SASL_PLAINTEXT`, `sasl.username=alice`, ...);
    /// may be repeated.
    #[arg(long = "client-config", value_parser = key_value)]
    pub client_config: Vec<(String, String)>,
    #[arg(long, default_value_t = 4)]
    pub bomb_threads: usize,
    /// How many times the attacks run, each followed by a baseline.
    #[arg(long, default_value_t = 1)]
    pub cycles: usize,
}

/// What the hostile clients of one phase saw, by outcome.
type Outcomes = BTreeMap<String, u64>;

fn note(o: &mut Outcomes, what: impl Into<String>) {
    *o.entry(what.into()).or_default() += 1;
}

#[derive(Debug, Serialize)]
pub struct PhaseReport {
    pub phase: String,
    pub seconds: f64,
    pub sent: u64,
    pub delivered: u64,
    pub failed: u64,
    /// The well-behaved producer: send to delivery report.
    pub produce_us: Percentiles,
    /// This phase's p99 over that of the baselines right before and after it, merged (for
    /// a baseline: over the first baseline's).
    pub p99_vs_baseline: f64,
    pub broker_rss_max_mib: Option<f64>,
    pub broker_rss_end_mib: Option<f64>,
    /// Whether the broker answered an ApiVersions on a new connection after the phase.
    pub broker_answers_after: bool,
    pub outcomes: Outcomes,
}

/// Every occurrence of one attack, merged, against its neighbouring baselines, merged.
#[derive(Debug, Serialize)]
pub struct PooledReport {
    pub phase: String,
    pub occurrences: usize,
    pub produce_us: Percentiles,
    pub baseline_us: Percentiles,
    pub p99_vs_baseline: f64,
    pub broker_rss_max_mib: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct HostileReport {
    pub config: HostileConfig,
    pub phases: Vec<PhaseReport>,
    pub pooled: Vec<PooledReport>,
}

/// The phases in order: a baseline, then each attack followed by a baseline, `cycles` times.
fn plan(attacks: &[Attack], cycles: usize) -> Vec<Option<Attack>> {
    let mut plan = vec![None];
    for _ in 0..cycles {
        for a in attacks {
            plan.push(Some(*a));
            plan.push(None);
        }
    }
    plan
}

fn ratio(p99_us: u64, baseline_p99_us: u64) -> f64 {
    p99_us as f64 / baseline_p99_us.max(1) as f64
}

/// Fills in each attack's ratio to its neighbouring baselines, and pools each kind.
/// `latencies[i]` is phase i's histogram; phases alternate baseline, attack, baseline, ...
fn compare(phases: &mut [PhaseReport], latencies: &[Histogram<u64>]) -> Vec<PooledReport> {
    let merged = |indexes: &[usize]| {
        let mut h = new_histogram();
        for &i in indexes {
            h.add(&latencies[i]).expect("same bounds");
        }
        h
    };
    let is_baseline: Vec<bool> = phases.iter().map(|p| p.phase == BASELINE).collect();
    let neighbours = |i: usize| -> Vec<usize> {
        [i.checked_sub(1), Some(i + 1)]
            .into_iter()
            .flatten()
            .filter(|&j| is_baseline.get(j) == Some(&true))
            .collect()
    };
    let first_baseline_p99 = phases.first().map_or(0, |b| b.produce_us.p99);
    let mut pooled: Vec<PooledReport> = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for (i, phase) in phases.iter_mut().enumerate() {
        if phase.phase == BASELINE {
            phase.p99_vs_baseline = ratio(phase.produce_us.p99, first_baseline_p99);
            continue;
        }
        let around = Percentiles::of(&merged(&neighbours(i)));
        phase.p99_vs_baseline = ratio(phase.produce_us.p99, around.p99);
        if !kinds.contains(&phase.phase) {
            kinds.push(phase.phase.clone());
        }
    }
    for kind in kinds {
        let at: Vec<usize> = (0..phases.len()).filter(|&i| phases[i].phase == kind).collect();
        let mut around: Vec<usize> = at.iter().flat_map(|&i| neighbours(i)).collect();
        around.sort_unstable();
        around.dedup();
        let produce_us = Percentiles::of(&merged(&at));
        let baseline_us = Percentiles::of(&merged(&around));
        pooled.push(PooledReport {
            occurrences: at.len(),
            p99_vs_baseline: ratio(produce_us.p99, baseline_us.p99),
            produce_us,
            baseline_us,
            broker_rss_max_mib: at
                .iter()
                .filter_map(|&i| phases[i].broker_rss_max_mib)
                .reduce(f64::max),
            phase: kind,
        });
    }
    pooled
}

const BASELINE: &str = "baseline";

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s}: KEY=VALUE"))
}

pub fn run(cfg: &HostileConfig) -> anyhow::Result<HostileReport> {
    if cfg.records_per_s == 0
        || cfg.phase_s == 0
        || cfg.long_phase_s == 0
        || cfg.record_bytes == 0
        || cfg.cycles == 0
    {
        bail!("--records-per-s, --phase-s, --long-phase-s, --record-bytes and --cycles must be positive");
    }
    let addr = cfg
        .bootstrap
        .to_socket_addrs()
        .with_context(|| format!("resolve {}", cfg.bootstrap))?
        .next()
        .context("no address")?;
    raise_open_files(cfg.idle_connections + cfg.non_reading_consumers + cfg.unfinished_frames + 256)?;
    crate::verify::ensure_topic_with(&cfg.bootstrap, &cfg.topic, 1, 1, &cfg.client_config)?;
    if cfg.attacks.contains(&Attack::NonReading) {
        crate::verify::ensure_topic(&cfg.bootstrap, &cfg.bulk_topic, 1)?;
        client_perf::fill(&client_perf::FillConfig {
            bootstrap: cfg.bootstrap.clone(),
            topic: cfg.bulk_topic.clone(),
            bytes: cfg.bulk_bytes,
            record_bytes: 1024,
        })?;
    }
    if cfg.attacks.contains(&Attack::Bombs) {
        crate::verify::ensure_topic(&cfg.bootstrap, &cfg.bomb_topic, cfg.bomb_threads.max(1) as i32)?;
    }
    if cfg.attacks.contains(&Attack::HugeCounts) {
        crate::verify::ensure_topic(&cfg.bootstrap, HUGE_TOPIC, 1)?;
    }
    let rss = RssSampler {
        pid: cfg.broker_pid,
        max_kib: AtomicU64::new(0),
        last_kib: AtomicU64::new(0),
    };

    let (p, ctx) = timed_producer(
        &cfg.bootstrap,
        &cfg.acks,
        Duration::from_secs(cfg.long_phase_s),
        &cfg.client_config,
    )?;
    let value = payload(cfg.record_bytes);
    send_first(&p, &cfg.topic, &value)?;

    let done = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let mut phases: Vec<PhaseReport> = Vec::new();
    let mut latencies: Vec<Histogram<u64>> = Vec::new();
    std::thread::scope(|s| -> anyhow::Result<()> {
        s.spawn(|| rss.run(&done));
        s.spawn(|| {
            let interval = Duration::from_secs_f64(1.0 / cfg.records_per_s as f64);
            let start = Instant::now();
            let mut i = 0u64;
            while !done.load(Ordering::Relaxed) {
                let due = start + interval.mul_f64(i as f64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                send_retrying(
                    &p,
                    BaseRecord::with_opaque_to(&cfg.topic, Box::new(Instant::now())).payload(&value[..]),
                );
                sent.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        });
        // A warm-up, unreported: the first seconds of a fresh producer and broker are slower.
        std::thread::sleep(Duration::from_secs(5));
        let result = (|| -> anyhow::Result<()> {
            for attack in plan(&cfg.attacks, cfg.cycles) {
                let name = attack.map_or(BASELINE, Attack::name).to_string();
                let seconds = match attack {
                    Some(Attack::NonReading | Attack::UnfinishedFrames | Attack::Unauthenticated) => {
                        cfg.long_phase_s
                    }
                    _ => cfg.phase_s,
                };
                eprintln!("phase {name}: {seconds} s");
                let stop = AtomicBool::new(false);
                let ready = AtomicBool::new(attack.is_none());
                let (outcomes, measured) = std::thread::scope(|a| -> anyhow::Result<_> {
                    let attacker = a.spawn(|| match attack {
                        None => Outcomes::new(),
                        Some(kind) => attack_run(kind, cfg, addr, &ready, &stop),
                    });
                    while !ready.load(Ordering::Relaxed) && !attacker.is_finished() {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    let d0 = ctx.delivered.load(Ordering::Relaxed);
                    let f0 = ctx.failed.load(Ordering::Relaxed);
                    let s0 = sent.load(Ordering::Relaxed);
                    let started = Instant::now();
                    *ctx.recorded.lock().unwrap() = Recorded::new(started, Duration::from_secs(seconds));
                    rss.max_kib.store(0, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_secs(seconds));
                    let latency = ctx.recorded.lock().unwrap().latency_us.clone();
                    latencies.push(latency.clone());
                    let measured = (
                        started.elapsed().as_secs_f64(),
                        sent.load(Ordering::Relaxed) - s0,
                        ctx.delivered.load(Ordering::Relaxed) - d0,
                        ctx.failed.load(Ordering::Relaxed) - f0,
                        Percentiles::of(&latency),
                        rss.max_kib.load(Ordering::Relaxed),
                        rss.last_kib.load(Ordering::Relaxed),
                    );
                    stop.store(true, Ordering::Relaxed);
                    let outcomes = attacker
                        .join()
                        .map_err(|_| anyhow::anyhow!("attack thread panicked"))?;
                    Ok((outcomes, measured))
                })?;
                let (secs, sent_n, delivered, failed, produce_us, max_kib, last_kib) = measured;
                let mib = |kib: u64| (cfg.broker_pid.is_some() && kib > 0).then(|| kib as f64 / 1024.0);
                phases.push(PhaseReport {
                    phase: name,
                    seconds: secs,
                    sent: sent_n,
                    delivered,
                    failed,
                    // Filled in at the end, when the baseline after it is known.
                    p99_vs_baseline: 0.0,
                    produce_us,
                    broker_rss_max_mib: mib(max_kib),
                    broker_rss_end_mib: mib(last_kib),
                    broker_answers_after: api_versions(addr).is_ok(),
                    outcomes,
                });
                // Let the broker close what the attack left before the next phase.
                std::thread::sleep(Duration::from_secs(2));
            }
            Ok(())
        })();
        done.store(true, Ordering::Relaxed);
        result
    })?;
    let _ = p.flush(Duration::from_secs(FLUSH_TIMEOUT_S));
    let pooled = compare(&mut phases, &latencies);
    Ok(HostileReport {
        config: cfg.clone(),
        phases,
        pooled,
    })
}

impl HostileReport {
    pub fn print_table(&self) {
        println!(
            "well-behaved producer: {} records/s of {} B, acks={}, against {}",
            self.config.records_per_s, self.config.record_bytes, self.config.acks, self.config.bootstrap
        );
        println!(
            "{:<22} {:>6} {:>9} {:>7} {:>9} {:>9} {:>9} {:>7} {:>9}  outcomes",
            "phase", "s", "delivered", "failed", "p50 ms", "p99 ms", "p99.9 ms", "p99 x", "RSS MiB"
        );
        for p in &self.phases {
            let ms = |us: u64| us as f64 / 1000.0;
            let outcomes: Vec<String> = p.outcomes.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            println!(
                "{:<22} {:>6.1} {:>9} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>7.2} {:>9}  {}",
                p.phase,
                p.seconds,
                p.delivered,
                p.failed,
                ms(p.produce_us.p50),
                ms(p.produce_us.p99),
                ms(p.produce_us.p999),
                p.p99_vs_baseline,
                p.broker_rss_max_mib.map_or("-".into(), |m| format!("{m:.0}")),
                outcomes.join("; ")
            );
        }
        println!("p99 x: over the baselines right before and after (a baseline: over the first one)");
        println!();
        println!(
            "{:<22} {:>5} {:>9} {:>9} {:>13} {:>13} {:>7} {:>9}",
            "pooled", "times", "p99 ms", "p99.9 ms", "base p99 ms", "base p99.9 ms", "p99 x", "RSS MiB"
        );
        for p in &self.pooled {
            let ms = |us: u64| us as f64 / 1000.0;
            println!(
                "{:<22} {:>5} {:>9.2} {:>9.2} {:>13.2} {:>13.2} {:>7.2} {:>9}",
                p.phase,
                p.occurrences,
                ms(p.produce_us.p99),
                ms(p.produce_us.p999),
                ms(p.baseline_us.p99),
                ms(p.baseline_us.p999),
                p.p99_vs_baseline,
                p.broker_rss_max_mib.map_or("-".into(), |m| format!("{m:.0}")),
            );
        }
    }
}

/// Samples a process's resident memory every 100 ms.
struct RssSampler {
    pid: Option<u32>,
    max_kib: AtomicU64,
    last_kib: AtomicU64,
}

impl RssSampler {
    fn run(&self, done: &AtomicBool) {
        let Some(pid) = self.pid else { return };
        while !done.load(Ordering::Relaxed) {
            let kib = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("VmRSS:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                })
                .unwrap_or(0);
            self.last_kib.store(kib, Ordering::Relaxed);
            self.max_kib.fetch_max(kib, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn raise_open_files(needed: usize) -> anyhow::Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            bail!("getrlimit: {}", std::io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            bail!("setrlimit: {}", std::io::Error::last_os_error());
        }
    }
    if (lim.rlim_max as usize) < needed {
        bail!(
            "this run needs {needed} open files and the hard limit is {}",
            lim.rlim_max
        );
    }
    Ok(())
}

fn attack_run(
    kind: Attack,
    cfg: &HostileConfig,
    addr: SocketAddr,
    ready: &AtomicBool,
    stop: &AtomicBool,
) -> Outcomes {
    match kind {
        Attack::Idle => idle(cfg, addr, ready, stop),
        Attack::NonReading => non_reading(cfg, addr, ready, stop),
        Attack::Flood => flood(cfg, addr, ready, stop),
        Attack::UnfinishedFrames => unfinished_frames(cfg, addr, ready, stop),
        Attack::Bombs => bombs(cfg, addr, ready, stop),
        Attack::HugeCounts => huge_counts(addr, ready, stop),
        Attack::Unauthenticated => unauthenticated(cfg, addr, ready, stop),
    }
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

fn wait_for(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What became of a held connection: drains what the broker sent without waiting.
fn connection_state(s: &mut TcpStream) -> &'static str {
    if s.set_nonblocking(true).is_err() {
        return "closed by the broker";
    }
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return "closed by the broker",
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return "still open",
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return "reset by the broker",
        }
    }
}

/// A new connection, or `None` with the failure noted.
fn connect(addr: SocketAddr, o: &mut Outcomes) -> Option<TcpStream> {
    match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
        Ok(s) => Some(s),
        Err(e) => {
            note(o, format!("connect failed: {}", e.kind()));
            None
        }
    }
}

fn connect_all(addr: SocketAddr, n: usize, stop: &AtomicBool, o: &mut Outcomes) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(s) = connect(addr, o) {
            held.push(s);
        }
    }
    o.insert("connected".into(), held.len() as u64);
    held
}

fn idle(cfg: &HostileConfig, addr: SocketAddr, ready: &AtomicBool, stop: &AtomicBool) -> Outcomes {
    let mut o = Outcomes::new();
    let mut held = connect_all(addr, cfg.idle_connections, stop, &mut o);
    ready.store(true, Ordering::Relaxed);
    wait_for(stop);
    for s in &mut held {
        note(&mut o, format!("at the end: {}", connection_state(s)));
    }
    o
}

fn non_reading(cfg: &HostileConfig, addr: SocketAddr, ready: &AtomicBool, stop: &AtomicBool) -> Outcomes {
    let mut o = Outcomes::new();
    let mut held = connect_all(addr, cfg.non_reading_consumers, stop, &mut o);
    // A small receive window, so that the broker's sends block soon, as behind a client that
    // has stopped reading for good.
    let per_mib_records = (1 << 20) / 1024;
    for (i, s) in held.iter_mut().enumerate() {
        let _ = socket2::SockRef::from(&*s).set_recv_buffer_size(8 << 10);
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        for k in 0..cfg.fetches_per_consumer {
            let offset = ((i * cfg.fetches_per_consumer + k) * per_mib_records) as u64
                % (cfg.bulk_bytes / 1024).max(1);
            let req = fetch_v4(&cfg.bulk_topic, 0, offset as i64, 1 << 20, (i * 100 + k) as i32);
            match s.write_all(&req) {
                Ok(()) => note(&mut o, "fetches sent"),
                Err(e) => note(&mut o, format!("send failed: {}", e.kind())),
            }
        }
    }
    ready.store(true, Ordering::Relaxed);
    wait_for(stop);
    for s in &mut held {
        note(&mut o, format!("at the end: {}", connection_state(s)));
    }
    o
}

fn flood(cfg: &HostileConfig, addr: SocketAddr, ready: &AtomicBool, stop: &AtomicBool) -> Outcomes {
    ready.store(true, Ordering::Relaxed);
    let started = Instant::now();
    let all = Mutex::new(Outcomes::new());
    std::thread::scope(|s| {
        for _ in 0..cfg.flood_threads.max(1) {
            s.spawn(|| {
                let mut o = Outcomes::new();
                let mut i = 0u64;
                // Each thread's share of --flood-per-s, paced from its start.
                let interval = (cfg.flood_per_s > 0).then(|| {
                    Duration::from_secs_f64(cfg.flood_threads.max(1) as f64 / cfg.flood_per_s as f64)
                });
                let began = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(interval) = interval {
                        let due = began + interval.mul_f64(i as f64);
                        let now = Instant::now();
                        if due > now {
                            std::thread::sleep(due - now);
                        }
                    }
                    i += 1;
                    let Some(mut c) = connect(addr, &mut o) else {
                        continue;
                    };
                    note(&mut o, "connections");
                    // Every other one closes at once, without a request.
                    if i.is_multiple_of(2) {
                        continue;
                    }
                    match ask(&mut c, &api_versions_v0(i as i32)) {
                        Ok(_) => note(&mut o, "ApiVersions answered"),
                        Err(e) => note(&mut o, format!("ApiVersions not answered: {e}")),
                    }
                }
                let mut all = all.lock().unwrap();
                for (k, v) in o {
                    *all.entry(k).or_default() += v;
                }
            });
        }
    });
    let mut o = all.into_inner().unwrap();
    let per_s = o.get("connections").copied().unwrap_or(0) as f64 / started.elapsed().as_secs_f64();
    o.insert("connections per s".into(), per_s as u64);
    o
}

fn unfinished_frames(
    cfg: &HostileConfig,
    addr: SocketAddr,
    ready: &AtomicBool,
    stop: &AtomicBool,
) -> Outcomes {
    let mut o = Outcomes::new();
    // A frame that starts like a Produce request and then stops.
    let mut start = cfg.unfinished_frame_bytes.to_be_bytes().to_vec();
    start.extend_from_slice(&request_header(0, 7, 1));
    start.resize(start.len() + cfg.unfinished_frame_sent_bytes, 0);
    let mut held = connect_all(addr, cfg.unfinished_frames, stop, &mut o);
    for s in &mut held {
        if let Err(e) = s.write_all(&start) {
            note(&mut o, format!("send failed: {}", e.kind()));
        }
    }
    // A few announce more than any broker's socket.request.max.bytes: closed at once, or not?
    let mut over = Vec::new();
    for _ in 0..10 {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            let _ = s.write_all(&(1i32 << 30).to_be_bytes());
            over.push(s);
        }
    }
    ready.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(2));
    for s in &mut over {
        note(
            &mut o,
            format!("1 GiB announced, 2 s later: {}", connection_state(s)),
        );
    }
    wait_for(stop);
    for s in &mut held {
        note(&mut o, format!("at the end: {}", connection_state(s)));
    }
    o
}

/// The unfinished frames and the flood at once, before any authentication.
fn unauthenticated(cfg: &HostileConfig, addr: SocketAddr, ready: &AtomicBool, stop: &AtomicBool) -> Outcomes {
    let frames_ready = AtomicBool::new(false);
    let (mut frames, flooded) = std::thread::scope(|s| {
        let frames = s.spawn(|| unfinished_frames(cfg, addr, &frames_ready, stop));
        while !frames_ready.load(Ordering::Relaxed) && !frames.is_finished() {
            std::thread::sleep(Duration::from_millis(20));
        }
        // The flood marks the phase ready as it starts: the frames are held by then.
        let flooded = flood(cfg, addr, ready, stop);
        (frames.join().expect("unfinished frames thread"), flooded)
    });
    for (k, v) in flooded {
        frames.insert(format!("flood: {k}"), v);
    }
    frames
}

/// `count` records of `record_bytes` zeros, encoded and compressed as a stream: the
/// uncompressed records never exist in memory.
fn bomb(codec: Compression, count: i32, record_bytes: usize) -> Vec<u8> {
    let compressed = match codec {
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            write_zero_records(&mut e, count, record_bytes);
            e.finish().expect("in memory")
        }
        Compression::Zstd => {
            let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("zstd encoder");
            write_zero_records(&mut e, count, record_bytes);
            e.finish().expect("in memory")
        }
        other => panic!("no bomb of {}", other.name()),
    };
    BatchBuilder::new(codec, 1_700_000_000_000)
        .build_precompressed(count, &compressed)
        .expect("a batch")
}

fn write_zero_records(w: &mut impl Write, count: i32, record_bytes: usize) {
    let zeros = vec![0u8; 1 << 20];
    for i in 0..count {
        let mut head = vec![0u8]; // attributes
        write_varint(&mut head, 0); // timestamp delta (a varlong 0 is the same byte)
        write_varint(&mut head, i); // offset delta
        write_varint(&mut head, -1); // null key
        write_varint(&mut head, record_bytes as i32);
        let mut framed = Vec::new();
        // The record's length: its head, its value and the header count (one byte).
        write_varint(&mut framed, (head.len() + record_bytes + 1) as i32);
        framed.extend_from_slice(&head);
        w.write_all(&framed).expect("in memory");
        let mut left = record_bytes;
        while left > 0 {
            let n = left.min(zeros.len());
            w.write_all(&zeros[..n]).expect("in memory");
            left -= n;
        }
        w.write_all(&[0]).expect("in memory"); // no headers
    }
}

fn bombs(cfg: &HostileConfig, addr: SocketAddr, ready: &AtomicBool, stop: &AtomicBool) -> Outcomes {
    let kinds = [
        ("gzip 100 MiB", bomb(Compression::Gzip, 1, 100 << 20)),
        ("zstd 1 GiB", bomb(Compression::Zstd, 1024, 1 << 20)),
    ];
    ready.store(true, Ordering::Relaxed);
    let all = Mutex::new(Outcomes::new());
    std::thread::scope(|s| {
        for t in 0..cfg.bomb_threads.max(1) {
            let (kinds, all) = (&kinds, &all);
            s.spawn(move || {
                let mut o = Outcomes::new();
                let mut conn: Option<TcpStream> = None;
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let (name, batch) = &kinds[i % kinds.len()];
                    i += 1;
                    let c = match conn.as_mut() {
                        Some(c) => c,
                        None => match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                            Ok(c) => conn.insert(c),
                            Err(e) => {
                                note(&mut o, format!("connect failed: {}", e.kind()));
                                std::thread::sleep(Duration::from_millis(100));
                                continue;
                            }
                        },
                    };
                    let req = produce_v7(&cfg.bomb_topic, t as i32, batch, i as i32);
                    match ask(c, &req) {
                        Ok(body) => match produce_error(&body, &cfg.bomb_topic) {
                            Some(code) => note(&mut o, format!("{name}: error {code}")),
                            None => note(&mut o, format!("{name}: unreadable answer")),
                        },
                        Err(e) => {
                            note(&mut o, format!("{name}: {e}"));
                            conn = None;
                        }
                    }
                }
                let mut all = all.lock().unwrap();
                for (k, v) in o {
                    *all.entry(k).or_default() += v;
                }
            });
        }
    });
    all.into_inner().unwrap()
}

/// The topic the huge-count requests name (it exists, so that a batch reaches validation).
const HUGE_TOPIC: &str = "hostile-huge";

fn huge_counts(addr: SocketAddr, ready: &AtomicBool, stop: &AtomicBool) -> Outcomes {
    let mut metadata = request_header(3, 1, 1);
    metadata.extend_from_slice(&(1i32 << 30).to_be_bytes());

    let mut produce_topics = request_header(0, 7, 2);
    produce_topics.extend_from_slice(&(-1i16).to_be_bytes());
    produce_topics.extend_from_slice(&1i16.to_be_bytes());
    produce_topics.extend_from_slice(&30_000i32.to_be_bytes());
    produce_topics.extend_from_slice(&i32::MAX.to_be_bytes());

    let mut fetch_partitions = request_header(1, 4, 3);
    for v in [-1i32, 100, 1, 1 << 20] {
        fetch_partitions.extend_from_slice(&v.to_be_bytes());
    }
    fetch_partitions.push(0);
    fetch_partitions.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut fetch_partitions, HUGE_TOPIC);
    fetch_partitions.extend_from_slice(&i32::MAX.to_be_bytes());

    // A well-formed batch of one record whose header claims 2^31-1 records.
    let mut b = BatchBuilder::new(Compression::None, 1_700_000_000_000);
    b.push(RecordSpec {
        timestamp_ms: 1_700_000_000_000,
        value: Some(vec![1u8; 64]),
        ..Default::default()
    });
    let mut batch = b.build().expect("a batch");
    batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc_of(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let records_count = unframed(&produce_v7(HUGE_TOPIC, 0, &batch, 4));

    let mut client_id = Vec::new();
    client_id.extend_from_slice(&18i16.to_be_bytes());
    client_id.extend_from_slice(&0i16.to_be_bytes());
    client_id.extend_from_slice(&5i32.to_be_bytes());
    client_id.extend_from_slice(&i16::MAX.to_be_bytes());
    client_id.extend_from_slice(b"short");

    let mut records_bytes = unframed(&produce_v7(HUGE_TOPIC, 0, &batch, 6));
    let at = records_bytes.len() - batch.len() - 4;
    records_bytes[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());

    let cases: [(&str, Vec<u8>); 6] = [
        ("Metadata with 2^30 topics", metadata),
        ("Produce with 2^31-1 topics", produce_topics),
        ("Fetch with 2^31-1 partitions", fetch_partitions),
        ("a batch claiming 2^31-1 records", records_count),
        ("a client id of 32767 bytes in 5", client_id),
        ("records of 2^31-1 bytes", records_bytes),
    ];
    ready.store(true, Ordering::Relaxed);
    let mut o = Outcomes::new();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let (name, body) = &cases[i % cases.len()];
        i += 1;
        let Some(mut c) = connect(addr, &mut o) else {
            continue;
        };
        let mut framed = (body.len() as i32).to_be_bytes().to_vec();
        framed.extend_from_slice(body);
        match ask(&mut c, &framed) {
            Ok(answer) if name.starts_with("a batch") => match produce_error(&answer, HUGE_TOPIC) {
                Some(code) => note(&mut o, format!("{name}: error {code}")),
                None => note(&mut o, format!("{name}: unreadable answer")),
            },
            Ok(_) => note(&mut o, format!("{name}: answered")),
            Err(e) => note(&mut o, format!("{name}: {e}")),
        }
    }
    o
}

// The few requests the attacks send, in the Kafka wire format, hand-built because most of
// them are deliberately wrong.

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Request header v1: api key, version, correlation id, client id.
fn request_header(api_key: i16, version: i16, correlation_id: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&api_key.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    put_str(&mut out, "laminar-perf-hostile");
    out
}

fn framed(body: Vec<u8>) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn unframed(frame: &[u8]) -> Vec<u8> {
    frame[4..].to_vec()
}

fn api_versions_v0(correlation_id: i32) -> Vec<u8> {
    framed(request_header(18, 0, correlation_id))
}

pub(crate) fn fetch_v4(
    topic: &str,
    partition: i32,
    offset: i64,
    max_bytes: i32,
    correlation_id: i32,
) -> Vec<u8> {
    let mut b = request_header(1, 4, correlation_id);
    b.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    b.extend_from_slice(&500i32.to_be_bytes()); // max wait ms
    b.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    b.extend_from_slice(&max_bytes.to_be_bytes());
    b.push(0); // read_uncommitted
    b.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut b, topic);
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&partition.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&max_bytes.to_be_bytes());
    framed(b)
}

/// Produce v7 (the first with zstd; the same layout as v3), acks=1, one partition.
fn produce_v7(topic: &str, partition: i32, records: &[u8], correlation_id: i32) -> Vec<u8> {
    let mut b = request_header(0, 7, correlation_id);
    b.extend_from_slice(&(-1i16).to_be_bytes()); // no transactional id
    b.extend_from_slice(&1i16.to_be_bytes());
    b.extend_from_slice(&30_000i32.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    put_str(&mut b, topic);
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&partition.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(records);
    framed(b)
}

/// The error code of the one partition of a Produce v3-v8 answer.
fn produce_error(body: &[u8], topic: &str) -> Option<i16> {
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    Some(i16::from_be_bytes(body.get(at..at + 2)?.try_into().ok()?))
}

/// Sends one request and reads one answer's body; a closed connection or no answer in time
/// is an error naming which.
fn ask(s: &mut TcpStream, request: &[u8]) -> Result<Vec<u8>, &'static str> {
    s.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(|_| "closed")?;
    s.set_write_timeout(Some(ANSWER_TIMEOUT)).map_err(|_| "closed")?;
    s.write_all(request).map_err(|_| "closed while sending")?;
    let mut size = [0u8; 4];
    s.read_exact(&mut size).map_err(|e| match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => "no answer in 10 s",
        _ => "closed without an answer",
    })?;
    let n = i32::from_be_bytes(size);
    if !(0..=256 << 20).contains(&n) {
        return Err("answer of a bad size");
    }
    let mut body = vec![0u8; n as usize];
    s.read_exact(&mut body).map_err(|_| "closed in the answer")?;
    Ok(body)
}

fn api_versions(addr: SocketAddr) -> Result<Vec<u8>, &'static str> {
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(|_| "connect failed")?;
    ask(&mut s, &api_versions_v0(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, latencies_ms: &[u64]) -> (PhaseReport, Histogram<u64>) {
        let mut h = new_histogram();
        for ms in latencies_ms {
            h.record(ms * 1000).unwrap();
        }
        let report = PhaseReport {
            phase: name.to_string(),
            seconds: 1.0,
            sent: 0,
            delivered: 0,
            failed: 0,
            produce_us: Percentiles::of(&h),
            p99_vs_baseline: 0.0,
            broker_rss_max_mib: Some(latencies_ms.len() as f64),
            broker_rss_end_mib: None,
            broker_answers_after: true,
            outcomes: Outcomes::new(),
        };
        (report, h)
    }

    #[test]
    fn the_plan_puts_a_baseline_after_every_attack() {
        assert_eq!(
            plan(&[Attack::Idle, Attack::Bombs], 2),
            vec![
                None,
                Some(Attack::Idle),
                None,
                Some(Attack::Bombs),
                None,
                Some(Attack::Idle),
                None,
                Some(Attack::Bombs),
                None
            ]
        );
    }

    #[test]
    fn attacks_are_compared_with_their_neighbouring_baselines_and_pooled() {
        // The machine drifts: the first baseline is fast, the later ones slow.
        let (mut phases, latencies): (Vec<_>, Vec<_>) = [
            phase(BASELINE, &[1; 100]),
            phase("idle-connections", &[4; 100]),
            phase(BASELINE, &[4; 100]),
            phase("idle-connections", &[6; 100]),
            phase(BASELINE, &[6; 100]),
        ]
        .into_iter()
        .unzip();
        let pooled = compare(&mut phases, &latencies);
        // Against baselines of 1 and 4 ms, merged: their p99 is 4 ms.
        assert_eq!(phases[1].p99_vs_baseline, 1.0);
        assert_eq!(phases[3].p99_vs_baseline, 1.0);
        assert!(
            (phases[2].p99_vs_baseline - 4.0).abs() < 0.01,
            "a baseline against the first"
        );
        assert_eq!(pooled.len(), 1);
        let idle = &pooled[0];
        assert_eq!(idle.occurrences, 2);
        assert_eq!(idle.p99_vs_baseline, 1.0);
        assert_eq!(idle.broker_rss_max_mib, Some(100.0));
        assert!(idle.baseline_us.p50 >= 4000 && idle.baseline_us.p50 < 4010);
    }
}
