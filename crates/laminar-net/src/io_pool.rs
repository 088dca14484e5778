//! The I/O pool: blocking work that may touch a disk (reading cold data, batch headers,
//! directory operations), run off the socket threads with bounded concurrency.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

#[derive(Clone)]
pub struct IoPool {
    permits: Arc<Semaphore>,
    /// Jobs run on the caller's thread, blocking it: what a broker without this pool does
    /// (Kafka reads cold data on its network threads). Only for measuring what the pool
    /// prevents ([`IoPool::on_caller_thread`]).
    on_caller: bool,
}

/// States of a watched job.
const WAITING: u8 = 0;
const RUNNING: u8 = 1;
const LENT: u8 = 2;
const DONE: u8 = 3;

/// A job on the pool that its caller watches, and may find stuck on a disk.
pub struct Watched {
    state: Arc<AtomicU8>,
    permits: Arc<Semaphore>,
}

impl Watched {
    /// Adds a permit to the pool in place of this job's, for as long as the job runs: jobs
    /// stuck behind a stalled disk do not take the pool's capacity from the others. When
    /// the job returns, its own permit is forgotten instead of released, so the pool is its
    /// configured size again. Does nothing (returns false) unless the job is running and has
    /// not been lent for already. Lent permits are bounded by the callers: fetch lends one
    /// per partition found stuck, and skips that partition until its read returns.
    pub fn lend(&self) -> bool {
        let lent = self
            .state
            .compare_exchange(RUNNING, LENT, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if lent {
            self.permits.add_permits(1);
        }
        lent
    }
}

impl IoPool {
    pub fn new(threads: usize) -> IoPool {
        IoPool {
            permits: Arc::new(Semaphore::new(threads.max(1))),
            on_caller: false,
        }
    }

    /// A pool that runs each job on the thread that asks for it, blocking that thread (a
    /// socket thread, if a socket thread asks): the behaviour the pool exists to prevent,
    /// for tests that measure the difference. Never used by the broker itself.
    pub fn on_caller_thread() -> IoPool {
        IoPool {
            permits: Arc::new(Semaphore::new(1)),
            on_caller: true,
        }
    }

    /// Runs `f` on a blocking thread once one of the pool's permits is free. A request
    /// waits for it (its "wait" phase).
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        super::observe::waiting(self.run_job(f, None)).await
    }

    /// Like [`IoPool::run`], with a handle through which the caller can lend the job's
    /// permit back to the pool if the job gets stuck.
    pub fn run_watched<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> (impl Future<Output = T> + Send + 'static, Watched) {
        let state = Arc::new(AtomicU8::new(WAITING));
        let watched = Watched {
            state: state.clone(),
            permits: self.permits.clone(),
        };
        let pool = self.clone();
        let job = async move { pool.run_job(f, Some(state)).await };
        (super::observe::waiting(job), watched)
    }

    async fn run_job<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
        state: Option<Arc<AtomicU8>>,
    ) -> T {
        if self.on_caller {
            return f();
        }
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the pool is never closed");
        let out = tokio::task::spawn_blocking(move || {
            if let Some(s) = &state {
                s.store(RUNNING, Ordering::SeqCst);
            }
            let out = f();
            match state.map(|s| s.swap(DONE, Ordering::SeqCst)) {
                // A permit was added in this job's place while it ran.
                Some(LENT) => permit.forget(),
                other => {
                    debug_assert!(matches!(other, None | Some(RUNNING)), "{other:?}");
                    drop(permit)
                }
            }
            out
        })
        .await;
        match out {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lent_permit_lets_other_jobs_run_and_the_pool_keeps_its_size() {
        let pool = IoPool::new(1);
        let (release, stuck_until) = std::sync::mpsc::channel::<()>();
        let (stuck, watched) = pool.run_watched(move || stuck_until.recv().unwrap());
        let stuck = tokio::spawn(stuck);
        // Wait until the stuck job holds the only permit.
        while !watched.lend() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(!watched.lend(), "a job is lent for once");
        let other = tokio::time::timeout(Duration::from_secs(5), pool.run(|| 7)).await;
        assert_eq!(other.ok(), Some(7), "another job ran while the first was stuck");
        release.send(()).unwrap();
        stuck.await.unwrap();
        assert_eq!(pool.permits.available_permits(), 1, "the pool is its size again");
    }
}
