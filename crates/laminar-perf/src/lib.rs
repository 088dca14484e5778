//! Laminar's log performance suite (`laminar perf log`) and the charts of every suite's
//! series (`laminar perf plot`). Each suite prints histogram percentiles, the configuration and
//! the versions; none of them is a test. The suites that drive Kafka clients are in
//! `laminar-load`.

pub mod log_perf;
pub mod plot;
