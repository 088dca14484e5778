//! Issue 13, acceptance: franz-go's `GroupTransactSession` (Go, the module from the Go module
//! proxy) runs a chain of two transactional stages, in -> mid -> out, while `laminar serve`
//! is killed with SIGKILL twice and restarted; a read_committed consumer of the output sees
//! every input record exactly once, through both stages.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

const RECORDS: usize = 2_000;

fn build_program(out: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/txnchain");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(out)
        .arg(".")
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go (is Go installed? .ci/run installs it)");
    assert!(
        built.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
}

fn produce_input(addr: &str) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sends: Vec<_> = (0..RECORDS)
            .map(|i| {
                let v = i.to_string();
                p.send_result(
                    FutureRecord::<str, str>::to("chain-in")
                        .payload(&v)
                        .partition((i % 2) as i32),
                )
                .unwrap()
            })
            .collect();
        for s in sends {
            s.await.unwrap().expect("delivered");
        }
    });
}

fn read_output(addr: &str) -> BTreeMap<String, usize> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "chain-checker")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..2 {
        tpl.add_partition_offset("chain-out", p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut seen = BTreeMap::new();
    let mut eof = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while eof.len() < 2 && Instant::now() < deadline {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                eof.remove(&m.partition());
                let v = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
                *seen.entry(v).or_default() += 1;
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                eof.insert(p);
            }
            Some(Err(e)) => panic!("read chain-out: {e}"),
            None => {}
        }
    }
    seen
}

#[test]
fn franz_go_chains_two_transactional_stages_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("txnchain");
    build_program(&program);
    let dir = tmp.path().join("data");
    let mut broker = serve(&dir);
    let addr = broker.addr.clone();
    for t in ["chain-in", "chain-mid", "chain-out"] {
        create_topic(&addr, t, 2);
    }
    produce_input(&addr);

    let mut child = Command::new(&program)
        .args([&addr, &RECORDS.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let printed = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    for kill in 0..2 {
        std::thread::sleep(Duration::from_millis(1_500));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the chain finished before kill {kill}"
        );
        broker.kill9();
        broker = serve_at(&dir, &addr);
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the chain did not finish: {}", printed.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let printed = printed.join().unwrap();
    assert!(status.success(), "the chain failed: {printed}");
    eprintln!("{printed}");

    let seen = read_output(&addr);
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "written twice: {twice:?}");
    let missing: Vec<String> = (0..RECORDS)
        .map(|i| format!("s2-s1-{i}"))
        .filter(|v| !seen.contains_key(v))
        .collect();
    assert!(
        missing.is_empty(),
        "{} lost, first {:?}",
        missing.len(),
        missing.first()
    );
    assert_eq!(seen.len(), RECORDS);
    broker.terminate();
}
