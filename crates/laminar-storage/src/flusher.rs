//! Background flushing with group commit.
//!
//! A few flusher threads share every log. A log is flushed when a durability waiter asks,
//! when `flush_messages` records are unflushed, when a segment has rolled, or when
//! `flush_interval_ms` has passed. One fsync covers every append made before it started,
//! so all waiters that queued during the previous fsync complete together.
//!
//! A thread skips a log that another thread is flushing, so one log whose disk stalls an
//! fsync for seconds holds up only one flusher thread, not every partition's durability.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::log::{Flushed, Log};
use crate::log_threads::LogThreads;
use crate::types::now_ms;

/// The longest a flusher thread sleeps without looking at its logs.
const FLUSHER_IDLE_WAIT_MS: u64 = 200;

pub struct Flusher {
    threads: LogThreads,
}

impl Flusher {
    pub fn start(threads: usize) -> Flusher {
        Flusher {
            threads: LogThreads::start("laminar-flush", threads, pass),
        }
    }

    pub fn register(&self, log: &Arc<Log>) {
        log.attach_flusher(self.threads.register(log));
    }

    /// Stops the threads after their current flush. Logs are flushed by their own `close`.
    pub fn stop(&mut self) {
        self.threads.stop();
    }
}

/// Is `log` due for a flush now? If not, when (ms since epoch) will it be?
fn due(log: &Log, now: i64) -> Result<(), Option<i64>> {
    // An offline log never flushes again (its waiters were failed); a closed one was
    // flushed by `close`. Either way, looking at it again would only spin.
    if log.is_offline_or_closed() {
        return Err(None);
    }
    if log.flush_requested.load(Ordering::Acquire) {
        return Ok(());
    }
    let config = log.config();
    if config
        .flush_messages
        .is_some_and(|n| log.records_unflushed() >= n)
    {
        return Ok(());
    }
    let flush_at = match config.flush_interval_ms {
        Some(ms) if log.records_unflushed() > 0 => Some(log.last_flush_ms() + ms as i64),
        _ => None,
    };
    // A checkpoint left behind by fsyncs that were not due to write it is written later, so
    // that recovery after a crash never scans more than an interval's appends.
    let at = match (flush_at, log.checkpoint_due_ms()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match at {
        Some(at) if now >= at => Ok(()),
        at => Err(at),
    }
}

/// One look at every log: flushes those that are due, and says how long to sleep.
fn pass(logs: &[Arc<Log>]) -> Duration {
    let mut next_deadline: Option<i64> = None;
    for log in logs {
        match due(log, now_ms()) {
            // An error takes the log offline and fails its waiters; the broker reports it
            // from `offline_reason`. Nothing to retry here.
            Ok(()) => match log.try_flush() {
                // Waiters that queued during this fsync want the next one at once: that
                // is group commit, one fsync after another while appends go on. They woke
                // no other thread (`notify_flusher`): this one looks again.
                Ok(Flushed::Synced | Flushed::Nothing) if log.flush_wanted() => {
                    next_deadline = Some(now_ms())
                }
                // The thread that is flushing it looks again when its fsync is done (see
                // above), so this one does not spin on it meanwhile.
                Ok(Flushed::Busy | Flushed::Synced | Flushed::Nothing) | Err(_) => {}
            },
            Err(Some(at)) => next_deadline = Some(next_deadline.map_or(at, |d| d.min(at))),
            Err(None) => {}
        }
    }
    let wait_ms = match next_deadline {
        Some(at) => (at - now_ms()).clamp(0, FLUSHER_IDLE_WAIT_MS as i64) as u64,
        None => FLUSHER_IDLE_WAIT_MS,
    };
    Duration::from_millis(wait_ms)
}
