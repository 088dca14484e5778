//! The log cleaner (compaction), in steps. Built so far: the offset map a cleaning pass
//! builds over a log's dirty records. To come: the pass over closed segments (each batch
//! filtered with `laminar_records::clean::filter_batch`, written to `.cleaned` files), the
//! crash-safe swap, its own I/O rate and thread, and recovery of an interrupted pass.

mod offset_map;

pub use offset_map::OffsetMap;
