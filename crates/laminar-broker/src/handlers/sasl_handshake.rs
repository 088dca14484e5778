//! SaslHandshake v0-1: a client on a SASL listener names its mechanism; after v1 the
//! exchange goes in SaslAuthenticate requests, after v0 in bare tokens framed by their
//! length (as Kafka 4 still serves it, for older clients). After authenticating, a client may
//! begin again with v1 and the same mechanism (KIP-368's re-authentication, which needs
//! SaslAuthenticate v1); it is served nothing else until that ends.

use std::time::Instant;

use kafka_protocol::messages::SaslHandshakeResponse;
use laminar_protocol::requests::SaslHandshakeRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::{Auth, Framing, RequestContext, Session};

pub fn handle(session: &Session, ctx: &RequestContext, r: SaslHandshakeRequest) -> Encoded {
    let mut resp = SaslHandshakeResponse::default();
    resp.error_code = match &session.sasl {
        // Kafka answers so on a listener without SASL.
        None => ErrorCode::IllegalSaslState.code(),
        Some(sasl) => {
            resp.mechanisms = sasl.enabled().iter().map(|m| sb(m)).collect();
            let mut auth = session.auth();
            // Who the connection is (a re-authentication), and with which mechanism.
            let current = match &*auth {
                Auth::Unauthenticated => Some(None),
                Auth::Authenticated {
                    principal, mechanism, ..
                } => Some(Some((principal.clone(), mechanism.clone()))),
                Auth::Exchanging { .. } | Auth::Failed => None,
            };
            let framing = match ctx.api_version {
                0 => Framing::RawTokens,
                _ => Framing::Requests,
            };
            match (current, sasl.start(&r.mechanism)) {
                (None, _) => ErrorCode::IllegalSaslState.code(),
                // KIP-368: a re-authentication goes in SaslAuthenticate requests.
                (Some(Some(_)), _) if framing == Framing::RawTokens => ErrorCode::IllegalSaslState.code(),
                // Nor may it change mechanism (Kafka: "not supported for re-authentication
                // of mechanism ..."); the connection serves nothing more.
                (Some(Some((principal, was))), _) if was.as_deref() != Some(r.mechanism.as_str()) => {
                    crate::warn!(
                        "{principal} on the connection from {} asked to re-authenticate with {} instead of {}",
                        session.peer,
                        r.mechanism,
                        was.as_deref().unwrap_or("none")
                    );
                    *auth = Auth::Failed;
                    ErrorCode::UnsupportedSaslMechanism.code()
                }
                (Some(_), None) => ErrorCode::UnsupportedSaslMechanism.code(),
                (Some(current), Some(exchange)) => {
                    *auth = Auth::Exchanging {
                        exchange,
                        framing,
                        current: current.map(|(principal, _)| principal),
                        started: Instant::now(),
                    };
                    ErrorCode::None.code()
                }
            }
        }
    };
    responses::encode(ApiKey::SaslHandshake, ctx.api_version, ctx.correlation_id, &resp)
}
