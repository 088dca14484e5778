//! Durable group state: committed offsets and deletions, as records in an internal log of
//! our own (`__laminar_groups-0`, the role `__consumer_offsets` plays in Kafka). Each
//! change is appended and fsynced before it is acknowledged, and the log is replayed into
//! the coordinator at startup.

use std::sync::Arc;

use laminar_records::{decode_records, validate_batches, BatchBuilder, Compression, RecordSpec};
use laminar_storage::backend::read_exact_at;
use laminar_storage::{Log, LogConfig, LogId, Offset, Store};
use serde::{Deserialize, Serialize};

use super::{CommittedOffset, Coordinator};

pub const GROUPS_LOG_TOPIC: &str = "__laminar_groups";
/// Bound on one decoded record batch of the internal log.
const GROUP_BATCH_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GroupRecord {
    Offset {
        group: String,
        topic: String,
        partition: i32,
        offset: i64,
        leader_epoch: i32,
        metadata: Option<String>,
        commit_ms: i64,
    },
    OffsetDeleted {
        group: String,
        topic: String,
        partition: i32,
    },
    GroupDeleted {
        group: String,
    },
}

/// Group records appended and not yet applied, by the offset of their batch's last record.
pub type Pending = Arc<std::sync::Mutex<std::collections::BTreeMap<Offset, Vec<GroupRecord>>>>;

pub struct GroupStore {
    pub log: Arc<Log>,
    /// Records reach memory in log order once durable, whichever request's fsync wait wakes
    /// first: otherwise two commits to one partition could leave the older in memory while
    /// the log (and so the next start) holds the newer.
    pub pending: Pending,
}

impl GroupStore {
    /// Opens (or creates) the internal log. Blocking: call it off the socket threads.
    pub fn open(store: &Store) -> Result<GroupStore, String> {
        let id = LogId::new(GROUPS_LOG_TOPIC, 0);
        let log = match store.log(&id) {
            Some(l) => l,
            None => {
                let config = LogConfig {
                    segment_bytes: 64 << 20,
                    retention_ms: None,
                    ..LogConfig::default()
                };
                store.create_log(&id, config).map_err(|e| e.to_string())?
            }
        };
        let config = LogConfig {
            segment_bytes: 64 << 20,
            retention_ms: None,
            ..LogConfig::default()
        };
        log.set_config(config)?;
        Ok(GroupStore {
            log,
            pending: Pending::default(),
        })
    }

    /// Encodes records as one batch. The append itself runs on a storage thread.
    pub fn encode(records: &[GroupRecord]) -> Vec<u8> {
        let now = laminar_storage::now_ms();
        let mut b = BatchBuilder::new(Compression::None, now);
        for r in records {
            let group = match r {
                GroupRecord::Offset { group, .. }
                | GroupRecord::OffsetDeleted { group, .. }
                | GroupRecord::GroupDeleted { group } => group,
            };
            b.push(RecordSpec {
                timestamp_ms: now,
                key: Some(group.as_bytes().to_vec()),
                value: Some(serde_json::to_vec(r).expect("records serialise")),
                headers: vec![],
            });
        }
        b.build().expect("batch builds")
    }

    /// Reads the whole internal log into the coordinator. Blocking: startup only.
    pub fn replay(&self, coordinator: &Coordinator) -> Result<usize, String> {
        let mut offset = self.log.log_start();
        let mut applied = 0;
        let mut buf = Vec::new();
        loop {
            let read = self.log.read(offset, 4 << 20, true).map_err(|e| e.to_string())?;
            let Some(range) = read.range else { break };
            buf.resize(range.len as usize, 0);
            read_exact_at(range.file.as_ref(), &mut buf, range.position.0).map_err(|e| e.to_string())?;
            for (_, start, end) in validate_batches(&buf).map_err(|e| e.to_string())? {
                for rec in
                    decode_records(&buf[start..end], GROUP_BATCH_BYTES_MAX).map_err(|e| e.to_string())?
                {
                    let Some(value) = rec.value else { continue };
                    match serde_json::from_slice::<GroupRecord>(&value) {
                        Ok(r) => {
                            apply(coordinator, r);
                            applied += 1;
                        }
                        Err(e) => crate::warn!("skipping an unreadable group record: {e}"),
                    }
                }
            }
            if range.next_offset <= offset {
                break;
            }
            offset = range.next_offset;
        }
        Ok(applied)
    }

    pub fn flushed(&self, last: Offset) -> laminar_storage::FlushWait {
        self.log.wait_flushed(last)
    }

    /// Applies every pending record up to `through` (now durable, and so is everything
    /// before it) to memory, in log order. Holding the lock while applying keeps two callers
    /// from interleaving.
    pub fn apply_durable(&self, coordinator: &Coordinator, through: Offset) {
        let mut pending = self.pending.lock().unwrap();
        let later = pending.split_off(&Offset(through.0 + 1));
        for (_, records) in std::mem::replace(&mut *pending, later) {
            for r in records {
                apply(coordinator, r);
            }
        }
    }
}

pub fn apply(c: &Coordinator, r: GroupRecord) {
    match r {
        GroupRecord::Offset {
            group,
            topic,
            partition,
            offset,
            leader_epoch,
            metadata,
            commit_ms,
        } => c.apply_commit(
            &group,
            &topic,
            partition,
            CommittedOffset {
                offset,
                leader_epoch,
                metadata,
                commit_ms,
            },
        ),
        GroupRecord::OffsetDeleted {
            group,
            topic,
            partition,
        } => c.apply_delete_offset(&group, &topic, partition),
        GroupRecord::GroupDeleted { group } => c.apply_delete_group(&group),
    }
}
