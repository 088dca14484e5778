//! Hand-built requests, for tests of what a real client would never send (bad input) or of
//! exact broker behaviour (replayed sequence numbers).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

pub fn header(api_key: i16, version: i16, correlation_id: i32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&api_key.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.extend_from_slice(&4i16.to_be_bytes());
    out.extend_from_slice(b"test");
    out
}

/// Sends raw bytes and returns the response body, or `None` if the broker closed the
/// connection without answering.
pub fn exchange(addr: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).ok()?;
    let mut size = [0u8; 4];
    s.read_exact(&mut size).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// A Produce v3 request of `records` to `topic` partition 0, acks=1.
pub fn produce_v3(topic: &str, records: &[u8]) -> Vec<u8> {
    let mut b = header(0, 3, 77);
    b.extend_from_slice(&(-1i16).to_be_bytes()); // transactional id: null
    b.extend_from_slice(&1i16.to_be_bytes()); // acks
    b.extend_from_slice(&30_000i32.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    b.extend_from_slice(topic.as_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(records);
    frame(&b)
}

/// The error code of the single partition in a Produce v3 response.
pub fn produce_error(body: &[u8], topic: &str) -> i16 {
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    i16::from_be_bytes([body[at], body[at + 1]])
}

/// The error code and base offset of the single partition in a Produce v3 response.
pub fn produce_result(body: &[u8], topic: &str) -> (i16, i64) {
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    (
        i16::from_be_bytes([body[at], body[at + 1]]),
        i64::from_be_bytes(body[at + 2..at + 10].try_into().unwrap()),
    )
}
