// What each fuzz target does with one input. Shared by the targets (fuzz_targets/*.rs) and by
// the test that replays the kept corpus on stable Rust (crates/laminar/tests/fuzz_corpus.rs),
// through `include!`, so both run exactly this. None of it may panic, whatever the bytes.

/// Every request decoder: the input is a whole frame body (API key, version, correlation
/// id, client id, then the request), as the network layer hands it over.
pub fn request_decoders(data: &[u8]) {
    let _ = laminar_protocol::requests::decode(bytes::Bytes::copy_from_slice(data));
}

/// Record batch validation, record parsing, and decompression of every codec (the first
/// byte picks one for a raw decompression of the rest).
pub fn record_batches(data: &[u8]) {
    if let Ok(batches) = laminar_records::validate_batches(data) {
        for (_, start, end) in batches {
            let _ = laminar_records::decode_records(&data[start..end], 1 << 20);
        }
    }
    // Also past the CRC, which a mutation almost always breaks: the record parser must stand
    // on its own.
    let _ = laminar_records::decode_records(data, 1 << 20);
    if let Some((&codec, rest)) = data.split_first() {
        let codec = match codec % 5 {
            0 => laminar_records::Compression::None,
            1 => laminar_records::Compression::Gzip,
            2 => laminar_records::Compression::Snappy,
            3 => laminar_records::Compression::Lz4,
            _ => laminar_records::Compression::Zstd,
        };
        let _ = laminar_records::decompress(codec, rest, 1 << 20);
        // The streaming validator (Produce's) accepts exactly what decompressing the whole
        // and validating it accepts.
        // Fed both the input as compressed data and the input compressed, so that arbitrary
        // records reach the parser.
        let count = rest.first().map_or(0, |&b| b as i32 % 16);
        let compressed = laminar_records::compress(codec, rest.get(1..).unwrap_or_default());
        for data in [rest, &compressed[..]] {
            let whole = laminar_records::decompress(codec, data, 1 << 20)
                .and_then(|plain| laminar_records::RecordIter::new(&plain, count).validate());
            let streamed = laminar_records::validate_compressed(codec, data, count, 1 << 20);
            assert_eq!(whole.is_ok(), streamed.is_ok(), "{whole:?} against {streamed:?}");
        }
    }
}

/// Log recovery from arbitrary bytes: the input, cut in two at a point its first byte
/// chooses, becomes a segment file and its offset index; the log is opened as after a crash
/// and read to its end. Recovery may refuse or truncate, never panic.
pub fn log_recovery(data: &[u8]) {
    use laminar_storage::backend::{SimStorage, Storage};
    use std::path::Path;
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let cut = (cut as usize * rest.len() / 256).min(rest.len());
    let (segment, index) = rest.split_at(cut);
    let sim = SimStorage::new();
    let dir = Path::new("/fuzz/t-0");
    if sim.create_dir_all(dir).is_err() {
        return;
    }
    sim.write_file_durably(&dir.join("00000000000000000000.log"), segment);
    sim.write_file_durably(&dir.join("00000000000000000000.index"), index);
    // The same bytes as an aborted-transaction index: its loader takes any file.
    sim.write_file_durably(&dir.join("00000000000000000000.txnindex"), index);
    // Small, and without preallocation: the simulated disk holds files in memory.
    let config = laminar_storage::LogConfig {
        segment_bytes: 1 << 20,
        preallocate_bytes: 0,
        index_interval_bytes: 512,
        ..laminar_storage::LogConfig::default()
    };
    // One set of histograms for every run: allocating them is most of a run's cost.
    static METRICS: std::sync::OnceLock<std::sync::Arc<laminar_storage::StorageMetrics>> =
        std::sync::OnceLock::new();
    let metrics = METRICS.get_or_init(Default::default).clone();
    let storage: std::sync::Arc<dyn Storage> = sim;
    let Ok(log) = laminar_storage::Log::open("t-0", dir, storage, config, metrics, false) else {
        return;
    };
    // Whatever recovery made of the transactions in the log, the stable offset lies within it
    // and a read_committed reader gets only what is below it.
    let (start, end, stable) = (log.log_start(), log.log_end(), log.last_stable_offset());
    assert!(start <= stable && stable <= end, "{start} <= {stable} <= {end}");
    let _ = log.aborted_txns(start, end);
    if let Ok(r) = log.read_committed(start, 1 << 20, true) {
        assert!(r.range.is_none_or(|range| range.next_offset <= stable));
    }
    let mut offset = log.log_start();
    for _ in 0..10_000 {
        match log.read(offset, 1 << 20, true) {
            Ok(r) => match r.range {
                Some(range) if range.next_offset > offset => offset = range.next_offset,
                _ => break,
            },
            Err(_) => break,
        }
    }
}
