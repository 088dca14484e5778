//! `laminar perf log --json` prints exactly one JSON object of the documented shape, with
//! every appended record read back by every reader.

mod common;

use std::process::Command;

use common::laminar;

#[test]
fn perf_log_json_reports_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let stdout = laminar(&[
        "perf",
        "log",
        "--partitions",
        "3",
        "--message-size",
        "200",
        "--set-size",
        "10",
        "--messages",
        "5000",
        "--readers",
        "2",
        "--compression",
        "lz4",
        "--flush-messages",
        "500",
        "--segment-bytes",
        "65536",
        "--json",
        "--dir",
        logs.to_str().unwrap(),
    ]);
    assert_eq!(stdout.trim().lines().count(), 1, "exactly one line: {stdout}");
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(r["config"]["compression"], "lz4");
    assert_eq!(r["config"]["partitions"], 3);
    assert_eq!(r["append"]["records"], 5000);
    assert_eq!(r["read"]["records"], 10000, "two readers each read everything");
    for phase in ["append", "read"] {
        assert!(r[phase]["records_per_s"].as_f64().unwrap() > 0.0);
        assert!(r[phase]["mb_per_s"].as_f64().unwrap() > 0.0);
        let l = &r[phase]["latency_us"];
        assert!(l["p50"].as_u64().unwrap() <= l["p99"].as_u64().unwrap());
        assert!(l["p999"].as_u64().unwrap() <= l["max"].as_u64().unwrap());
    }
    assert!(
        r["flush"]["count"].as_u64().unwrap() > 0,
        "--flush-messages 500 flushed"
    );
    assert!(r["flush"]["latency_us"]["max"].as_u64().unwrap() > 0);
    assert!(
        !dir.path().join("logs").exists(),
        "the run cleans up after itself"
    );
}

/// At a fixed rate the writers keep to their schedule: 2,000 records at 10,000 records/s
/// cannot finish before the last append is due, 190 ms in.
#[test]
fn perf_log_keeps_a_fixed_rate() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let stdout = laminar(&[
        "perf",
        "log",
        "--partitions",
        "2",
        "--message-size",
        "100",
        "--set-size",
        "10",
        "--messages",
        "2000",
        "--records-per-s",
        "10000",
        "--json",
        "--dir",
        logs.to_str().unwrap(),
    ]);
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(r["config"]["records_per_s"], 10000);
    assert_eq!(r["append"]["records"], 2000);
    let seconds = r["append"]["seconds"].as_f64().unwrap();
    assert!(
        seconds >= 0.19,
        "the last append is due at 190 ms; the run took {seconds} s"
    );
    assert!(r["append"]["records_per_s"].as_f64().unwrap() <= 10_600.0);
}

#[test]
fn perf_log_rejects_bad_arguments() {
    let out = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(["perf", "log", "--compression", "brotli"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown compression"));
}

/// --series-out saves the append latency as a series for `laminar perf plot`; in durable mode
/// a second one, "LABEL durable", in an array. The JSON report's config is unchanged.
#[test]
fn perf_log_writes_latency_series() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let plain = dir.path().join("plain.json");
    let stdout = laminar(&[
        "perf",
        "log",
        "--partitions",
        "2",
        "--message-size",
        "100",
        "--set-size",
        "10",
        "--messages",
        "2000",
        "--json",
        "--series-out",
        plain.to_str().unwrap(),
        "--dir",
        logs.to_str().unwrap(),
    ]);
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(r["config"].get("series_out").is_none() && r["config"].get("label").is_none());
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    assert_eq!(s["label"], "perf log 2p max flush off");
    assert!(!s["over_time"].as_array().unwrap().is_empty());
    let pct = s["percentiles"].as_array().unwrap();
    assert_eq!(pct.last().unwrap()[0], 100.0);
    assert_eq!(
        pct.last().unwrap()[1].as_f64().unwrap(),
        r["append"]["latency_us"]["max"].as_f64().unwrap() / 1000.0,
        "the max agrees with the report's"
    );

    let durable = dir.path().join("durable.json");
    laminar(&[
        "perf",
        "log",
        "--partitions",
        "2",
        "--message-size",
        "100",
        "--set-size",
        "10",
        "--messages",
        "2000",
        "--records-per-s",
        "20000",
        "--durable",
        // One flusher thread completes every durable append on its own.
        "--flush-threads",
        "1",
        "--label",
        "Laminar log",
        "--series-out",
        durable.to_str().unwrap(),
        "--dir",
        logs.to_str().unwrap(),
    ]);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&durable).unwrap()).unwrap();
    let labels: Vec<&str> = s
        .as_array()
        .expect("an array of two series")
        .iter()
        .map(|x| x["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Laminar log", "Laminar log durable"]);

    let charts = laminar(&[
        "perf",
        "plot",
        "--out",
        dir.path().join("chart").to_str().unwrap(),
        plain.to_str().unwrap(),
        durable.to_str().unwrap(),
    ]);
    assert_eq!(charts.lines().count(), 2, "{charts}");
    for path in charts.lines() {
        let svg = std::fs::read_to_string(path).unwrap();
        assert!(svg.contains("Laminar log durable") && svg.contains("perf log 2p max flush off"));
    }
}
