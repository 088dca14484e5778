//! Writing one response: in-memory chunks with `write`, resident file ranges with
//! `sendfile`, cold file ranges read on the I/O pool first. Every piece is at most
//! `chunk_bytes`, and the task yields between pieces.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use laminar_protocol::responses::{Chunk, ResponseFrame};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;

use super::conn_io::WriteHalf;
use super::{IoPool, NetMetrics, SendFile};

async fn write_pieces(stream: &mut WriteHalf, bytes: &[u8], chunk_bytes: usize) -> io::Result<()> {
    for piece in bytes.chunks(chunk_bytes) {
        match stream {
            WriteHalf::Plain(s) => s.write_all(piece).await?,
            WriteHalf::Tls(io) => io.write_all(piece).await?,
        }
        tokio::task::yield_now().await;
    }
    Ok(())
}

async fn sendfile_pieces(
    stream: &mut OwnedWriteHalf,
    in_fd: i32,
    position: u64,
    len: u64,
    chunk_bytes: usize,
    metrics: &NetMetrics,
) -> io::Result<()> {
    let mut offset = position as libc::off_t;
    let end = (position + len) as libc::off_t;
    while offset < end {
        let want = ((end - offset) as usize).min(chunk_bytes);
        let tcp = stream.as_ref();
        let out_fd = tcp.as_raw_fd();
        let sent = tcp
            .async_io(Interest::WRITABLE, || {
                let t = Instant::now();
                // SAFETY: both descriptors are open for the call; `offset` is a local.
                let n = unsafe { libc::sendfile(out_fd, in_fd, &mut offset, want) };
                metrics.sendfile_us.record_since(t);
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            })
            .await?;
        if sent == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shorter than the range being sent",
            ));
        }
        tokio::task::yield_now().await;
    }
    Ok(())
}

/// The most of a cold range read into memory at once for one connection: a 50 MB fetch of
/// cold data costs this much memory at a time, not 50 MB.
pub const COLD_READ_PIECE_BYTES: u64 = 1 << 20;

pub(crate) async fn send_response<F: SendFile>(
    stream: &mut WriteHalf,
    frame: ResponseFrame<F>,
    chunk_bytes: usize,
    io_pool: &IoPool,
    metrics: &NetMetrics,
) -> io::Result<()> {
    for chunk in frame.chunks {
        match chunk {
            Chunk::Bytes(b) => write_pieces(stream, &b, chunk_bytes).await?,
            Chunk::File(f) => {
                let f = Arc::new(f);
                let mut offset = 0;
                while offset < f.len() {
                    let len = (f.len() - offset).min(COLD_READ_PIECE_BYTES);
                    send_file_piece(stream, &f, offset, len, chunk_bytes, io_pool, metrics).await?;
                    offset += len;
                }
            }
        }
    }
    Ok(())
}

/// Sends `[offset, offset + len)` of a file range: with `sendfile` when it is resident,
/// otherwise read into memory first on the I/O pool (which also brings it into the page
/// cache), so that the socket thread never waits for the disk.
///
/// Over TLS (without kernel TLS) the bytes must pass through here to be encrypted: the range
/// is always read on the I/O pool.
async fn send_file_piece<F: SendFile>(
    stream: &mut WriteHalf,
    f: &Arc<F>,
    offset: u64,
    len: u64,
    chunk_bytes: usize,
    io_pool: &IoPool,
    metrics: &NetMetrics,
) -> io::Result<()> {
    match (&mut *stream, f.raw_fd(), f.is_resident(offset, len)) {
        (WriteHalf::Plain(plain), Some(fd), Some(true)) => {
            sendfile_pieces(plain, fd, f.position() + offset, len, chunk_bytes, metrics).await
        }
        _ => {
            let f = f.clone();
            let (bytes, elapsed) = io_pool
                .run(move || {
                    let t = Instant::now();
                    (f.read_range(offset, len), t.elapsed())
                })
                .await;
            metrics.cold_read_us.record(elapsed);
            write_pieces(stream, &bytes?, chunk_bytes).await
        }
    }
}
