//! Where the dirty part of a log begins: the end of what the last cleaning pass mapped, as
//! Kafka's `cleaner-offset-checkpoint`, but one file per log, beside its segments. It only
//! saves work: a lost or unreadable one reads as the log start, and the next pass maps
//! the whole log again.
//!
//! Layout: the offset in decimal ASCII and a newline, written atomically.

use std::path::Path;

use crate::backend::{read_whole, write_atomically, Storage};
use crate::error::{IoContext, Result};
use crate::types::Offset;

pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

pub fn read(storage: &dyn Storage, dir: &Path) -> Option<Offset> {
    let bytes = read_whole(storage, &dir.join(CLEANER_CHECKPOINT_FILE)).ok()??;
    let text = std::str::from_utf8(&bytes).ok()?;
    let offset: i64 = text.strip_suffix('\n')?.parse().ok()?;
    (offset >= 0).then_some(Offset(offset))
}

pub fn write(storage: &dyn Storage, dir: &Path, first_dirty: Offset) -> Result<()> {
    write_atomically(
        storage,
        dir,
        CLEANER_CHECKPOINT_FILE,
        format!("{}\n", first_dirty.0).as_bytes(),
    )
    .ctx("write", &dir.join(CLEANER_CHECKPOINT_FILE))
}
