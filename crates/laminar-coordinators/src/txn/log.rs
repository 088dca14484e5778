//! The transaction log: the state of every transactional id, one record per change, in the
//! compacted internal topic `__transaction_state` (partition 0 on a single node), so that a
//! restart finds each transaction where it was. Each record holds the whole state of one
//! id, so compaction keeps exactly the newest; an id that expires gets a tombstone.
//!
//! The layout is Laminar's own (docs/disk-format.md), close to Kafka's `TransactionLogValue`
//! but with the transaction's pending offset commits in it: they are applied to the group
//! log when the transaction commits, and must survive a restart between the commit decision
//! and that.
//!
//! Key: version i16 (0), transactional id (string: i16 length, UTF-8).
//! Value: version i16 (0), producer id i64, producer epoch i16, last producer id i64, last
//! producer epoch i16, next producer id i64 (-1: none), timeout ms i32, status i8 (Kafka's numbering), start ms i64, update ms
//! i64, partitions (i32 count, each topic string, partition i32), offsets (i32 count, each
//! group string, topic string, partition i32, offset i64, leader epoch i32, metadata
//! nullable string (length -1 for null), commit ms i64).

use std::collections::{BTreeMap, BTreeSet};

use laminar_cluster::TopicPartition;
use laminar_records::{BatchBuilder, Compression, RecordSpec};
use laminar_storage::Log;

use super::{PendingOffset, TxnMeta, TxnStatus};

pub use laminar_cluster::names::TRANSACTION_TOPIC;
const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;
/// Bound on the partitions and offsets of one transaction's record.
const ENTRIES_MAX: usize = 1 << 20;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TxnLogError {
    #[error("a transaction log record ends early")]
    Truncated,
    #[error("unknown transaction log {what} version {version}")]
    Version { what: &'static str, version: i16 },
    #[error("invalid transaction log record: {0}")]
    Invalid(&'static str),
}

type Result<T> = std::result::Result<T, TxnLogError>;

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.0.len() < n {
            return Err(TxnLogError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i8(&mut self) -> Result<i8> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn nullable_str(&mut self) -> Result<Option<String>> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(None);
        }
        let bytes = self.take(n as usize)?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| TxnLogError::Invalid("a string is not UTF-8"))
    }
    fn str(&mut self) -> Result<String> {
        self.nullable_str()?.ok_or(TxnLogError::Invalid("a null string"))
    }
    fn count(&mut self) -> Result<usize> {
        let n = self.i32()?;
        if n < 0 || n as usize > ENTRIES_MAX {
            return Err(TxnLogError::Invalid("a count out of range"));
        }
        Ok(n as usize)
    }
}

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&KEY_VERSION.to_be_bytes());
    put_str(&mut out, transactional_id);
    out
}

pub fn decode_key(key: &[u8]) -> Result<String> {
    let mut c = Cursor(key);
    match c.i16()? {
        KEY_VERSION => c.str(),
        version => Err(TxnLogError::Version { what: "key", version }),
    }
}

pub fn encode_value(m: &TxnMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    out.extend_from_slice(&m.producer_id.to_be_bytes());
    out.extend_from_slice(&m.producer_epoch.to_be_bytes());
    out.extend_from_slice(&m.last_producer_id.to_be_bytes());
    out.extend_from_slice(&m.last_producer_epoch.to_be_bytes());
    out.extend_from_slice(&m.next_producer_id.to_be_bytes());
    out.extend_from_slice(&m.timeout_ms.to_be_bytes());
    out.push(m.status as i8 as u8);
    out.extend_from_slice(&m.start_ms.to_be_bytes());
    out.extend_from_slice(&m.update_ms.to_be_bytes());
    out.extend_from_slice(&(m.partitions.len() as i32).to_be_bytes());
    for p in &m.partitions {
        put_str(&mut out, &p.topic);
        out.extend_from_slice(&p.partition.to_be_bytes());
    }
    out.extend_from_slice(&(m.offsets.len() as i32).to_be_bytes());
    for ((group, topic, partition), o) in &m.offsets {
        put_str(&mut out, group);
        put_str(&mut out, topic);
        out.extend_from_slice(&partition.to_be_bytes());
        out.extend_from_slice(&o.offset.to_be_bytes());
        out.extend_from_slice(&o.leader_epoch.to_be_bytes());
        match &o.metadata {
            Some(s) => put_str(&mut out, s),
            None => out.extend_from_slice(&(-1i16).to_be_bytes()),
        }
        out.extend_from_slice(&o.commit_ms.to_be_bytes());
    }
    out
}

