//! The controller's wire: requests between controllers (openraft's RPCs) and from brokers to
//! the controller (heartbeats, metadata changes), over TCP on the addresses of
//! `controller.quorum.voters`.
//!
//! A frame is a big-endian `u32` length and that many bytes of JSON. A connection carries
//! one request at a time; each side reconnects after any error. This is Laminar's own
//! protocol between its nodes, not Kafka's: clients never see it.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use laminar_auth::peer_secret::{PeerSecret, Side};

use super::image::{BrokerId, ClusterImage, Command, CommandResult};
use super::raft::{NodeId, TypeConfig};

/// A frame larger than this is refused: a snapshot goes in chunks (openraft's default 3 MiB),
/// and one command is at most a topic's assignment.
pub const FRAME_BYTES_MAX: usize = 64 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Serialize, Deserialize)]
pub enum ControllerRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A broker's heartbeat; the first one from a new incarnation registers it.
    Heartbeat(Heartbeat),
    /// A broker asks the active controller to change the metadata.
    Write(Command),
    /// A broker asks the active controller to place and create a topic.
    CreateTopic(TopicRequest),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopicRequest {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u16,
    pub configs: std::collections::BTreeMap<String, String>,
    pub validate_only: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Heartbeat {
    pub id: BrokerId,
    pub incarnation: String,
    pub host: String,
    pub port: u16,
    /// Every listener's advertised endpoint.
    #[serde(default)]
    pub endpoints: Vec<crate::image::Endpoint>,
    /// The newest metadata version the broker holds: the answer carries the image if the
    /// controller's is newer.
    pub known_version: u64,
    /// The broker is shutting down cleanly: fence it now, moving its leaderships.
    pub leaving: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeartbeatAnswer {
    pub fenced: bool,
    pub image: Option<ClusterImage>,
}

/// This controller is not the active one; it names the one it knows, if any.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotLeader {
    pub leader: Option<NodeId>,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum ControllerResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    Heartbeat(Result<HeartbeatAnswer, NotLeader>),
    Write(Result<CommandResult, NotLeader>),
}

impl ControllerResponse {
    /// The controller that answered is not the active one: the one it names, if any.
    pub fn not_leader(&self) -> Option<Option<NodeId>> {
        match self {
            ControllerResponse::Heartbeat(Err(n)) | ControllerResponse::Write(Err(n)) => Some(n.leader),
            _ => None,
        }
    }
}

/// What a controller connection runs over: TCP, or TLS over it.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Stream for T {}

/// The controller port's TLS, when its listener (`controller.listener.names`) is SSL: both
/// sides present a certificate of the truststore's CA (mutual TLS), so only brokers reach a
/// controller and a controller is who it says.
#[derive(Clone)]
pub struct ControllerTls {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
    /// Who, among the holders of such a certificate, the port serves (with an authorizer:
    /// the principals allowed CLUSTER_ACTION, super users among them, as Kafka's controllers
    /// serve); `None`: every one. A client certificate from the same CA does not make a
    /// client a broker.
    pub admit: Option<AdmitCertificate>,
}

/// Checks a controller-port client's certificate (DER, the end entity's), from its address,
/// against the controller's ACLs: why not, if not.
pub type AdmitCertificate =
    Arc<dyn Fn(&[u8], std::net::IpAddr, &laminar_auth::acl::Acls) -> Result<(), String> + Send + Sync>;

impl std::fmt::Debug for ControllerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControllerTls")
    }
}

/// How the controller port knows its peers, and they it: mutual TLS (an SSL controller
/// listener) and a shared secret (a single node's own, or `controller.quorum.secret.file`),
/// either or both. With neither, it takes anyone who reaches it: a cluster with an
/// authorizer refuses to start so (the broker's startup).
#[derive(Clone, Debug, Default)]
pub struct ControllerAuth {
    pub tls: Option<ControllerTls>,
    /// Each connection's two sides prove they hold it before the first request
    /// ([`laminar_auth::peer_secret`]).
    pub secret: Option<PeerSecret>,
}

