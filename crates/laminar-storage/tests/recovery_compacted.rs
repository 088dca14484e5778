//! A segment holding a batch that compaction has filtered (fewer records than the offsets it
//! covers, its base offset and last offset delta kept) is recovered whole after a crash, as
//! Kafka's log is: the sparse batch is not taken for damage and cut off.

mod common;

use std::path::Path;

use common::*;
use laminar_records::clean::{filter_batch, Filtered};
use laminar_records::BASE_OFFSET_POS;
use laminar_storage::backend::{SimStorage, Storage};
use laminar_storage::Offset;

fn at(mut batch: Vec<u8>, base_offset: i64) -> Vec<u8> {
    batch[BASE_OFFSET_POS..BASE_OFFSET_POS + 8].copy_from_slice(&base_offset.to_be_bytes());
    // The CRC does not cover the base offset.
    batch
}

#[test]
fn a_filtered_batch_survives_crash_recovery() {
    let sim = SimStorage::new();
    let dir = Path::new("/data/t-0");
    sim.create_dir_all(dir).unwrap();
    let dense = at(batch(5, 10, 1_000, 1), 0);
    let Filtered::Rewritten(sparse) =
        filter_batch(&at(batch(5, 10, 2_000, 2), 5), 1 << 20, None, false, |o, _| {
            o == 7 || o == 9
        })
        .unwrap()
    else {
        panic!("two of five records kept")
    };
    let after = at(batch(3, 10, 3_000, 3), 10);
    let segment = [&dense[..], &sparse[..], &after[..]].concat();
    sim.write_file_durably(&dir.join("00000000000000000000.log"), &segment);

    // No clean-shutdown marker: the segment is scanned as after a crash.
    let log = open_log(sim.clone(), "/data/t-0", small_config(), false);
    assert_eq!(log.log_end(), Offset(13), "nothing cut off");
    let range = log.read(Offset(0), 1 << 20, true).unwrap().range.unwrap();
    assert_eq!(range.len as usize, segment.len());
    assert_eq!(range.next_offset, Offset(13));
    // A fetch from inside the filtered batch starts at that batch.
    let range = log.read(Offset(6), 1 << 20, true).unwrap().range.unwrap();
    assert_eq!(range.first_offset, Offset(5));
}
