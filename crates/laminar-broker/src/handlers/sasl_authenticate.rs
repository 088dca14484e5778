//! SaslAuthenticate v0-2: one message of the SASL exchange SaslHandshake began, answered
//! with the server's next. On success the connection is the user (`User:NAME`); with
//! `connections.max.reauth.ms` its session lasts that long (v1+ tells the client, which
//! authenticates again before). A failure is answered SASL_AUTHENTICATION_FAILED after
//! `connection.failed.authentication.delay.ms`, logged with the peer, and the connection
//! then serves nothing more.

use std::time::{Duration, Instant};

use kafka_protocol::messages::SaslAuthenticateResponse;
use laminar_auth::Step;
use laminar_protocol::requests::SaslAuthenticateRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::{Auth, Principal, RequestContext, Session};
use crate::security::SecuritySettings;

pub async fn handle(
    session: &Session,
    settings: &SecuritySettings,
    ctx: &RequestContext,
    r: SaslAuthenticateRequest,
) -> Encoded {
    let mut resp = SaslAuthenticateResponse::default();
    let failed = {
        let mut auth = session.auth();
        let Auth::Exchanging { exchange, current } = &mut *auth else {
            resp.error_code = ErrorCode::IllegalSaslState.code();
            resp.error_message = Some(sb("SaslAuthenticate without a SaslHandshake before it"));
            return encode(ctx, &resp);
        };
        match exchange.step(&r.auth_bytes) {
            Ok(Step::Continue(challenge)) => {
                resp.auth_bytes = challenge.into();
                None
            }
            Ok(Step::Authenticated { response, user }) => {
                let principal = Principal::user(&user);
                match current.take() {
                    // Kafka: re-authentication may not change who the connection is.
                    Some((was, _)) if was != principal => Some(format!(
                        "re-authentication as {principal} on a connection authenticated as {was}"
                    )),
                    _ => {
                        let lifetime_ms = settings.connections_max_reauth_ms;
                        let expires =
                            (lifetime_ms > 0).then(|| Instant::now() + Duration::from_millis(lifetime_ms));
                        resp.auth_bytes = response.into();
                        resp.session_lifetime_ms = lifetime_ms as i64;
                        *auth = Auth::Authenticated { principal, expires };
                        None
                    }
                }
            }
            Err(e) => {
                resp.error_message = Some(sb(&e.to_string()));
                Some(e.detail())
            }
        }
    };
    if let Some(why) = failed {
        *session.auth() = Auth::Failed;
        crate::warn!(
            "authentication of the connection from {} on listener {} failed: {why}",
            session.peer,
            session.listener.name
        );
        resp.error_code = ErrorCode::SaslAuthenticationFailed.code();
        if resp.error_message.is_none() {
            resp.error_message = Some(sb("Authentication failed"));
        }
        resp.auth_bytes = Default::default();
        // Only this connection waits: its requests are handled one at a time, off the others'.
        tokio::time::sleep(Duration::from_millis(settings.failed_authentication_delay_ms)).await;
    }
    encode(ctx, &resp)
}

fn encode(ctx: &RequestContext, resp: &SaslAuthenticateResponse) -> Encoded {
    responses::encode(
        ApiKey::SaslAuthenticate,
        ctx.api_version,
        ctx.correlation_id,
        resp,
    )
}
