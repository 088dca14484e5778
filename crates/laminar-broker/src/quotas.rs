//! Client byte-rate quotas, as Kafka has them: `consumer_byte_rate` and
//! `producer_byte_rate` per user, per client-id, or per user and client-id, each named or the
//! default, resolved as Kafka resolves them (`quota`). Set and read with AlterClientQuotas and
//! DescribeClientQuotas (so `kafka-configs.sh --entity-type users|clients` works), held in
//! the cluster metadata. A user's quota is shared by all its connections; the default
//! user's applies to each user apart (Kafka's metric tags).
//!
//! Rates are measured as Kafka measures them: bytes over `QUOTA_WINDOW_SAMPLES` samples of
//! `QUOTA_SAMPLE_MS` each, with the window counted as at least all but one full sample, so
//! a new client is not throttled for its first burst. A client over its quota gets a
//! throttle time, `(rate - quota) / quota * window`, at most the whole window: the response
//! carries it in `throttle_time_ms`, and the connection stops reading for that long (KIP-219).

use crate::error::BrokerError;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

pub use laminar_cluster::quotas::{apply_changes, EntityName, QuotaChange, QuotaEntity, QuotaEntry};
use laminar_protocol::requests::QuotaOp;
/// Kafka's `quota.window.num` and `quota.window.size.seconds` defaults.
pub const QUOTA_WINDOW_SAMPLES: u64 = 11;
pub const QUOTA_SAMPLE_MS: u64 = 1000;
/// Clients whose rates are tracked at once; the least recently seen is forgotten beyond.
pub const QUOTA_CLIENTS_MAX: usize = 10_000;

pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CLIENT_ID: &str = "client-id";
pub const USER: &str = "user";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Fetch,
    Produce,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
        }
    }
}

/// Bytes per sample over the window, for one client and kind.
struct Window {
    /// (sample start ms, bytes), oldest first.
    samples: Vec<(u64, u64)>,
    last_seen_ms: u64,
}

impl Window {
    fn record(&mut self, now_ms: u64, bytes: u64) {
        let start = now_ms - now_ms % QUOTA_SAMPLE_MS;
        match self.samples.last_mut() {
            Some((s, b)) if *s == start => *b += bytes,
            _ => self.samples.push((start, bytes)),
        }
        let oldest = start.saturating_sub((QUOTA_WINDOW_SAMPLES - 1) * QUOTA_SAMPLE_MS);
        self.samples.retain(|(s, _)| *s >= oldest);
        self.last_seen_ms = now_ms;
    }

    /// The window's length in ms, padded as Kafka's `Rate` pads it.
    fn window_ms(&self, now_ms: u64) -> u64 {
        let oldest = self.samples.first().map_or(now_ms, |(s, _)| *s);
        let mut elapsed = now_ms.saturating_sub(oldest).max(1);
        let full = elapsed / QUOTA_SAMPLE_MS;
        if full < QUOTA_WINDOW_SAMPLES - 1 {
            elapsed += (QUOTA_WINDOW_SAMPLES - 1 - full) * QUOTA_SAMPLE_MS;
        }
        elapsed
    }

    /// Takes back bytes recorded in the current sample (a response that was not sent).
    fn unrecord(&mut self, bytes: u64) {
        if let Some((_, b)) = self.samples.last_mut() {
            *b = b.saturating_sub(bytes);
        }
    }

    fn throttle(&self, now_ms: u64, quota_bytes_per_s: f64) -> Duration {
        let window_ms = self.window_ms(now_ms);
        let bytes: u64 = self.samples.iter().map(|(_, b)| b).sum();
        let rate = bytes as f64 * 1000.0 / window_ms as f64;
        if rate <= quota_bytes_per_s {
            return Duration::ZERO;
        }
        let ms = (rate - quota_bytes_per_s) / quota_bytes_per_s * window_ms as f64;
        Duration::from_millis((ms.round() as u64).min(QUOTA_WINDOW_SAMPLES * QUOTA_SAMPLE_MS))
    }
}

pub struct Quotas {
    entries: RwLock<Vec<QuotaEntry>>,
    /// Keyed by a keyed hash of the client-id: a client-id can be 32 KiB long, and the
    /// random key keeps clients from choosing collisions.
    windows: Mutex<HashMap<(u64, QuotaKind), Window>>,
    hasher: RandomState,
    /// Rates use a monotonic clock, so a wall-clock step cannot skew a window.
    epoch: Instant,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas::new()
    }
}

impl Quotas {
    /// No quotas until the cluster metadata's arrive (`set_entries`).
    pub fn new() -> Quotas {
        Quotas {
            entries: RwLock::new(Vec::new()),
            windows: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
            epoch: Instant::now(),
        }
    }

    pub fn entries(&self) -> Vec<QuotaEntry> {
        self.entries.read().unwrap().clone()
    }

