//! The users a SASL listener authenticates: SCRAM credentials from the cluster metadata
//! (the same on every broker, changed with AlterUserScramCredentials), PLAIN passwords from
//! the listener's JAAS configuration (`listener.name.<l>.plain.sasl.jaas.config`).

use std::collections::BTreeMap;
use std::sync::Arc;

use laminar_auth::{ScramKeys, ScramMechanism, Users};
use laminar_cluster::Cluster;

pub struct BrokerUsers {
    pub cluster: Arc<Cluster>,
    pub plain: BTreeMap<String, String>,
}

impl Users for BrokerUsers {
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramKeys> {
        let image = self.cluster.image();
        let c = image
            .scram
            .iter()
            .find(|c| c.user == user && c.mechanism == mechanism.name())?;
        Some(ScramKeys {
            iterations: c.iterations,
            salt: c.salt.clone(),
            stored_key: c.stored_key.clone(),
            server_key: c.server_key.clone(),
        })
    }

    fn plain(&self, user: &str, password: &[u8]) -> bool {
        self.plain
            .get(user)
            .is_some_and(|p| same_bytes(p.as_bytes(), password))
    }
}

/// Compares in a time that depends on the lengths only, not on where they differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
