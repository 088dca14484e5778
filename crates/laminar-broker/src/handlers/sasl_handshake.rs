//! SaslHandshake v1: a client on a SASL listener names its mechanism; the exchange then goes
//! in SaslAuthenticate requests. After authenticating, a client may begin again (KIP-368's
//! re-authentication) and serves on meanwhile as who it was.

use std::time::Instant;

use kafka_protocol::messages::SaslHandshakeResponse;
use laminar_protocol::requests::SaslHandshakeRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::{Auth, RequestContext, Session};

pub fn handle(session: &Session, ctx: &RequestContext, r: SaslHandshakeRequest) -> Encoded {
    let mut resp = SaslHandshakeResponse::default();
    resp.error_code = match &session.sasl {
        // Kafka answers so on a listener without SASL.
        None => ErrorCode::IllegalSaslState.code(),
        Some(sasl) => {
            resp.mechanisms = sasl.enabled().iter().map(|m| sb(m)).collect();
            let mut auth = session.auth();
            let current = match &*auth {
                Auth::Unauthenticated => Some(None),
                Auth::Authenticated { principal, expires } => Some(Some((principal.clone(), *expires))),
                Auth::Exchanging { .. } | Auth::Failed => None,
            };
            match (current, sasl.start(&r.mechanism)) {
                (None, _) => ErrorCode::IllegalSaslState.code(),
                (Some(_), None) => ErrorCode::UnsupportedSaslMechanism.code(),
                (Some(current), Some(exchange)) => {
                    // A session that expired serves nothing more while it authenticates again.
                    let current = current.filter(|(_, expires)| expires.is_none_or(|e| Instant::now() < e));
                    *auth = Auth::Exchanging { exchange, current };
                    ErrorCode::None.code()
                }
            }
        }
    };
    responses::encode(ApiKey::SaslHandshake, ctx.api_version, ctx.correlation_id, &resp)
}
