//! Kernel TLS (`ssl.ktls.enable`): after rustls's handshake, the connection's keys go to the
//! kernel (`setsockopt(TCP_ULP, "tls")`, then `TLS_TX` and `TLS_RX`), and from then on the
//! socket reads and writes plaintext like a plain TCP one: responses go out with the plain
//! path's `write` and `sendfile` (the residency check included), and the kernel encrypts.
//!
//! What the kernel cannot take falls back to rustls in user space, per connection, counted:
//! a kernel without the `tls` module (`tcp_available_ulp`), a cipher suite it does not
//! implement, plaintext rustls had already decrypted. Once the keys are in the kernel there
//! is no going back: a TLS record other than application data (the client's alert, or a TLS
//! 1.3 KeyUpdate, which kernels before 6.14 cannot follow) fails the read with `EIO`, and the
//! connection is closed; the client reconnects.

use std::io;
use std::os::fd::AsRawFd;

use rustls::{CipherSuite, ConnectionTrafficSecrets, ProtocolVersion, ServerConnection};
use tokio::net::TcpStream;

/// Why a connection stays on user-space TLS, or why it is lost.
pub(crate) enum NotKernel {
    /// The kernel did not take it; the connection goes on with rustls.
    Fallback(Box<ServerConnection>, String),
    /// The keys left rustls but the kernel refused them: the connection cannot go on.
    Lost(io::Error),
}

/// Whether the kernel implements `suite` (AES-GCM 128 and 256, ChaCha20-Poly1305).
fn kernel_cipher(suite: CipherSuite) -> bool {
    matches!(
        suite,
        CipherSuite::TLS13_AES_128_GCM_SHA256
            | CipherSuite::TLS13_AES_256_GCM_SHA384
            | CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
    )
}

fn setsockopt<T>(fd: i32, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a plain C struct (or byte string) of the size passed, alive for the
    // call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One direction's keys as the kernel takes them.
fn crypto_info(
    fd: i32,
    direction: i32,
    version: u16,
    (seq, secrets): (u64, ConnectionTrafficSecrets),
) -> io::Result<()> {
    let rec_seq = seq.to_be_bytes();
    // The two AES-GCM structs differ only in their key's length: the iv rustls gives is the
    // kernel's 4-byte salt and 8-byte explicit nonce.
    macro_rules! aes_gcm {
        ($info:ty, $cipher:expr, $key:expr, $iv:expr) => {{
            let (salt, nonce) = $iv.as_ref().split_at(4);
            // SAFETY: a plain C struct, all zeros valid.
            let mut c: $info = unsafe { std::mem::zeroed() };
            c.info.version = version;
            c.info.cipher_type = $cipher;
            c.key.copy_from_slice($key.as_ref());
            c.salt.copy_from_slice(salt);
            c.iv.copy_from_slice(nonce);
            c.rec_seq = rec_seq;
            setsockopt(fd, libc::SOL_TLS, direction, &c)
        }};
    }
    match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
            aes_gcm!(
                libc::tls12_crypto_info_aes_gcm_128,
                libc::TLS_CIPHER_AES_GCM_128,
                key,
                iv
            )
        }
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            aes_gcm!(
                libc::tls12_crypto_info_aes_gcm_256,
                libc::TLS_CIPHER_AES_GCM_256,
                key,
                iv
            )
        }
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            // SAFETY: a plain C struct, all zeros valid.
            let mut c: libc::tls12_crypto_info_chacha20_poly1305 = unsafe { std::mem::zeroed() };
            c.info.version = version;
            c.info.cipher_type = libc::TLS_CIPHER_CHACHA20_POLY1305;
            c.key.copy_from_slice(key.as_ref());
            c.iv.copy_from_slice(iv.as_ref());
            c.rec_seq = rec_seq;
            setsockopt(fd, libc::SOL_TLS, direction, &c)
        }
        _ => Err(io::Error::other("a cipher the kernel does not implement")),
    }
}

/// Hands `conn`'s keys to the kernel, on `tcp`. `conn` must have finished its handshake,
/// sent everything it had to send, and hold no decrypted plaintext and no part of a record
/// it has not decrypted (the handshake read record by record).
pub(crate) fn to_kernel(tcp: &TcpStream, conn: ServerConnection) -> Result<(), NotKernel> {
    let version = match conn.protocol_version() {
        Some(ProtocolVersion::TLSv1_3) => libc::TLS_1_3_VERSION,
        Some(ProtocolVersion::TLSv1_2) => libc::TLS_1_2_VERSION,
        other => {
            return Err(NotKernel::Fallback(
                Box::new(conn),
                format!("TLS version {other:?}"),
            ))
        }
    };
    match conn.negotiated_cipher_suite().map(|s| s.suite()) {
        Some(suite) if kernel_cipher(suite) => {}
        other => {
            return Err(NotKernel::Fallback(
                Box::new(conn),
                format!("the kernel has no {other:?}"),
            ))
        }
    }
    assert!(
        !conn.is_handshaking() && !conn.wants_write(),
        "a finished, flushed handshake"
    );
    let fd = tcp.as_raw_fd();
    // Without the `tls` module (or with it disallowed) this fails, and nothing changed.
    if let Err(e) = setsockopt(fd, libc::SOL_TCP, libc::TCP_ULP, b"tls\0") {
        return Err(NotKernel::Fallback(Box::new(conn), format!("TCP_ULP tls: {e}")));
    }
    let secrets = conn
        .dangerous_extract_secrets()
        .map_err(|e| NotKernel::Lost(io::Error::other(format!("extracting the TLS keys: {e}"))))?;
    crypto_info(fd, libc::TLS_TX, version, secrets.tx)
        .and_then(|()| crypto_info(fd, libc::TLS_RX, version, secrets.rx))
        .map_err(|e| NotKernel::Lost(io::Error::new(e.kind(), format!("kernel TLS keys: {e}"))))
}

/// A TLS record type: an alert (a close_notify, or the peer's error).
pub(crate) const RECORD_ALERT: u8 = 21;
/// A TLS record type: a handshake message (after the handshake, a TLS 1.3 KeyUpdate).
pub(crate) const RECORD_HANDSHAKE: u8 = 22;

/// The type of the record at the head of a kernel TLS socket's queue, taken off it: after a
/// read failed with `EIO`, which is how the kernel refuses a plain read of a record other
/// than application data. `None` if the socket says nothing more.
pub(crate) fn take_control_record(fd: i32) -> Option<u8> {
    let mut data = [0u8; 256];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // u64s: a control buffer aligned as cmsghdr needs.
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; the pointers set into it outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` describes buffers alive for the call.
    if unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) } < 0 {
        return None;
    }
    // SAFETY: `msg` was filled by recvmsg; the header, if any, lies within `control`.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_level != libc::SOL_TLS || (*c).cmsg_type != libc::TLS_GET_RECORD_TYPE {
            return None;
        }
        Some(*libc::CMSG_DATA(c))
    }
}
