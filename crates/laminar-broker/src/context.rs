//! What every request handler is given about the request beside its body: who sent it, on
//! which listener, at which API version, as whom, and what the authorization step let it do.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use laminar_auth::principal::Principal;
use laminar_auth::{Authenticator, Exchange};
use laminar_protocol::ApiKey;

use crate::listeners::Listener;
use crate::security::step::Grants;
use laminar_auth::acl::{Operation, ResourceType, CLUSTER_NAME};

/// One request's context, made by the dispatch from the request header and the connection.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_version: i16,
    pub correlation_id: i32,
    /// The header's `client.id` ("" when it sent none).
    pub client_id: String,
    pub peer: SocketAddr,
    /// The listener the connection came in on: clients are told its endpoints.
    pub listener: Arc<Listener>,
    /// Who sent it: `User:ANONYMOUS` on a listener without authentication.
    pub principal: Principal,
    /// What it may do, as the authorization step decided.
    pub grants: Grants,
}

/// What the broker keeps of one connection: where it came in, and who it is.
pub struct Session {
    pub peer: SocketAddr,
    /// When the connection was accepted (and, over TLS, its handshake done).
    pub opened: Instant,
    pub listener: Arc<Listener>,
    /// The listener's SASL exchanges, on a SASL listener.
    pub sasl: Option<Arc<Authenticator>>,
    auth: Mutex<Auth>,
}

/// Where a connection is in its authentication.
pub enum Auth {
    /// On a SASL listener, before SaslHandshake: only ApiVersions and the SASL requests.
    Unauthenticated,
    /// A mechanism was chosen; SaslAuthenticate requests carry the exchange (or, after a
    /// SaslHandshake v0, the frames themselves: `framing`). `current`: the principal a
    /// re-authentication (KIP-368) must end as. Nothing but the exchange is served until it
    /// ends, which must be within [`AUTHENTICATION_TIMEOUT`] of `started`, as Kafka serves
    /// nothing while a connection re-authenticates.
    Exchanging {
        exchange: Exchange,
        framing: Framing,
        current: Option<Principal>,
        started: Instant,
    },
    /// Authenticated (or on a listener without authentication), until `expires` if
    /// `connections.max.reauth.ms` or the credential bounds the session. `mechanism`: the
    /// SASL mechanism it authenticated with, which a re-authentication must keep.
    Authenticated {
        principal: Principal,
        expires: Option<Instant>,
        mechanism: Option<String>,
    },
    /// An authentication failed: the connection only closes.
    Failed,
}

/// How the messages of a SASL exchange travel, as the handshake's version chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// SaslHandshake v1: each message in a SaslAuthenticate request (KIP-152).
    Requests,
    /// SaslHandshake v0: each frame after the handshake is a bare SASL token (a 4-byte
    /// length, then the token, no request header), answered the same way, until the
    /// exchange ends. Kafka 4 still serves it; librdkafka before 1.x and old Java clients
    /// send it.
    RawTokens,
}

/// The largest frame a client that has not authenticated may send (Kafka's
/// `sasl.server.max.receive.size`): a SASL message is small, and the request budget is not
/// for clients nobody knows.
pub const UNAUTHENTICATED_FRAME_BYTES: usize = 512 << 10;

/// A SASL client must have authenticated this long after it connected, or its connection is
/// closed: Kafka's clients do it within milliseconds, and a connection that never does
/// holds a task and a file descriptor.
pub const AUTHENTICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a connection may not do now, and why: the connection is closed with it.
pub struct Refused(pub String);

impl Session {
    /// `certified`: the principal a TLS client certificate names (on an SSL listener).
    pub fn new(
        peer: SocketAddr,
        listener: Arc<Listener>,
        sasl: Option<Arc<Authenticator>>,
        certified: Option<Principal>,
    ) -> Session {
        let auth = if sasl.is_some() {
            Auth::Unauthenticated
        } else {
            Auth::Authenticated {
                principal: certified.unwrap_or_else(Principal::anonymous),
                expires: None,
                mechanism: None,
            }
        };
        Session {
            // An IPv4 client on a dual-stack listener arrives as `::ffff:a.b.c.d`: it is the
            // IPv4 address for host ACLs, quotas and logs, as Java sees it in Kafka (a
            // `--deny-host 10.0.0.5` must hold for it).
            peer: SocketAddr::new(peer.ip().to_canonical(), peer.port()),
            opened: Instant::now(),
            listener,
            sasl,
            auth: Mutex::new(auth),
        }
    }

