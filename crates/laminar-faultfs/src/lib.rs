//! laminar-faultfs: a FUSE passthrough file system that makes real faults on demand, for
//! tests and benchmarks (never part of the broker). Over a source directory it can delay or
//! fail reads, writes, fsyncs and creates for paths that match a glob, and, in lazy mode,
//! keep every write that has not been fsynced in memory so that a "power cut" can drop it,
//! as Jepsen's LazyFS does. It is driven through a Unix socket (see `control`).

pub mod control;
pub mod fs;
pub mod mount;
pub mod namespace;
pub mod pages;
pub mod rules;
pub mod state;

pub use control::command;
pub use fs::{FaultFs, Options, Shared};
pub use mount::Mount;
