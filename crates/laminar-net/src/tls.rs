//! TLS on a connection, with rustls driven by hand over the connection's TCP socket, so that
//! the reader and the writer keep their shapes: the reader waits for readiness and takes what
//! is there within the request budget, the writer sends in bounded pieces.
//!
//! One `rustls::ServerConnection` serves both directions, behind a mutex that is held only
//! for the CPU work of decrypting or encrypting (never across an await). The handshake's
//! steps (certificate signing, key exchange) run on tokio's blocking threads, not on a socket
//! thread, and at most on half the cores at once, so a burst of handshakes cannot stall other
//! connections; a handshake must finish within [`HANDSHAKE_TIMEOUT`].
//!
//! In user space a file range cannot go out with `sendfile`: it is read into memory on the
//! I/O pool and encrypted here. With kernel TLS (`ssl.ktls.enable`, [`crate::ktls`]) the
//! handshake reads record by record, the keys then go to the kernel, and the connection is
//! served as a plain one.

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use rustls::ServerConnection;
use tokio::net::TcpStream;

/// A TLS handshake not done within this long closes the connection.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Plaintext taken out of rustls at a time.
const PLAINTEXT_READ_BYTES: usize = 16 << 10;

/// The server side of a listener's TLS: its current configuration (certificates may be
/// replaced while it serves; new connections get the new ones).
pub struct TlsServer {
    config: RwLock<Arc<rustls::ServerConfig>>,
    /// Hand each connection's keys to the kernel after the handshake (its configuration
    /// must allow `enable_secret_extraction`).
    kernel: bool,
}

impl TlsServer {
    pub fn new(config: Arc<rustls::ServerConfig>) -> TlsServer {
        TlsServer {
            config: RwLock::new(config),
            kernel: false,
        }
    }

    /// Kernel TLS for its connections (`ssl.ktls.enable`), where the kernel takes them.
    pub fn with_kernel_tls(mut self, on: bool) -> TlsServer {
        self.kernel = on;
        self
    }

    /// New connections use `config` from now on.
    pub fn replace(&self, config: Arc<rustls::ServerConfig>) {
        *self.config.write().unwrap() = config;
    }

    fn current(&self) -> Arc<rustls::ServerConfig> {
        self.config.read().unwrap().clone()
    }
}

/// What a TLS handshake learned of the client.
#[derive(Debug, Clone, Default)]
pub struct TlsPeer {
    /// The client's certificate chain (DER), end entity first, if it sent one.
    pub certificates: Vec<Vec<u8>>,
}

/// A connection's TLS, shared by its reader and writer.
pub struct TlsIo {
    pub tcp: TcpStream,
    state: Mutex<State>,
}

struct State {
    conn: ServerConnection,
    /// Decrypted bytes not taken by the reader yet.
    plaintext: BytesMut,
    /// The peer closed (a TCP end or a close_notify).
    eof: bool,
}

/// `io::Read` over a non-blocking socket: `WouldBlock` when nothing is there.
struct TryRead<'a>(&'a TcpStream);

impl Read for TryRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

/// Where a handshake that hands its keys to the kernel is in the TLS records it reads: it
/// never reads past the end of a record, so that what follows the client's last handshake
/// record (its first requests) stays in the socket for the kernel to decrypt.
#[derive(Default)]
struct RecordBounds {
    header: [u8; 5],
    header_got: usize,
    body_left: usize,
}

/// [`TryRead`] that stops at the end of each record ([`RecordBounds`]).
struct RecordRead<'a>(&'a TcpStream, &'a mut RecordBounds);

impl Read for RecordRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let b = &mut *self.1;
        if b.body_left > 0 {
            let want = buf.len().min(b.body_left);
            let n = self.0.try_read(&mut buf[..want])?;
            b.body_left -= n;
            return Ok(n);
        }
        let want = buf.len().min(5 - b.header_got);
        let n = self.0.try_read(&mut buf[..want])?;
        b.header[b.header_got..b.header_got + n].copy_from_slice(&buf[..n]);
        b.header_got += n;
        if b.header_got == 5 {
            b.body_left = u16::from_be_bytes([b.header[3], b.header[4]]) as usize;
            b.header_got = 0;
        }
        Ok(n)
    }
}

/// What a TLS connection runs on once its handshake is done.
pub enum Accepted {
    /// rustls in user space; with the reason kernel TLS was asked for and not taken.
    User(Box<TlsIo>, Option<String>),
    /// The kernel's TLS: the socket reads and writes plaintext.
    Kernel(TcpStream),
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

/// Writes all of `bytes` to the socket, waiting for room.
async fn write_all(tcp: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        tcp.writable().await?;
        match tcp.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The TLS records rustls has ready to send.
fn pending_records(conn: &mut ServerConnection) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out)?;
    }
    Ok(out)
}

