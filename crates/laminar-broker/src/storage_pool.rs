//! Storage threads: every append runs here, never on a socket thread. A partition always
//! maps to the same thread, so appends to one partition keep their arrival order and the
//! idempotence checks that run with them see a consistent state.

use std::sync::mpsc::{sync_channel, SyncSender};

use tokio::sync::oneshot;

/// Jobs that may wait for one storage thread. When a thread's queue is full, callers wait
/// (asynchronously) for room: back-pressure, not unbounded memory.
pub const STORAGE_QUEUE_JOBS_MAX: usize = 1024;

type Job = Box<dyn FnOnce() + Send>;

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
                            job();
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
    pub async fn run<T: Send + 'static>(&self, key: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        crate::net::waiting(self.run_job(key, f)).await
    }

    async fn run_job<T: Send + 'static>(&self, key: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
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
        rx.await.expect("storage job ran")
    }
}

pub fn partition_key(topic: &str, partition: i32) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    topic.hash(&mut h);
    partition.hash(&mut h);
    h.finish()
}