/// The exchange that opens a controller-port connection when the port has a secret: the
/// server's challenge, the client's proof with its own challenge, the server's proof.
#[derive(Debug, Serialize, Deserialize)]
struct Challenge {
    challenge: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ClientProof {
    proof: String,
    challenge: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ServerProof {
    proof: String,
}

fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why.to_string())
}

/// The client's side of the secret's exchange.
async fn prove_as_client(stream: &mut dyn Stream, secret: &PeerSecret) -> io::Result<()> {
    let Challenge { challenge } = read_frame(stream).await?;
    let mine = PeerSecret::challenge();
    let proof = ClientProof {
        proof: secret.prove(Side::Client, &challenge),
        challenge: mine.clone(),
    };
    write_frame(stream, &proof).await?;
    let ServerProof { proof } = read_frame(stream).await?;
    if !secret.verify(Side::Server, &mine, &proof) {
        return Err(refused("the controller does not hold the cluster's secret"));
    }
    Ok(())
}

/// The server's side: the peer proves it holds the secret before anything else is read.
async fn prove_as_server(stream: &mut dyn Stream, secret: &PeerSecret) -> io::Result<()> {
    let challenge = PeerSecret::challenge();
    write_frame(
        stream,
        &Challenge {
            challenge: challenge.clone(),
        },
    )
    .await?;
    // The first frame must be the proof: small, and soon.
    let ClientProof {
        proof,
        challenge: theirs,
    } = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, read_frame(stream))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
        .map_err(|e| refused(&format!("no proof of the cluster's secret ({e})")))?;
    if !secret.verify(Side::Client, &challenge, &proof) {
        return Err(refused("a wrong proof of the cluster's secret"));
    }
    write_frame(
        stream,
        &ServerProof {
            proof: secret.prove(Side::Server, &theirs),
        },
    )
    .await
}

/// Connects to a controller at `addr` (`host:port`), as `auth` says.
async fn connect(addr: &str, auth: &ControllerAuth) -> io::Result<Box<dyn Stream>> {
    let mut stream = connect_transport(addr, auth.tls.as_ref()).await?;
    if let Some(secret) = &auth.secret {
        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, prove_as_client(stream.as_mut(), secret))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    }
    Ok(stream)
}

/// TCP to `addr`, in TLS with `tls`.
async fn connect_transport(addr: &str, tls: Option<&ControllerTls>) -> io::Result<Box<dyn Stream>> {
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    tcp.set_nodelay(true)?;
    let Some(tls) = tls else {
        return Ok(Box::new(tcp));
    };
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
    let stream = tokio::time::timeout(
        TLS_HANDSHAKE_TIMEOUT,
        tokio_rustls::TlsConnector::from(tls.client.clone()).connect(name, tcp),
    )
    .await
    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    Ok(Box::new(stream))
}

/// Accepts a connection on the controller port, as `auth` says: TLS first, then the proof
/// of the secret.
/// `acls`: the controller's, that the peer's certificate is judged against.
pub async fn accepted(
    tcp: TcpStream,
    auth: &ControllerAuth,
    acls: &laminar_auth::acl::Acls,
) -> io::Result<Box<dyn Stream>> {
    let mut stream = accepted_transport(tcp, auth.tls.as_ref(), acls).await?;
    if let Some(secret) = &auth.secret {
        prove_as_server(stream.as_mut(), secret).await?;
    }
    Ok(stream)
}

async fn accepted_transport(
    tcp: TcpStream,
    tls: Option<&ControllerTls>,
    acls: &laminar_auth::acl::Acls,
) -> io::Result<Box<dyn Stream>> {
    let _ = tcp.set_nodelay(true);
    let peer = tcp.peer_addr()?.ip();
    let Some(tls) = tls else {
        return Ok(Box::new(tcp));
    };
    let stream = tokio::time::timeout(
        TLS_HANDSHAKE_TIMEOUT,
        tokio_rustls::TlsAcceptor::from(tls.server.clone()).accept(tcp),
    )
    .await
    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    if let Some(admit) = &tls.admit {
        let certificate = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| io::Error::new(io::ErrorKind::PermissionDenied, "no client certificate"))?;
        admit(certificate.as_ref(), peer, acls)
            .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
    }
    Ok(Box::new(stream))
}

