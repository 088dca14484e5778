//! Accepting connections and running each one.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use laminar_protocol::frame::split_frame;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use super::observe::{measure_waits, NetMetrics, RequestTimes};
use super::send::send_response;
use super::watchdog::{doing, Registry};
use super::{CloseConnection, IoPool, RequestKind, ResponseOrClose, Service};

#[derive(Debug, Clone)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub max_inflight_requests_per_connection: usize,
    pub socket_request_max_bytes: usize,
    pub socket_send_chunk_bytes: usize,
    /// A poll of a connection task longer than this is logged as a stall.
    pub event_loop_stall_threshold: Duration,
    /// Tests only: see `BrokerConfig::cold_reads_inline`.
    pub cold_reads_inline: bool,
}

/// Stops a running server: no more accepts, in-flight requests finish, then connections
/// close.
pub struct ServerHandle {
    pub local_addr: SocketAddr,
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
struct Conn<S> {
    peer: SocketAddr,
    service: Arc<S>,
    limits: ServerLimits,
    io_pool: IoPool,
    metrics: Arc<NetMetrics>,
    watchdog: Arc<Registry>,
}

pub fn serve<S: Service>(
    listener: TcpListener,
    service: Arc<S>,
    limits: ServerLimits,
    io_pool: IoPool,
    metrics: Arc<NetMetrics>,
) -> ServerHandle {
    let local_addr = listener.local_addr().expect("bound listener has an address");
    let (shutdown, mut shutdown_rx) = watch::channel(false);
    let watchdog = Registry::new(limits.event_loop_stall_threshold, metrics.clone());
    watchdog.start();
    let wd = watchdog.clone();
    let connection_permits = Arc::new(Semaphore::new(limits.max_connections));
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            crate::warn!("accept failed: {e}");
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    let Ok(permit) = connection_permits.clone().try_acquire_owned() else {
                        metrics.connections_refused_total.fetch_add(1, Ordering::Relaxed);
                        crate::warn!("closing connection from {peer}: max.connections {} reached", limits.max_connections);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let conn = Conn {
                        peer,
                        service: service.clone(),
                        limits: limits.clone(),
                        io_pool: io_pool.clone(),
                        metrics: metrics.clone(),
                        watchdog: wd.clone(),
                    };
                    let rx = shutdown_rx.clone();
                    connections.spawn(async move {
                        conn.metrics.connections_open.fetch_add(1, Ordering::Relaxed);
                        let metrics = conn.metrics.clone();
                        connection(stream, conn, rx).await;
                        metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
                        drop(permit);
                    });
                }
                _ = shutdown_rx.changed() => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        while connections.join_next().await.is_some() {}
    });
    ServerHandle {
        local_addr,
        shutdown,
        task,
        watchdog,
    }
}

async fn connection<S: Service>(stream: TcpStream, conn: Conn<S>, mut shutdown: watch::Receiver<bool>) {
    let Conn {
        peer,
        service,
        limits,
        io_pool,
        metrics,
        watchdog,
    } = conn;
    let (mut rd, mut wr) = stream.into_split();
    // Three tasks per connection: the reader splits frames, the executor handles them one
    // at a time in arrival order (as Kafka does, so appends from one connection keep their
    // order), the writer sends responses in that same order. The reader keeps reading while
    // requests are handled and responses are sent, up to the in-flight limit: the two
    // channels' capacities, which make it wait when full.
    let inflight = limits.max_inflight_requests_per_connection.max(2);
    let (frame_tx, mut frame_rx) = mpsc::channel::<(bytes::Bytes, Instant)>(inflight / 2);
    let (resp_tx, mut resp_rx) =
        mpsc::channel::<(ResponseOrClose<S::File>, RequestKind, RequestTimes)>(inflight / 2);
    let wd = watchdog.clone();
    let executor = tokio::spawn(async move {
        while let Some((frame, received)) = frame_rx.recv().await {
            let started = Instant::now();
            let kind = service.kind(&frame);
            let call = doing(&wd, kind.name, Some(peer), service.clone().call(frame, peer));
            let (result, waited) = measure_waits(call).await;
            let times = RequestTimes {
                received,
                started,
                handled: Instant::now(),
                waited,
            };
            let close = result.is_err();
            if resp_tx.send((result, kind, times)).await.is_err() || close {
                return;
            }
        }
    });
    let chunk_bytes = limits.socket_send_chunk_bytes;
    let inline = limits.cold_reads_inline;
    let writer_metrics = metrics.clone();
    let writer = tokio::spawn(doing(&watchdog, "sending a response", Some(peer), async move {
        while let Some((result, kind, times)) = resp_rx.recv().await {
            let send_started = Instant::now();
            match result {
                Ok(Some(frame)) => {
                    let sent =
                        send_response(&mut wr, frame, chunk_bytes, &io_pool, inline, &writer_metrics).await;
                    if let Err(e) = sent {
                        crate::info!("connection from {peer} closed while sending: {e}");
                        return;
                    }
                }
                Ok(None) => {}
                Err(CloseConnection(reason)) => {
                    writer_metrics
                        .connections_closed_for_errors_total
                        .fetch_add(1, Ordering::Relaxed);
                    crate::warn!("closing connection from {peer}: {reason}");
                    return;
                }
            }
            if let Some(phases) = &kind.phases {
                phases.record(&times, send_started, Instant::now());
            }
        }
    }));
    let reader = doing(&watchdog, "reading requests", Some(peer), async move {
        let mut buf = BytesMut::with_capacity(16 << 10);
        'read: loop {
            loop {
                match split_frame(&mut buf, limits.socket_request_max_bytes) {
                    Ok(Some(frame)) => {
                        if frame_tx.send((frame, Instant::now())).await.is_err() {
                            break 'read;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        metrics
                            .connections_closed_for_errors_total
                            .fetch_add(1, Ordering::Relaxed);
                        crate::warn!("closing connection from {peer}: {e}");
                        break 'read;
                    }
                }
            }
            tokio::select! {
                n = rd.read_buf(&mut buf) => match n {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                },
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
