//! SCRAM credentials (RFC 5802; SHA-256 and SHA-512 as RFC 7677 and Kafka's KIP-84): what a
//! server keeps of a password is its salt, iteration count, StoredKey = H(HMAC(salted,
//! "Client Key")) and ServerKey = HMAC(salted, "Server Key"), where salted is PBKDF2 of the
//! password. Neither key lets anyone log in as the user: StoredKey only checks a proof.

use rsasl::mechanisms::scram::tools::{derive_keys, hash_password};
use sha2::digest::generic_array::GenericArray;
use sha2::{Digest, Sha256, Sha512};

/// Kafka's lowest iteration count for a SCRAM credential (`ScramMechanism.minIterations`).
pub const MIN_ITERATIONS: u32 = 4096;
/// And its highest.
pub const MAX_ITERATIONS: u32 = 16384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// As the Admin API numbers them (`ScramMechanism.type`): 1 and 2.
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.kafka_type() == t)
    }

    /// The length of its hash (and of a salted password), in bytes.
    pub fn hash_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }
}

/// What the server keeps of one user's password for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramKeys {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramKeys {
    /// From what AlterUserScramCredentials carries: the salt, the iteration count and the
    /// password salted by the client (PBKDF2), which is then dropped.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> ScramKeys {
        let (stored_key, server_key) = match mechanism {
            ScramMechanism::Sha256 => {
                let (client_key, server_key) = derive_keys::<Sha256>(salted_password);
                (Sha256::digest(client_key).to_vec(), server_key.to_vec())
            }
            ScramMechanism::Sha512 => {
                let (client_key, server_key) = derive_keys::<Sha512>(salted_password);
                (Sha512::digest(client_key).to_vec(), server_key.to_vec())
            }
        };
        ScramKeys {
            iterations,
            salt: salt.to_vec(),
            stored_key,
            server_key,
        }
    }

    /// From a password (what a client does before AlterUserScramCredentials).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> ScramKeys {
        let salted = salt_password(mechanism, password, salt, iterations);
        ScramKeys::from_salted_password(mechanism, &salted, salt, iterations)
    }
}

/// PBKDF2 of `password` with the mechanism's HMAC.
pub fn salt_password(mechanism: ScramMechanism, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => {
            let mut out = GenericArray::default();
            hash_password::<Sha256>(password, iterations, salt, &mut out);
            out.to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut out = GenericArray::default();
            hash_password::<Sha512>(password, iterations, salt, &mut out);
            out.to_vec()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine;
    use hmac::{Hmac, Mac};

    /// RFC 7677 section 3: user "user", password "pencil". The keys derived here must check
    /// the client's proof and sign the server's answer exactly as in the RFC's exchange.
    #[test]
    fn rfc_7677_test_vector() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let keys = ScramKeys::from_password(ScramMechanism::Sha256, b"pencil", &salt, 4096);
        let client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first =
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final_without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth_message = format!("{client_first_bare},{server_first},{client_final_without_proof}");
        let hmac = |key: &[u8], msg: &[u8]| {
            let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
            m.update(msg);
            m.finalize().into_bytes().to_vec()
        };
        // The server's signature (the RFC's v=).
        let server_signature = hmac(&keys.server_key, auth_message.as_bytes());
        assert_eq!(
            B64.encode(server_signature),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        // The client's proof (the RFC's p=) yields a client key whose hash is StoredKey.
        let proof = B64
            .decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        let client_signature = hmac(&keys.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
        assert_eq!(Sha256::digest(&client_key).to_vec(), keys.stored_key);
    }

    #[test]
    fn keys_from_the_salted_password_are_the_keys_from_the_password() {
        for m in ScramMechanism::ALL {
            let salted = salt_password(m, b"secret", b"salt", 4096);
            assert_eq!(salted.len(), m.hash_len());
            assert_eq!(
                ScramKeys::from_salted_password(m, &salted, b"salt", 4096),
                ScramKeys::from_password(m, b"secret", b"salt", 4096)
            );
            assert_eq!(ScramMechanism::from_kafka_type(m.kafka_type()), Some(m));
            assert_eq!(ScramMechanism::from_name(m.name()), Some(m));
        }
    }
}
