//! A connection's two directions, plain TCP or TLS, as the reader and the writer use them.
//! The plain path is the socket's own halves, untouched by TLS.

use std::io;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use crate::tls::TlsIo;

pub(crate) enum ReadHalf {
    Plain(OwnedReadHalf),
    Tls(Arc<TlsIo>),
}

pub(crate) enum WriteHalf {
    Plain(OwnedWriteHalf),
    Tls(Arc<TlsIo>),
}

pub(crate) fn plain(stream: TcpStream) -> (ReadHalf, WriteHalf) {
    let (rd, wr) = stream.into_split();
    (ReadHalf::Plain(rd), WriteHalf::Plain(wr))
}

pub(crate) fn tls(io: TlsIo) -> (ReadHalf, WriteHalf) {
    let io = Arc::new(io);
    (ReadHalf::Tls(io.clone()), WriteHalf::Tls(io))
}

impl ReadHalf {
    /// Waits for the connection's first bytes (`false`: it closed first).
    pub(crate) async fn first_bytes(&mut self) -> bool {
        match self {
            ReadHalf::Plain(rd) => {
                let mut one = [0u8; 1];
                matches!(rd.peek(&mut one).await, Ok(n) if n > 0)
            }
            ReadHalf::Tls(io) => io.readable().await.is_ok(),
        }
    }

    pub(crate) async fn readable(&self) -> io::Result<()> {
        match self {
            ReadHalf::Plain(rd) => rd.readable().await,
            ReadHalf::Tls(io) => io.readable().await,
        }
    }

    /// After a kernel TLS read failed with `EIO`: the type of the record that made it fail,
    /// taken off the socket ([`crate::ktls::take_control_record`]).
    pub(crate) fn take_control_record(&self) -> Option<u8> {
        use std::os::fd::AsRawFd;
        match self {
            ReadHalf::Plain(rd) => crate::ktls::take_control_record(rd.as_ref().as_raw_fd()),
            ReadHalf::Tls(_) => None,
        }
    }

    /// Reads at most `room` bytes into `buf` without waiting: `Ok(0)` at the end,
    /// `WouldBlock` when nothing is there.
    pub(crate) fn try_read_buf(&mut self, buf: &mut BytesMut, room: usize) -> io::Result<usize> {
        match self {
            ReadHalf::Plain(rd) => rd.try_read_buf(&mut buf.limit(room)),
            ReadHalf::Tls(io) => io.try_read_buf(buf, room),
        }
    }
}