    /// The quota of `kind` that applies to `user` connected as `client_id`, and the key of
    /// the window it is measured over: the first entity that has one, in Kafka's order
    /// (user and client-id, user and the default client-id, the user, the default user and
    /// the client-id, the default user and the default client-id, the default user, the
    /// client-id, the default client-id). The window is the entity's: one for all of a
    /// user's clients under a user quota, one per user under the default user's.
    fn quota(&self, user: &str, client_id: &str, kind: QuotaKind) -> Option<(f64, u64)> {
        use EntityName::{Default, Named};
        let entries = self.entries.read().unwrap();
        // Most brokers have no quota at all: every request asks, so nothing is built for it.
        if entries.is_empty() {
            return None;
        }
        let value = |user: Option<EntityName>, client_id: Option<EntityName>| {
            entries
                .iter()
                .find(|e| e.entity.user == user && e.entity.client_id == client_id)
                .and_then(|e| e.values.get(kind.key()).copied())
        };
        let (u, c) = (|| Named(user.to_string()), || Named(client_id.to_string()));
        let levels = [
            (Some(u()), Some(c()), true, true),
            (Some(u()), Some(Default), true, true),
            (Some(u()), None, true, false),
            (Some(Default), Some(c()), true, true),
            (Some(Default), Some(Default), true, true),
            (Some(Default), None, true, false),
            (None, Some(c()), false, true),
            (None, Some(Default), false, true),
        ];
        levels
            .into_iter()
            .find_map(|(entity_user, entity_client, by_user, by_client)| {
                let quota = value(entity_user, entity_client)?;
                let tags = (
                    if by_user { user } else { "" },
                    if by_client { client_id } else { "" },
                );
                Some((quota, self.hasher.hash_one(tags)))
            })
    }

    fn now_ms(&self) -> u64 {
        // Offset by a window, so the first samples start after zero.
        self.epoch.elapsed().as_millis() as u64 + QUOTA_WINDOW_SAMPLES * QUOTA_SAMPLE_MS
    }

    /// The most a fetch may return to `user` as `client_id` at once: what its quota allows
    /// over the window (Kafka's `getMaxValueInQuotaWindow`), so that one response can always
    /// pass.
    pub fn fetch_bytes_cap(&self, user: &str, client_id: &str) -> Option<u64> {
        self.quota(user, client_id, QuotaKind::Fetch)
            .map(|(q, _)| (q * ((QUOTA_WINDOW_SAMPLES - 1) * QUOTA_SAMPLE_MS) as f64 / 1000.0) as u64)
    }

    /// Takes back bytes recorded for a response that was not sent (a throttled fetch is
    /// answered empty), as Kafka does.
    pub fn unrecord(&self, user: &str, client_id: &str, kind: QuotaKind, bytes: u64) {
        let Some((_, key)) = self.quota(user, client_id, kind) else {
            return;
        };
        if let Some(w) = self.windows.lock().unwrap().get_mut(&(key, kind)) {
            w.unrecord(bytes);
        }
    }

    /// Records `bytes` sent to (fetch) or received from (produce) `user` as `client_id` and
    /// returns how long the client must be throttled, zero when it is within its quota or
    /// has none.
    pub fn record(&self, user: &str, client_id: &str, kind: QuotaKind, bytes: u64) -> Duration {
        let Some((quota, key)) = self.quota(user, client_id, kind) else {
            return Duration::ZERO;
        };
        let now_ms = self.now_ms();
        let key = (key, kind);
        let mut windows = self.windows.lock().unwrap();
        if windows.len() >= QUOTA_CLIENTS_MAX && !windows.contains_key(&key) {
            // Bounded: forget the client seen least recently.
            if let Some(k) = windows
                .iter()
                .min_by_key(|(_, w)| w.last_seen_ms)
                .map(|(k, _)| *k)
            {
                windows.remove(&k);
            }
        }
        let w = windows.entry(key).or_insert_with(|| Window {
            samples: Vec::new(),
            last_seen_ms: now_ms,
        });
        w.record(now_ms, bytes);
        w.throttle(now_ms, quota)
    }

    /// The quotas the cluster metadata holds, applied here as they are.
    pub fn set_entries(&self, entries: Vec<QuotaEntry>) {
        let mut current = self.entries.write().unwrap();
        if *current != entries {
            *current = entries;
        }
    }
}

/// An AlterClientQuotas entry checked: a user, client-id or user and client-id entity,
/// quotas Laminar has, positive values.
pub fn checked_change(
    entity: &[(String, Option<String>)],
    ops: &[QuotaOp],
) -> Result<QuotaChange, BrokerError> {
    let entity = checked_entity(entity)?;
    for op in ops {
        if op.key != CONSUMER_BYTE_RATE && op.key != PRODUCER_BYTE_RATE {
            return Err(BrokerError::InvalidRequest(format!(
                "quota {} is not supported; Laminar has {CONSUMER_BYTE_RATE} and {PRODUCER_BYTE_RATE}",
                op.key
            )));
        }
        let positive = op.value.is_finite() && op.value > 0.0;
        if !op.remove && !positive {
            return Err(BrokerError::InvalidRequest(format!(
                "{} must be a positive number of bytes per second",
                op.key
            )));
        }
    }
    let values = ops
        .iter()
        .map(|op| (op.key.clone(), (!op.remove).then_some(op.value)))
        .collect();
    Ok((entity, values))
}

