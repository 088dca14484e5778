//! What the network layer measures: the phases of every request, its own disk calls
//! (`sendfile`, reads of cold ranges on the I/O pool) and its connections. Socket-thread
//! stalls are in [`super::watchdog`]. The broker exports all of it on its metrics endpoint.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::{Duration, Instant};

use laminar_metrics::LatencyHistogram;

/// The phases of one kind of request, as Kafka's request metrics split them.
#[derive(Default)]
pub struct RequestPhases {
    /// From the frame being read to its handler starting (waiting behind earlier requests
    /// of the same connection).
    pub request_queue_us: LatencyHistogram,
    /// Handler time not spent waiting: decoding, checks, encoding.
    pub local_us: LatencyHistogram,
    /// Handler time spent waiting for other threads: a storage or I/O-pool job, an fsync,
    /// a long poll, a rebalance.
    pub wait_us: LatencyHistogram,
    /// From the handler finishing to its response starting to be sent (waiting behind
    /// earlier responses of the same connection).
    pub response_queue_us: LatencyHistogram,
    /// Writing the response to the socket.
    pub send_us: LatencyHistogram,
    /// From the frame being read to the last byte of its response being written.
    pub total_us: LatencyHistogram,
}

/// When one request passed each point, recorded by the connection's tasks.
pub(crate) struct RequestTimes {
    pub received: Instant,
    pub started: Instant,
    pub handled: Instant,
    pub waited: Duration,
}

impl RequestPhases {
    pub(crate) fn record(&self, t: &RequestTimes, send_started: Instant, sent: Instant) {
        let handling = t.handled.saturating_duration_since(t.started);
        self.request_queue_us
            .record(t.started.saturating_duration_since(t.received));
        self.local_us.record(handling.saturating_sub(t.waited));
        self.wait_us.record(t.waited.min(handling));
        self.response_queue_us
            .record(send_started.saturating_duration_since(t.handled));
        self.send_us.record(sent.saturating_duration_since(send_started));
        self.total_us.record(sent.saturating_duration_since(t.received));
    }
}

/// The network layer's own figures.
#[derive(Default)]
pub struct NetMetrics {
    /// One `sendfile` call of a resident file range.
    pub sendfile_us: LatencyHistogram,
    /// Reading a range that was not known to be resident, on the I/O pool.
    pub cold_read_us: LatencyHistogram,
    /// How late the event-loop probe woke up (see `watchdog`).
    pub event_loop_lateness_us: LatencyHistogram,
    /// Polls of connection tasks that ran longer than the stall threshold.
    pub stalled_poll_us: LatencyHistogram,
    pub stalls_total: AtomicU64,
    /// Of those, the stalls whose thread spent most of the time runnable but waiting for a
    /// CPU (the machine overloaded), not running or blocked.
    pub stalls_waiting_for_cpu_total: AtomicU64,
    pub connections_open: AtomicI64,
    /// The server's budget of request bytes, and its size.
    pub(crate) request_budget: std::sync::OnceLock<(std::sync::Arc<tokio::sync::Semaphore>, usize)>,
    /// The most request bytes read and not yet handled at once, since startup.
    pub inflight_request_bytes_max: AtomicU64,
    pub connections_refused_total: AtomicU64,
    pub connections_closed_for_errors_total: AtomicU64,
    /// Time accepts were held back by `max.connection.creation.rate`, in microseconds.
    pub accept_throttled_us_total: AtomicU64,
    /// TLS connections whose keys went to the kernel (`ssl.ktls.enable`).
    pub ktls_connections_total: AtomicU64,
    /// TLS connections kernel TLS was asked for that stayed in user space.
    pub ktls_fallbacks_total: AtomicU64,
}

impl NetMetrics {
    /// Bytes of requests read and not yet handled, over all connections.
    pub fn inflight_request_bytes(&self) -> u64 {
        self.request_budget
            .get()
            .map_or(0, |(s, size)| (size - s.available_permits()) as u64)
    }

    pub(crate) fn note_request_bytes(&self) {
        self.inflight_request_bytes_max.fetch_max(
            self.inflight_request_bytes(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// What the handling of one request has noted, in its task.
#[derive(Clone, Copy, Default)]
struct Scope {
    /// Nesting depth of `waiting` calls.
    depth: u32,
    waited_us: u64,
    throttle_ms: u64,
}

tokio::task_local! {
    static SCOPE: Cell<Scope>;
}

/// What a handler's task noted while handling one request.
pub(crate) struct Noted {
    pub waited: Duration,
    /// Stop reading this connection's requests for this long (a quota's throttle).
    pub throttle: Duration,
}

/// Runs `f` as part of handling a request, and returns what `f` returned with the time its
/// handler spent in [`waiting`] calls and any [`throttle`] it asked for.
pub(crate) async fn measure_waits<T>(f: impl Future<Output = T>) -> (T, Noted) {
    SCOPE
        .scope(Cell::new(Scope::default()), async {
            let out = f.await;
            let s = SCOPE.with(|s| s.get());
            let noted = Noted {
                waited: Duration::from_micros(s.waited_us),
                throttle: Duration::from_millis(s.throttle_ms),
            };
            (out, noted)
        })
        .await
}

/// Marks `f` as time the current request spends waiting for another thread or an event
/// (the "wait" phase). Nested calls count once. Outside a request it just runs `f`.
pub async fn waiting<T>(f: impl Future<Output = T>) -> T {
    let outermost = SCOPE
        .try_with(|c| {
            let mut s = c.get();
            s.depth += 1;
            c.set(s);
            s.depth == 1
        })
        .unwrap_or(false);
    let start = Instant::now();
    let out = f.await;
    let _ = SCOPE.try_with(|c| {
        let mut s = c.get();
        if outermost {
            s.waited_us += start.elapsed().as_micros() as u64;
        }
        s.depth = s.depth.saturating_sub(1);
        c.set(s);
    });
    out
}

/// Asks the network layer to stop reading the current connection's requests for `d` once
/// this request is handled: how a client over its quota is throttled (KIP-219).
pub fn throttle(d: Duration) {
    let _ = SCOPE.try_with(|c| {
        let mut s = c.get();
        s.throttle_ms = s.throttle_ms.max(d.as_millis() as u64);
        c.set(s);
    });
}