    /// A connection whose authentication failed before any request (a client certificate
    /// no mapping rule maps): it serves nothing, and closes at its first request.
    pub fn refused(peer: SocketAddr, listener: Arc<Listener>) -> Session {
        Session {
            peer: SocketAddr::new(peer.ip().to_canonical(), peer.port()),
            opened: Instant::now(),
            listener,
            sasl: None,
            auth: Mutex::new(Auth::Failed),
        }
    }

    /// Whether the connection is not authenticated now: before its first authentication, and
    /// while it authenticates again (a re-authentication gets the same bounds, frame size
    /// and time, as a first one).
    pub fn unauthenticated(&self) -> bool {
        !matches!(*self.auth(), Auth::Authenticated { .. })
    }

    /// When the exchange under way must have ended, or the connection closes.
    pub fn authenticate_by(&self) -> Option<Instant> {
        match &*self.auth() {
            Auth::Authenticated { .. } => None,
            Auth::Exchanging { started, .. } => Some(*started + AUTHENTICATION_TIMEOUT),
            Auth::Unauthenticated | Auth::Failed => Some(self.opened + AUTHENTICATION_TIMEOUT),
        }
    }

    /// Whether the connection's next frame is a bare SASL token (after a SaslHandshake v0),
    /// not a request.
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            *self.auth(),
            Auth::Exchanging {
                framing: Framing::RawTokens,
                ..
            }
        )
    }

    /// The connection's authentication state, to look at or change (SASL handlers only).
    pub fn auth(&self) -> std::sync::MutexGuard<'_, Auth> {
        self.auth.lock().unwrap()
    }

    /// Who sends `api` now, or why the connection must close instead, as Kafka closes it:
    /// anything but the SASL requests (and ApiVersions) during a SASL exchange, first or
    /// again (KIP-368), and anything but a SaslHandshake that begins a re-authentication
    /// once the session has expired.
    pub fn principal_for(&self, api: ApiKey, now: Instant) -> Result<Principal, Refused> {
        let sasl_request = matches!(
            api,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        );
        match &*self.auth() {
            Auth::Authenticated {
                principal, expires, ..
            } => {
                if expires.is_some_and(|e| now >= e) && api != ApiKey::SaslHandshake {
                    return Err(Refused(format!(
                        "{principal}'s session expired (connections.max.reauth.ms or its credential) before it authenticated again"
                    )));
                }
                Ok(principal.clone())
            }
            Auth::Exchanging { current, .. } if sasl_request => {
                Ok(current.clone().unwrap_or_else(Principal::anonymous))
            }
            Auth::Unauthenticated if sasl_request => Ok(Principal::anonymous()),
            Auth::Exchanging {
                current: Some(principal),
                ..
            } => Err(Refused(format!(
                "a {} request while {principal} authenticates again",
                api.name()
            ))),
            Auth::Unauthenticated | Auth::Exchanging { .. } => Err(Refused(format!(
                "unexpected {} request during SASL authentication",
                api.name()
            ))),
            Auth::Failed => Err(Refused("a request after a failed authentication".into())),
        }
    }
}

impl RequestContext {
    /// Whether the request's principal, from its host, may do `operation` on the resource:
    /// one its API's rule in the authorization step states ([`Grants::may`]).
    pub fn may(&self, operation: Operation, resource: ResourceType, name: &str) -> bool {
        self.grants.may(operation, resource, name)
    }

    /// Whether it may do `operation` on some resource of the type.
    pub fn may_any(&self, operation: Operation, resource: ResourceType) -> bool {
        self.grants.may_any(operation, resource)
    }

    /// Whether it may do `operation` on the cluster.
    pub fn may_on_cluster(&self, operation: Operation) -> bool {
        self.may(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Kafka's authorized-operations field for one resource ([`Grants::authorized_operations`]).
    /// Tools and UIs read it to tell what a user may do (the Admin client's
    /// `includeAuthorizedOperations`).
    pub fn authorized_operations(&self, resource: ResourceType, name: &str) -> i32 {
        self.grants.authorized_operations(resource, name)
    }

    /// The client's host as Kafka reports it in group descriptions (`/127.0.0.1`).
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
    }
}
