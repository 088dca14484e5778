//! Accepting connections and running each one.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use laminar_protocol::frame::split_frame;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use super::budget::{FrameBudget, Held, RequestBudget};
use super::conn_io::{self, ReadHalf, WriteHalf};
use super::observe::{measure_waits, NetMetrics, RequestTimes};
use super::send::send_response;
use super::tls::TlsServer;
use super::watchdog::{doing, Registry};
use super::{CloseConnection, Handled, IoPool, RequestKind, ResponseOrClose, Service};

#[derive(Debug, Clone)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub max_inflight_requests_per_connection: usize,
    pub socket_request_max_bytes: usize,
    /// Bytes of requests, over all connections, read and not yet handled. A connection
    /// whose next frame does not fit stops reading until earlier requests are answered.
    /// At least `socket_request_max_bytes`, so that any valid frame fits eventually.
    pub queued_max_request_bytes: usize,
    pub socket_send_chunk_bytes: usize,
    /// Connections accepted per second at most (`max.connection.creation.rate`); more wait
    /// in the listen backlog. `None`: no limit.
    pub max_connection_creation_rate: Option<u32>,
    /// SO_SNDBUF of each connection (`socket.send.buffer.bytes`); `None`: autotuning.
    pub socket_send_buffer_bytes: Option<usize>,
    /// A poll of a connection task longer than this is logged as a stall.
    pub event_loop_stall_threshold: Duration,
    /// Connections from one IP address at most (`max.connections.per.ip`), but for the
    /// addresses of `max_connections_per_ip_overrides`; more are closed at accept.
    pub max_connections_per_ip: usize,
    pub max_connections_per_ip_overrides: HashMap<IpAddr, usize>,
    /// The bytes connections that have not authenticated may hold, over all of them, apart
    /// from `queued_max_request_bytes` (`queued.max.unauthenticated.request.bytes`): clients
    /// nobody knows cannot spend the budget authenticated clients need.
    pub queued_max_unauthenticated_request_bytes: usize,
}

