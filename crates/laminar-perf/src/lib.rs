//! Laminar's performance suites. Each is a program that prints histogram percentiles, the
//! configuration and the versions; none of them is a test.

pub mod client_perf;
pub mod hostile;
pub mod log_perf;
pub mod partitions;
pub mod plot;
pub mod verify;
