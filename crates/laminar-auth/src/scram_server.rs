//! The server's side of a SCRAM exchange (RFC 5802, with SHA-256 and SHA-512 as RFC 7677),
//! as Kafka's `ScramSaslServer` runs it: two client messages, two server answers, checked
//! against what the server keeps of the password ([`ScramKeys`]).
//!
//! It differs from Kafka 4.3.1 in one place, on purpose: the nonce of the client's final
//! message need only *end* with the nonce the server sent. librdkafka from 0.9.x to 2.6.0
//! (Debian 12's 2.0.2 and Ubuntu's among them) sends its own nonce once more in front of it,
//! and computes its proof over the message as it sent it. Kafka 4.3.1's `ScramSaslServer`
//! compares the nonces with `equals` (read in its jar), so those clients cannot use SCRAM
//! against it (librdkafka 2.6.1 stopped doubling; its CHANGELOG ties this to a change of
//! Kafka's check in 3.8.1). Taking it
//! costs nothing: the message must still end with the server's random nonce, and the proof
//! signs the whole exchange. A strict server (rsasl's) refuses every such client.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256, Sha512};

use crate::scram::{ScramKeys, ScramMechanism};

/// Where an exchange is. One per exchange, boxed by its owner (`sasl::Inner`): the size
/// between states does not matter.
#[allow(clippy::large_enum_variant)]
enum State {
    /// Waiting for the client's first message.
    First,
    /// The server's first message was sent; waiting for the client's final one.
    Final {
        gs2_header: String,
        client_first_bare: String,
        server_first: String,
        /// The whole nonce of the server's first message (the client's, then the server's).
        nonce: String,
        keys: ScramKeys,
        /// Whether the user has a credential (else `keys` are a stand-in).
        known: bool,
        user: String,
    },
    /// Finished, or failed: no more messages.
    Done,
}

/// One client's SCRAM exchange.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

/// What a step answers.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// The server's first message; the client answers with its final one.
    Continue(Vec<u8>),
    /// The client proved it knows the user's password: the server's final message (its
    /// signature, which the client checks) goes back with the success.
    Authenticated { response: Vec<u8>, user: String },
}

