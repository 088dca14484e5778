//! What every request handler is given about the request beside its body: who sent it, on
//! which listener, at which API version, and (once authentication exists) as whom.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::listeners::Listener;

/// Kafka's `KafkaPrincipal`: a type and a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    /// Who a client is without authentication, as Kafka names it (`User:ANONYMOUS`).
    pub fn anonymous() -> Principal {
        Principal {
            kind: "User".into(),
            name: "ANONYMOUS".into(),
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

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
    /// Who sent it. `User:ANONYMOUS` on a plaintext listener (the only kind there is yet).
    pub principal: Principal,
}

/// What the broker keeps of one connection.
#[derive(Debug)]
pub struct Session {
    pub peer: SocketAddr,
    pub listener: Arc<Listener>,
}

impl RequestContext {
    /// The client's host as Kafka reports it in group descriptions (`/127.0.0.1`).
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
    }
}
