//! SASL exchanges as a Kafka broker runs them (SaslHandshake names the mechanism, then each
//! SaslAuthenticate carries one client message and gets one server message back): PLAIN on
//! `rsasl`, SCRAM on [`crate::scram_server`] (Kafka's checks, which older librdkafka needs),
//! OAUTHBEARER on [`crate::oauthbearer`]. The principal is the authenticated user name
//! (`User:NAME`).

use std::sync::Arc;

use rsasl::callback::{Context, SessionCallback, SessionData};
use rsasl::prelude::{Mechname, SASLConfig, SASLServer, Session, State};
use rsasl::property::{AuthId, AuthzId, Password};
use rsasl::validate::{Validate, Validation, ValidationError};

use crate::oauthbearer::{initial_response, JwtValidator};
use crate::scram::{ScramKeys, ScramMechanism};
use crate::scram_server::{ScramError, ScramServer, ScramStep};

/// Where an exchange finds its users.
pub trait Users: Send + Sync + 'static {
    /// The user's SCRAM credential for the mechanism, if it has one.
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramKeys>;
    /// Whether `password` is the user's PLAIN password.
    fn plain(&self, user: &str, password: &[u8]) -> bool;
}

/// The mechanisms with a password, on `rsasl`: the server's and the client's side.
pub const PASSWORD_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The mechanisms there is a server's exchange for.
pub const SUPPORTED: [&str; 4] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER];

pub const OAUTHBEARER: &str = "OAUTHBEARER";

/// Why an exchange failed. Its text is what the client is told, and it says no more than
/// Kafka's does: never whether the user exists.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {0}"
    )]
    InvalidCredentials(String),
    #[error("Authentication failed: client requested an authorization id that is different from username")]
    AuthorizationId,
    /// Anything else the exchange refused (a malformed message, a wrong proof); `detail`
    /// is for the broker's log, not the client.
    #[error("Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")]
    Refused { mechanism: String, detail: String },
}

impl AuthError {
    /// What the broker logs: the client's text, and why the mechanism refused.
    pub fn detail(&self) -> String {
        match self {
            AuthError::Refused { detail, .. } => format!("{self} ({detail})"),
            _ => self.to_string(),
        }
    }
}

/// Starts exchanges for the mechanisms a listener enables.
pub struct Authenticator {
    config: Arc<SASLConfig>,
    users: Arc<dyn Users>,
    enabled: Vec<String>,
    oauth: Option<Arc<JwtValidator>>,
}

impl Authenticator {
    /// `enabled`: `sasl.enabled.mechanisms`; each must be one of [`SUPPORTED`]. OAUTHBEARER
    /// needs `oauth`, how its tokens are checked.
    pub fn new(
        enabled: Vec<String>,
        users: Arc<dyn Users>,
        oauth: Option<Arc<JwtValidator>>,
    ) -> Result<Authenticator, String> {
        if let Some(m) = enabled.iter().find(|m| !SUPPORTED.contains(&m.as_str())) {
            return Err(format!(
                "SASL mechanism {m} is not supported (supported: {})",
                SUPPORTED.join(", ")
            ));
        }
        if enabled.iter().any(|m| m == OAUTHBEARER) && oauth.is_none() {
            return Err(
                "OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (the keys its tokens are signed with)"
                    .into(),
            );
        }
        let config = SASLConfig::builder()
            .with_defaults()
            .with_callback(Callback { users: users.clone() })
            .map_err(|e| format!("SASL configuration: {e}"))?;
        Ok(Authenticator {
            config,
            users,
            enabled,
            oauth,
        })
    }

    pub fn enabled(&self) -> &[String] {
        &self.enabled
    }

    /// An exchange of `mechanism`, if it is enabled.
    pub fn start(&self, mechanism: &str) -> Option<Exchange> {
        if !self.enabled.iter().any(|m| m == mechanism) {
            return None;
        }
        if mechanism == OAUTHBEARER {
            return Some(Exchange {
                inner: Inner::OAuthBearer(self.oauth.clone()?),
                mechanism: mechanism.to_string(),
            });
        }
        if let Some(m) = ScramMechanism::from_name(mechanism) {
            return Some(Exchange {
                inner: Inner::Scram(Box::new(ScramServer::new(m)), self.users.clone()),
                mechanism: mechanism.to_string(),
            });
        }
        let name = Mechname::parse(mechanism.as_bytes()).ok()?;
        let session = SASLServer::<Principal>::new(self.config.clone())
            .start_suggested(name)
            .ok()?;
        Some(Exchange {
            inner: Inner::Password(Box::new(session)),
            mechanism: mechanism.to_string(),
        })
    }
}