/// Why an exchange failed.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramError {
    /// No such user, or a wrong password: the client is told no more than that.
    InvalidCredentials,
    /// The client asked to act as another user (authzid).
    AuthorizationId,
    /// A malformed or unexpected message; the text is for the broker's log.
    Refused(String),
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::First,
        }
    }

    /// Takes the client's next message. `credential` looks up the user's keys for this
    /// mechanism.
    pub fn step(
        &mut self,
        input: &[u8],
        credential: impl FnOnce(&str) -> Option<ScramKeys>,
    ) -> Result<ScramStep, ScramError> {
        let input = std::str::from_utf8(input).map_err(|_| refused("a message that is not UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => {
                let first = parse_client_first(input)?;
                // An unknown user goes on as a known one would, with a salt that is the same
                // at every try, and fails at the proof: the answers do not tell whether the
                // user exists.
                let (keys, known) = match credential(&first.user) {
                    // A stored credential out of Kafka's bounds (from before they were
                    // checked, or written around them) is not used, as Kafka refuses it.
                    Some(keys)
                        if (crate::scram::MIN_ITERATIONS..=crate::scram::MAX_ITERATIONS)
                            .contains(&keys.iterations) =>
                    {
                        (keys, true)
                    }
                    _ => (self.stand_in(&first.user), false),
                };
                let mut random = [0u8; 24];
                rand::thread_rng().fill_bytes(&mut random);
                let nonce = format!("{}{}", first.nonce, B64.encode(random));
                let server_first = format!("r={nonce},s={},i={}", B64.encode(&keys.salt), keys.iterations);
                let answer = server_first.clone().into_bytes();
                self.state = State::Final {
                    gs2_header: first.gs2_header,
                    client_first_bare: first.bare,
                    server_first,
                    nonce,
                    keys,
                    known,
                    user: first.user,
                };
                Ok(ScramStep::Continue(answer))
            }
            State::Final {
                gs2_header,
                client_first_bare,
                server_first,
                nonce,
                keys,
                known,
                user,
            } => {
                let (without_proof, proof) = input
                    .rsplit_once(",p=")
                    .ok_or_else(|| refused("a final message without a proof"))?;
                let mut attributes = without_proof.split(',');
                let binding = attributes
                    .next()
                    .and_then(|a| a.strip_prefix("c="))
                    .ok_or_else(|| refused("a final message without channel binding"))?;
                if B64.decode(binding).ok().as_deref() != Some(gs2_header.as_bytes()) {
                    return Err(refused("channel binding differs from the first message's header"));
                }
                let client_nonce = attributes
                    .next()
                    .and_then(|a| a.strip_prefix("r="))
                    .ok_or_else(|| refused("a final message without a nonce"))?;
                // Kafka's check (see the module's comment), not the RFC's equality.
                if !client_nonce.ends_with(&nonce) {
                    return Err(refused(
                        "the final message's nonce does not end with the server's",
                    ));
                }
                let proof = B64
                    .decode(proof)
                    .map_err(|_| refused("a proof that is not base64"))?;
                let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
                let client_signature = self.hmac(&keys.stored_key, auth_message.as_bytes());
                if proof.len() != client_signature.len() {
                    return Err(ScramError::InvalidCredentials);
                }
                let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
                if !constant_time_eq(&self.hash(&client_key), &keys.stored_key) || !known {
                    return Err(ScramError::InvalidCredentials);
                }
                let server_signature = self.hmac(&keys.server_key, auth_message.as_bytes());
                Ok(ScramStep::Authenticated {
                    response: format!("v={}", B64.encode(server_signature)).into_bytes(),
                    user,
                })
            }
            State::Done => Err(refused("a message after the exchange ended")),
        }
    }

    /// Keys for a user who has none: a salt derived from the name with a key of this
    /// process (the same name gets the same salt every time), Kafka's lowest iteration
    /// count, and keys no password matches.
    fn stand_in(&self, user: &str) -> ScramKeys {
        static SECRET: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
        let secret = SECRET.get_or_init(|| {
            let mut key = [0u8; 32];
            rand::thread_rng().fill_bytes(&mut key);
            key
        });
        let salt = Hmac::<Sha256>::new_from_slice(secret)
            .expect("HMAC takes a key of any length")
            .chain_update(self.mechanism.name().as_bytes())
            .chain_update(b"\0")
            .chain_update(user.as_bytes())
            .finalize()
            .into_bytes()
            .to_vec();
        let mut unmatched = vec![0u8; self.mechanism.hash_len()];
        rand::thread_rng().fill_bytes(&mut unmatched);
        ScramKeys {
            iterations: crate::scram::MIN_ITERATIONS,
            salt,
            stored_key: unmatched.clone(),
            server_key: unmatched,
        }
    }

    fn hmac(&self, key: &[u8], message: &[u8]) -> Vec<u8> {
        match self.mechanism {
            ScramMechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
                m.update(message);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes a key of any length");
                m.update(message);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(&self, data: &[u8]) -> Vec<u8> {
        match self.mechanism {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }
}

fn refused(why: &str) -> ScramError {
    ScramError::Refused(why.to_string())
}

/// The parts of a client's first message the exchange needs.
struct ClientFirst {
    /// `n,,` or `n,a=NAME,`: its base64 comes back as the final message's channel binding.
    gs2_header: String,
    /// The message without the header: part of what both proofs sign.
    bare: String,
    user: String,
    nonce: String,
}

/// `n,[a=authzid],n=user,r=nonce[,extensions]`. Channel binding is not offered (`n` only, as
/// Kafka's pattern takes); no extension is taken (Kafka's `tokenauth` is for delegation
/// tokens, which Laminar does not issue).
fn parse_client_first(message: &str) -> Result<ClientFirst, ScramError> {
    let rest = message
        .strip_prefix("n,")
        .ok_or_else(|| refused("a first message that asks for channel binding or lacks its header"))?;
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or_else(|| refused("a first message without its header's end"))?;
    let gs2_header = format!("n,{authzid},");
    let authzid = match authzid {
        "" => None,
        a => Some(unescape(
            a.strip_prefix("a=")
                .ok_or_else(|| refused("a malformed authorization id"))?,
        )?),
    };
    let mut attributes = bare.split(',');
    let user = attributes
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or_else(|| refused("a first message without a user name"))?;
    let user = unescape(user)?;
    let nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| refused("a first message without a nonce"))?
        .to_string();
    if let Some(extension) = attributes.next() {
        return Err(ScramError::Refused(format!(
            "unsupported extension {:?}",
            extension.split('=').next().unwrap_or_default()
        )));
    }
    if user.is_empty() {
        return Err(refused("an empty user name"));
    }
    // Kafka refuses to act for another user (no proxying).
    if authzid.is_some_and(|a| a != user) {
        return Err(ScramError::AuthorizationId);
    }
    Ok(ClientFirst {
        gs2_header,
        bare: bare.to_string(),
        user,
        nonce,
    })
}

/// A `saslname`: `=2C` is a comma and `=3D` an equals sign; any other `=` is malformed.
fn unescape(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(refused("a malformed name (a bare '=')")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Compares in a time that depends only on the lengths, so a proof's bytes cannot be
/// guessed one at a time from the answer's timing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hmac(m: ScramMechanism, key: &[u8], msg: &[u8]) -> Vec<u8> {
        ScramServer::new(m).hmac(key, msg)
    }

    /// A client as RFC 5802 has it; `doubled`: as librdkafka before 2.6.1, which sends its
    /// nonce again in front of the server's.
    fn client_final(
        m: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        doubled_nonce: Option<&str>,
    ) -> String {
        let nonce = server_first
            .split(',')
            .next()
            .unwrap()
            .strip_prefix("r=")
            .unwrap();
        let salt = B64
            .decode(
                server_first
                    .split(",s=")
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap(),
            )
            .unwrap();
        let iterations: u32 = server_first.rsplit("i=").next().unwrap().parse().unwrap();
        let salted = crate::scram::salt_password(m, password.as_bytes(), &salt, iterations);
        let client_key = hmac(m, &salted, b"Client Key");
        let stored_key = ScramServer::new(m).hash(&client_key);
        let without_proof = format!("c=biws,r={}{nonce}", doubled_nonce.unwrap_or(""));
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hmac(m, &stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        format!("{without_proof},p={}", B64.encode(proof))
    }

    fn run(m: ScramMechanism, user: &str, password: &str, doubled: bool) -> Result<ScramStep, ScramError> {
        let keys = ScramKeys::from_password(m, b"alice-secret", b"NaCl", 4096);
        let lookup = |u: &str| (u == "alice").then(|| keys.clone());
        let mut server = ScramServer::new(m);
        let cnonce = "fyko+d2lbbFgONRv9qkxdawL";
        let bare = format!("n={user},r={cnonce}");
        let ScramStep::Continue(first) = server.step(format!("n,,{bare}").as_bytes(), lookup)? else {
            panic!("continues");
        };
        let first = String::from_utf8(first).unwrap();
        assert!(first.starts_with(&format!("r={cnonce}")), "{first}");
        let last = client_final(m, password, &bare, &first, doubled.then_some(cnonce));
        server.step(last.as_bytes(), lookup)
    }

    #[test]
    fn the_password_authenticates_and_a_wrong_one_or_an_unknown_user_does_not() {
        for m in ScramMechanism::ALL {
            for doubled in [false, true] {
                let Ok(ScramStep::Authenticated { response, user }) =
                    run(m, "alice", "alice-secret", doubled)
                else {
                    panic!("{m:?} doubled={doubled}: not authenticated");
                };
                assert_eq!(user, "alice");
                assert!(response.starts_with(b"v="));
                assert_eq!(
                    run(m, "alice", "wrong", doubled),
                    Err(ScramError::InvalidCredentials)
                );
            }
            assert_eq!(
                run(m, "mallory", "alice-secret", false),
                Err(ScramError::InvalidCredentials)
            );
        }
    }

    /// Issue 41, item 10: a credential whose iteration count is out of Kafka's bounds does
    /// not authenticate, even with its password.
    #[test]
    fn a_credential_out_of_the_iteration_bounds_does_not_authenticate() {
        for iterations in [1, 4095, 16385] {
            let keys = ScramKeys::from_password(ScramMechanism::Sha256, b"pw", b"salt", iterations);
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            let bare = "n=alice,r=abc";
            let Ok(ScramStep::Continue(first)) =
                server.step(format!("n,,{bare}").as_bytes(), |_| Some(keys.clone()))
            else {
                panic!("goes on, as for any user");
            };
            let first = String::from_utf8(first).unwrap();
            let last = client_final(ScramMechanism::Sha256, "pw", bare, &first, None);
            assert_eq!(
                server.step(last.as_bytes(), |_| Some(keys.clone())),
                Err(ScramError::InvalidCredentials),
                "{iterations} iterations"
            );
        }
    }

    /// Issue 41: an unknown user is answered as a known one (a salt, stable per name), and
    /// refused only at the proof.
    #[test]
    fn an_unknown_user_gets_a_stable_salt_and_fails_only_at_the_proof() {
        let first_answer = |user: &str| {
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            let msg = format!("n,,n={user},r=abc");
            let Ok(ScramStep::Continue(answer)) = server.step(msg.as_bytes(), |_| None) else {
                panic!("an unknown user gets the server's first message");
            };
            let answer = String::from_utf8(answer).unwrap();
            answer.split(",s=").nth(1).unwrap().to_string()
        };
        assert_eq!(
            first_answer("mallory"),
            first_answer("mallory"),
            "the same salt each time"
        );
        assert_ne!(first_answer("mallory"), first_answer("trudy"));
    }

    #[test]
    fn malformed_messages_are_refused() {
        let keys = ScramKeys::from_password(ScramMechanism::Sha256, b"x", b"NaCl", 4096);
        for first in [
            "y,,n=alice,r=abc",
            "p=tls-unique,,n=alice,r=abc",
            "n,,n=alice",
            "n,,n=al=ice,r=abc",
            "n,,n=alice,r=abc,tokenauth=true",
            "n,a=bob,n=alice,r=abc",
            "n,,n=,r=abc",
        ] {
            let mut s = ScramServer::new(ScramMechanism::Sha256);
            assert!(
                s.step(first.as_bytes(), |_| Some(keys.clone())).is_err(),
                "{first}"
            );
        }
        assert_eq!(unescape("a=2Cb=3Dc").unwrap(), "a,b=c");
        // A final message whose nonce does not end with the server's.
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        s.step(b"n,,n=alice,r=abc", |_| Some(keys.clone())).unwrap();
        assert!(matches!(
            s.step(b"c=biws,r=abcXYZ,p=AAAA", |_| None),
            Err(ScramError::Refused(_))
        ));
        assert!(matches!(
            s.step(b"anything", |_| None),
            Err(ScramError::Refused(_))
        ));
    }
}
