//! `laminar-load fill` and `laminar-load latency`: the scenario load, through librdkafka,
//! against a Laminar broker started in this process.

use std::process::Command;

use laminar_broker::{BrokerConfig, RunningBroker};

/// Runs `laminar-load` with these arguments; its standard output.
fn laminar_load(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_laminar-load"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "laminar-load {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn fill_then_measure_produce_latency_with_a_catch_up_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let broker = runtime
        .block_on(RunningBroker::start(BrokerConfig {
            listeners: laminar_broker::listeners::ListenerSettings::plaintext("127.0.0.1:0".parse().unwrap()),
            metrics_listen: None,
            data_dir: dir.path().join("data"),
            ..Default::default()
        }))
        .unwrap();
    let addr = broker.local_addr().to_string();
    let fill = laminar_load(&[
        "fill",
        "--bootstrap",
        &addr,
        "--topic",
        "big",
        "--bytes",
        "2000000",
        "--json",
    ]);
    let fill: serde_json::Value = serde_json::from_str(fill.trim()).unwrap();
    assert_eq!(fill["records"], 1954, "2,000,000 bytes of 1 KiB records");
    assert!(fill["mb_per_s"].as_f64().unwrap() > 0.0);

    let out = laminar_load(&[
        "latency",
        "--bootstrap",
        &addr,
        "--topic",
        "hot",
        "--records-per-s",
        "1000",
        "--duration-s",
        "1",
        "--catch-up-topic",
        "big",
        "--json",
    ]);
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["sent"], 1000);
    assert_eq!(r["delivered"], 1000, "every record delivered: {r}");
    assert_eq!(r["failed"], 0);
    let l = &r["latency_us"];
    assert!(l["p50"].as_u64().unwrap() > 0 && l["p50"].as_u64() <= l["p99"].as_u64());
    let c = &r["consumer"];
    assert_eq!(c["topic"], "big");
    assert!(
        c["records"].as_u64().unwrap() > 0,
        "the catch-up consumer read: {c}"
    );
    runtime.block_on(broker.shutdown()).unwrap();
}
