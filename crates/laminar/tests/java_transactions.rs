//! Issue 13, acceptance: the Java client (kafka-clients 4.3.1) runs a consume-transform-
//! produce loop with `sendOffsetsToTransaction` while `laminar serve` is killed with SIGKILL
//! ten times and restarted on the same address; a read_committed consumer of the output
//! then sees every input record exactly once.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const INPUT_RECORDS: usize = 3_000;
const KILLS: usize = 10;

#[test]
fn java_consume_transform_produce_is_exactly_once_across_ten_sigkills() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut broker = serve(&dir);
    let addr = broker.addr.clone();
    create_topic(&addr, "eos-in", 2);
    create_topic(&addr, "eos-out", 2);
    produce_values(&addr, "eos-in", 2, (0..INPUT_RECORDS).map(|i| i.to_string()));

    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/TransformExactlyOnce.java");
    let mut java = Program::spawn(
        Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(format!("{}/*", kafka_lib().display()))
            .arg(&program)
            .args([&addr, "eos-in", "eos-out", "eos-group", "eos-txn"])
            .arg(INPUT_RECORDS.to_string()),
    );
    // Kill the broker in the middle of the loop's transactions, again and again.
    for kill in 0..KILLS {
        std::thread::sleep(Duration::from_millis(1_500 + 300 * (kill as u64 % 3)));
        assert!(
            java.running(),
            "the loop finished before kill {kill}: the kills must land while it runs"
        );
        broker.kill9();
        broker = serve_at(&dir, &addr);
    }
    eprintln!("{}", java.finish(Duration::from_secs(300)));

    common::assert_exactly_once_output(&addr, "eos-out", 2, INPUT_RECORDS);
    broker.terminate();
}
