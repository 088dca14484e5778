//! Client quotas as the cluster metadata holds them: each client-id entity's values, and the
//! changes AlterClientQuotas makes to them. The broker enforces them (its `quotas` module).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One client-id's quotas (`name: None` is the default entity).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct QuotaEntry {
    pub client_id: Option<String>,
    pub values: BTreeMap<String, f64>,
}

/// One entity's quota change: its client-id (`None`: the default entity) and, per quota key,
/// the new value (`None`: removed).
pub type QuotaChange = (Option<String>, Vec<(String, Option<f64>)>);

/// Applies checked changes to a set of quota entries (an entity left with no quota goes).
/// Applying the same changes twice changes nothing the second time.
pub fn apply_changes(entries: &mut Vec<QuotaEntry>, changes: &[QuotaChange]) {
    for (client_id, values) in changes {
        let pos = entries
            .iter()
            .position(|e| e.client_id == *client_id)
            .unwrap_or_else(|| {
                entries.push(QuotaEntry {
                    client_id: client_id.clone(),
                    values: BTreeMap::new(),
                });
                entries.len() - 1
            });
        for (key, value) in values {
            match value {
                Some(v) => entries[pos].values.insert(key.clone(), *v),
                None => entries[pos].values.remove(key),
            };
        }
        if entries[pos].values.is_empty() {
            entries.remove(pos);
        }
    }
}
