//! Storage threads: every append runs here, never on a socket thread.
//!
//! Each partition has its own queue, and at most one of its jobs runs at a time, so appends to
//! one partition keep their arrival order and the idempotence checks that run with them see
//! a consistent state. Any thread may take any partition's next job.
//!
//! A `write(2)` can block for seconds behind a slow disk (seed 002). A thread stuck in one
//! partition's job must not hold up the others, so the pool grows: when jobs are waiting, no
//! thread is free, and a running job has taken longer than `STUCK_AFTER`, a supervisor adds
//! a thread (up to `STORAGE_THREADS_MAX`); threads beyond the configured count leave again
//! after `SPARE_IDLE` without work. A stalled partition then holds one thread and its own
//! queue, and nothing else.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Jobs that may wait in the pool, over every partition, per configured thread. When the
/// pool is full, callers wait (asynchronously) for room: back-pressure, not unbounded memory.
pub const STORAGE_QUEUE_JOBS_MAX: usize = 1024;
/// The most threads the pool grows to while jobs are stuck.
pub const STORAGE_THREADS_MAX: usize = 64;
/// A job running this long is taken to be stuck on the disk.
const STUCK_AFTER: Duration = Duration::from_millis(20);
/// How often the supervisor looks for stuck jobs.
const SUPERVISE_EVERY: Duration = Duration::from_millis(5);
/// A thread beyond the configured count leaves after this long without work.
const SPARE_IDLE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

/// Storage jobs that panicked since startup (`laminar_storage_job_panics_total`).
pub static JOB_PANICS: AtomicU64 = AtomicU64::new(0);
/// Threads the pool added because jobs were stuck (`laminar_storage_threads_added_total`).
pub static THREADS_ADDED: AtomicU64 = AtomicU64::new(0);

/// A storage job panicked (a bug): the request that sent it fails, and the thread carries on
/// serving the other partitions.
#[derive(Debug, thiserror::Error)]
#[error("a storage job panicked: {0}")]
pub struct JobPanicked(pub String);

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

#[derive(Default)]
struct State {
    /// Each partition's waiting jobs, in arrival order.
    queues: HashMap<u64, VecDeque<Job>>,
    /// Partitions with waiting jobs and none running, in the order they became ready.
    ready: VecDeque<u64>,
    /// Partitions with a job running, and when it started.
    running: HashMap<u64, Instant>,
    queued: usize,
    threads: usize,
    idle: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    /// Threads the pool keeps even when idle.
    base_threads: usize,
    queued_max: usize,
}

pub struct StoragePool {
    shared: Arc<Shared>,
}

