//! Issue 4, acceptance 4, with the real binary: a group commits, the broker is killed with
//! SIGKILL and restarted, and a new member of the group resumes exactly at the committed
//! offset: no gap, and nothing re-delivered beyond what was not committed.

mod common;

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

fn group_member(addr: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "resume")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap();
    c.subscribe(&["rs"]).unwrap();
    c
}

fn next_offset(c: &BaseConsumer, deadline: Instant) -> i64 {
    loop {
        assert!(Instant::now() < deadline, "no record arrived");
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            return m.expect("consume").offset();
        }
    }
}

#[test]
fn committed_offsets_survive_sigkill_and_a_new_member_resumes_there() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let broker = common::serve(&dir);
    let addr = broker.addr.clone();
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("linger.ms", "2")
        .create()
        .unwrap();
    for i in 0..1000 {
        let v = i.to_string();
        p.send(BaseRecord::<(), _>::to("rs").partition(0).payload(&v))
            .unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    drop(p);

    let c = group_member(&addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    for expected in 0..450 {
        assert_eq!(next_offset(&c, deadline), expected);
        if expected == 399 {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset("rs", 0, Offset::Offset(400)).unwrap();
            c.commit(&tpl, CommitMode::Sync).unwrap();
        }
    }
    // Records 400..449 were consumed but not committed. Kill the broker mid-session.
    broker.kill9();
    drop(c);

    let broker = common::serve(&dir);
    let addr = broker.addr.clone();
    let c = group_member(&addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    assert_eq!(next_offset(&c, deadline), 400, "resumes at the committed offset");
    assert_eq!(next_offset(&c, deadline), 401);
    drop(c);
    broker.terminate();
}

/// A member of group `g` on topic `g6`, librdkafka's classic protocol, committing
/// automatically, reading from the start.
fn g_member(addr: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "g")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&["g6"]).unwrap();
    c
}

/// `kcat -G g g6`: a member as the user ran it, committing every 500 ms.
fn kcat_member(addr: &str) -> std::process::Child {
    std::process::Command::new("kcat")
        .args([
            "-b",
            addr,
            "-G",
            "g",
            "g6",
            "-q",
            "-X",
            "auto.commit.interval.ms=500",
        ])
        .args(["-X", "auto.offset.reset=earliest"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kcat (apt-get install kcat; scripts/test does it)")
}

/// Issue 40: two members leave a group (SIGINT: each revokes, commits and sends
/// LeaveGroup), the broker is killed right after they exit and restarted. The group comes
/// back empty, as the leaves left it, so a new member joins after
/// `group.initial.rebalance.delay.ms` (3 s), not after the session timeout (45 s) of
/// members that had left. Before the fix a leave was answered before the empty group's
/// record was written (by a writer every 50 ms), and the group came back Stable with both.
#[test]
fn a_group_whose_members_all_left_comes_back_empty_after_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let broker = common::serve(&dir);
    let addr = broker.addr.clone();
    common::create_topic(&addr, "g6", 6);
    common::produce_values(&addr, "g6", 6, (0..600).map(|i| i.to_string()));
    let members = [kcat_member(&addr), kcat_member(&addr)];
    // Both in the group, each with its share, and everything read and committed.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the two members never settled");
        let described = common::laminar(&["groups", "describe", "g", "--bootstrap", &addr]);
        let lags: Vec<&str> = described
            .lines()
            .filter(|l| l.trim_start().starts_with("g6-"))
            .collect();
        if described.contains("state Stable")
            && described.matches(" member ").count() == 2
            && lags.len() == 6
            && lags.iter().all(|l| l.trim_end().ends_with(" 0"))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for mut m in members {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(m.id() as i32, libc::SIGINT) };
        m.wait().unwrap();
    }
    broker.kill9();

    let broker = common::serve(&dir);
    let addr = broker.addr.clone();
    // What the restarted broker read back from its group log: the group, empty.
    let described = common::laminar(&["groups", "describe", "g", "--bootstrap", &addr]);
    assert!(described.contains("state Empty"), "{described}");
    assert!(!described.contains(" member "), "{described}");
    common::produce_values(&addr, "g6", 6, (600..700).map(|i| i.to_string()));
    let started = Instant::now();
    let c = g_member(&addr);
    let mut got = 0;
    while got < 100 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the new member read {got} of the 100 new records in 30 s"
        );
        if let Some(m) = c.poll(Duration::from_millis(50)) {
            let m = m.unwrap();
            let v: i32 = std::str::from_utf8(m.payload().unwrap())
                .unwrap()
                .parse()
                .unwrap();
            assert!(v >= 600, "re-read {v}: it resumes at the committed offsets");
            got += 1;
        }
    }
    let joined = started.elapsed();
    eprintln!("a new member read the 100 new records {joined:?} after it subscribed");
    assert!(
        joined < Duration::from_secs(4),
        "within the initial rebalance delay (3 s) plus a second: {joined:?}"
    );
    drop(c);
    broker.terminate();
}
