//! Histograms of every disk call the storage engine makes, so that a stall is visible
//! without kprobes. The broker exports them; `perf log` prints them.

use std::sync::Mutex;
use std::time::Instant;

use hdrhistogram::Histogram;

/// A latency histogram in microseconds, from 1 µs to 1 hour with 3 significant digits.
pub struct LatencyHistogram {
    inner: Mutex<Histogram<u64>>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            inner: Mutex::new(Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")),
        }
    }
}

impl LatencyHistogram {
    pub fn record_us(&self, us: u64) {
        self.inner.lock().unwrap().saturating_record(us.max(1));
    }

    pub fn record_since(&self, start: Instant) {
        self.record_us(start.elapsed().as_micros() as u64);
    }

    pub fn snapshot(&self) -> Histogram<u64> {
        self.inner.lock().unwrap().clone()
    }
}

#[derive(Default)]
pub struct StorageMetrics {
    /// `pwrite` of appended batches into a segment's data file.
    pub segment_write_us: LatencyHistogram,
    /// `fdatasync` of a segment's data file.
    pub segment_fsync_us: LatencyHistogram,
    /// Reads of batch headers and data through the storage interface.
    pub segment_read_us: LatencyHistogram,
    /// One whole flush of one log: its data syncs, index writes and checkpoint.
    pub log_flush_us: LatencyHistogram,
    /// `fallocate` steps.
    pub segment_allocate_us: LatencyHistogram,
    /// Checkpoint, index and directory syncs.
    pub metadata_fsync_us: LatencyHistogram,
}
