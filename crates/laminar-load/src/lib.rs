//! Programs that drive real Kafka clients (librdkafka) against any Kafka-compatible broker:
//! the scenarios' load, the delivery verifier, the history checker and hostile clients. Each prints histogram
//! percentiles or counts, with its configuration; none of them is a test.

pub mod client_perf;
pub mod history;
pub mod hostile;
pub mod idle_fetchers;
pub mod partitions;
pub mod verify;
