//! The per-partition recovery-point checkpoint, written atomically: a temporary file,
//! fsync, rename over the old one, fsync of the directory.
//!
//! Layout (big-endian): magic `LMRP`, version u16, next_offset i64, segment_base i64,
//! position u64; from version 2, the transactions open at the recovery point: count u32, then
//! (producer id i64, first offset i64) each; last, a CRC-32C u32 of every byte before it.
//! Version 1 (34 bytes) was written before transactions existed: none were open.

use std::path::Path;

use crate::backend::{read_exact_at, read_whole, write_atomically, Storage};
use crate::error::{IoContext, Result};
use crate::txn::OpenTxns;
use crate::types::{FilePos, Offset, RecoveryPoint};

pub const CHECKPOINT_FILE: &str = "recovery-point";
const MAGIC: &[u8; 4] = b"LMRP";
const VERSION: u16 = 2;
const FIXED_BYTES: usize = 30;
/// A version 1 file, and the smallest version 2 one (no open transactions) less 4.
pub const CHECKPOINT_BYTES: usize = 34;
/// More open transactions than this in one partition is not a checkpoint this broker wrote.
const OPEN_TXNS_MAX: usize = 1 << 20;

/// What the checkpoint holds: the recovery point, and the transactions open there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub point: RecoveryPoint,
    pub open_txns: OpenTxns,
}

pub fn encode(rp: &RecoveryPoint, open: &OpenTxns) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_BYTES + 8 + 16 * open.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&rp.next_offset.0.to_be_bytes());
    out.extend_from_slice(&rp.segment_base.0.to_be_bytes());
    out.extend_from_slice(&rp.position.0.to_be_bytes());
    out.extend_from_slice(&(open.len() as u32).to_be_bytes());
    for (pid, first) in open.entries() {
        out.extend_from_slice(&pid.to_be_bytes());
        out.extend_from_slice(&first.0.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> Option<Checkpoint> {
    if bytes.len() < CHECKPOINT_BYTES || &bytes[0..4] != MAGIC {
        return None;
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().unwrap()) {
        return None;
    }
    let at = |i: usize| i64::from_be_bytes(body[i..i + 8].try_into().unwrap());
    let point = RecoveryPoint {
        next_offset: Offset(at(6)),
        segment_base: Offset(at(14)),
        position: FilePos(at(22) as u64),
    };
    let open_txns = match u16::from_be_bytes(body[4..6].try_into().unwrap()) {
        1 if body.len() == FIXED_BYTES => OpenTxns::default(),
        2 if body.len() >= FIXED_BYTES + 4 => {
            let n = u32::from_be_bytes(body[30..34].try_into().unwrap()) as usize;
            if n > OPEN_TXNS_MAX || body.len() != FIXED_BYTES + 4 + 16 * n {
                return None;
            }
            let entries: Vec<(i64, Offset)> = (0..n)
                .map(|i| (at(34 + 16 * i), Offset(at(42 + 16 * i))))
                .collect();
            if entries
                .iter()
                .any(|(pid, first)| *pid < 0 || *first > point.next_offset)
            {
                return None;
            }
            OpenTxns::from_entries(entries)
        }
        _ => return None,
    };
    (point.next_offset >= point.segment_base && point.segment_base.0 >= 0)
        .then_some(Checkpoint { point, open_txns })
}

/// Reads the checkpoint of the log in `dir`. A missing or invalid one reads as `None`, and
/// recovery then scans the whole log.
pub fn read(storage: &dyn Storage, dir: &Path) -> Option<Checkpoint> {
    let path = dir.join(CHECKPOINT_FILE);
    let file = storage.open(&path, false).ok()?;
    let len = file.len().ok()? as usize;
    if len > FIXED_BYTES + 8 + 16 * OPEN_TXNS_MAX {
        return None;
    }
    let mut buf = vec![0u8; len];
    read_exact_at(file.as_ref(), &mut buf, 0).ok()?;
    decode(&buf)
}

/// Written when the log goes offline (a failed fsync): the point its last successful fsync
/// covered. Recovery trusts nothing after it (see `log/recover.rs`). Not synced, and need
/// not be: it matters to a restart of the process while the kernel keeps its page cache
/// (which still shows what never reached the disk); after a power cut recovery reads what
/// the disk holds.
pub const DURABLE_BEFORE_FAILURE_FILE: &str = "durable-before-failure";

pub fn write_durable_before_failure(storage: &dyn Storage, dir: &Path, rp: &RecoveryPoint) -> Result<()> {
    let path = dir.join(DURABLE_BEFORE_FAILURE_FILE);
    let bytes = encode(rp, &OpenTxns::default());
    let file = storage.open(&path, true).ctx("create", &path)?;
    file.set_len(0).ctx("truncate", &path)?;
    file.write_all_at(&bytes, 0).ctx("write", &path)
}

/// The point a failed fsync left this log durable to, if one failed since it last recovered.
pub fn read_durable_before_failure(storage: &dyn Storage, dir: &Path) -> Option<RecoveryPoint> {
    let bytes = read_whole(storage, &dir.join(DURABLE_BEFORE_FAILURE_FILE)).ok()??;
    decode(&bytes).map(|c| c.point)
}

pub fn write(storage: &dyn Storage, dir: &Path, rp: &RecoveryPoint, open: &OpenTxns) -> Result<()> {
    write_atomically(storage, dir, CHECKPOINT_FILE, &encode(rp, open))
        .ctx("write checkpoint", &dir.join(CHECKPOINT_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_reject_garbage() {
        let rp = RecoveryPoint {
            next_offset: Offset(1234),
            segment_base: Offset(1000),
            position: FilePos(98765),
        };
        let open = OpenTxns::from_entries([(5, Offset(1001)), (3, Offset(1200))]);
        for open in [OpenTxns::default(), open] {
            let bytes = encode(&rp, &open);
            let want = Checkpoint {
                point: rp,
                open_txns: open.clone(),
            };
            assert_eq!(decode(&bytes), Some(want));
            for i in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[i] ^= 0x10;
                assert_eq!(decode(&bad), None, "flip at {i}");
            }
            assert_eq!(decode(&bytes[..20]), None);
        }
        // Version 1, as written before transactions.
        let mut v1 = Vec::new();
        v1.extend_from_slice(b"LMRP");
        v1.extend_from_slice(&1u16.to_be_bytes());
        v1.extend_from_slice(&1234i64.to_be_bytes());
        v1.extend_from_slice(&1000i64.to_be_bytes());
        v1.extend_from_slice(&98765u64.to_be_bytes());
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(decode(&v1).map(|c| c.point), Some(rp));
    }
}
