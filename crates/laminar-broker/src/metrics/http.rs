//! The metrics endpoint: `GET /metrics` over plain HTTP/1.1, one request per connection.
//! Small and bounded: requests over `REQUEST_BYTES_MAX` or slower than
//! `REQUEST_TIMEOUT_MS` are dropped, and at most `CONNECTIONS_MAX` are served at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

const REQUEST_BYTES_MAX: usize = 8 << 10;
const REQUEST_TIMEOUT_MS: u64 = 5_000;
const CONNECTIONS_MAX: usize = 8;

/// What the endpoint serves: the whole exposition, rendered when asked (a few milliseconds
/// of CPU: called on a blocking thread, never a socket thread).
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves until the task is aborted.
pub fn serve(listener: TcpListener, render: Render) -> tokio::task::JoinHandle<()> {
    let permits = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                crate::warn!("metrics: closing connection from {peer}: {CONNECTIONS_MAX} already open");
                continue;
            };
            let render = render.clone();
            tokio::spawn(async move {
                let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
                if let Err(e) = tokio::time::timeout(timeout, answer(stream, render)).await {
                    crate::info!("metrics: connection from {peer} timed out: {e}");
                }
                drop(permit);
            });
        }
    })
}

async fn answer(mut stream: TcpStream, render: Render) {
    let peer: Option<SocketAddr> = stream.peer_addr().ok();
    let mut buf = Vec::with_capacity(1024);
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if buf.len() >= REQUEST_BYTES_MAX {
            crate::info!("metrics: request from {peer:?} over {REQUEST_BYTES_MAX} bytes");
            return;
        }
        let mut chunk = [0u8; 1024];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let line = buf.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let (status, body) = match (method, path) {
        (b"GET", b"/metrics") => {
            // Snapshotting every histogram is a few milliseconds of CPU: not on a socket
            // thread.
            let body = tokio::task::spawn_blocking(move || render())
                .await
                .unwrap_or_default();
            ("200 OK", body)
        }
        (b"GET", _) => ("404 Not Found", "only /metrics is here\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET /metrics\n".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}
