//! Writing one response: in-memory chunks with `write`, resident file ranges with
//! `sendfile`, cold file ranges read on the I/O pool first. Every piece is at most
//! `chunk_bytes`, and the task yields between pieces.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use laminar_protocol::responses::{Chunk, ResponseFrame};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;

use super::{IoPool, NetMetrics, SendFile};

async fn write_pieces(stream: &mut OwnedWriteHalf, bytes: &[u8], chunk_bytes: usize) -> io::Result<()> {
    for piece in bytes.chunks(chunk_bytes) {
        stream.write_all(piece).await?;
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

pub async fn send_response<F: SendFile>(
    stream: &mut OwnedWriteHalf,
    frame: ResponseFrame<F>,
    chunk_bytes: usize,
    io_pool: &IoPool,
    cold_reads_inline: bool,
    metrics: &NetMetrics,
) -> io::Result<()> {
    for chunk in frame.chunks {
        match chunk {
            Chunk::Bytes(b) => write_pieces(stream, &b, chunk_bytes).await?,
            Chunk::File(f) => match (f.raw_fd(), f.is_resident()) {
                (Some(fd), Some(true)) => {
                    sendfile_pieces(stream, fd, f.position(), f.len(), chunk_bytes, metrics).await?
                }
                _ if cold_reads_inline => {
                    let t = Instant::now();
                    let bytes = f.read_all()?;
                    metrics.cold_read_us.record_since(t);
                    write_pieces(stream, &bytes, chunk_bytes).await?
                }
                _ => {
                    // Not known to be resident: never let the socket thread wait for the
                    // disk. Read it on the I/O pool (which brings it into the page cache).
                    let bytes = io_pool
                        .run(move || {
                            let t = Instant::now();
                            let bytes = f.read_all();
                            (bytes, t.elapsed())
                        })
                        .await;
                    metrics.cold_read_us.record(bytes.1);
                    write_pieces(stream, &bytes.0?, chunk_bytes).await?;
                }
            },
        }
    }
    Ok(())
}