pub fn decode_value(transactional_id: &str, value: &[u8]) -> Result<TxnMeta> {
    let mut c = Cursor(value);
    let version = c.i16()?;
    if version != VALUE_VERSION {
        return Err(TxnLogError::Version {
            what: "value",
            version,
        });
    }
    let producer_id = c.i64()?;
    let producer_epoch = c.i16()?;
    let last_producer_id = c.i64()?;
    let last_producer_epoch = c.i16()?;
    let next_producer_id = c.i64()?;
    let timeout_ms = c.i32()?;
    let status = TxnStatus::from_i8(c.i8()?).ok_or(TxnLogError::Invalid("an unknown status"))?;
    let start_ms = c.i64()?;
    let update_ms = c.i64()?;
    let mut partitions = BTreeSet::new();
    for _ in 0..c.count()? {
        partitions.insert(TopicPartition::new(c.str()?, c.i32()?));
    }
    let mut offsets = BTreeMap::new();
    for _ in 0..c.count()? {
        let key = (c.str()?, c.str()?, c.i32()?);
        let o = PendingOffset {
            offset: c.i64()?,
            leader_epoch: c.i32()?,
            metadata: c.nullable_str()?,
            commit_ms: c.i64()?,
        };
        offsets.insert(key, o);
    }
    if producer_id < 0 {
        return Err(TxnLogError::Invalid("a negative producer id"));
    }
    Ok(TxnMeta {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        last_producer_id,
        last_producer_epoch,
        next_producer_id,
        timeout_ms,
        status,
        partitions,
        offsets,
        start_ms,
        update_ms,
    })
}

/// One batch of records: each transaction's new state, or a tombstone (`None`).
pub fn encode_batch(changes: &[(String, Option<TxnMeta>)]) -> Vec<u8> {
    let now = laminar_storage::now_ms();
    let mut b = BatchBuilder::new(Compression::None, now);
    for (id, meta) in changes {
        b.push(RecordSpec {
            timestamp_ms: now,
            key: Some(encode_key(id)),
            value: meta.as_ref().map(encode_value),
            headers: vec![],
        });
    }
    b.build().expect("a batch of transaction records builds")
}

/// Reads the whole log, oldest first: the newest state of each id (tombstones remove it).
/// Records that do not decode are skipped with a warning. Blocking: startup only.
pub fn replay(
    log: &Log,
) -> std::result::Result<BTreeMap<String, TxnMeta>, crate::groups::store::ReplayError> {
    let mut out = BTreeMap::new();
    crate::groups::store::for_each_record(log, |key, value| {
        let id = match decode_key(key) {
            Ok(id) => id,
            Err(e) => {
                crate::warn!("skipping a transaction log record: {e}");
                return;
            }
        };
        match value {
            None => {
                out.remove(&id);
            }
            Some(v) => match decode_value(&id, v) {
                Ok(meta) => {
                    out.insert(id, meta);
                }
                Err(e) => crate::warn!("skipping a transaction log record of {id:?}: {e}"),
            },
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_are_refused() {
        let meta = TxnMeta {
            transactional_id: "t-1".into(),
            producer_id: 1234,
            producer_epoch: 7,
            last_producer_id: 1234,
            last_producer_epoch: 6,
            next_producer_id: -1,
            timeout_ms: 60_000,
            status: TxnStatus::PrepareCommit,
            partitions: BTreeSet::from([TopicPartition::new("a", 0), TopicPartition::new("b", 3)]),
            offsets: BTreeMap::from([(
                ("g".to_string(), "a".to_string(), 0),
                PendingOffset {
                    offset: 42,
                    leader_epoch: -1,
                    metadata: None,
                    commit_ms: 99,
                },
            )]),
            start_ms: 1,
            update_ms: 2,
        };
        assert_eq!(decode_key(&encode_key("t-1")), Ok("t-1".to_string()));
        let value = encode_value(&meta);
        assert_eq!(decode_value("t-1", &value), Ok(meta));
        for cut in 0..value.len() {
            assert!(decode_value("t-1", &value[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = value.clone();
        bad[0] = 9;
        assert!(matches!(
            decode_value("t-1", &bad),
            Err(TxnLogError::Version { .. })
        ));
    }
}
