//! The log cleaner: compaction of logs whose `cleanup.policy` holds `compact`, as Kafka's
//! `LogCleaner`. Its own threads (one by default) look at every compacted log, measure its
//! dirty ratio, and run a pass ([`pass`]) over the dirtiest log that is due. A pass reads
//! and writes through the storage interface at a bounded byte rate, with an offset map of
//! bounded size, and swaps its output in crash-safely; it never takes the append path's
//! locks except for the moment a swap is published.

mod checkpoint;
mod offset_map;
pub mod pass;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use checkpoint::CLEANER_CHECKPOINT_FILE;
pub use offset_map::OffsetMap;
pub use pass::{PassLimits, PassStats};

use crate::error::StorageError;
use crate::log::Log;
use crate::types::now_ms;

/// The cleaner's settings, by Kafka's broker config names.
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`.
    pub enabled: bool,
    /// `log.cleaner.threads`.
    pub threads: usize,
    /// `log.cleaner.backoff.ms`: how long a thread sleeps when no log is due.
    pub backoff_ms: u64,
    pub limits: PassLimits,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enabled: true,
            threads: 1,
            backoff_ms: 15_000,
            limits: PassLimits {
                dedupe_buffer_bytes: 128 << 20,
                io_buffer_bytes: 512 << 10,
                io_max_bytes_per_s: None,
            },
        }
    }
}

/// What the cleaner reports to its owner, who logs it.
#[derive(Debug)]
pub enum CleanerEvent {
    Cleaned { log: String, stats: PassStats },
    Failed { log: String, error: StorageError },
}

pub type EventSink = Arc<dyn Fn(CleanerEvent) + Send + Sync>;

struct State {
    logs: Vec<Weak<Log>>,
    /// Logs a thread is cleaning now.
    busy: Vec<String>,
    /// Logs whose last pass failed, and when: they wait a backoff before the next.
    failed: HashMap<String, Instant>,
    wakeups: u64,
}

struct Shared {
    config: CleanerConfig,
    state: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
    sink: Mutex<Option<EventSink>>,
}

pub struct Cleaner {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Cleaner {
    /// Starts the cleaner's threads (none if it is disabled).
    pub fn start(config: CleanerConfig) -> Cleaner {
        let n = if config.enabled { config.threads.max(1) } else { 0 };
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(State {
                logs: Vec::new(),
                busy: Vec::new(),
                failed: HashMap::new(),
                wakeups: 0,
            }),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            sink: Mutex::new(None),
        });
        let threads = (0..n)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("laminar-cleaner-{i}"))
                    .spawn(move || {
                        // The cleaner is background work: at nice 19 it takes only the CPU
                        // that appends, reads and socket threads leave (measured: at normal
                        // priority it took a 5,000 records/s producer's p99 on another topic
                        // from 1.2 to 3-4 ms on 2 cores, bench/results/2026-11-23-vm-cleaner).
                        // SAFETY: setpriority on this thread's own id changes only its
                        // scheduling weight.
                        unsafe {
                            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
                        }
                        run(&shared)
                    })
                    .expect("spawn cleaner thread")
            })
            .collect();
        Cleaner { shared, threads }
    }

    pub fn register(&self, log: &Arc<Log>) {
        self.shared.state.lock().unwrap().logs.push(Arc::downgrade(log));
    }

    pub fn set_event_sink(&self, sink: EventSink) {
        *self.shared.sink.lock().unwrap() = Some(sink);
    }

    /// Looks at every log now rather than after the backoff (a config changed).
    pub fn wake(&self) {
        self.shared.state.lock().unwrap().wakeups += 1;
        self.shared.cv.notify_all();
    }

    /// Stops the threads; a pass in progress abandons its unfinished output.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Cleaner {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared) {
    let mut throttle = pass::Throttle::new(shared.config.limits.io_max_bytes_per_s);
    while !shared.stop.load(Ordering::Acquire) {
        let seen = shared.state.lock().unwrap().wakeups;
        if clean_dirtiest(shared, &mut throttle) {
            continue;
        }
        let state = shared.state.lock().unwrap();
        if state.wakeups == seen && !shared.stop.load(Ordering::Acquire) {
            let _ = shared
                .cv
                .wait_timeout(state, Duration::from_millis(shared.config.backoff_ms))
                .unwrap();
        }
    }
}

/// Measures every compacted log and cleans the dirtiest one that is due. Returns whether it
/// ran a pass.
fn clean_dirtiest(shared: &Shared, throttle: &mut pass::Throttle) -> bool {
    let backoff = Duration::from_millis(shared.config.backoff_ms);
    let logs: Vec<Arc<Log>> = {
        let mut state = shared.state.lock().unwrap();
        state.logs.retain(|w| w.strong_count() > 0);
        state.failed.retain(|_, at| at.elapsed() < backoff);
        let skip: Vec<String> = state.busy.iter().chain(state.failed.keys()).cloned().collect();
        state
            .logs
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|l| !l.is_offline_or_closed() && !skip.iter().any(|n| n == l.name()))
            .collect()
    };
    let now = now_ms();
    let mut best: Option<(f64, Arc<Log>, pass::Cleanable)> = None;
    for log in logs {
        let cleanable = match pass::examine(&log, now) {
            Ok(Some(c)) => c,
            Ok(None) => {
                log.set_dirty_ratio(0.0);
                continue;
            }
            Err(error) => {
                report_failure(shared, &log, error);
                continue;
            }
        };
        let ratio = cleanable.dirty_ratio();
        log.set_dirty_ratio(ratio);
        if cleanable.is_due(log.config().min_cleanable_dirty_ratio)
            && best.as_ref().is_none_or(|b| ratio > b.0)
        {
            best = Some((ratio, log, cleanable));
        }
    }
    let Some((_, log, cleanable)) = best else {
        return false;
    };
    {
        let mut state = shared.state.lock().unwrap();
        if state.busy.iter().any(|n| n == log.name()) {
            return false;
        }
        state.busy.push(log.name().to_string());
    }
    let metrics = log.metrics().clone();
    let result = pass::clean(
        &log,
        cleanable,
        &shared.config.limits,
        throttle,
        now_ms(),
        &shared.stop,
    );
    shared.state.lock().unwrap().busy.retain(|n| n != log.name());
    match result {
        Ok(Some(stats)) => {
            metrics.cleaner_passes.fetch_add(1, Ordering::Relaxed);
            metrics
                .cleaner_bytes_read
                .fetch_add(stats.bytes_read, Ordering::Relaxed);
            metrics
                .cleaner_bytes_written
                .fetch_add(stats.bytes_written, Ordering::Relaxed);
            metrics
                .cleaner_records_removed
                .fetch_add(stats.records_removed, Ordering::Relaxed);
            metrics.cleaner_pass_us.record(stats.elapsed);
            // The part just cleaned is clean now.
            if let Ok(Some(c)) = pass::examine(&log, now_ms()) {
                log.set_dirty_ratio(c.dirty_ratio());
            }
            if let Some(sink) = shared.sink.lock().unwrap().clone() {
                sink(CleanerEvent::Cleaned {
                    log: log.name().to_string(),
                    stats,
                });
            }
        }
        Ok(None) => {}
        Err(error) => report_failure(shared, &log, error),
    }
    true
}

fn report_failure(shared: &Shared, log: &Log, error: StorageError) {
    log.metrics().cleaner_failures.fetch_add(1, Ordering::Relaxed);
    shared
        .state
        .lock()
        .unwrap()
        .failed
        .insert(log.name().to_string(), Instant::now());
    if let Some(sink) = shared.sink.lock().unwrap().clone() {
        sink(CleanerEvent::Failed {
            log: log.name().to_string(),
            error,
        });
    }
}
