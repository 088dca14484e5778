//! The records of `__consumer_offsets`, in Kafka's own key and value schemas
//! (`OffsetCommitKey`/`OffsetCommitValue`, `GroupMetadataKey`/`GroupMetadataValue` of
//! Kafka's group coordinator), so that tools which read the topic (Kafka's
//! `OffsetsMessageFormatter`, lag monitors such as Burrow) decode what Laminar writes.
//!
//! A key starts with an int16 naming its kind (0 and 1: an offset commit, 2: a group's
//! metadata); a value starts with an int16 version. A record with no value is a tombstone:
//! the offset, or the group, is gone, and compaction removes the key.

use bytes::{BufMut, Bytes, BytesMut};
use laminar_protocol::reader::Reader;

/// Key kinds, as Kafka numbers them.
const KEY_OFFSET_COMMIT_V0: i16 = 0;
const KEY_OFFSET_COMMIT: i16 = 1;
const KEY_GROUP_METADATA: i16 = 2;
/// The value versions Laminar writes: what Kafka 4 writes for a classic group.
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;
/// Versions 4 and up of both values are flexible (compact strings, tagged fields).
const FIRST_FLEXIBLE_VERSION: i16 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Metadata {
        group: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when unknown (and in values older than version 3).
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("key kind {0} is not one Laminar reads (offset commits and group metadata are)")]
    UnknownKey(i16),
    #[error("value version {0} is not one Laminar reads")]
    UnknownVersion(i16),
    #[error("malformed group record: {0}")]
    Malformed(String),
    #[error("a string of {0} bytes does not fit a group record (at most 32767)")]
    TooLong(usize),
}

impl From<laminar_protocol::ProtocolError> for RecordError {
    fn from(e: laminar_protocol::ProtocolError) -> RecordError {
        RecordError::Malformed(e.to_string())
    }
}

/// Kafka's schemas give these strings an int16 length; flexible request versions can carry
/// longer ones, which are refused here rather than cut.
fn put_string(out: &mut BytesMut, s: &str) -> Result<(), RecordError> {
    let len = i16::try_from(s.len()).map_err(|_| RecordError::TooLong(s.len()))?;
    out.put_i16(len);
    out.put_slice(s.as_bytes());
    Ok(())
}

fn put_nullable_string(out: &mut BytesMut, s: Option<&str>) -> Result<(), RecordError> {
    match s {
        Some(s) => put_string(out, s),
        None => {
            out.put_i16(-1);
            Ok(())
        }
    }
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

impl GroupKey {
    pub fn group(&self) -> &str {
        match self {
            GroupKey::Offset { group, .. } | GroupKey::Metadata { group } => group,
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = BytesMut::new();
        match self {
            GroupKey::Offset {
                group,
                topic,
                partition,
            } => {
                out.put_i16(KEY_OFFSET_COMMIT);
                put_string(&mut out, group)?;
                put_string(&mut out, topic)?;
                out.put_i32(*partition);
            }
            GroupKey::Metadata { group } => {
                out.put_i16(KEY_GROUP_METADATA);
                put_string(&mut out, group)?;
            }
        }
        Ok(out.to_vec())
    }

    pub fn decode(key: &[u8]) -> Result<GroupKey, RecordError> {
        let mut r = Reader::new(Bytes::copy_from_slice(key), false);
        let kind = r.i16()?;
        let decoded = match kind {
            KEY_OFFSET_COMMIT_V0 | KEY_OFFSET_COMMIT => GroupKey::Offset {
                group: r.string()?,
                topic: r.string()?,
                partition: r.i32()?,
            },
            KEY_GROUP_METADATA => GroupKey::Metadata { group: r.string()? },
            other => return Err(RecordError::UnknownKey(other)),
        };
        Ok(decoded)
    }
}

impl OffsetValue {
    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = BytesMut::new();
        out.put_i16(OFFSET_COMMIT_VALUE_VERSION);
        out.put_i64(self.offset);
        out.put_i32(self.leader_epoch);
        put_string(&mut out, &self.metadata)?;
        out.put_i64(self.commit_timestamp_ms);
        Ok(out.to_vec())
    }

    pub fn decode(value: &[u8]) -> Result<OffsetValue, RecordError> {
        let mut r = Reader::new(Bytes::copy_from_slice(value), false);
        let version = r.i16()?;
        if !(0..=FIRST_FLEXIBLE_VERSION).contains(&version) {
            return Err(RecordError::UnknownVersion(version));
        }
        r.set_flexible(version >= FIRST_FLEXIBLE_VERSION);
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string()?;
        let commit_timestamp_ms = r.i64()?;
        if version == 1 {
            let _expire_timestamp_ms = r.i64()?;
        }
        if version >= FIRST_FLEXIBLE_VERSION {
            r.tagged_fields()?;
        }
        Ok(OffsetValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
        })
    }
}