/// One client's exchange, from its first message to its end.
pub struct Exchange {
    inner: Inner,
    mechanism: String,
}

enum Inner {
    /// PLAIN, on `rsasl`.
    Password(Box<Session<Principal>>),
    /// SCRAM-SHA-256 and SCRAM-SHA-512, with the users' stored keys.
    Scram(Box<ScramServer>, Arc<dyn Users>),
    /// One message, a token.
    OAuthBearer(Arc<JwtValidator>),
}

/// What a step of an exchange answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The server's next message; the client answers it.
    Continue(Vec<u8>),
    /// The client is this user; the last server message goes back with the success.
    /// `expires_s`: when the credential itself expires (a token's `exp`, seconds since the
    /// epoch), which bounds the session as Kafka's `CREDENTIAL.LIFETIME.MS` does.
    Authenticated {
        response: Vec<u8>,
        user: String,
        expires_s: Option<u64>,
    },
}

impl Exchange {
    pub fn mechanism(&self) -> &str {
        &self.mechanism
    }

    /// Takes the client's next message.
    pub fn step(&mut self, input: &[u8]) -> Result<Step, AuthError> {
        let session = match &mut self.inner {
            Inner::Password(session) => session,
            Inner::OAuthBearer(validator) => return oauthbearer_step(validator, input),
            Inner::Scram(server, users) => {
                let mechanism = ScramMechanism::from_name(&self.mechanism).expect("a SCRAM exchange");
                return match server.step(input, |user| users.scram(user, mechanism)) {
                    Ok(ScramStep::Continue(challenge)) => Ok(Step::Continue(challenge)),
                    Ok(ScramStep::Authenticated { response, user }) => Ok(Step::Authenticated {
                        response,
                        user,
                        expires_s: None,
                    }),
                    Err(ScramError::InvalidCredentials) => {
                        Err(AuthError::InvalidCredentials(self.mechanism.clone()))
                    }
                    Err(ScramError::AuthorizationId) => Err(AuthError::AuthorizationId),
                    Err(ScramError::Refused(detail)) => Err(AuthError::Refused {
                        mechanism: self.mechanism.clone(),
                        detail,
                    }),
                };
            }
        };
        let mut out = Vec::new();
        let invalid = || AuthError::InvalidCredentials(self.mechanism.clone());
        match session.step(Some(input), &mut out) {
            Ok(State::Running) => Ok(Step::Continue(out)),
            Ok(State::Finished(_)) => match session.validation() {
                Some(Ok(user)) => Ok(Step::Authenticated {
                    response: out,
                    user,
                    expires_s: None,
                }),
                Some(Err(e)) => Err(e),
                None => Err(invalid()),
            },
            // An unknown user: no credential was given for it.
            Err(e) if e.is_missing_prop() => Err(invalid()),
            // A wrong proof, a malformed message.
            Err(e) => Err(AuthError::Refused {
                mechanism: self.mechanism.clone(),
                detail: format!(
                    "{e}: {}",
                    std::error::Error::source(&e).map_or(String::new(), |s| s.to_string())
                ),
            }),
        }
    }
}

/// OAUTHBEARER's one step: the token in the client's message, checked. A refusal is
/// answered at once with the error (Kafka first sends `{"status":"invalid_token"}` and
/// waits for the client's `\x01`; both clients treat either as a failed authentication).
fn oauthbearer_step(validator: &JwtValidator, input: &[u8]) -> Result<Step, AuthError> {
    let refused = |detail: String| AuthError::Refused {
        mechanism: OAUTHBEARER.to_string(),
        detail,
    };
    let (authzid, token) = initial_response(input).map_err(refused)?;
    let token = validator.validate(&token).map_err(refused)?;
    if authzid.is_some_and(|a| a != token.principal) {
        return Err(AuthError::AuthorizationId);
    }
    Ok(Step::Authenticated {
        response: Vec::new(),
        user: token.principal,
        expires_s: Some(token.expires_s),
    })
}