/// A TLS handshake on the controller port takes no longer than this.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn write_frame<T: Serialize, S: AsyncWrite + Unpin + ?Sized>(
    stream: &mut S,
    value: &T,
) -> io::Result<()> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    if body.len() > FRAME_BYTES_MAX {
        return Err(io::Error::other(format!(
            "a frame of {} bytes is too large",
            body.len()
        )));
    }
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    stream.write_all(&buf).await?;
    // Over TLS, what the socket did not take yet waits in the session's buffer until a flush.
    stream.flush().await
}

pub async fn read_frame<T: DeserializeOwned, S: AsyncRead + Unpin + ?Sized>(stream: &mut S) -> io::Result<T> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes is over the {FRAME_BYTES_MAX} bound"),
        ));
    }
    // Grown as bytes arrive, not allocated from the untrusted length.
    let mut body = Vec::new();
    (&mut *stream).take(len as u64).read_to_end(&mut body).await?;
    if body.len() != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// One connection to a controller, made on first use and again after any error. It must be
/// used on the runtime that made it.
pub struct Connection {
    addr: String,
    auth: ControllerAuth,
    stream: tokio::sync::Mutex<Option<Box<dyn Stream>>>,
}

impl Connection {
    pub fn new(addr: String, auth: ControllerAuth) -> Connection {
        Connection {
            addr,
            auth,
            stream: tokio::sync::Mutex::new(None),
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends one request and waits for its answer, at most `timeout`.
    pub async fn call(
        &self,
        request: &ControllerRequest,
        timeout: Duration,
    ) -> Result<ControllerResponse, CallError> {
        let mut guard = self.stream.lock().await;
        if guard.is_none() {
            let stream = connect(&self.addr, &self.auth)
                .await
                .map_err(CallError::Unreachable)?;
            *guard = Some(stream);
        }
        let stream = guard.as_mut().expect("connected");
        let exchanged = tokio::time::timeout(timeout, async {
            write_frame(stream.as_mut(), request).await?;
            read_frame::<ControllerResponse, _>(stream.as_mut()).await
        })
        .await;
        match exchanged {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                *guard = None;
                Err(CallError::Failed(e))
            }
            Err(_) => {
                *guard = None;
                Err(CallError::Failed(io::ErrorKind::TimedOut.into()))
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unreachable: {0}")]
    Unreachable(io::Error),
    #[error("{0}")]
    Failed(io::Error),
}

/// openraft's connections to the other controllers.
pub struct Network {
    pub auth: ControllerAuth,
}

pub struct Peer {
    target: NodeId,
    connection: Connection,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer {
            target,
            connection: Connection::new(node.addr.clone(), self.auth.clone()),
        }
    }
}

impl Peer {
    async fn call<E: std::error::Error>(
        &self,
        request: ControllerRequest,
        option: &RPCOption,
    ) -> Result<ControllerResponse, RPCError<NodeId, BasicNode, E>> {
        self.connection
            .call(&request, option.hard_ttl())
            .await
            .map_err(|e| match e {
                CallError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
                CallError::Failed(e) => RPCError::Network(NetworkError::new(&e)),
            })
    }

    fn unexpected<E: std::error::Error>(&self, what: &str) -> RPCError<NodeId, BasicNode, E> {
        RPCError::Network(NetworkError::new(&io::Error::other(format!(
            "controller {} answered a {what} with something else",
            self.target
        ))))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self.call(ControllerRequest::AppendEntries(rpc), &option).await? {
            ControllerResponse::AppendEntries(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected("AppendEntries")),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self
            .call(ControllerRequest::InstallSnapshot(rpc), &option)
            .await?
        {
            ControllerResponse::InstallSnapshot(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected("InstallSnapshot")),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self.call(ControllerRequest::Vote(rpc), &option).await? {
            ControllerResponse::Vote(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected("Vote")),
        }
    }
}
