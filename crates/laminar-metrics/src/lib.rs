//! Latency histograms, shared by every layer so that a stall is measured the same way
//! wherever it happens, their Prometheus text exposition, and the process's own log
//! ([`log`], the `info!` and `warn!` macros), which never blocks the thread that writes a line.

pub mod log;
pub mod prometheus;

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use hdrhistogram::Histogram;
use serde::Serialize;

/// The bounds every latency histogram uses: 1 µs to 1 hour, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// A latency histogram in microseconds that many threads record into.
pub struct LatencyHistogram {
    inner: Mutex<Histogram<u64>>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            inner: Mutex::new(new_histogram()),
        }
    }
}

impl LatencyHistogram {
    pub fn record_us(&self, us: u64) {
        self.inner.lock().unwrap().saturating_record(us.max(1));
    }

    pub fn record(&self, elapsed: Duration) {
        self.record_us(elapsed.as_micros() as u64);
    }

    pub fn record_since(&self, start: Instant) {
        self.record(start.elapsed());
    }

    pub fn snapshot(&self) -> Histogram<u64> {
        self.inner.lock().unwrap().clone()
    }
}

/// The percentiles every report prints, in the histogram's unit.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Percentiles {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            p50: h.value_at_quantile(0.50),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}
