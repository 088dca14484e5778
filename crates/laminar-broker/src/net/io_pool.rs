//! The I/O pool: blocking work that may touch a disk (reading cold data, batch headers,
//! directory operations), run off the socket threads with bounded concurrency.

use std::sync::Arc;

use tokio::sync::Semaphore;

#[derive(Clone)]
pub struct IoPool {
    permits: Arc<Semaphore>,
}

impl IoPool {
    pub fn new(threads: usize) -> IoPool {
        IoPool {
            permits: Arc::new(Semaphore::new(threads.max(1))),
        }
    }

    /// Runs `f` on a blocking thread once one of the pool's permits is free. A request
    /// waits for it (its "wait" phase).
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        super::observe::waiting(self.run_job(f)).await
    }

    async fn run_job<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the pool is never closed");
        let out = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f()
        })
        .await;
        match out {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}
