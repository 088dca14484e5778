//! SaslAuthenticate v0-2: one message of the SASL exchange SaslHandshake began, answered
//! with the server's next. On success the connection is the user (`User:NAME`); with
//! `connections.max.reauth.ms`, or a credential that expires (an OAUTHBEARER token), its
//! session lasts until the first of the two (v1+ tells the client, which authenticates again
//! before; the connection is closed at its next request after that). A failure is answered SASL_AUTHENTICATION_FAILED after
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
            Ok(Step::Authenticated {
                response,
                user,
                expires_s,
            }) => {
                let principal = Principal::user(&user);
                match current.take() {
                    // Kafka: re-authentication may not change who the connection is.
                    Some((was, _)) if was != principal => Some(format!(
                        "re-authentication as {principal} on a connection authenticated as {was}"
                    )),
                    _ => {
                        let lifetime_ms = session_lifetime_ms(settings.connections_max_reauth_ms, expires_s);
                        let expires = lifetime_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
                        resp.auth_bytes = response.into();
                        resp.session_lifetime_ms = lifetime_ms.unwrap_or(0) as i64;
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

/// How long a session lasts, as Kafka bounds it: by `connections.max.reauth.ms` (0: no
/// bound), and by the credential's own expiry (an OAUTHBEARER token's `exp`), whichever
/// comes first; `None` when neither bounds it. A token must not keep a connection
/// authenticated past its expiry, with or without `connections.max.reauth.ms`.
fn session_lifetime_ms(max_reauth_ms: u64, credential_expires_s: Option<u64>) -> Option<u64> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let credential_ms = credential_expires_s.map(|s| s.saturating_mul(1000).saturating_sub(now_ms));
    let max_ms = (max_reauth_ms > 0).then_some(max_reauth_ms);
    match (credential_ms, max_ms) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
    }
}

#[cfg(test)]
mod tests {
    use super::session_lifetime_ms;

    #[test]
    fn a_session_ends_when_the_credential_expires_or_reauth_is_due_whichever_is_first() {
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(session_lifetime_ms(0, None), None);
        assert_eq!(session_lifetime_ms(60_000, None), Some(60_000));
        let token = session_lifetime_ms(0, Some(now_s + 30)).unwrap();
        assert!((28_000..=30_000).contains(&token), "{token}");
        assert_eq!(session_lifetime_ms(10_000, Some(now_s + 30)), Some(10_000));
        let sooner = session_lifetime_ms(60_000, Some(now_s + 30)).unwrap();
        assert!((28_000..=30_000).contains(&sooner), "{sooner}");
        assert_eq!(
            session_lifetime_ms(60_000, Some(now_s - 5)),
            Some(0),
            "expired: now"
        );
    }
}