impl GroupMetadataValue {
    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = BytesMut::new();
        out.put_i16(GROUP_METADATA_VALUE_VERSION);
        put_string(&mut out, &self.protocol_type)?;
        out.put_i32(self.generation);
        put_nullable_string(&mut out, self.protocol.as_deref())?;
        put_nullable_string(&mut out, self.leader.as_deref())?;
        out.put_i64(self.current_state_timestamp_ms);
        out.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_string(&mut out, &m.member_id)?;
            put_nullable_string(&mut out, m.group_instance_id.as_deref())?;
            put_string(&mut out, &m.client_id)?;
            put_string(&mut out, &m.client_host)?;
            out.put_i32(m.rebalance_timeout_ms);
            out.put_i32(m.session_timeout_ms);
            put_bytes(&mut out, &m.subscription);
            put_bytes(&mut out, &m.assignment);
        }
        Ok(out.to_vec())
    }

    pub fn decode(value: &[u8]) -> Result<GroupMetadataValue, RecordError> {
        let mut r = Reader::new(Bytes::copy_from_slice(value), false);
        let version = r.i16()?;
        if !(0..=FIRST_FLEXIBLE_VERSION).contains(&version) {
            return Err(RecordError::UnknownVersion(version));
        }
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        r.set_flexible(flexible);
        let protocol_type = r.string()?;
        let generation = r.i32()?;
        let protocol = r.nullable_string()?;
        let leader = r.nullable_string()?;
        let current_state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
        // The smallest member: three empty strings and a session timeout, two empty byte
        // arrays, in the narrowest widths (version 4's one-byte lengths).
        let count = r.array_len::<MemberValue>(3 + 4 + 2)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let member_id = r.string()?;
            let group_instance_id = if version >= 3 { r.nullable_string()? } else { None };
            let client_id = r.string()?;
            let client_host = r.string()?;
            let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
            let session_timeout_ms = r.i32()?;
            let subscription = r.nullable_bytes()?.unwrap_or_default();
            let assignment = r.nullable_bytes()?.unwrap_or_default();
            if flexible {
                r.tagged_fields()?;
            }
            members.push(MemberValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms: if rebalance_timeout_ms < 0 {
                    session_timeout_ms
                } else {
                    rebalance_timeout_ms
                },
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        if flexible {
            r.tagged_fields()?;
        }
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp_ms,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let key = GroupKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 7,
        };
        assert_eq!(GroupKey::decode(&key.encode().unwrap()).unwrap(), key);
        let key = GroupKey::Metadata { group: "g".into() };
        assert_eq!(GroupKey::decode(&key.encode().unwrap()).unwrap(), key);
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        };
        assert_eq!(OffsetValue::decode(&value.encode().unwrap()).unwrap(), value);
        let value = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp_ms: 9,
            members: vec![MemberValue {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(
            GroupMetadataValue::decode(&value.encode().unwrap()).unwrap(),
            value
        );
    }

    /// The bytes Kafka's schemas give, written out field by field: an offset commit key
    /// (kind 1) and its version 3 value.
    #[test]
    fn offset_commit_matches_kafkas_layout() {
        let key = GroupKey::Offset {
            group: "g".into(),
            topic: "tp".into(),
            partition: 2,
        };
        assert_eq!(
            key.encode().unwrap(),
            [0, 1, 0, 1, b'g', 0, 2, b't', b'p', 0, 0, 0, 2]
        );
        let value = OffsetValue {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
        };
        let mut want = vec![0, 3];
        want.extend(5i64.to_be_bytes());
        want.extend((-1i32).to_be_bytes());
        want.extend([0, 0]);
        want.extend(1i64.to_be_bytes());
        assert_eq!(value.encode().unwrap(), want);
    }

    #[test]
    fn older_offset_values_decode() {
        // Version 1 carries an expire timestamp after the commit timestamp.
        let mut v1 = vec![0, 1];
        v1.extend(9i64.to_be_bytes());
        v1.extend([0, 1, b'x']);
        v1.extend(2i64.to_be_bytes());
        v1.extend(3i64.to_be_bytes());
        let v = OffsetValue::decode(&v1).unwrap();
        assert_eq!(
            (
                v.offset,
                v.leader_epoch,
                v.metadata.as_str(),
                v.commit_timestamp_ms
            ),
            (9, -1, "x", 2)
        );
        assert!(matches!(
            OffsetValue::decode(&[0, 9]),
            Err(RecordError::UnknownVersion(9))
        ));
        assert!(matches!(
            GroupKey::decode(&[0, 3, 0, 0]),
            Err(RecordError::UnknownKey(3))
        ));
        assert!(OffsetValue::decode(&[0, 3, 0]).is_err());
        let long = GroupKey::Metadata {
            group: "g".repeat(40_000),
        };
        assert!(matches!(long.encode(), Err(RecordError::TooLong(40_000))));
    }
}
