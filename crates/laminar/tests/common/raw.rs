//! A raw Kafka client for the tests that must send what no real client sends (an attack):
//! requests encoded by the independent `kafka-protocol` crate.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A raw client on `addr`: Kafka requests encoded by the `kafka-protocol` crate, v1 headers.
pub struct Raw {
    pub stream: TcpStream,
    next: i32,
}

impl Raw {
    pub fn connect(addr: &str) -> Raw {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        Raw { stream, next: 0 }
    }

    /// Sends a request and reads its answer's body, or `None` when the broker closed the
    /// connection instead of answering.
    pub fn call<Req: kafka_protocol::protocol::Encodable, Resp: kafka_protocol::protocol::Decodable>(
        &mut self,
        key: kafka_protocol::messages::ApiKey,
        version: i16,
        req: &Req,
    ) -> Option<Resp> {
        self.call_as(key, version, version, req)
    }

    /// As [`Raw::call`] at `version`, the request encoded and the answer decoded as
    /// `codec_version`, the same shape, for a version the codec lacks (ListOffsets v11 is v10's
    /// shape; Laminar answers it in v10's).
    pub fn call_as<Req: kafka_protocol::protocol::Encodable, Resp: kafka_protocol::protocol::Decodable>(
        &mut self,
        key: kafka_protocol::messages::ApiKey,
        version: i16,
        codec_version: i16,
        req: &Req,
    ) -> Option<Resp> {
        use bytes::{Buf, BufMut, BytesMut};
        use kafka_protocol::messages::{RequestHeader, ResponseHeader};
        use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
        self.next += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = codec_version;
        header.correlation_id = self.next;
        header.client_id = Some(StrBytes::from_static_str("raw"));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, key.request_header_version(codec_version))
            .unwrap();
        buf[6..8].copy_from_slice(&version.to_be_bytes());
        req.encode(&mut buf, codec_version)
            .unwrap_or_else(|e| panic!("encoding {key:?} v{version}: {e}"));
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf).ok()?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).unwrap();
        let mut body = bytes::Bytes::from(body);
        ResponseHeader::decode(&mut body, key.response_header_version(codec_version)).unwrap();
        let resp = Resp::decode(&mut body, codec_version).unwrap();
        assert_eq!(body.remaining(), 0);
        Some(resp)
    }

    /// SaslHandshake v1 with `mechanism`: its error code.
    pub fn handshake(&mut self, mechanism: &str) -> Option<i16> {
        use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};
        let mut r = SaslHandshakeRequest::default();
        r.mechanism = kafka_protocol::protocol::StrBytes::from_string(mechanism.to_string());
        self.call::<_, SaslHandshakeResponse>(ApiKey::SaslHandshake, 1, &r)
            .map(|r| r.error_code)
    }

    /// PLAIN's one message in SaslAuthenticate v2: its error code.
    pub fn plain(&mut self, user: &str, password: &str) -> Option<i16> {
        use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};
        let mut r = SaslAuthenticateRequest::default();
        r.auth_bytes = format!("\0{user}\0{password}").into_bytes().into();
        self.call::<_, SaslAuthenticateResponse>(ApiKey::SaslAuthenticate, 2, &r)
            .map(|r| r.error_code)
    }

    /// Metadata v12 for every topic: whether it was answered.
    pub fn metadata(&mut self) -> bool {
        use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
        self.call::<_, MetadataResponse>(ApiKey::Metadata, 12, &MetadataRequest::default())
            .is_some()
    }

    /// Whether the broker closed the connection within `within` (reading nothing).
    pub fn closed_within(&mut self, within: Duration) -> bool {
        self.stream.set_read_timeout(Some(within)).unwrap();
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0))
    }
}
