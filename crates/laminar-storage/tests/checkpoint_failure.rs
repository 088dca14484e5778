//! A flush whose data fsync succeeded, but whose index or checkpoint write then fails (ENOSPC,
//! EIO), has made the data durable: the log must stay online and carry on, and retry the
//! checkpoint at the next flush. Only a failed fsync takes a log offline.

mod common;

use std::path::Path;

use common::*;
use laminar_storage::backend::{Fault, FaultyStorage, SimStorage};

#[test]
fn a_failed_checkpoint_or_index_write_does_not_take_the_log_offline() {
    let faulty = FaultyStorage::new(SimStorage::new());
    let log = open_log(faulty.clone(), "/data/t-0", small_config(), false);
    let dir = Path::new("/data/t-0");
    faulty.inject(dir.join("00000000000000000000.index"), Fault::FailWrites);
    faulty.inject(dir.join("recovery-point"), Fault::FailWrites);
    for i in 0..20 {
        log.append(&mut batch(3, 100, 1000 + i, i as u64)).unwrap();
    }
    assert!(log.flush().unwrap(), "the data was fsynced");
    assert!(log.offline_reason().is_none(), "{:?}", log.offline_reason());
    assert_eq!(log.flushed_end().0, 60);

    faulty.clear();
    log.append(&mut batch(3, 100, 2000, 99)).unwrap();
    assert!(log.flush().unwrap());
    assert!(log.offline_reason().is_none());
    assert_eq!(read_all(&log).len(), 21);
}
