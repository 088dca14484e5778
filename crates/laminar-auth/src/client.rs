//! The client's side of a SASL exchange, for a broker that authenticates to another on the
//! inter-broker listener: the same mechanisms as the server side, with a user name and
//! password from the listener's JAAS configuration (`username="..." password="..."`).

use rsasl::prelude::{Mechname, SASLClient, SASLConfig, Session, State};

/// One exchange as a client: the first message, then one answer to each server message.
pub struct ClientExchange {
    mechanism: String,
    session: Session,
}

/// What the client does after a step.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientStep {
    /// Send this to the server and wait for its next message.
    Send(Vec<u8>),
    /// The client has nothing more to send: the server's answer to the last message ends
    /// the exchange (its success or failure).
    Done(Vec<u8>),
}

impl ClientExchange {
    /// `mechanism` is one of [`crate::sasl::PASSWORD_MECHANISMS`].
    pub fn start(mechanism: &str, username: &str, password: &str) -> Result<ClientExchange, String> {
        if !crate::sasl::PASSWORD_MECHANISMS.contains(&mechanism) {
            return Err(format!("SASL mechanism {mechanism} is not supported as a client"));
        }
        let config = SASLConfig::with_credentials(None, username.to_string(), password.to_string())
            .map_err(|e| e.to_string())?;
        let name = Mechname::parse(mechanism.as_bytes()).map_err(|e| e.to_string())?;
        let session = SASLClient::new(config)
            .start_suggested([&name])
            .map_err(|e| e.to_string())?;
        Ok(ClientExchange {
            mechanism: mechanism.to_string(),
            session,
        })
    }

    pub fn mechanism(&self) -> &str {
        &self.mechanism
    }

    /// The client's next message: the first (`server` is `None`; every supported mechanism
    /// has the client speak first), or its answer to the server's last message.
    pub fn step(&mut self, server: Option<&[u8]>) -> Result<ClientStep, String> {
        let mut out = Vec::new();
        match self.session.step(server, &mut out) {
            Ok(State::Running) => Ok(ClientStep::Send(out)),
            Ok(State::Finished(_)) => Ok(ClientStep::Done(out)),
            Err(e) => Err(format!("{} exchange: {e}", self.mechanism)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sasl::{Authenticator, Step, Users};
    use crate::scram::{ScramKeys, ScramMechanism};

    struct OneUser;

    impl Users for OneUser {
        fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramKeys> {
            (user == "broker")
                .then(|| ScramKeys::from_password(mechanism, b"secret", b"salt-of-broker", 4096))
        }
        fn plain(&self, user: &str, password: &[u8]) -> bool {
            user == "broker" && password == b"secret"
        }
    }

    /// Runs a client exchange against the server side: the user, or why not.
    fn exchange(mechanism: &str, password: &str) -> Result<String, String> {
        let server = Authenticator::new(
            crate::sasl::PASSWORD_MECHANISMS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            Arc::new(OneUser),
            None,
        )
        .unwrap();
        let mut server = server.start(mechanism).unwrap();
        let mut client = ClientExchange::start(mechanism, "broker", password)?;
        let mut message = match client.step(None)? {
            ClientStep::Send(m) | ClientStep::Done(m) => m,
        };
        loop {
            match server.step(&message).map_err(|e| e.to_string())? {
                Step::Continue(answer) => match client.step(Some(&answer))? {
                    ClientStep::Send(m) | ClientStep::Done(m) => message = m,
                },
                Step::Authenticated { response, user, .. } => {
                    if !response.is_empty() {
                        // SCRAM's server-final message: the client checks the server's key.
                        client.step(Some(&response))?;
                    }
                    return Ok(user);
                }
            }
        }
    }

    #[test]
    fn a_client_exchange_authenticates_with_each_mechanism_and_only_with_its_password() {
        for mechanism in crate::sasl::PASSWORD_MECHANISMS {
            assert_eq!(
                exchange(mechanism, "secret").as_deref(),
                Ok("broker"),
                "{mechanism}"
            );
            assert!(exchange(mechanism, "wrong").is_err(), "{mechanism}");
        }
    }
}