/// The validation an exchange ends with: the user, or why not.
struct Principal;

impl Validation for Principal {
    type Value = Result<String, AuthError>;
}

struct Callback {
    users: Arc<dyn Users>,
}

impl SessionCallback for Callback {
    fn validate(
        &self,
        session: &SessionData,
        context: &Context,
        validate: &mut Validate<'_>,
    ) -> Result<(), ValidationError> {
        let mechanism = session.mechanism().mechanism.as_str().to_string();
        let user = context.get_ref::<AuthId>().map(str::to_string);
        let authzid = context
            .get_ref::<AuthzId>()
            .filter(|a| !a.is_empty())
            .map(str::to_string);
        let password = context.get_ref::<Password>().map(<[u8]>::to_vec);
        validate.with::<Principal, _>(|| {
            let Some(user) = user else {
                return Ok(Err(AuthError::InvalidCredentials(mechanism)));
            };
            // Kafka refuses to act for another user (no proxying).
            if authzid.is_some_and(|a| a != user) {
                return Ok(Err(AuthError::AuthorizationId));
            }
            if mechanism == "PLAIN" && !password.is_some_and(|p| self.users.plain(&user, &p)) {
                return Ok(Err(AuthError::InvalidCredentials(mechanism)));
            }
            Ok(Ok(user))
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsasl::prelude::SASLClient;

    struct Alice;

    impl Users for Alice {
        fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramKeys> {
            (user == "alice").then(|| ScramKeys::from_password(mechanism, b"alice-secret", b"NaCl", 4096))
        }
        fn plain(&self, user: &str, password: &[u8]) -> bool {
            user == "alice" && password == b"alice-secret"
        }
    }

    /// Runs a whole exchange with rsasl's client as `user` with `password`.
    fn exchange(mechanism: &str, user: &str, password: &str) -> Result<String, AuthError> {
        let auth = Authenticator::new(
            PASSWORD_MECHANISMS.map(String::from).to_vec(),
            Arc::new(Alice),
            None,
        )
        .unwrap();
        let mut server = auth.start(mechanism).unwrap();
        let config = SASLConfig::with_credentials(None, user.into(), password.into()).unwrap();
        let mut client = SASLClient::new(config)
            .start_suggested(&[Mechname::parse(mechanism.as_bytes()).unwrap()])
            .unwrap();
        let mut to_server = Vec::new();
        client.step(None, &mut to_server).unwrap();
        loop {
            match server.step(&to_server)? {
                Step::Authenticated { response, user, .. } => {
                    if !response.is_empty() {
                        // The client checks the server's signature too.
                        client.step(Some(&response), &mut Vec::new()).unwrap();
                    }
                    return Ok(user);
                }
                Step::Continue(challenge) => {
                    to_server.clear();
                    client.step(Some(&challenge), &mut to_server).unwrap();
                }
            }
        }
    }

    #[test]
    fn each_mechanism_authenticates_the_user_and_refuses_a_wrong_password() {
        for m in PASSWORD_MECHANISMS {
            assert_eq!(exchange(m, "alice", "alice-secret").unwrap(), "alice", "{m}");
            for (user, password) in [("alice", "wrong"), ("mallory", "alice-secret")] {
                let e = exchange(m, user, password).unwrap_err();
                assert!(
                    e.to_string().starts_with(
                        "Authentication failed during authentication due to invalid credentials"
                    ),
                    "{m} {user}: {e:?}"
                );
            }
        }
    }

    #[test]
    fn a_mechanism_not_enabled_is_not_started() {
        let auth = Authenticator::new(vec!["SCRAM-SHA-512".into()], Arc::new(Alice), None).unwrap();
        assert!(auth.start("PLAIN").is_none());
        assert!(auth.start("SCRAM-SHA-512").is_some());
        assert!(Authenticator::new(vec!["GSSAPI".into()], Arc::new(Alice), None).is_err());
    }
}
