//! Storage threads: every append runs here, never on a socket thread. A partition always
//! maps to the same thread, so appends to one partition keep their arrival order and the
//! idempotence checks that run with them see a consistent state.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};

use tokio::sync::oneshot;

/// Jobs that may wait for one storage thread. When a thread's queue is full, callers wait
/// (asynchronously) for room: back-pressure, not unbounded memory.
pub const STORAGE_QUEUE_JOBS_MAX: usize = 1024;

type Job = Box<dyn FnOnce() + Send>;

/// Storage jobs that panicked since startup (`laminar_storage_job_panics_total`).
pub static JOB_PANICS: AtomicU64 = AtomicU64::new(0);

/// A storage job panicked (a bug): the request that sent it fails, and the thread carries on
/// serving the other partitions mapped to it.
#[derive(Debug, thiserror::Error)]
#[error("a storage job panicked: {0}")]
pub struct JobPanicked(pub String);

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

pub struct StoragePool {
    queues: Vec<SyncSender<Job>>,
}

impl StoragePool {
    pub fn new(threads: usize) -> StoragePool {
        let queues = (0..threads.max(1))
            .map(|i| {
                let (tx, rx) = sync_channel::<Job>(STORAGE_QUEUE_JOBS_MAX);
                std::thread::Builder::new()
                    .name(format!("laminar-storage-{i}"))
                    .spawn(move || {
                        for job in rx {
                            // One bad job must not take down every partition of this thread.
                            if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
                                JOB_PANICS.fetch_add(1, Ordering::Relaxed);
                                crate::warn!(
                                    "laminar-storage-{i}: a job panicked ({}); carrying on",
                                    panic_message(p.as_ref())
                                );
                            }
                        }
                    })
                    .expect("spawn storage thread");
                tx
            })
            .collect();
        StoragePool { queues }
    }

    /// Runs `f` on the storage thread that owns `key` (a partition's hash). The request
    /// waits for it (its "wait" phase).
    pub async fn run<T: Send + 'static>(
        &self,
        key: u64,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, JobPanicked> {
        crate::net::waiting(self.run_job(key, f)).await
    }

    async fn run_job<T: Send + 'static>(
        &self,
        key: u64,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, JobPanicked> {
        let (tx, rx) = oneshot::channel();
        let queue = self.queues[(key % self.queues.len() as u64) as usize].clone();
        let mut job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        loop {
            match queue.try_send(job) {
                Ok(()) => break,
                Err(std::sync::mpsc::TrySendError::Full(j)) => {
                    job = j;
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => panic!("storage thread exited"),
            }
        }
        // The sender is dropped unsent only when the job panicked.
        rx.await.map_err(|_| JobPanicked("see the broker's log".into()))
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
        // The same thread (there is one) still serves every partition.
        assert_eq!(pool.run(7, || 1).await.unwrap(), 1);
        assert_eq!(pool.run(8, || 2).await.unwrap(), 2);
        assert!(JOB_PANICS.load(Ordering::Relaxed) >= 1);
    }
}
