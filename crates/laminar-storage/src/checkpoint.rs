//! The per-partition recovery-point checkpoint, written atomically: a temporary file,
//! fsync, rename over the old one, fsync of the directory.
//!
//! Layout (34 bytes, big-endian): magic `LMRP`, version u16 = 1, next_offset i64,
//! segment_base i64, position u64, CRC-32C u32 of the 30 bytes before it.

use std::path::Path;

use crate::backend::{read_exact_at, write_atomically, Storage};
use crate::error::{IoContext, Result};
use crate::types::{FilePos, Offset, RecoveryPoint};

pub const CHECKPOINT_FILE: &str = "recovery-point";
const MAGIC: &[u8; 4] = b"LMRP";
const VERSION: u16 = 1;
pub const CHECKPOINT_BYTES: usize = 34;

pub fn encode(rp: &RecoveryPoint) -> [u8; CHECKPOINT_BYTES] {
    let mut out = [0u8; CHECKPOINT_BYTES];
    out[0..4].copy_from_slice(MAGIC);
    out[4..6].copy_from_slice(&VERSION.to_be_bytes());
    out[6..14].copy_from_slice(&rp.next_offset.0.to_be_bytes());
    out[14..22].copy_from_slice(&rp.segment_base.0.to_be_bytes());
    out[22..30].copy_from_slice(&rp.position.0.to_be_bytes());
    let crc = crc32c::crc32c(&out[..30]);
    out[30..34].copy_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> Option<RecoveryPoint> {
    if bytes.len() != CHECKPOINT_BYTES || &bytes[0..4] != MAGIC {
        return None;
    }
    if u16::from_be_bytes(bytes[4..6].try_into().unwrap()) != VERSION {
        return None;
    }
    if crc32c::crc32c(&bytes[..30]) != u32::from_be_bytes(bytes[30..34].try_into().unwrap()) {
        return None;
    }
    let rp = RecoveryPoint {
        next_offset: Offset(i64::from_be_bytes(bytes[6..14].try_into().unwrap())),
        segment_base: Offset(i64::from_be_bytes(bytes[14..22].try_into().unwrap())),
        position: FilePos(u64::from_be_bytes(bytes[22..30].try_into().unwrap())),
    };
    (rp.next_offset >= rp.segment_base && rp.segment_base.0 >= 0).then_some(rp)
}

/// Reads the checkpoint of the log in `dir`. A missing or invalid one reads as `None`, and
/// recovery then scans the whole log.
pub fn read(storage: &dyn Storage, dir: &Path) -> Option<RecoveryPoint> {
    let path = dir.join(CHECKPOINT_FILE);
    let file = storage.open(&path, false).ok()?;
    let len = file.len().ok()?;
    if len != CHECKPOINT_BYTES as u64 {
        return None;
    }
    let mut buf = [0u8; CHECKPOINT_BYTES];
    read_exact_at(file.as_ref(), &mut buf, 0).ok()?;
    decode(&buf)
}

pub fn write(storage: &dyn Storage, dir: &Path, rp: &RecoveryPoint) -> Result<()> {
    write_atomically(storage, dir, CHECKPOINT_FILE, &encode(rp))
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
        let bytes = encode(&rp);
        assert_eq!(decode(&bytes), Some(rp));
        for i in 0..CHECKPOINT_BYTES {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert_eq!(decode(&bad), None, "flip at {i}");
        }
        assert_eq!(decode(&bytes[..20]), None);
    }
}
