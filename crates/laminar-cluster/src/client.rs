//! Kafka requests from this broker to another: a follower's fetches, and the transaction
//! coordinator's markers and the partition leaders' transaction checks. Plain Kafka
//! protocol, one request at a time per connection.

use std::collections::HashMap;
use std::io;
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::image::{BrokerId, ClusterImage};

/// A response larger than this closes the connection.
const RESPONSE_BYTES_MAX: usize = 64 << 20;
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept per broker.
const IDLE_PER_BROKER_MAX: usize = 4;

/// A Kafka connection to another broker, one request at a time.
pub struct BrokerConnection {
    stream: TcpStream,
    correlation_id: i32,
    client_id: StrBytes,
}

impl BrokerConnection {
    pub async fn connect(addr: &str, client_id: &str) -> io::Result<BrokerConnection> {
        let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        stream.set_nodelay(true)?;
        Ok(BrokerConnection {
            stream,
            correlation_id: 0,
            client_id: StrBytes::from_string(client_id.to_string()),
        })
    }

    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> io::Result<Resp> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(self.client_id.clone());
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, key.request_header_version(version))
            .map_err(io::Error::other)?;
        request.encode(&mut buf, version).map_err(io::Error::other)?;
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        let exchange = async {
            self.stream.write_all(&buf).await?;
            let size = self.stream.read_i32().await?;
            if size < 0 || size as usize > RESPONSE_BYTES_MAX {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a response of {size} bytes"),
                ));
            }
            let mut body = Vec::new();
            (&mut self.stream)
                .take(size as u64)
                .read_to_end(&mut body)
                .await?;
            if body.len() != size as usize {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            Ok(Bytes::from(body))
        };
        let mut body = tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        let h = ResponseHeader::decode(&mut body, key.response_header_version(version))
            .map_err(io::Error::other)?;
        if h.correlation_id != self.correlation_id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a response out of order",
            ));
        }
        let resp = Resp::decode(&mut body, version).map_err(io::Error::other)?;
        if body.has_remaining() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bytes after a response",
            ));
        }
        Ok(resp)
    }
}

/// Connections to the other brokers, reused: a request takes an idle one (or opens one)
/// and gives it back when its answer came; a connection that failed is dropped.
pub struct BrokerClients {
    client_id: String,
    idle: Mutex<HashMap<BrokerId, Vec<BrokerConnection>>>,
}

impl BrokerClients {
    pub fn new(node: BrokerId) -> BrokerClients {
        BrokerClients {
            client_id: format!("laminar-broker-{node}"),
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `request` to broker `to` at the endpoint `image` gives it. A fenced broker is
    /// not tried. A connection kept idle may have been closed by the other side meanwhile (it
    /// restarted): the request is sent once more, on a new connection, if that one was
    /// found closed. Markers carry their coordinator's epoch, so even a copy that arrives
    /// late cannot end a later transaction (TRANSACTION_COORDINATOR_FENCED).
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        image: &ClusterImage,
        to: BrokerId,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> io::Result<Resp> {
        let b = image.brokers.get(&to).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("broker {to} is not registered"))
        })?;
        if b.fenced {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("broker {to} is fenced"),
            ));
        }
        let addr = format!("{}:{}", b.host, b.port);
        let idle = self.idle.lock().unwrap().get_mut(&to).and_then(|v| v.pop());
        let (conn, answer) = match idle {
            Some(mut conn) => match conn.call(key, version, request).await {
                Ok(resp) => (conn, resp),
                // Closed by the other side while idle: the request did not get there. (A
                // request that timed out may have, and is not sent again here.)
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    let mut conn = BrokerConnection::connect(&addr, &self.client_id).await?;
                    let resp = conn.call(key, version, request).await?;
                    (conn, resp)
                }
                Err(e) => return Err(e),
            },
            None => {
                let mut conn = BrokerConnection::connect(&addr, &self.client_id).await?;
                let resp = conn.call(key, version, request).await?;
                (conn, resp)
            }
        };
        let mut idle = self.idle.lock().unwrap();
        let pool = idle.entry(to).or_default();
        if pool.len() < IDLE_PER_BROKER_MAX {
            pool.push(conn);
        }
        Ok(answer)
    }
}