/// How many connections each IP address has open, within `max.connections.per.ip`.
struct PerIp {
    max: usize,
    overrides: HashMap<IpAddr, usize>,
    open: std::sync::Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its address's count, given back when it ends.
struct IpSlot {
    per_ip: Arc<PerIp>,
    ip: IpAddr,
}

impl PerIp {
    /// A place for a connection from `ip`, or `None` when its address has all it may.
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<IpSlot> {
        let limit = self.overrides.get(&ip).copied().unwrap_or(self.max);
        let mut open = self.open.lock().unwrap();
        let n = open.entry(ip).or_insert(0);
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            per_ip: self.clone(),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut open = self.per_ip.open.lock().unwrap();
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// A frame begun must arrive whole within this long, or the connection is closed: what it
/// has sent holds its share of `queued_max_request_bytes` meanwhile.
pub const FRAME_READ_TIMEOUT_MS: u64 = 60_000;
/// A response must be written within this long, or the connection is closed: a client that
/// stops reading must not keep its tasks (and a clean shutdown) waiting forever.
pub const RESPONSE_SEND_TIMEOUT_MS: u64 = 60_000;
/// Bytes read from a socket at a time (more once a large frame is under way).
const READ_CHUNK_BYTES: usize = 16 << 10;
/// The most read at a time of a large frame under way.
const LARGE_READ_BYTES: usize = 1 << 20;
/// How often a connection whose next frame does not fit the budget tries again.
const BUDGET_RETRY_MS: u64 = 5;
/// A connection not yet authenticated waits twice as long at each try, up to this: with the
/// unauthenticated budget full, the 540 of `bench/hostile_sasl.sh`'s 600 connections that do
/// not fit would otherwise wake the socket threads about 100,000 times a second, for nothing.
/// (The authenticated producer's p99 beside them: 1.15x its baselines before, 1.08x after, one
/// run each; its maximum, about 30 ms once per attack, is unchanged and comes from elsewhere.)
const UNAUTHENTICATED_BUDGET_RETRY_MAX_MS: u64 = 100;

/// A response in a connection's writer queue: ready, or still waiting (a
/// [`Handled::Later`]). The writer awaits the latter in its turn, not a task of its own: a
/// spawn per request woke another runtime thread, for a future that only waits.
enum Pending<F> {
    Ready(ResponseOrClose<F>),
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = ResponseOrClose<F>> + Send>>),
}

/// Stops a running server: no more accepts, in-flight requests finish, then connections
/// close.
pub struct ServerHandle {
    /// Each listener's bound address, in the order [`serve`] was given them.
    pub local_addrs: Vec<SocketAddr>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    watchdog: Arc<Registry>,
}

impl ServerHandle {
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
        self.watchdog.stop();
    }
}

/// What one connection's tasks share.
struct Conn<S: Service> {
    peer: SocketAddr,
    session: Arc<S::Session>,
    request_bytes: RequestBudget,
    /// Apart from `request_bytes`: what connections not authenticated may hold.
    unauthenticated_bytes: RequestBudget,
    service: Arc<S>,
    limits: ServerLimits,
    io_pool: IoPool,
    metrics: Arc<NetMetrics>,
    watchdog: Arc<Registry>,
}

/// Serves connections accepted on every one of `listeners` (Kafka's listeners: the service
/// is told which one each connection came in on). The limits are the broker's, over all of
/// them.
/// A bound listener, and its TLS if it has any.
pub struct NetListener {
    pub tcp: TcpListener,
    pub tls: Option<Arc<TlsServer>>,
}

/// A connection kernel TLS was asked for and not taken: counted, and the first reason of
/// each run logged (every connection of a kernel without `tls` would log the same).
fn note_ktls_fallback(metrics: &NetMetrics, peer: SocketAddr, why: &str) {
    static LOGGED: AtomicBool = AtomicBool::new(false);
    metrics.ktls_fallbacks_total.fetch_add(1, Ordering::Relaxed);
    if !LOGGED.swap(true, Ordering::Relaxed) {
        laminar_metrics::warn!(
            "kernel TLS not taken for the connection from {peer} ({why}): it and others like it use TLS in user space (laminar_ktls_fallbacks_total)"
        );
    }
}

pub fn serve<S: Service>(
    listeners: Vec<NetListener>,
    service: Arc<S>,
    limits: ServerLimits,
    io_pool: IoPool,
    metrics: Arc<NetMetrics>,
) -> ServerHandle {
    let local_addrs = listeners
        .iter()
        .map(|l| l.tcp.local_addr().expect("bound listener has an address"))
        .collect();
    let tls: Vec<Option<Arc<TlsServer>>> = listeners.iter().map(|l| l.tls.clone()).collect();
    let listeners: Vec<TcpListener> = listeners.into_iter().map(|l| l.tcp).collect();
    let (shutdown, mut shutdown_rx) = watch::channel(false);
    let watchdog = Registry::new(limits.event_loop_stall_threshold, metrics.clone());
    watchdog.start();
    let wd = watchdog.clone();
    let connection_permits = Arc::new(Semaphore::new(limits.max_connections));
    assert!(
        limits.queued_max_request_bytes >= limits.socket_request_max_bytes,
        "the request budget must hold the largest frame"
    );
    let request_semaphore = Arc::new(Semaphore::new(limits.queued_max_request_bytes));
    let _ = metrics
        .request_budget
        .set((request_semaphore.clone(), limits.queued_max_request_bytes));
    let request_bytes = RequestBudget::new(request_semaphore);
    let unauthenticated_bytes = RequestBudget::new(Arc::new(Semaphore::new(
        limits.queued_max_unauthenticated_request_bytes.max(1),
    )));
    let per_ip = Arc::new(PerIp {
        max: limits.max_connections_per_ip,
        overrides: limits.max_connections_per_ip_overrides.clone(),
        open: Default::default(),
    });
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        // A token bucket of one second's worth of accepts: a flood waits in the kernel's
        // listen backlog (whose overflow the client sees as a slow connect), not in tasks.
        let mut bucket = limits.max_connection_creation_rate.map(AcceptBucket::new);
        loop {
            // The loop also turns for each connection that ends: only an accept spends a token.
            if let Some(b) = bucket.as_mut() {
                let wait = b.wait();
                if !wait.is_zero() {
                    metrics
                        .accept_throttled_us_total
                        .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = shutdown_rx.changed() => break,
                    }
                    continue;
                }
            }
            tokio::select! {
                (index, accepted) = accept_any(&listeners) => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            laminar_metrics::warn!("accept failed: {e}");
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    if let Some(b) = bucket.as_mut() {
                        b.spend();
                    }
                    // As the broker sees its address (an IPv4 client of a dual-stack
                    // listener is its IPv4 address).
                    let ip = peer.ip().to_canonical();
                    let Some(ip_slot) = per_ip.take(ip) else {
                        metrics.connections_refused_total.fetch_add(1, Ordering::Relaxed);
                        laminar_metrics::warn!("closing connection from {peer}: max.connections.per.ip reached for {ip}");
                        continue;
                    };
                    let Ok(permit) = connection_permits.clone().try_acquire_owned() else {
                        metrics.connections_refused_total.fetch_add(1, Ordering::Relaxed);
                        laminar_metrics::warn!("closing connection from {peer}: max.connections {} reached", limits.max_connections);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    if let Some(bytes) = limits.socket_send_buffer_bytes {
                        if let Err(e) = socket2::SockRef::from(&stream).set_send_buffer_size(bytes) {
                            laminar_metrics::warn!("socket.send.buffer.bytes on the connection from {peer}: {e}");
                        }
                    }
                    let tls = tls[index].clone();
                    let (service, request_bytes, unauthenticated_bytes, limits, io_pool, metrics, watchdog) = (
                        service.clone(),
                        request_bytes.clone(),
                        unauthenticated_bytes.clone(),
                        limits.clone(),
                        io_pool.clone(),
                        metrics.clone(),
                        wd.clone(),
                    );
                    let rx = shutdown_rx.clone();
                    connections.spawn(async move {
                        metrics.connections_open.fetch_add(1, Ordering::Relaxed);
                        let (rd, wr, session) = match tls {
                            None => {
                                let (rd, wr) = conn_io::plain(stream);
                                (rd, wr, service.open(peer, index, None))
                            }
                            Some(server) => match crate::tls::accept(&server, stream).await {
                                Ok((accepted, tls_peer)) => {
                                    let session = service.open(peer, index, Some(&tls_peer));
                                    let (rd, wr) = match accepted {
                                        crate::tls::Accepted::Kernel(stream) => {
                                            metrics.ktls_connections_total.fetch_add(1, Ordering::Relaxed);
                                            conn_io::plain(stream)
                                        }
                                        crate::tls::Accepted::User(io, fallback) => {
                                            if let Some(why) = fallback {
                                                note_ktls_fallback(&metrics, peer, &why);
                                            }
                                            conn_io::tls(*io)
                                        }
                                    };
                                    (rd, wr, session)
                                }
                                Err(e) => {
                                    metrics.connections_closed_for_errors_total.fetch_add(1, Ordering::Relaxed);
                                    laminar_metrics::warn!("closing connection from {peer}: {e}");
                                    metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
                                    drop((permit, ip_slot));
                                    return;
                                }
                            },
                        };
                        let conn = Conn {
                            peer,
                            session,
                            request_bytes,
                            unauthenticated_bytes,
                            service,
                            limits,
                            io_pool,
                            metrics: metrics.clone(),
                            watchdog,
                        };
                        connection(rd, wr, conn, rx).await;
                        metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
                        drop((permit, ip_slot));
                    });
                }
                _ = shutdown_rx.changed() => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        while connections.join_next().await.is_some() {}
    });
    ServerHandle {
        local_addrs,
        shutdown,
        task,
        watchdog,
    }
}

