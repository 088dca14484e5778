//! The history checker, in the spirit of Jepsen's Kafka workloads.
//!
//! [`workload`] runs plain (idempotent, `acks=all`) producers, transactional producers and
//! consumers in one group (`read_committed`) against any Kafka-compatible broker while
//! something outside breaks it (kills, power cuts, pauses, partitions), and records every
//! event: each acknowledgement and its offset, each transaction's records and what its
//! producer was told, each consumer's assignments and every record it polled, in order. At the
//! end it reads every partition back. [`check`] then reads the whole history and names every
//! anomaly it finds: lost or duplicated records, reordering, non-monotonic or skipping polls,
//! an offset read with two different records, aborted reads and torn transactions.
//!
//! A history is one JSON object per line (an [`Event`]), so a run's history can be kept beside
//! its results and checked again.

pub mod check;
pub mod workload;

use serde::{Deserialize, Serialize};

pub use check::{check, Report};

/// Who wrote a record: plain producers are numbered from 0, transactional producers after them.
pub type Writer = u32;

/// A record's identity: its writer in the top 24 bits, then the writer's sequence number, so
/// sorting one writer's values sorts them in the order they were sent.
pub type Value = u64;

pub fn value_of(writer: Writer, seq: u64) -> Value {
    (u64::from(writer) << 40) | (seq & ((1 << 40) - 1))
}

pub fn writer_of(value: Value) -> Writer {
    (value >> 40) as Writer
}

/// The fence writer: one record per partition written after everything else, so that the
/// final read knows it has read every partition to its end.
pub const FENCE_WRITER: Writer = 0xFF_FFFF;

/// What a transactional producer was told when it ended a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// `commit_transaction` returned success: every record must be visible.
    Committed,
    /// `abort_transaction` returned success: no record may ever be read.
    Aborted,
    /// Neither returned success (a timeout, a fatal error, a broker gone): the transaction may
    /// have committed or not, but all of it or none of it.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "e", rename_all = "snake_case")]
pub enum Event {
    /// The run began: its topic, the id in every payload, the partitions.
    Began {
        topic: String,
        run: u64,
        partitions: i32,
    },
    /// A plain producer's record, acknowledged at `offset`.
    Acked {
        writer: Writer,
        partition: i32,
        offset: i64,
        value: Value,
    },
    /// A plain producer's record whose acknowledgement never came (an error or a timeout): it
    /// may or may not be in the log.
    Unacked {
        writer: Writer,
        partition: i32,
        value: Value,
    },
    /// A transaction ended: its records as (partition, value), and what its producer was told.
    Txn {
        writer: Writer,
        records: Vec<(i32, Value)>,
        outcome: Outcome,
    },
    /// A consumer was given these partitions (its polls of each start a new session).
    Assigned { consumer: u32, partitions: Vec<i32> },
    /// A consumer gave these partitions up.
    Revoked { consumer: u32, partitions: Vec<i32> },
    /// A consumer polled a record; `value` is `None` for a record that is not one this run
    /// wrote intact (corrupted).
    Polled {
        consumer: u32,
        partition: i32,
        offset: i64,
        value: Option<Value>,
    },
    /// The final read-back (`read_committed`, after the faults) found a record.
    Final {
        partition: i32,
        offset: i64,
        value: Option<Value>,
    },
}

/// Magic, run id, value, partition.
pub const HEADER_BYTES: usize = 4 + 8 + 8 + 4;
const MAGIC: &[u8; 4] = b"LMH1";

/// The consumer that stands for an earlier final read when a history is checked against the
/// log read again (`workload::reread`).
pub const REREAD_CONSUMER: u32 = u32::MAX;

/// A record's payload: a header naming the run, the value and the partition it was sent to,
/// then bytes that follow from the value, so a reader can tell an intact record from a damaged
/// one without keeping what was sent.
pub fn payload(run: u64, value: Value, partition: i32, bytes: usize) -> Vec<u8> {
    framed(MAGIC, run, value, partition, bytes)
}

/// The value a record read from `partition` carries, if it is an intact record of `run` sent
/// to that partition.
pub fn parse(run: u64, partition: i32, bytes: &[u8]) -> Option<Value> {
    let (r, value, p) = unframe(MAGIC, bytes)?;
    (r == run && p == partition && bytes == payload(run, value, partition, bytes.len()).as_slice())
        .then_some(value)
}

/// A self-checking payload (shared with the delivery verifier, which has a magic of its
/// own): magic, run id, the record's id, its partition, then bytes that follow from the id.
pub(crate) fn framed(magic: &[u8; 4], run: u64, id: u64, partition: i32, bytes: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(bytes.max(HEADER_BYTES));
    v.extend_from_slice(magic);
    v.extend_from_slice(&run.to_be_bytes());
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&partition.to_be_bytes());
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

/// The (run, id, partition) a [`framed`] payload claims, if it has the magic.
pub(crate) fn unframe(magic: &[u8; 4], bytes: &[u8]) -> Option<(u64, u64, i32)> {
    if bytes.len() < HEADER_BYTES || &bytes[..4] != magic {
        return None;
    }
    let run = u64::from_be_bytes(bytes[4..12].try_into().ok()?);
    let id = u64::from_be_bytes(bytes[12..20].try_into().ok()?);
    let partition = i32::from_be_bytes(bytes[20..24].try_into().ok()?);
    Some((run, id, partition))
}

/// Reads a history written one event per line.
pub fn read(text: &str) -> anyhow::Result<Vec<Event>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| anyhow::anyhow!("line {}: {e}", i + 1)))
        .collect()
}

/// Writes a history one event per line.
pub fn write(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str(&serde_json::to_string(e).expect("an event serialises"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_check_themselves() {
        let v = value_of(3, 42);
        let bytes = payload(7, v, 2, 100);
        assert_eq!(bytes.len(), 100);
        assert_eq!(parse(7, 2, &bytes), Some(v));
        assert_eq!(parse(8, 2, &bytes), None, "another run's record");
        assert_eq!(parse(7, 1, &bytes), None, "found in another partition");
        let mut flipped = bytes.clone();
        flipped[60] ^= 1;
        assert_eq!(parse(7, 2, &flipped), None, "a flipped bit");
        assert_eq!(writer_of(v), 3);
    }

    #[test]
    fn histories_read_back_as_written() {
        let events = vec![
            Event::Acked {
                writer: 0,
                partition: 1,
                offset: 5,
                value: value_of(0, 1),
            },
            Event::Txn {
                writer: 2,
                records: vec![(0, value_of(2, 0))],
                outcome: Outcome::Unknown,
            },
            Event::Polled {
                consumer: 1,
                partition: 0,
                offset: 3,
                value: None,
            },
        ];
        assert_eq!(read(&write(&events)).unwrap(), events);
    }
}
