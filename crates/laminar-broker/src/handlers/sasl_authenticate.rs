//! SaslAuthenticate v0-2: one message of the SASL exchange SaslHandshake v1 began, answered
//! with the server's next (after a SaslHandshake v0 the messages come bare: [`raw_token`]). On success the connection is the user (`User:NAME`); with
//! `connections.max.reauth.ms`, or a credential that expires (an OAUTHBEARER token), its
//! session lasts until the first of the two (v1+ tells the client, which authenticates again
//! before; the connection is closed at its next request after that). A failure is answered SASL_AUTHENTICATION_FAILED after
//! `connection.failed.authentication.delay.ms`, logged with the peer, and the connection
//! then serves nothing more.

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::SaslAuthenticateResponse;
use laminar_auth::Step;
use laminar_net::CloseConnection;
use laminar_protocol::requests::SaslAuthenticateRequest;
use laminar_protocol::responses::ResponseFrame;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::{Auth, RequestContext, Session};
use crate::response::Dispatched;
use crate::security::SecuritySettings;
use laminar_auth::principal::Principal;

pub async fn handle(
    session: &Session,
    settings: &SecuritySettings,
    ctx: &RequestContext,
    r: SaslAuthenticateRequest,
) -> Encoded {
    let mut resp = SaslAuthenticateResponse::default();
    match step(session, settings, &r.auth_bytes) {
        Ok(answer) => {
            resp.auth_bytes = answer.bytes.into();
            resp.session_lifetime_ms = answer.session_lifetime_ms.unwrap_or(0) as i64;
        }
        Err(Failure::NotExchanging) => {
            resp.error_code = ErrorCode::IllegalSaslState.code();
            resp.error_message = Some(sb("SaslAuthenticate without a SaslHandshake before it"));
        }
        Err(Failure::Refused { told }) => {
            resp.error_code = ErrorCode::SaslAuthenticationFailed.code();
            resp.error_message = Some(sb(told.as_deref().unwrap_or("Authentication failed")));
            // Only this connection waits: its requests are handled one at a time, off the others'.
            tokio::time::sleep(Duration::from_millis(settings.failed_authentication_delay_ms)).await;
        }
    }
    responses::encode(
        ApiKey::SaslAuthenticate,
        ctx.api_version,
        ctx.correlation_id,
        &resp,
    )
}

/// A frame after a SaslHandshake v0: a bare SASL token, answered with the server's next
/// token framed by its length alone (no response header), as Kafka's
/// `SaslServerAuthenticator` does without SaslAuthenticate headers. There is no way to
/// tell such a client why it failed: Kafka closes the connection, and so does Laminar,
/// after the same delay.
pub async fn raw_token(
    session: &Session,
    settings: &SecuritySettings,
    token: Bytes,
) -> Result<Dispatched, CloseConnection> {
    match step(session, settings, &token) {
        Ok(answer) => {
            let mut out = BytesMut::with_capacity(4 + answer.bytes.len());
            out.put_u32(answer.bytes.len() as u32);
            out.put_slice(&answer.bytes);
            Ok(Dispatched::Now(Some(ResponseFrame::from_bytes(out.freeze()))))
        }
        Err(Failure::NotExchanging) => Err(CloseConnection(
            "a bare SASL token outside a SaslHandshake v0 exchange".into(),
        )),
        Err(Failure::Refused { .. }) => {
            tokio::time::sleep(Duration::from_millis(settings.failed_authentication_delay_ms)).await;
            Err(CloseConnection(
                "its SASL authentication (SaslHandshake v0) failed".into(),
            ))
        }
    }
}

/// The server's answer to one message of the exchange.
struct Answer {
    bytes: Vec<u8>,
    /// Once authenticated: how long the session lasts (`None`: unbounded).
    session_lifetime_ms: Option<u64>,
}

enum Failure {
    /// No exchange is under way (no SaslHandshake before).
    NotExchanging,
    /// The exchange failed: the connection serves nothing more. `told`: what the client may
    /// be told (never whether the user exists); the reason is logged.
    Refused { told: Option<String> },
}

/// Takes the client's next message of the exchange SaslHandshake began, however it was
/// framed. On success the connection is the user (`User:NAME`), until its session ends.
fn step(session: &Session, settings: &SecuritySettings, input: &[u8]) -> Result<Answer, Failure> {
    let (failed, told) = {
        let mut auth = session.auth();
        let Auth::Exchanging {
            exchange, current, ..
        } = &mut *auth
        else {
            return Err(Failure::NotExchanging);
        };
        match exchange.step(input) {
            Ok(Step::Continue(challenge)) => {
                return Ok(Answer {
                    bytes: challenge,
                    session_lifetime_ms: None,
                })
            }
            Ok(Step::Authenticated {
                response,
                user,
                expires_s,
            }) => {
                let principal = Principal::user(&user);
                match current.take() {
                    // Kafka: re-authentication may not change who the connection is.
                    Some(was) if was != principal => (
                        format!("re-authentication as {principal} on a connection authenticated as {was}"),
                        None,
                    ),
                    _ => {
                        let lifetime_ms = session_lifetime_ms(settings.connections_max_reauth_ms, expires_s);
                        let expires = lifetime_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
                        let mechanism = Some(exchange.mechanism().to_string());
                        *auth = Auth::Authenticated {
                            principal,
                            expires,
                            mechanism,
                        };
                        return Ok(Answer {
                            bytes: response,
                            session_lifetime_ms: lifetime_ms,
                        });
                    }
                }
            }
            Err(e) => (e.detail(), Some(e.to_string())),
        }
    };
    *session.auth() = Auth::Failed;
    crate::warn!(
        "authentication of the connection from {} on listener {} failed: {failed}",
        session.peer,
        session.listener.name
    );
    Err(Failure::Refused { told })
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