/// The next connection accepted on any of `listeners`, with the listener's index.
async fn accept_any(listeners: &[TcpListener]) -> (usize, std::io::Result<(TcpStream, SocketAddr)>) {
    std::future::poll_fn(|cx| {
        for (index, listener) in listeners.iter().enumerate() {
            if let std::task::Poll::Ready(accepted) = listener.poll_accept(cx) {
                return std::task::Poll::Ready((index, accepted));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Allows `rate` accepts a second, in bursts of at most `rate`.
struct AcceptBucket {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl AcceptBucket {
    fn new(rate: u32) -> AcceptBucket {
        let rate = f64::from(rate.max(1));
        AcceptBucket {
            rate,
            tokens: rate,
            at: Instant::now(),
        }
    }

    /// How long until a token is there for the next accept (zero if one is), after adding
    /// what has accrued.
    fn wait(&mut self) -> Duration {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.rate);
        self.at = now;
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.rate)
        }
    }

    /// Spends a token on an accept.
    fn spend(&mut self) {
        self.tokens -= 1.0;
    }
}

async fn connection<S: Service>(
    mut rd: ReadHalf,
    mut wr: WriteHalf,
    conn: Conn<S>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Conn {
        peer,
        session,
        request_bytes,
        unauthenticated_bytes,
        service,
        limits,
        io_pool,
        metrics,
        watchdog,
    } = conn;
    // Until its first bytes arrive, a connection is this one task, asleep: 10,000 idle
    // connections are 10,000 tasks, not 30,000, and closing them all at once wakes one each.
    // The bytes are only looked at here: the reader reads them within the request budget.
    let unauthenticated = |deadline: Option<std::time::Instant>| {
        let deadline = deadline.map(tokio::time::Instant::from_std);
        async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        }
    };
    let closing_unauthenticated = |peer: SocketAddr| {
        laminar_metrics::warn!("closing connection from {peer}: it did not authenticate in time");
    };
    tokio::select! {
        arrived = rd.first_bytes() => if !arrived {
            return;
        },
        _ = unauthenticated(service.authenticate_by(&session)) => {
            closing_unauthenticated(peer);
            return;
        }
        _ = shutdown.changed() => return,
    }
    // Then three tasks: the reader splits frames, the executor handles them one
    // at a time in arrival order (as Kafka does, so appends from one connection keep their
    // order), the writer sends responses in that same order. The reader keeps reading while
    // requests are handled and responses are sent, up to the in-flight limit: the two
    // channels' capacities, which make it wait when full.
    let inflight = limits.max_inflight_requests_per_connection.max(2);
    // Each request carries its share of `queued_max_request_bytes` until its handler is done
    // with it (as Kafka releases a request's buffer), so a client that stops reading its
    // responses does not pin the budget.
    let (frame_tx, mut frame_rx) = mpsc::channel::<(bytes::Bytes, Instant, FrameBudget)>(inflight / 2);
    let (resp_tx, mut resp_rx) = mpsc::channel::<(Pending<S::File>, RequestKind, RequestTimes)>(inflight / 2);
    let wd = watchdog.clone();
    // Until when the reader must not read (a quota's throttle), in ms since `epoch`.
    let epoch = Instant::now();
    let muted_until_ms = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mute = muted_until_ms.clone();
    let (service_for_limit, session_for_limit) = (service.clone(), session.clone());
    // The executor tells the reader when the authentication deadline changed (a handshake
    // began an exchange, or one ended), so that a client silent after a SaslHandshake is
    // closed at its deadline, not only at its next bytes.
    let deadline_changed = Arc::new(tokio::sync::Notify::new());
    let deadline_moved = deadline_changed.clone();
    let executor = tokio::spawn(async move {
        let mut deadline = service.authenticate_by(&session);
        while let Some((frame, received, budget)) = frame_rx.recv().await {
            // A throttled client's requests already read wait out the throttle too.
            let muted_ms = mute.load(Ordering::Relaxed);
            let now_ms = epoch.elapsed().as_millis() as u64;
            if muted_ms > now_ms {
                tokio::time::sleep(Duration::from_millis(muted_ms - now_ms)).await;
            }
            let started = Instant::now();
            let kind = service.kind(&session, &frame);
            let call = doing(
                &wd,
                kind.name,
                Some(peer),
                service.clone().call(frame, session.clone()),
            );
            let (result, noted) = measure_waits(call).await;
            drop(budget);
            let now_by = service.authenticate_by(&session);
            if now_by != deadline {
                deadline = now_by;
                deadline_moved.notify_one();
            }
            let handled = Instant::now();
            if !noted.throttle.is_zero() {
                let until = (handled + noted.throttle).duration_since(epoch).as_millis() as u64;
                mute.fetch_max(until, Ordering::Relaxed);
            }
            let times = RequestTimes {
                received,
                started,
                handled,
                waited: noted.waited,
            };
            let (pending, close) = match result {
                Handled::Now(r) => {
                    let close = r.is_err();
                    (Pending::Ready(r), close)
                }
                // The rest only waits (an fsync): the next request starts now, and this one's
                // response keeps its place in the writer's queue.
                Handled::Later(rest) => (
                    Pending::Later(Box::pin(doing(&wd, kind.name, Some(peer), rest))),
                    false,
                ),
            };
            if resp_tx.send((pending, kind, times)).await.is_err() || close {
                return;
            }
        }
    });
    let chunk_bytes = limits.socket_send_chunk_bytes;
    let writer_metrics = metrics.clone();
    let writer = tokio::spawn(doing(&watchdog, "sending a response", Some(peer), async move {
        while let Some((pending, kind, mut times)) = resp_rx.recv().await {
            let result = match pending {
                Pending::Ready(r) => r,
                Pending::Later(rest) => {
                    let r = rest.await;
                    // Its time until now was a wait (for an fsync), part of its handling.
                    let done = Instant::now();
                    times.waited += done.saturating_duration_since(times.handled);
                    times.handled = done.max(times.handled);
                    r
                }
            };
            let send_started = Instant::now();
            match result {
                Ok(Some(frame)) => {
                    let sent = tokio::time::timeout(
                        Duration::from_millis(RESPONSE_SEND_TIMEOUT_MS),
                        send_response(&mut wr, frame, chunk_bytes, &io_pool, &writer_metrics),
                    )
                    .await;
                    match sent {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            laminar_metrics::info!("connection from {peer} closed while sending: {e}");
                            return;
                        }
                        Err(_) => {
                            laminar_metrics::warn!(
                                "closing connection from {peer}: a response was not taken within {RESPONSE_SEND_TIMEOUT_MS} ms"
                            );
                            return;
                        }
                    }
                }
                Ok(None) => {}
                Err(CloseConnection(reason)) => {
                    writer_metrics
                        .connections_closed_for_errors_total
                        .fetch_add(1, Ordering::Relaxed);
                    laminar_metrics::warn!("closing connection from {peer}: {reason}");
                    return;
                }
            }
            if let Some(phases) = &kind.phases {
                phases.record(&times, send_started, Instant::now());
            }
        }
    }));
    let reader = doing(&watchdog, "reading requests", Some(peer), async move {
        // Allocated when bytes arrive and dropped once every frame in it is taken, so that an
        // idle connection holds no buffer (10,000 idle connections cost no 160 MB).
        let mut buf = BytesMut::new();
        // What the buffered bytes hold of the request budget, taken as they are read.
        let mut held = Held::default();
        // Tries in a row that found no room in the budget.
        let mut budget_waits = 0u32;
        // Whether `held` is from the budget of connections that have not authenticated; it
        // changes only while nothing is held (a permit is never merged across budgets).
        let mut unauthenticated_budget = false;
        // A frame begun must arrive whole by then.
        let mut frame_deadline: Option<tokio::time::Instant> = None;
        'read: loop {
            loop {
                let muted_ms = muted_until_ms.load(Ordering::Relaxed);
                let now_ms = epoch.elapsed().as_millis() as u64;
                if muted_ms > now_ms {
                    // Throttled: the client is over its quota. Requests wait in the socket.
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(muted_ms - now_ms)) => continue,
                        _ = shutdown.changed() => break 'read,
                    }
                }
                let max_bytes = service_for_limit
                    .frame_limit(&session_for_limit)
                    .map_or(limits.socket_request_max_bytes, |l| {
                        l.min(limits.socket_request_max_bytes)
                    });
                match split_frame(&mut buf, max_bytes) {
                    Ok(Some(frame)) => {
                        let budget = if unauthenticated_budget {
                            &unauthenticated_bytes
                        } else {
                            &request_bytes
                        };
                        let share = held.take_frame(budget, 4 + frame.len());
                        frame_deadline = None;
                        if frame_tx.send((frame, Instant::now(), share)).await.is_err() {
                            break 'read;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        metrics
                            .connections_closed_for_errors_total
                            .fetch_add(1, Ordering::Relaxed);
                        laminar_metrics::warn!("closing connection from {peer}: {e}");
                        break 'read;
                    }
                }
            }
            if buf.is_empty() {
                buf = BytesMut::new();
            } else if frame_deadline.is_none() {
                frame_deadline =
                    Some(tokio::time::Instant::now() + Duration::from_millis(FRAME_READ_TIMEOUT_MS));
            }
            // The rest of the frame under way, once its size is known.
            let frame_left = frame_size(&buf).map(|size| 4 + size - buf.len());
            let want = frame_left.map_or(READ_CHUNK_BYTES, |left| {
                left.clamp(READ_CHUNK_BYTES, LARGE_READ_BYTES)
            });
            tokio::select! {
                ready = rd.readable() => {
                    if ready.is_err() {
                        break;
                    }
                    if held.is_empty() {
                        unauthenticated_budget = service_for_limit.frame_limit(&session_for_limit).is_some();
                    }
                    let budget = if unauthenticated_budget {
                        &unauthenticated_bytes
                    } else {
                        &request_bytes
                    };
                    let room = held.room(budget, want, frame_left);
                    if room == 0 {
                        // Not a FIFO wait: a large frame waiting for room must not hold back
                        // the smaller frames of other connections that fit now.
                        let wait_ms = if unauthenticated_budget {
                            (BUDGET_RETRY_MS << budget_waits.min(5)).min(UNAUTHENTICATED_BUDGET_RETRY_MAX_MS)
                        } else {
                            BUDGET_RETRY_MS
                        };
                        budget_waits += 1;
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(wait_ms)) => continue,
                            _ = shutdown.changed() => break 'read,
                            _ = frame_tx.closed() => break 'read,
                        }
                    }
                    buf.reserve(room);
                    let read = match rd.try_read_buf(&mut buf, room) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                        // Kernel TLS fails a read of a record other than application data:
                        // the client's alert, or a TLS 1.3 KeyUpdate a kernel before 6.14
                        // cannot follow. The client reconnects.
                        Err(e) if e.raw_os_error() == Some(libc::EIO) => {
                            match rd.take_control_record() {
                                // The client's close_notify (or its error): an end.
                                Some(crate::ktls::RECORD_ALERT) => {}
                                Some(crate::ktls::RECORD_HANDSHAKE) => laminar_metrics::warn!(
                                    "closing connection from {}: a TLS key update, which this kernel's TLS cannot follow (the client reconnects)",
                                    conn.peer
                                ),
                                other => laminar_metrics::warn!(
                                    "closing connection from {}: a TLS record the kernel does not decrypt (type {other:?})",
                                    conn.peer
                                ),
                            }
                            break;
                        }
                        Err(_) => break,
                    };
                    held.keep(read);
                    budget_waits = 0;
                    metrics.note_request_bytes();
                }
                _ = tokio::time::sleep_until(frame_deadline.unwrap_or_else(tokio::time::Instant::now)), if frame_deadline.is_some() => {
                    metrics.connections_closed_for_errors_total.fetch_add(1, Ordering::Relaxed);
                    laminar_metrics::warn!(
                        "closing connection from {peer}: a frame was not received whole within {FRAME_READ_TIMEOUT_MS} ms"
                    );
                    break;
                }
                _ = unauthenticated(service_for_limit.authenticate_by(&session_for_limit)) => {
                    metrics.connections_closed_for_errors_total.fetch_add(1, Ordering::Relaxed);
                    closing_unauthenticated(peer);
                    break;
                }
                _ = deadline_changed.notified() => continue,
                _ = frame_tx.closed() => break,
                _ = shutdown.changed() => break,
            }
        }
    });
    reader.await;
    // Requests already read are still handled and answered, in order; then it closes.
    let _ = executor.await;
    let _ = writer.await;
}

/// The size of the frame at the front of `buf`, once its 4-byte prefix is there (a size
/// `split_frame` refuses has closed the connection before this is asked).
fn frame_size(buf: &[u8]) -> Option<usize> {
    let prefix: [u8; 4] = buf.get(..4)?.try_into().ok()?;
    usize::try_from(i32::from_be_bytes(prefix)).ok()
}
