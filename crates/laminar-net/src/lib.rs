//! The network layer: it only moves bytes. It knows frames, connections and response
//! order; it knows nothing of Kafka APIs or storage (it depends on no storage code).
//!
//! Threading model:
//! - Socket threads are the async runtime's workers (`num.network.threads`). They accept,
//!   read frames, run handlers' non-blocking parts and write responses. They must never
//!   wait on a disk: no `read`, `write`, `fsync` or `sendfile` of data that may not be in
//!   memory, and no blocking log call.
//! - File ranges in responses are sent with `sendfile` only when `cachestat` says they are
//!   resident; otherwise they are read into memory on the I/O pool first (bounded by
//!   `num.io.threads`), and sent from there.
//! - Each connection has a reader task and a writer task. The reader keeps reading requests
//!   while responses are pending, up to `max.inflight.requests.per.connection`. The writer
//!   sends responses strictly in request order, in pieces of at most
//!   `socket.send.chunk.bytes`, yielding between pieces so that one connection's 1 MB fetch
//!   responses cannot hold a socket thread while other connections wait (seed 003).

mod budget;
mod conn_io;
pub mod io_pool;
mod ktls;
pub mod observe;
pub mod open_files;
pub mod send;
pub mod server;
pub mod tls;
pub mod watchdog;

use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use laminar_protocol::responses::{FileSlice, ResponseFrame};

pub use io_pool::IoPool;
pub use observe::{throttle, waiting, NetMetrics, RequestPhases};
pub use server::{serve, NetListener, ServerHandle, ServerLimits};
pub use tls::{TlsPeer, TlsServer};

/// A file range that can be sent without copying when it is resident.
pub trait SendFile: FileSlice {
    fn raw_fd(&self) -> Option<RawFd>;
    fn position(&self) -> u64;
    /// `Some(true)` only when every page of `[offset, offset + len)` of this range is known
    /// to be in the page cache.
    fn is_resident(&self, offset: u64, len: u64) -> Option<bool>;
    /// Reads `[offset, offset + len)` of this range into memory. Blocks on the disk: runs
    /// on the I/O pool only.
    fn read_range(&self, offset: u64, len: u64) -> io::Result<Bytes>;
}

/// Why a connection is closed instead of answered. Logged with the peer's address.
#[derive(Debug)]
pub struct CloseConnection(pub String);

pub type ResponseOrClose<F> = Result<Option<ResponseFrame<F>>, CloseConnection>;
pub type HandlerFuture<F> = Pin<Box<dyn Future<Output = Handled<F>> + Send>>;
pub type LaterFuture<F> = Pin<Box<dyn Future<Output = ResponseOrClose<F>> + Send>>;

/// What a handler gives back.
pub enum Handled<F> {
    /// The response, or why the connection closes.
    Now(ResponseOrClose<F>),
    /// The request's ordered part is done (a produce's appends are in the log, in arrival
    /// order) and what is left only waits (for the fsync that covers them). The connection
    /// goes on to its next request meanwhile, so one fsync can cover several of its requests
    /// (group commit within a connection); the response is still sent in request order. The
    /// future is polled only once the responses before it are sent: what it waits for must
    /// be under way without it (the fsync asked for, deadlines already set).
    Later(LaterFuture<F>),
}

impl<F> From<ResponseOrClose<F>> for Handled<F> {
    fn from(r: ResponseOrClose<F>) -> Self {
        Handled::Now(r)
    }
}

/// What the service says a frame is, before handling it: a name for the stall detector's
/// reports and the histograms its phases go into.
pub struct RequestKind {
    pub name: &'static str,
    /// `None` for a frame that is not understood.
    pub phases: Option<Arc<RequestPhases>>,
}

/// What the network layer calls for each request frame. `None` means no response (a
/// produce with acks=0).
pub trait Service: Send + Sync + 'static {
    type File: SendFile;
    /// What the service keeps of one connection (who it is, once it has authenticated).
    type Session: Send + Sync + 'static;
    /// A connection accepted from `peer` on the listener at `listener` (its index in the
    /// list [`serve`] was given), with what its TLS handshake learned on a TLS listener.
    fn open(&self, peer: std::net::SocketAddr, listener: usize, tls: Option<&TlsPeer>) -> Arc<Self::Session>;
    /// What the connection's next frame is (a frame's meaning may depend on the
    /// connection's state: after a SASL handshake v0 it is a bare token).
    fn kind(&self, session: &Self::Session, frame: &[u8]) -> RequestKind;
    /// The largest frame the connection may send now, if less than
    /// `socket.request.max.bytes` (a client that has not authenticated yet, as Kafka's
    /// `sasl.server.max.receive.size`): a larger one closes the connection.
    fn frame_limit(&self, _session: &Self::Session) -> Option<usize> {
        None
    }
    /// When the connection must have authenticated by, while it has not (a client that
    /// never finishes its SASL exchange is closed then).
    fn authenticate_by(&self, _session: &Self::Session) -> Option<std::time::Instant> {
        None
    }
    /// Handles one frame of the connection; a connection's frames are handled one at a
    /// time, in the order they arrived.
    fn call(self: Arc<Self>, frame: Bytes, session: Arc<Self::Session>) -> HandlerFuture<Self::File>;
}
