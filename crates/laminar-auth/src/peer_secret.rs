//! A secret the brokers and controllers of one cluster share, with which each side of a
//! controller-port connection proves to the other that it holds it: an HMAC-SHA256 of the
//! other side's random challenge, so the secret never travels and an answer seen once is no
//! use again. A single node makes its own at start (only it ever calls its controller); a
//! cluster reads it from a file (`controller.quorum.secret.file`).

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// The shared secret. It never prints.
#[derive(Clone)]
pub struct PeerSecret(std::sync::Arc<[u8]>);

impl std::fmt::Debug for PeerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerSecret(hidden)")
    }
}

/// The least a secret read from a file may hold: 128 bits, written as 32 hex digits or more.
pub const MIN_SECRET_BYTES: usize = 16;

/// Which side a proof is for: a client's proof is no server's, and the other way round.
#[derive(Debug, Clone, Copy)]
pub enum Side {
    Client,
    Server,
}

impl PeerSecret {
    /// A fresh random secret (a single node's, for its own calls).
    pub fn random() -> PeerSecret {
        let mut key = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut key);
        PeerSecret(key.to_vec().into())
    }

    /// From a file's contents: its text, trimmed, of at least [`MIN_SECRET_BYTES`] bytes.
    pub fn from_file_contents(contents: &[u8]) -> Result<PeerSecret, String> {
        let text = std::str::from_utf8(contents).map_err(|_| "the secret file is not text".to_string())?;
        let secret = text.trim();
        if secret.len() < MIN_SECRET_BYTES * 2 {
            return Err(format!(
                "the secret file holds {} characters; at least {} are needed (for example `openssl rand -hex 32`)",
                secret.len(),
                MIN_SECRET_BYTES * 2
            ));
        }
        Ok(PeerSecret(secret.as_bytes().to_vec().into()))
    }

    /// A random challenge for the other side, as hex.
    pub fn challenge() -> String {
        let mut nonce = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut nonce);
        hex(&nonce)
    }

    /// The proof `side` sends for `challenge`, as hex.
    pub fn prove(&self, side: Side, challenge: &str) -> String {
        hex(&self.mac(side, challenge))
    }

    /// Whether `proof` is `side`'s proof for `challenge` (in constant time).
    pub fn verify(&self, side: Side, challenge: &str, proof: &str) -> bool {
        let expected = hex(&self.mac(side, challenge));
        expected.len() == proof.len()
            && expected
                .bytes()
                .zip(proof.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    fn mac(&self, side: Side, challenge: &str) -> Vec<u8> {
        let label: &[u8] = match side {
            Side::Client => b"laminar controller client\0",
            Side::Server => b"laminar controller server\0",
        };
        Hmac::<Sha256>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length")
            .chain_update(label)
            .chain_update(challenge.as_bytes())
            .finalize()
            .into_bytes()
            .to_vec()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_holder_of_the_secret_proves_and_a_side_is_not_the_other() {
        let secret = PeerSecret::random();
        let challenge = PeerSecret::challenge();
        let proof = secret.prove(Side::Client, &challenge);
        assert!(secret.verify(Side::Client, &challenge, &proof));
        assert!(
            !secret.verify(Side::Server, &challenge, &proof),
            "a client's proof is no server's"
        );
        assert!(
            !secret.verify(Side::Client, &PeerSecret::challenge(), &proof),
            "nor for another challenge"
        );
        assert!(
            !PeerSecret::random().verify(Side::Client, &challenge, &proof),
            "nor with another secret"
        );
        assert!(format!("{secret:?}").contains("hidden"));
        assert!(PeerSecret::from_file_contents(b"short\n").is_err());
        let from_file = PeerSecret::from_file_contents(b"00112233445566778899aabbccddeeff\n").unwrap();
        let again = PeerSecret::from_file_contents(b"  00112233445566778899aabbccddeeff").unwrap();
        assert!(again.verify(Side::Server, "c", &from_file.prove(Side::Server, "c")));
    }
}
