//! Consumers idle in long poll: one connection per partition of a topic where nothing is
//! written, each sending Fetch (v4, `max_wait_ms` 500, as a consumer's default
//! `fetch.max.wait.ms`) at offset 0 again as soon as the last is answered. What a broker
//! with many quiet consumers serves; a producer's cost beside them shows what an append
//! costs them (`bench/idle_consumers.sh`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(clap::Args, Debug, Clone)]
pub struct IdleFetchersConfig {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: SocketAddr,
    /// The topic whose partitions are fetched (one connection each, partitions 0..N).
    #[arg(long)]
    pub topic: String,
    #[arg(long, default_value_t = 1000)]
    pub partitions: i32,
    /// How long to keep fetching (s).
    #[arg(long, default_value_t = 60)]
    pub duration_s: u64,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct IdleFetchersReport {
    pub connections: u64,
    pub fetches_answered: u64,
    /// Fetches answered before their 500 ms wait ended (woken by the broker).
    pub answered_early: u64,
    pub failed_connections: u64,
}

const MAX_WAIT: Duration = Duration::from_millis(500);

/// Runs the fetchers for `duration_s`; prints "ready" on stderr once every connection is
/// open.
pub fn run(cfg: &IdleFetchersConfig) -> anyhow::Result<IdleFetchersReport> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let answered = Arc::new(AtomicU64::new(0));
        let early = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut connections = Vec::new();
        let mut failed = 0;
        for p in 0..cfg.partitions {
            match TcpStream::connect(cfg.bootstrap).await {
                Ok(s) => connections.push((p, s)),
                Err(_) => failed += 1,
            }
        }
        eprintln!("ready: {} connections, {failed} failed", connections.len());
        let report_connections = connections.len() as u64;
        let tasks: Vec<_> = connections
            .into_iter()
            .map(|(p, s)| {
                let (topic, answered, early, stop) =
                    (cfg.topic.clone(), answered.clone(), early.clone(), stop.clone());
                tokio::spawn(async move { fetch_loop(s, &topic, p, &answered, &early, &stop).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(cfg.duration_s)).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
        }
        Ok(IdleFetchersReport {
            connections: report_connections,
            fetches_answered: answered.load(Ordering::Relaxed),
            answered_early: early.load(Ordering::Relaxed),
            failed_connections: failed,
        })
    })
}

async fn fetch_loop(
    mut s: TcpStream,
    topic: &str,
    partition: i32,
    answered: &AtomicU64,
    early: &AtomicU64,
    stop: &AtomicBool,
) {
    let mut body = Vec::new();
    let mut correlation_id = 0;
    while !stop.load(Ordering::Relaxed) {
        correlation_id += 1;
        let request = crate::hostile::fetch_v4(topic, partition, 0, 1 << 20, correlation_id);
        let sent = Instant::now();
        if s.write_all(&request).await.is_err() {
            return;
        }
        let mut size = [0u8; 4];
        if s.read_exact(&mut size).await.is_err() {
            return;
        }
        let n = i32::from_be_bytes(size).clamp(0, 64 << 20) as usize;
        body.resize(n, 0);
        if s.read_exact(&mut body).await.is_err() {
            return;
        }
        answered.fetch_add(1, Ordering::Relaxed);
        if sent.elapsed() < MAX_WAIT - Duration::from_millis(50) {
            early.fetch_add(1, Ordering::Relaxed);
        }
    }
}
