//! Replays the corpus that coverage-guided fuzzing (`fuzz/`, cargo-fuzz) keeps, on stable Rust:
//! every input of every target goes through the same code the fuzz target runs
//! (`fuzz/bodies.rs`), and none may panic. New crashes that fuzzing finds are added to the
//! corpus with their fix, so they stay fixed.

use std::path::PathBuf;

include!("../../../fuzz/bodies.rs");

fn replay(target: &str, body: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no corpus in {}", dir.display());
    for path in &inputs {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            // A fuzzer running meanwhile replaces inputs with smaller ones.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {e}", path.display()),
        };
        if std::panic::catch_unwind(|| body(&data)).is_err() {
            panic!("{target}: {} panicked", path.display());
        }
    }
    eprintln!("{target}: {} inputs replayed", inputs.len());
}

#[test]
fn request_decoder_corpus() {
    replay("request_decoders", request_decoders);
}

#[test]
fn record_batch_corpus() {
    replay("record_batches", record_batches);
}

#[test]
fn log_recovery_corpus() {
    replay("log_recovery", log_recovery);
}