impl StoragePool {
    pub fn new(threads: usize) -> StoragePool {
        let base_threads = threads.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            base_threads,
            queued_max: STORAGE_QUEUE_JOBS_MAX * base_threads,
        });
        for _ in 0..base_threads {
            spawn_worker(&shared);
        }
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("laminar-storage-supervisor".into())
            .spawn(move || supervise(weak))
            .expect("spawn storage supervisor");
        StoragePool { shared }
    }

    /// Runs `f` after every earlier job of the partition `key` (a partition's hash). The
    /// request waits for it (its "wait" phase).
    pub async fn run<T: Send + 'static>(
        &self,
        key: u64,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, JobPanicked> {
        laminar_net::waiting(self.run_job(key, f)).await
    }

    async fn run_job<T: Send + 'static>(
        &self,
        key: u64,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, JobPanicked> {
        let (tx, rx) = oneshot::channel();
        let mut job: Option<Job> = Some(Box::new(move || {
            let _ = tx.send(f());
        }));
        loop {
            {
                let mut st = self.shared.state.lock().unwrap();
                if st.queued < self.shared.queued_max {
                    st.queued += 1;
                    let queue = st.queues.entry(key).or_default();
                    let was_idle = queue.is_empty();
                    queue.push_back(job.take().expect("queued once"));
                    if was_idle && !st.running.contains_key(&key) {
                        st.ready.push_back(key);
                        self.shared.work.notify_one();
                    }
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The sender is dropped unsent only when the job panicked.
        rx.await.map_err(|_| JobPanicked("see the broker's log".into()))
    }

    /// Threads now, including those added for stuck jobs.
    pub fn threads(&self) -> usize {
        self.shared.state.lock().unwrap().threads
    }
}

impl Drop for StoragePool {
    fn drop(&mut self) {
        self.shared.state.lock().unwrap().shutdown = true;
        self.shared.work.notify_all();
    }
}

fn spawn_worker(shared: &Arc<Shared>) {
    let n = {
        let mut st = shared.state.lock().unwrap();
        st.threads += 1;
        st.threads
    };
    let shared = shared.clone();
    std::thread::Builder::new()
        .name(format!("laminar-storage-{}", n - 1))
        .spawn(move || work(&shared))
        .expect("spawn storage thread");
}

fn work(shared: &Shared) {
    let mut st = shared.state.lock().unwrap();
    loop {
        let Some(key) = st.ready.pop_front() else {
            if st.shutdown {
                st.threads -= 1;
                return;
            }
            st.idle += 1;
            let (guard, timeout) = shared.work.wait_timeout(st, SPARE_IDLE).unwrap();
            st = guard;
            st.idle -= 1;
            if timeout.timed_out() && st.ready.is_empty() && st.threads > shared.base_threads {
                st.threads -= 1;
                return;
            }
            continue;
        };
        let queue = st.queues.get_mut(&key).expect("a ready partition has a queue");
        let job = queue.pop_front().expect("a ready partition has a job");
        st.queued -= 1;
        st.running.insert(key, Instant::now());
        drop(st);
        // One bad job must not take down the thread, or the partitions it would serve next.
        if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
            JOB_PANICS.fetch_add(1, Ordering::Relaxed);
            laminar_metrics::warn!(
                "a storage job panicked ({}); carrying on",
                panic_message(p.as_ref())
            );
        }
        st = shared.state.lock().unwrap();
        st.running.remove(&key);
        if st.queues.get(&key).is_some_and(|q| !q.is_empty()) {
            // Behind the partitions already waiting: one busy partition cannot hog a thread.
            st.ready.push_back(key);
        } else {
            st.queues.remove(&key);
        }
    }
}

/// Adds a thread whenever partitions wait, every thread is busy, and some job has run for
/// longer than `STUCK_AFTER`.
fn supervise(shared: std::sync::Weak<Shared>) {
    loop {
        std::thread::sleep(SUPERVISE_EVERY);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let grow = {
            let st = shared.state.lock().unwrap();
            if st.shutdown {
                return;
            }
            !st.ready.is_empty()
                && st.idle == 0
                && st.threads < STORAGE_THREADS_MAX
                && st.running.values().any(|t| t.elapsed() > STUCK_AFTER)
        };
        if grow {
            THREADS_ADDED.fetch_add(1, Ordering::Relaxed);
            spawn_worker(&shared);
        }
    }
}

pub fn partition_key(topic: &str, partition: i32) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    topic.hash(&mut h);
    partition.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_job_fails_alone_and_the_thread_carries_on() {
        let pool = StoragePool::new(1);
        let failed = pool.run(7, || -> u32 { panic!("a bug in an append") }).await;
        assert!(failed.is_err());
        // The one thread still serves every partition.
        assert_eq!(pool.run(7, || 1).await.unwrap(), 1);
        assert_eq!(pool.run(8, || 2).await.unwrap(), 2);
        assert!(JOB_PANICS.load(Ordering::Relaxed) >= 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stuck_partition_holds_up_only_itself() {
        let pool = Arc::new(StoragePool::new(1));
        let stuck = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.run(1, || std::thread::sleep(Duration::from_millis(1500)))
                    .await
                    .unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Partition 1's next job waits behind its stuck one; partition 2's do not.
        let behind = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                pool.run(1, || ()).await.unwrap();
                t.elapsed()
            })
        };
        let t = Instant::now();
        for _ in 0..20 {
            pool.run(2, || ()).await.unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "another partition waited {:?}",
            t.elapsed()
        );
        assert!(behind.await.unwrap() > Duration::from_millis(1000), "order kept");
        stuck.await.unwrap();
        assert!(pool.threads() >= 2, "a thread was added");
    }

    /// On a current-thread runtime, spawned tasks are first polled in spawn order, so the
    /// jobs are queued in order 0..200.
    #[tokio::test]
    async fn one_partitions_jobs_run_in_order_one_at_a_time() {
        let pool = Arc::new(StoragePool::new(4));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let (pool, seen, running) = (pool.clone(), seen.clone(), running.clone());
                tokio::spawn(async move {
                    pool.run(5, move || {
                        assert_eq!(running.fetch_add(1, Ordering::SeqCst), 0, "one at a time");
                        std::thread::sleep(Duration::from_micros(200));
                        seen.lock().unwrap().push(i);
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
                    .unwrap()
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), (0..200).collect::<Vec<_>>());
    }
}
