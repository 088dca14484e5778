//! `laminar topics alter` against `laminar serve`: set and remove topic configs, checked with
//! `topics describe` and with librdkafka's admin client.

mod common;

use common::laminar;

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

fn described(addr: &str, topic: &str, name: &str) -> String {
    let out = laminar(&["topics", "describe", topic, "--bootstrap", addr]);
    out.lines()
        .find(|l| l.trim_start().starts_with(&format!("{name} = ")))
        .unwrap_or_else(|| panic!("{name} not in {out}"))
        .trim()
        .to_string()
}

#[test]
fn alter_sets_and_removes_topic_configs() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let addr = broker.addr.clone();
    laminar(&[
        "topics",
        "create",
        "t",
        "--partitions",
        "1",
        "--config",
        "retention.ms=60000",
        "--bootstrap",
        &addr,
    ]);
    assert_eq!(
        described(&addr, "t", "retention.ms"),
        "retention.ms = 60000 (set)"
    );

    let out = laminar(&[
        "topics",
        "alter",
        "t",
        "--add-config",
        "cleanup.policy=compact",
        "--add-config",
        "min.cleanable.dirty.ratio=0.2",
        "--delete-config",
        "retention.ms",
        "--bootstrap",
        &addr,
    ]);
    assert!(out.contains("altered topic t"), "{out}");
    assert_eq!(
        described(&addr, "t", "cleanup.policy"),
        "cleanup.policy = compact (set)"
    );
    assert_eq!(
        described(&addr, "t", "retention.ms"),
        "retention.ms = 604800000 (default)"
    );

    // Another client sees the same: librdkafka's DescribeConfigs.
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = rt
        .block_on(admin.describe_configs(
            [&ResourceSpecifier::Topic("t")],
            &AdminOptions::new().request_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap();
    let resource = results.into_iter().next().unwrap().unwrap();
    let entry = resource.get("min.cleanable.dirty.ratio").unwrap();
    assert_eq!(entry.value.as_deref(), Some("0.2"));
    assert!(!entry.is_default);

    // A bad value is refused with the broker's error, and the command fails.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(["topics", "alter", "t", "--add-config", "cleanup.policy=sometimes"])
        .args(["--bootstrap", &addr])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Kafka error"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        described(&addr, "t", "cleanup.policy"),
        "cleanup.policy = compact (set)"
    );
}
