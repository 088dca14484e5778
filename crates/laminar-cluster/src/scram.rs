//! SCRAM credentials (RFC 5802, KIP-554), kept in the cluster metadata so that every broker
//! authenticates the same users. Only what the server side of SCRAM needs is kept: the salt,
//! the iteration count, StoredKey and ServerKey. The password is never here; not even the
//! salted password, from which a client could be impersonated.

use serde::{Deserialize, Serialize};

/// One user's credential for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub user: String,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// Applies AlterUserScramCredentials: the deletions (user, mechanism), then the upsertions,
/// each replacing the user's credential for its mechanism. Kept sorted by user and mechanism.
pub fn apply_changes(
    credentials: &mut Vec<ScramCredential>,
    deletions: &[(String, String)],
    upsertions: &[ScramCredential],
) {
    credentials.retain(|c| !deletions.iter().any(|(u, m)| &c.user == u && &c.mechanism == m));
    for new in upsertions {
        credentials.retain(|c| !(c.user == new.user && c.mechanism == new.mechanism));
        credentials.push(new.clone());
    }
    credentials.sort_by(|a, b| (&a.user, &a.mechanism).cmp(&(&b.user, &b.mechanism)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(user: &str, mechanism: &str, iterations: u32) -> ScramCredential {
        ScramCredential {
            user: user.into(),
            mechanism: mechanism.into(),
            iterations,
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
        }
    }

    #[test]
    fn upsertions_replace_and_deletions_remove() {
        let mut all = Vec::new();
        apply_changes(
            &mut all,
            &[],
            &[
                cred("bob", "SCRAM-SHA-512", 4096),
                cred("alice", "SCRAM-SHA-256", 4096),
            ],
        );
        apply_changes(&mut all, &[], &[cred("alice", "SCRAM-SHA-256", 8192)]);
        assert_eq!(
            all,
            [
                cred("alice", "SCRAM-SHA-256", 8192),
                cred("bob", "SCRAM-SHA-512", 4096)
            ]
        );
        apply_changes(&mut all, &[("bob".into(), "SCRAM-SHA-512".into())], &[]);
        assert_eq!(all, [cred("alice", "SCRAM-SHA-256", 8192)]);
    }
}
