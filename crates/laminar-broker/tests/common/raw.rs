//! Hand-built requests, for tests of what a real client would never send (bad input) or of
//! exact broker behaviour (replayed sequence numbers).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

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

/// One request encoded by the `kafka-protocol` crate, and its decoded response, on `stream`.
pub fn call<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    req: &Req,
) -> Resp {
    call_as(stream, key, version, version, correlation_id, req)
}

/// Like [`call`], for a `version` the crate does not know whose request and response are
/// those of `codec_version` (ListOffsets v11 is v10 with one more timestamp value): the
/// header says `version`, the bodies are the codec's.
pub fn call_as<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    codec_version: i16,
    correlation_id: i32,
    req: &Req,
) -> Resp {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = codec_version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_static_str("laminar-test"));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, key.request_header_version(codec_version))
        .unwrap();
    buf[6..8].copy_from_slice(&version.to_be_bytes());
    let version = codec_version;
    req.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("encode {key:?} v{version}: {e}"));
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    stream.write_all(&buf).unwrap();
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .unwrap_or_else(|e| panic!("{key:?} v{version}: no response ({e}); see the broker log"));
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let rh = ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
    assert_eq!(rh.correlation_id, correlation_id);
    let resp = Resp::decode(&mut body, version)
        .unwrap_or_else(|e| panic!("decode {key:?} v{version} response: {e}"));
    assert_eq!(body.remaining(), 0, "{key:?} v{version}: bytes left over");
    resp
}
