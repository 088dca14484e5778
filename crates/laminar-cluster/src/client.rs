//! Kafka requests from this broker to another: a follower's fetches, and the transaction
//! coordinator's markers and the partition leaders' transaction checks. Kafka protocol, one
//! request at a time per connection, on the inter-broker listener: in TLS and after a SASL
//! exchange when that listener's security protocol says so ([`InterBrokerSecurity`]).

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::image::{BrokerId, ClusterImage};

/// A response larger than this closes the connection.
const RESPONSE_BYTES_MAX: usize = 64 << 20;
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept per broker.
const IDLE_PER_BROKER_MAX: usize = 4;

/// A TLS handshake and a SASL exchange together take no longer than this.
const SECURE_TIMEOUT: Duration = Duration::from_secs(10);

/// How this broker connects to the others' inter-broker listener: Kafka's security protocol
/// of `inter.broker.listener.name`, as the client side sees it.
#[derive(Clone, Default)]
pub struct InterBrokerSecurity {
    /// SSL and SASL_SSL: the server's certificate is checked against the truststore, and
    /// this broker's own certificate is offered (mutual TLS) when it has a keystore.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// SASL_PLAINTEXT and SASL_SSL: `sasl.mechanism.inter.broker.protocol` and the user of
    /// the listener's JAAS configuration.
    pub sasl: Option<SaslLogin>,
}

#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Stream for T {}

/// A Kafka connection to another broker, one request at a time.
pub struct BrokerConnection {
    stream: Box<dyn Stream>,
    correlation_id: i32,
    client_id: StrBytes,
}

impl BrokerConnection {
    /// Connects to `addr` (`host:port`), then makes the connection as secure as `security`
    /// says: TLS, then SASL. A refusal is `PermissionDenied`.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        security: &InterBrokerSecurity,
    ) -> io::Result<BrokerConnection> {
        let tcp = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        tcp.set_nodelay(true)?;
        let secure = async {
            let stream: Box<dyn Stream> = match &security.tls {
                None => Box::new(tcp),
                Some(config) => {
                    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                    let host = host.trim_start_matches('[').trim_end_matches(']');
                    let name = rustls::pki_types::ServerName::try_from(host.to_string())
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
                    let tls = tokio_rustls::TlsConnector::from(config.clone())
                        .connect(name, tcp)
                        .await?;
                    Box::new(tls)
                }
            };
            let mut conn = BrokerConnection {
                stream,
                correlation_id: 0,
                client_id: StrBytes::from_string(client_id.to_string()),
            };
            if let Some(login) = &security.sasl {
                conn.authenticate(login).await?;
            }
            Ok::<_, io::Error>(conn)
        };
        tokio::time::timeout(SECURE_TIMEOUT, secure)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake or SASL exchange"))?
    }

    /// SaslHandshake v1 names the mechanism; then each SaslAuthenticate carries one client
    /// message, until the server says the exchange succeeded or failed.
    async fn authenticate(&mut self, login: &SaslLogin) -> io::Result<()> {
        use kafka_protocol::messages::{
            SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
        };
        use laminar_auth::{ClientExchange, ClientStep};
        let refused = |why: String| io::Error::new(io::ErrorKind::PermissionDenied, why);
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_string(login.mechanism.clone());
        let h: SaslHandshakeResponse = self.call(ApiKey::SaslHandshake, 1, &handshake).await?;
        if h.error_code != 0 {
            return Err(refused(format!(
                "SaslHandshake for {}: error {} (enabled there: {:?})",
                login.mechanism,
                h.error_code,
                h.mechanisms.iter().map(|m| m.as_str()).collect::<Vec<_>>()
            )));
        }
        let mut exchange =
            ClientExchange::start(&login.mechanism, &login.username, &login.password).map_err(refused)?;
        let mut step = exchange.step(None).map_err(refused)?;
        loop {
            let (message, last) = match step {
                ClientStep::Send(m) => (m, false),
                ClientStep::Done(m) => (m, true),
            };
            let mut a = SaslAuthenticateRequest::default();
            a.auth_bytes = Bytes::from(message);
            let r: SaslAuthenticateResponse = self.call(ApiKey::SaslAuthenticate, 2, &a).await?;
            if r.error_code != 0 {
                return Err(refused(format!(
                    "{} as {}: error {}: {}",
                    login.mechanism,
                    login.username,
                    r.error_code,
                    r.error_message.as_ref().map_or("", |m| m.as_str())
                )));
            }
            if last {
                return Ok(());
            }
            step = exchange.step(Some(&r.auth_bytes)).map_err(refused)?;
            // SCRAM's server-final message checks the server; it answers with nothing more.
            if let ClientStep::Done(m) = &step {
                if m.is_empty() {
                    return Ok(());
                }
            }
        }
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
            // Over TLS, what the socket did not take yet waits in the session's buffer until
            // a flush.
            self.stream.flush().await?;
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
    security: RwLock<InterBrokerSecurity>,
}

impl BrokerClients {
    pub fn new(node: BrokerId) -> BrokerClients {
        BrokerClients {
            client_id: format!("laminar-broker-{node}"),
            idle: Mutex::new(HashMap::new()),
            security: RwLock::new(InterBrokerSecurity::default()),
        }
    }

    /// Set once at start, before any connection is made.
    pub fn set_security(&self, security: InterBrokerSecurity) {
        *self.security.write().unwrap() = security;
    }

    /// How connections to other brokers are made (the follower's fetcher makes its own).
    pub fn security(&self) -> InterBrokerSecurity {
        self.security.read().unwrap().clone()
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
                    let mut conn =
                        BrokerConnection::connect(&addr, &self.client_id, &self.security()).await?;
                    let resp = conn.call(key, version, request).await?;
                    (conn, resp)
                }
                Err(e) => return Err(e),
            },
            None => {
                let mut conn = BrokerConnection::connect(&addr, &self.client_id, &self.security()).await?;
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
