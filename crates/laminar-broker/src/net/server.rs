//! Accepting connections and running each one.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use laminar_protocol::frame::split_frame;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use super::send::send_response;
use super::{CloseConnection, IoPool, Service};

#[derive(Debug, Clone)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub max_inflight_requests_per_connection: usize,
    pub socket_request_max_bytes: usize,
    pub socket_send_chunk_bytes: usize,
    /// Tests only: see `BrokerConfig::cold_reads_inline`.
    pub cold_reads_inline: bool,
}

/// Stops a running server: no more accepts, in-flight requests finish, then connections
/// close.
pub struct ServerHandle {
    pub local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

pub fn serve<S: Service>(
    listener: TcpListener,
    service: Arc<S>,
    limits: ServerLimits,
    io_pool: IoPool,
) -> ServerHandle {
    let local_addr = listener.local_addr().expect("bound listener has an address");
    let (shutdown, mut shutdown_rx) = watch::channel(false);
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
                        crate::warn!("closing connection from {peer}: max.connections {} reached", limits.max_connections);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let (service, limits, io_pool, rx) = (service.clone(), limits.clone(), io_pool.clone(), shutdown_rx.clone());
                    connections.spawn(async move {
                        connection(stream, peer, service, limits, io_pool, rx).await;
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
    }
}

async fn connection<S: Service>(
    stream: TcpStream,
    peer: SocketAddr,
    service: Arc<S>,
    limits: ServerLimits,
    io_pool: IoPool,
    mut shutdown: watch::Receiver<bool>,
) {
    let (mut rd, mut wr) = stream.into_split();
    // Three tasks per connection: the reader splits frames, the executor handles them one
    // at a time in arrival order (as Kafka does, so appends from one connection keep their
    // order), the writer sends responses in that same order. The reader keeps reading while
    // requests are handled and responses are sent, up to the in-flight limit: the two
    // channels' capacities, which make it wait when full.
    let inflight = limits.max_inflight_requests_per_connection.max(2);
    let (frame_tx, mut frame_rx) = mpsc::channel::<bytes::Bytes>(inflight / 2);
    let (resp_tx, mut resp_rx) = mpsc::channel(inflight / 2);
    let executor = tokio::spawn(async move {
        while let Some(frame) = frame_rx.recv().await {
            let result = service.clone().call(frame, peer).await;
            let close = result.is_err();
            if resp_tx.send(result).await.is_err() || close {
                return;
            }
        }
    });
    let chunk_bytes = limits.socket_send_chunk_bytes;
    let inline = limits.cold_reads_inline;
    let writer = tokio::spawn(async move {
        while let Some(result) = resp_rx.recv().await {
            match result {
                Ok(Some(frame)) => {
                    if let Err(e) = send_response(&mut wr, frame, chunk_bytes, &io_pool, inline).await {
                        crate::info!("connection from {peer} closed while sending: {e}");
                        return;
                    }
                }
                Ok(None) => {}
                Err(CloseConnection(reason)) => {
                    crate::warn!("closing connection from {peer}: {reason}");
                    return;
                }
            }
        }
    });
    let mut buf = BytesMut::with_capacity(16 << 10);
    'read: loop {
        loop {
            match split_frame(&mut buf, limits.socket_request_max_bytes) {
                Ok(Some(frame)) => {
                    if frame_tx.send(frame).await.is_err() {
                        break 'read;
                    }
                }
                Ok(None) => break,
                Err(e) => {
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
    // Requests already read are still handled and answered, in order; then it closes.
    drop(frame_tx);
    let _ = executor.await;
    let _ = writer.await;
}
