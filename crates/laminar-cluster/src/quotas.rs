//! Client quotas as the cluster metadata holds them: each entity's values (a user, a
//! client-id, or a user and a client-id, each named or the default), and the changes
//! AlterClientQuotas makes to them. The broker enforces them (its `quotas` module).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One part of an entity: a name, or the default (`<default>` in Kafka's tools).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// From Kafka's wire, where the default is a null name.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        name.map_or(EntityName::Default, |n| EntityName::Named(n.to_string()))
    }

    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }
}

/// Whose quotas: a user, a client-id, or both (Kafka's `user`, `client-id` and `user` +
/// `client-id` entities); at least one part is present.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "EntityWire", into = "EntityWire")]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    /// A client-id entity (`None`: the default client-id), the only kind before user quotas.
    pub fn client(client_id: Option<&str>) -> QuotaEntity {
        QuotaEntity {
            user: None,
            client_id: Some(EntityName::from_wire(client_id)),
        }
    }
}

/// How an entity is stored: a client-id entity written before there were user entities is
/// its client-id alone (`null` for the default), and still reads so.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum EntityWire {
    Parts {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<EntityName>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<EntityName>,
    },
    ClientId(Option<String>),
}

impl From<EntityWire> for QuotaEntity {
    fn from(w: EntityWire) -> QuotaEntity {
        match w {
            EntityWire::Parts { user, client_id } => QuotaEntity { user, client_id },
            EntityWire::ClientId(c) => QuotaEntity::client(c.as_deref()),
        }
    }
}

impl From<QuotaEntity> for EntityWire {
    fn from(e: QuotaEntity) -> EntityWire {
        EntityWire::Parts {
            user: e.user,
            client_id: e.client_id,
        }
    }
}

/// One entity's quotas.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(from = "EntryWire", into = "EntryWire")]
pub struct QuotaEntry {
    pub entity: QuotaEntity,
    pub values: BTreeMap<String, f64>,
}

impl Default for QuotaEntity {
    fn default() -> QuotaEntity {
        QuotaEntity::client(None)
    }
}

/// How an entry is stored: `client_id` as before user quotas (a name, or `null` for the
/// default client-id), with `user` beside it, and `no_client_id` for an entity without one.
#[derive(Serialize, Deserialize)]
struct EntryWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<EntityName>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    no_client_id: bool,
    values: BTreeMap<String, f64>,
}

impl From<EntryWire> for QuotaEntry {
    fn from(w: EntryWire) -> QuotaEntry {
        QuotaEntry {
            entity: QuotaEntity {
                user: w.user,
                client_id: (!w.no_client_id).then(|| EntityName::from_wire(w.client_id.as_deref())),
            },
            values: w.values,
        }
    }
}

impl From<QuotaEntry> for EntryWire {
    fn from(e: QuotaEntry) -> EntryWire {
        EntryWire {
            user: e.entity.user,
            client_id: e
                .entity
                .client_id
                .as_ref()
                .and_then(|c| c.to_wire().map(str::to_string)),
            no_client_id: e.entity.client_id.is_none(),
            values: e.values,
        }
    }
}

/// One entity's quota change: per quota key, the new value (`None`: removed).
pub type QuotaChange = (QuotaEntity, Vec<(String, Option<f64>)>);

/// Applies checked changes to a set of quota entries (an entity left with no quota goes).
/// Applying the same changes twice changes nothing the second time.
pub fn apply_changes(entries: &mut Vec<QuotaEntry>, changes: &[QuotaChange]) {
    for (entity, values) in changes {
        let pos = entries
            .iter()
            .position(|e| e.entity == *entity)
            .unwrap_or_else(|| {
                entries.push(QuotaEntry {
                    entity: entity.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the cluster metadata held before user quotas reads as client-id entities: an
    /// entry in the image, and a change in a command of the controller's log.
    #[test]
    fn client_id_quotas_stored_before_user_quotas_read_the_same() {
        let entry: QuotaEntry =
            serde_json::from_str(r#"{"client_id":"reader","values":{"consumer_byte_rate":100.0}}"#).unwrap();
        assert_eq!(entry.entity, QuotaEntity::client(Some("reader")));
        let default: QuotaEntry = serde_json::from_str(r#"{"client_id":null,"values":{}}"#).unwrap();
        assert_eq!(default.entity, QuotaEntity::client(None));
        let changes: Vec<QuotaChange> = serde_json::from_str(
            r#"[["reader",[["consumer_byte_rate",100.0]]],[null,[["producer_byte_rate",null]]]]"#,
        )
        .unwrap();
        assert_eq!(changes[0].0, QuotaEntity::client(Some("reader")));
        assert_eq!(changes[1].0, QuotaEntity::client(None));
        // And each kind of entity round-trips.
        for entity in [
            QuotaEntity::client(Some("c")),
            QuotaEntity::client(None),
            QuotaEntity {
                user: Some(EntityName::Named("alice".into())),
                client_id: None,
            },
            QuotaEntity {
                user: Some(EntityName::Default),
                client_id: Some(EntityName::Named("c".into())),
            },
        ] {
            let entry = QuotaEntry {
                entity: entity.clone(),
                values: BTreeMap::from([("producer_byte_rate".to_string(), 1.0)]),
            };
            let back: QuotaEntry = serde_json::from_str(&serde_json::to_string(&entry).unwrap()).unwrap();
            assert_eq!(back, entry);
            let change: QuotaChange = (entity, vec![("producer_byte_rate".into(), None)]);
            let back: QuotaChange = serde_json::from_str(&serde_json::to_string(&change).unwrap()).unwrap();
            assert_eq!(back, change);
        }
    }
}
