//! Segments made ready before a roll needs them.
//!
//! Creating a file, and allocating its blocks with `fallocate`, can wait for reads of the
//! file system's metadata (directory blocks, block bitmaps, extent blocks) and for its
//! journal. After the page cache was dropped those reads queue behind whatever else the
//! disk is reading, such as a consumer catching up on cold data: one `fallocate` on the
//! append path waited 2.5-5 s in S1 with Kafka's Java clients (issue 27). So a few preparer
//! threads shared by every log make each log's next segment file (created under a
//! temporary name, allocated) once its active segment is half way to a roll, and the roll
//! only swaps it in.
//!
//! The active segment itself is never allocated from here: `fallocate` holds the file's
//! inode lock for as long as it waits, and every `pwrite` to the file takes that lock, so an
//! append would wait behind it just the same.
//!
//! A thread skips a log another thread is preparing for, so one log whose directory stalls
//! holds up one preparer thread; its appends overrun the roll meanwhile (see `Log::append`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::log::Log;
use crate::log_threads::LogThreads;

/// The longest a preparer thread sleeps without looking at its logs.
const PREPARER_IDLE_WAIT: Duration = Duration::from_secs(1);

pub struct Preparer {
    threads: LogThreads,
}

impl Preparer {
    pub fn start(threads: usize) -> Preparer {
        Preparer {
            threads: LogThreads::start("laminar-prepare", threads, pass),
        }
    }

    pub fn register(&self, log: &Arc<Log>) {
        log.attach_preparer(self.threads.register(log));
    }

    /// Stops the threads after their current preparation.
    pub fn stop(&mut self) {
        self.threads.stop();
    }
}

/// Prepares for every log that asked. A failure is counted by the log, which asks again
/// with its next append that finds no file ready.
fn pass(logs: &[Arc<Log>]) -> Duration {
    for log in logs
        .iter()
        .filter(|l| l.prepare_requested.load(Ordering::Acquire))
    {
        let _ = log.prepare_next();
    }
    PREPARER_IDLE_WAIT
}