/// The entity an AlterClientQuotas entry names: a user, a client-id, or both, each at most
/// once (a `None` name is the default).
fn checked_entity(entity: &[(String, Option<String>)]) -> Result<QuotaEntity, BrokerError> {
    let mut out = QuotaEntity {
        user: None,
        client_id: None,
    };
    for (kind, name) in entity {
        let part = match kind.as_str() {
            USER => &mut out.user,
            CLIENT_ID => &mut out.client_id,
            other => {
                return Err(BrokerError::InvalidRequest(format!(
                "quota entity type {other} is not supported ({USER}, {CLIENT_ID}; ip quotas are not built)"
            )))
            }
        };
        if part.is_some() {
            return Err(BrokerError::InvalidRequest(format!(
                "entity type {kind} is given twice"
            )));
        }
        *part = Some(EntityName::from_wire(name.as_deref()));
    }
    if out.user.is_none() && out.client_id.is_none() {
        return Err(BrokerError::InvalidRequest(
            "a quota entity names a user or a client-id".into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_follows_kafkas_rate_arithmetic() {
        let mut w = Window {
            samples: Vec::new(),
            last_seen_ms: 0,
        };
        // 3 MB in the first second of a window padded to 10 s: 300 KB/s against 100 KB/s is
        // 2x over, so 2 x 10 s, capped at the 11 s window.
        w.record(100_000, 3_000_000);
        assert_eq!(w.throttle(100_500, 100_000.0), Duration::from_millis(11_000));
        // 1.5 MB, 500 ms into a sample, so over a window of 10.5 s: (rate - quota) / quota *
        // window is bytes / quota - window, 15 s - 10.5 s.
        let mut w = Window {
            samples: Vec::new(),
            last_seen_ms: 0,
        };
        w.record(200_000, 1_500_000);
        assert_eq!(w.throttle(200_500, 100_000.0), Duration::from_millis(4_500));
        // Within the quota: no throttle.
        assert_eq!(w.throttle(200_000, 200_000.0), Duration::ZERO);
        // Samples older than the window are forgotten.
        w.record(200_000 + 20_000, 10);
        assert_eq!(w.samples.len(), 1);
    }

    /// Kafka's order: the most specific entity with a quota of the kind wins, user before
    /// client-id; a user's quota is one window for all its clients, the default user's one
    /// per user, a client-id's one per client-id.
    #[test]
    fn quotas_resolve_in_kafkas_order_over_the_entitys_window() {
        use EntityName::{Default as D, Named as N};
        let entry = |user: Option<EntityName>, client_id: Option<EntityName>, rate: f64| QuotaEntry {
            entity: QuotaEntity { user, client_id },
            values: std::collections::BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), rate)]),
        };
        let q = Quotas::new();
        q.set_entries(vec![
            entry(None, Some(D), 8.0),
            entry(None, Some(N("c".into())), 7.0),
            entry(Some(D), None, 6.0),
            entry(Some(N("alice".into())), None, 3.0),
            entry(Some(N("alice".into())), Some(N("c".into())), 1.0),
        ]);
        let rate = |user: &str, client: &str| q.quota(user, client, QuotaKind::Produce).map(|(r, _)| r);
        assert_eq!(rate("alice", "c"), Some(1.0), "user and client-id");
        assert_eq!(rate("alice", "d"), Some(3.0), "the user");
        assert_eq!(
            rate("bob", "c"),
            Some(6.0),
            "the default user, before the client-id"
        );
        assert_eq!(
            q.quota("alice", "c", QuotaKind::Fetch),
            None,
            "no consumer quota anywhere"
        );
        let window = |user: &str, client: &str| q.quota(user, client, QuotaKind::Produce).unwrap().1;
        assert_eq!(
            window("alice", "d"),
            window("alice", "e"),
            "one window for all of alice's clients"
        );
        assert_ne!(
            window("bob", "d"),
            window("carol", "d"),
            "one per user under the default user's"
        );
        q.set_entries(vec![
            entry(None, Some(D), 8.0),
            entry(None, Some(N("c".into())), 7.0),
        ]);
        assert_eq!(rate("alice", "c"), Some(7.0), "the client-id");
        assert_eq!(rate("alice", "x"), Some(8.0), "the default client-id");
        assert_eq!(
            window("alice", "x"),
            window("bob", "x"),
            "a client-id's window is not per user"
        );
    }
}
