//! The log start offset that DeleteRecords moved into the middle of a segment, written
//! atomically (a temporary file, fsync, rename, fsync of the directory) before the request is
//! answered, so that deleted records never come back after a crash. Without the file, or when
//! it is below the first segment's base, the log starts at the first segment.
//!
//! Layout (18 bytes, big-endian): magic `LMLS`, version u16 = 1, log_start i64, CRC-32C u32 of
//! the 14 bytes before it.

use std::path::Path;

use crate::backend::{read_exact_at, write_atomically, Storage};
use crate::error::{IoContext, Result};
use crate::types::Offset;

pub const LOG_START_FILE: &str = "log-start-offset";
const MAGIC: &[u8; 4] = b"LMLS";
const VERSION: u16 = 1;
pub const LOG_START_BYTES: usize = 18;

pub fn encode(start: Offset) -> [u8; LOG_START_BYTES] {
    let mut out = [0u8; LOG_START_BYTES];
    out[0..4].copy_from_slice(MAGIC);
    out[4..6].copy_from_slice(&VERSION.to_be_bytes());
    out[6..14].copy_from_slice(&start.0.to_be_bytes());
    let crc = crc32c::crc32c(&out[..14]);
    out[14..18].copy_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> Option<Offset> {
    if bytes.len() != LOG_START_BYTES || &bytes[0..4] != MAGIC {
        return None;
    }
    if u16::from_be_bytes(bytes[4..6].try_into().unwrap()) != VERSION {
        return None;
    }
    if crc32c::crc32c(&bytes[..14]) != u32::from_be_bytes(bytes[14..18].try_into().unwrap()) {
        return None;
    }
    let start = Offset(i64::from_be_bytes(bytes[6..14].try_into().unwrap()));
    (start.0 >= 0).then_some(start)
}

/// The log start offset written in `dir`, if any. The file is only ever replaced by a rename,
/// so an invalid one means a disk that lies: it reads as `None` (the first segment's base),
/// which can only bring deleted records back, never lose kept ones.
pub fn read(storage: &dyn Storage, dir: &Path) -> Option<Offset> {
    let file = storage.open(&dir.join(LOG_START_FILE), false).ok()?;
    if file.len().ok()? != LOG_START_BYTES as u64 {
        return None;
    }
    let mut buf = [0u8; LOG_START_BYTES];
    read_exact_at(file.as_ref(), &mut buf, 0).ok()?;
    decode(&buf)
}

pub fn write(storage: &dyn Storage, dir: &Path, start: Offset) -> Result<()> {
    write_atomically(storage, dir, LOG_START_FILE, &encode(start))
        .ctx("write log start offset", &dir.join(LOG_START_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_reject_garbage() {
        let bytes = encode(Offset(4321));
        assert_eq!(decode(&bytes), Some(Offset(4321)));
        for i in 0..LOG_START_BYTES {
            let mut bad = bytes;
            bad[i] ^= 0x04;
            assert_eq!(decode(&bad), None, "flip at {i}");
        }
        assert_eq!(decode(&bytes[..10]), None);
    }
}