/// Runs the server side of a TLS handshake on `tcp`, its crypto on a blocking thread, then
/// hands the keys to the kernel if the server asks for kernel TLS and the kernel takes them.
pub async fn accept(server: &TlsServer, tcp: TcpStream) -> io::Result<(Accepted, TlsPeer)> {
    let config = server.current();
    let kernel = server.kernel && config.enable_secret_extraction;
    let conn = ServerConnection::new(config).map_err(tls_error)?;
    let conn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&tcp, conn, kernel)).await {
        Ok(done) => done?,
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("TLS handshake not done within {HANDSHAKE_TIMEOUT:?}"),
            ))
        }
    };
    let peer = TlsPeer {
        certificates: conn
            .peer_certificates()
            .map(|c| c.iter().map(|c| c.to_vec()).collect())
            .unwrap_or_default(),
    };
    let io = TlsIo {
        tcp,
        state: Mutex::new(State {
            conn,
            plaintext: BytesMut::new(),
            eof: false,
        }),
    };
    // Application data the client sent with its last handshake flight.
    io.drain_plaintext()?;
    if !kernel {
        return Ok((Accepted::User(Box::new(io), None), peer));
    }
    let TlsIo { tcp, state } = io;
    let State { conn, plaintext, eof } = state.into_inner().unwrap();
    let user = |tcp, conn, plaintext, eof, why: String| {
        let io = TlsIo {
            tcp,
            state: Mutex::new(State { conn, plaintext, eof }),
        };
        Ok((Accepted::User(Box::new(io), Some(why)), peer.clone()))
    };
    if !plaintext.is_empty() || eof {
        // (Not expected: the handshake read no further than its last record.)
        return user(
            tcp,
            conn,
            plaintext,
            eof,
            "rustls had decrypted data already".into(),
        );
    }
    match crate::ktls::to_kernel(&tcp, conn) {
        Ok(()) => Ok((Accepted::Kernel(tcp), peer)),
        Err(crate::ktls::NotKernel::Lost(e)) => Err(e),
        Err(crate::ktls::NotKernel::Fallback(conn, why)) => user(tcp, *conn, plaintext, eof, why),
    }
}

/// The handshake steps that may run at once, process-wide: half the cores (at least one).
/// Without a bound, a burst of a thousand new connections ran a thousand blocking threads of
/// RSA signatures beside the socket threads, and the kernel shared the cores among all of
/// them: an established producer's p99 went from 4-5 ms to 63-68 ms; with it, 10-15 ms
/// (`bench/results/2026-11-26-vm-issue30-tls-burst/`).
fn handshake_cpu() -> &'static tokio::sync::Semaphore {
    static PERMITS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        tokio::sync::Semaphore::new((cores / 2).max(1))
    })
}

/// `record_bounded`: read no further than the end of each record ([`RecordBounds`]).
async fn handshake(
    tcp: &TcpStream,
    mut conn: ServerConnection,
    record_bounded: bool,
) -> io::Result<ServerConnection> {
    let mut bounds = RecordBounds::default();
    while conn.is_handshaking() {
        let out = pending_records(&mut conn)?;
        write_all(tcp, &out).await?;
        if !conn.is_handshaking() {
            break;
        }
        tcp.readable().await?;
        let read = if record_bounded {
            conn.read_tls(&mut RecordRead(tcp, &mut bounds))
        } else {
            conn.read_tls(&mut TryRead(tcp))
        };
        match read {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed during the TLS handshake",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
        // Signing and key agreement: off the socket threads, and at most on half the cores
        // at once, so that a burst of new connections leaves the socket threads CPU.
        let _permit = handshake_cpu()
            .acquire()
            .await
            .map_err(|e| io::Error::other(format!("TLS handshake permits: {e}")))?;
        let (back, processed) = tokio::task::spawn_blocking(move || {
            let processed = conn.process_new_packets().map(|_| ());
            (conn, processed)
        })
        .await
        .map_err(|e| io::Error::other(format!("TLS handshake task: {e}")))?;
        conn = back;
        if let Err(e) = processed {
            // The alert rustls queued tells the client why.
            let out = pending_records(&mut conn).unwrap_or_default();
            let _ = write_all(tcp, &out).await;
            return Err(tls_error(e));
        }
    }
    let out = pending_records(&mut conn)?;
    write_all(tcp, &out).await?;
    Ok(conn)
}

impl TlsIo {
    /// Moves what rustls has decrypted into the plaintext buffer.
    fn drain_plaintext(&self) -> io::Result<()> {
        let mut st = self.state.lock().unwrap();
        let State { conn, plaintext, eof } = &mut *st;
        loop {
            plaintext.reserve(PLAINTEXT_READ_BYTES);
            let mut chunk = [0u8; PLAINTEXT_READ_BYTES];
            match conn.reader().read(&mut chunk) {
                Ok(0) => {
                    *eof = true;
                    return Ok(());
                }
                Ok(n) => plaintext.put_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // The peer closed without close_notify: an end like any other.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    *eof = true;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until plaintext (or the end) is there to take.
    pub async fn readable(&self) -> io::Result<()> {
        loop {
            {
                let st = self.state.lock().unwrap();
                if !st.plaintext.is_empty() || st.eof {
                    return Ok(());
                }
            }
            self.tcp.readable().await?;
            let read = {
                let mut st = self.state.lock().unwrap();
                match st.conn.read_tls(&mut TryRead(&self.tcp)) {
                    Ok(0) => {
                        st.eof = true;
                        0
                    }
                    Ok(n) => {
                        st.conn.process_new_packets().map_err(tls_error)?;
                        n
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            };
            if read > 0 {
                self.drain_plaintext()?;
            }
        }
    }

    /// Takes up to `room` bytes of plaintext into `buf`: `Ok(0)` at the end, `WouldBlock`
    /// when there is none yet.
    pub fn try_read_buf(&self, buf: &mut BytesMut, room: usize) -> io::Result<usize> {
        let mut st = self.state.lock().unwrap();
        if st.plaintext.is_empty() {
            return if st.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = room.min(st.plaintext.len());
        buf.put_slice(&st.plaintext[..n]);
        st.plaintext.advance(n);
        Ok(n)
    }

    /// Encrypts `bytes` and sends the records.
    pub async fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        let out = {
            let mut st = self.state.lock().unwrap();
            st.conn.writer().write_all(bytes)?;
            pending_records(&mut st.conn)?
        };
        write_all(&self.tcp, &out).await
    }
}
