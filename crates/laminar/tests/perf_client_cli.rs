//! `laminar perf fill` and `laminar perf latency`: the scenario load, through librdkafka,
//! against `laminar serve`.

mod common;

use common::laminar;

#[test]
fn fill_then_measure_produce_latency_with_a_catch_up_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::serve(dir.path());
    let fill = laminar(&[
        "perf",
        "fill",
        "--bootstrap",
        &b.addr,
        "--topic",
        "big",
        "--bytes",
        "2000000",
        "--json",
    ]);
    let fill: serde_json::Value = serde_json::from_str(fill.trim()).unwrap();
    assert_eq!(fill["records"], 1954, "2,000,000 bytes of 1 KiB records");
    assert!(fill["mb_per_s"].as_f64().unwrap() > 0.0);

    let out = laminar(&[
        "perf",
        "latency",
        "--bootstrap",
        &b.addr,
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
    b.terminate();
}
