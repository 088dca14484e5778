//! Three `laminar serve` processes on 127.0.0.1, each a broker and a controller voter with
//! its own data directory: the controller quorum, broker registration and fencing, topic
//! placement, and what clients (librdkafka) see through it.

mod common;

use std::time::{Duration, Instant};

use common::{block, free_port, high_watermark, laminar, produce_values, read_to_end, try_serve_with, Serve};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};

struct Node {
    id: i32,
    listen: String,
    dir: std::path::PathBuf,
    serve: Option<Serve>,
}

struct Cluster {
    _dir: tempfile::TempDir,
    voters: String,
    /// `controller.quorum.secret.file`, the same for every node.
    secret_file: std::path::PathBuf,
    nodes: Vec<Node>,
    /// More `--set key=value` for every node.
    settings: Vec<String>,
}

impl Cluster {
    /// Starts `n` nodes; if one cannot listen (another test took a port between
    /// `free_port` and the bind), starts them all again on other ports.
    fn start(n: i32) -> Cluster {
        Cluster::start_with(n, &[])
    }

    /// As `start`, every node also given `settings` (`key=value`).
    fn start_with(n: i32, settings: &[&str]) -> Cluster {
        Cluster::start_in(n, settings, &[])
    }

    /// As `start_with`, the nodes named in `dirs` keeping their data there.
    fn start_in(n: i32, settings: &[&str], dirs: &[(i32, std::path::PathBuf)]) -> Cluster {
        for _ in 0..5 {
            if let Some(c) = Cluster::try_start(n, settings, dirs) {
                return c;
            }
        }
        panic!("no free ports for a cluster of {n} in five tries");
    }

    fn try_start(n: i32, settings: &[&str], dirs: &[(i32, std::path::PathBuf)]) -> Option<Cluster> {
        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join("controller.secret");
        common::write_secret(&secret_file, "0123456789abcdef0123456789abcdef0123456789abcdef");
        let voters: Vec<String> = (1..=n)
            .map(|id| format!("{id}@127.0.0.1:{}", free_port()))
            .collect();
        let mut c = Cluster {
            voters: voters.join(","),
            nodes: (1..=n)
                .map(|id| Node {
                    id,
                    listen: format!("127.0.0.1:{}", free_port()),
                    dir: dirs.iter().find(|(d, _)| *d == id).map_or_else(
                        || dir.path().join(format!("node{id}")),
                        |(_, p)| p.join(format!("try{}", free_port())),
                    ),
                    serve: None,
                })
                .collect(),
            _dir: dir,
            secret_file,
            settings: settings.iter().map(|s| s.to_string()).collect(),
        };
        for i in 0..c.nodes.len() {
            if !c.try_launch(i) {
                return None;
            }
        }
        Some(c)
    }

    /// Adds a broker that is not a controller voter: it learns the metadata from its
    /// heartbeats' answers.
    fn add_broker(&mut self) -> usize {
        let id = self.nodes.len() as i32 + 1;
        let dir = self.nodes[0].dir.parent().unwrap().join(format!("node{id}"));
        self.nodes.push(Node {
            id,
            listen: format!("127.0.0.1:{}", free_port()),
            dir,
            serve: None,
        });
        let i = self.nodes.len() - 1;
        self.launch(i);
        i
    }

    fn launch(&mut self, i: usize) {
        assert!(self.try_launch(i), "node {} restarts on its address", i + 1);
    }

    fn try_launch(&mut self, i: usize) -> bool {
        let node = &self.nodes[i];
        let id = format!("node.id={}", node.id);
        let voters = format!("controller.quorum.voters={}", self.voters);
        let secret = format!("controller.quorum.secret.file={}", self.secret_file.display());
        let mut args = vec![
            "--set",
            &id,
            "--set",
            &voters,
            "--set",
            &secret,
            "--set",
            "broker.session.timeout.ms=2000",
            "--set",
            "broker.heartbeat.interval.ms=300",
        ];
        // A setting may name this node's own address (its listener, under another name).
        let own: Vec<String> = self
            .settings
            .iter()
            .map(|s| s.replace("{listen}", &node.listen))
            .collect();
        for s in &own {
            args.extend(["--set", s.as_str()]);
        }
        let serve = try_serve_with(&node.dir, &node.listen, &args);
        let started = serve.is_some();
        self.nodes[i].serve = serve;
        started
    }

    fn addr(&self, i: usize) -> &str {
        &self.nodes[i].listen
    }

    fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.serve.is_some())
            .map(|n| n.listen.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn kill9(&mut self, i: usize) {
        self.nodes[i].serve.take().unwrap().kill9();
    }

    /// `laminar cluster describe` through node `i`: (controller, [(broker, fenced)]).
    fn describe(&self, i: usize) -> (i32, Vec<(i32, bool)>) {
        let out = laminar(&["cluster", "describe", "--bootstrap", self.addr(i)]);
        let mut lines = out.lines();
        let controller = lines
            .next()
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|c| c.parse().ok())
            .unwrap_or(-1);
        let brokers = lines
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                let id = words.nth(1)?.parse().ok()?;
                Some((id, l.contains("fenced")))
            })
            .collect();
        (controller, brokers)
    }

    /// Waits until node `i` sees the live brokers `live`, unfenced, and the rest fenced.
    fn wait_for_brokers(&self, i: usize, live: &[i32]) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (controller, brokers) = self.describe(i);
            let unfenced: Vec<i32> = brokers.iter().filter(|(_, f)| !f).map(|(id, _)| *id).collect();
            if unfenced == live && live.contains(&controller) {
                return controller;
            }
            assert!(
                Instant::now() < deadline,
                "brokers {live:?} live with a controller among them, seen from node {}: {brokers:?}, controller {controller}",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap()
}

/// Partition leaders of `topic` as librdkafka's metadata shows them, and the brokers listed.
/// Waits for the topic to reach the broker's image: a creation is answered once the
/// broker that took it knows it, and the others learn it from the controller.
fn leaders(bootstrap: &str, topic: &str) -> (Vec<i32>, Vec<i32>) {
    let c: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let md = c.fetch_metadata(Some(topic), Duration::from_secs(30)).unwrap();
        let brokers = md.brokers().iter().map(|b| b.id()).collect();
        let t = &md.topics()[0];
        if !t.partitions().is_empty() {
            return (t.partitions().iter().map(|p| p.leader()).collect(), brokers);
        }
        assert!(Instant::now() < deadline, "{topic} reaches {bootstrap}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn sorted_values(records: Vec<(i32, Vec<u8>, Vec<u8>)>) -> Vec<String> {
    let mut v: Vec<String> = records
        .into_iter()
        .map(|(_, _, v)| String::from_utf8(v).unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn three_brokers_place_partitions_fence_the_dead_and_take_back_the_restarted() {
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("spread", 3, TopicReplication::Fixed(1));
    let r = block(a.create_topics([&t], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    // More replicas than brokers is refused.
    let rf4 = NewTopic::new("rf4", 1, TopicReplication::Fixed(4));
    let r = block(a.create_topics([&rf4], &opts)).unwrap();
    assert_eq!(
        r[0].as_ref().unwrap_err().1,
        rdkafka::types::RDKafkaErrorCode::InvalidReplicationFactor
    );
    let (mut led, brokers) = leaders(c.addr(1), "spread");
    assert_eq!(brokers.len(), 3, "every broker is listed");
    led.sort();
    assert_eq!(led, vec![1, 2, 3], "one partition led by each broker");

    // Produced through one broker's bootstrap, each record reaches its partition's leader.
    let written = values("before", 300);
    produce_values(c.addr(0), "spread", 3, written.clone());
    let mut expected = written.clone();
    expected.sort();
    assert_eq!(
        sorted_values(read_to_end(c.addr(2), "spread", 3, "read_uncommitted")),
        expected
    );

    // SIGKILL broker 3: its session expires, it is fenced, its partition goes offline (one
    // replica, no unclean election) while the others keep working.
    let (leaders_before, _) = leaders(c.addr(0), "spread");
    let lost = leaders_before.iter().position(|l| *l == 3).unwrap() as i32;
    c.kill9(2);
    c.wait_for_brokers(0, &[1, 2]);
    let (now, brokers) = leaders(c.addr(0), "spread");
    assert_eq!(
        now[lost as usize], -1,
        "the dead broker's partition has no leader: {now:?}"
    );
    assert_eq!(brokers, vec![1, 2], "fenced brokers are not listed");

    // It restarts with its data: registered again, unfenced, it leads its partition again
    // and nothing it held is lost.
    c.launch(2);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while leaders(c.addr(0), "spread").0 != leaders_before {
        assert!(Instant::now() < deadline, "broker 3 leads its partition again");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        sorted_values(read_to_end(c.addr(1), "spread", 3, "read_uncommitted")),
        expected
    );
    // The partition's leader epoch moved twice: offline, then led again.
    let described = laminar(&["topics", "describe", "spread", "--bootstrap", c.addr(0)]);
    let line = described
        .lines()
        .find(|l| l.contains(&format!("partition {lost} ")))
        .unwrap()
        .to_string();
    assert!(line.contains("leader 3  epoch 2"), "{line}");

    // A fourth broker, not a voter, joins: it registers, is unfenced, and takes partitions.
    c.add_broker();
    c.wait_for_brokers(0, &[1, 2, 3, 4]);
    let t = NewTopic::new("four", 4, TopicReplication::Fixed(1));
    let r = block(a.create_topics([&t], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let (mut led, _) = leaders(c.addr(3), "four");
    led.sort();
    assert_eq!(led, vec![1, 2, 3, 4], "the new broker leads a partition");
    let written = values("four", 40);
    produce_values(&c.bootstrap(), "four", 4, written.clone());
    let mut expected = written;
    expected.sort();
    assert_eq!(
        sorted_values(read_to_end(c.addr(3), "four", 4, "read_uncommitted")),
        expected
    );
}

/// Kafka's automatic leader rebalancing: a broker that died and came back leads its
/// partitions again without anyone running `kafka-leader-election`.
#[test]
fn leaderships_go_back_to_their_preferred_replicas_by_themselves() {
    let mut c = Cluster::start_with(3, &["leader.imbalance.check.interval.seconds=1"]);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("pref", 3, TopicReplication::Fixed(3));
    let r = block(a.create_topics([&t], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    for p in 0..3 {
        wait_in_sync(&c, 0, "pref", p, &[1, 2, 3]);
    }
    let preferred: Vec<i32> = (0..3).map(|p| replicas_of(c.addr(0), "pref", p)[0]).collect();
    assert_eq!(
        leaders(c.addr(0), "pref").0,
        preferred,
        "placement makes the first replica lead"
    );
    let lost = preferred.iter().position(|l| *l == 3).unwrap() as i32;

    // Broker 3 dies: another replica leads its partition. Records written meanwhile are what
    // it must catch up on before it is in sync, and so preferred, again.
    c.kill9(2);
    c.wait_for_brokers(0, &[1, 2]);
    let during = wait_in_sync(&c, 0, "pref", lost, &[1, 2]);
    assert_ne!(during, 3);
    let written = values("pref", 300);
    produce_values(c.addr(0), "pref", 3, written.clone());

    c.launch(2);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = leaders(c.addr(1), "pref").0;
        if now == preferred {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "every partition led by its first replica again: {now:?}, preferred {preferred:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut expected = written;
    expected.sort();
    assert_eq!(
        sorted_values(read_to_end(c.addr(2), "pref", 3, "read_uncommitted")),
        expected
    );
}

#[test]
fn a_controller_failover_during_topic_creation_loses_nothing() {
    let mut c = Cluster::start(3);
    let controller = c.wait_for_brokers(0, &[1, 2, 3]);
    let killed = (controller - 1) as usize;
    let survivor = (0..3).find(|i| *i != killed).unwrap();
    let bootstrap = c.bootstrap();
    // Topics are created one after another through a broker that survives, while the active
    // controller is killed after the fifth. A creation the failover interrupts is retried,
    // as a client does; one acknowledged must exist afterwards.
    let names: Vec<String> = (0..20).map(|i| format!("created-{i}")).collect();
    let a = admin(&c.nodes[survivor].listen);
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let mut acknowledged = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if i == 5 {
            c.kill9(killed);
        }
        let t = NewTopic::new(name, 2, TopicReplication::Fixed(1));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            // The client may time out while no controller is active: it retries.
            let r = match block(a.create_topics([&t], &opts)) {
                Ok(r) => r,
                Err(e) => {
                    assert!(Instant::now() < deadline, "{name}: {e:?}");
                    continue;
                }
            };
            match &r[0] {
                Ok(_) => break,
                // A retry of a creation that was applied before its answer was lost.
                Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) if i >= 5 => break,
                Err(e) => {
                    assert!(Instant::now() < deadline, "{name}: {e:?}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        acknowledged.push(name.clone());
    }
    let live: Vec<i32> = (1..=3).filter(|id| *id != controller).collect();
    let new_controller = c.wait_for_brokers(survivor, &live);
    assert_ne!(new_controller, controller);
    let listed = laminar(&["topics", "list", "--bootstrap", &c.nodes[survivor].listen]);
    for name in &acknowledged {
        assert!(
            listed.lines().any(|l| l == name),
            "{name} survived the failover: {listed}"
        );
    }
    // The killed controller restarts from its own log and snapshot and catches up: every
    // topic is in its image too.
    c.launch(killed);
    c.wait_for_brokers(killed, &[1, 2, 3]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = laminar(&["topics", "list", "--bootstrap", c.addr(killed)]);
        if acknowledged.iter().all(|n| listed.lines().any(|l| l == n)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted node learns every topic: {listed}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(bootstrap);
}

#[test]
fn a_consumer_group_keeps_its_offsets_when_its_coordinators_broker_dies() {
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("grouped", 3, TopicReplication::Fixed(3));
    assert!(block(a.create_topics([&t], &opts)).unwrap()[0].is_ok());
    // The group log is replicated to every broker, once all three are live.
    let coordinator = wait_in_sync(&c, 0, "__consumer_offsets", 0, &[1, 2, 3]);
    for p in 0..3 {
        wait_in_sync(&c, 0, "grouped", p, &[1, 2, 3]);
    }
    produce_values(&c.bootstrap(), "grouped", 3, values("g", 90));
    let consume = |bootstrap: &str, want: usize| -> Vec<String> {
        let consumer: BaseConsumer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "survivors")
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        consumer.subscribe(&["grouped"]).unwrap();
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        while seen.len() < want {
            assert!(Instant::now() < deadline, "read {} of {want}", seen.len());
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                use rdkafka::Message;
                let m = m.unwrap();
                seen.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            }
        }
        consumer
            .commit_consumer_state(rdkafka::consumer::CommitMode::Sync)
            .unwrap();
        seen
    };
    assert_eq!(consume(&c.bootstrap(), 90).len(), 90);
    // The coordinator's broker dies: the group log's new leader loads the group's offsets
    // and coordinates it.
    c.kill9((coordinator - 1) as usize);
    let live: Vec<i32> = (1..=3).filter(|id| *id != coordinator).collect();
    let survivor = (live[0] - 1) as usize;
    let new_coordinator = wait_in_sync(&c, survivor, "__consumer_offsets", 0, &live);
    assert_ne!(new_coordinator, coordinator);
    let bootstrap = c.bootstrap();
    produce_values(&bootstrap, "grouped", 3, values("after", 30));
    // The group resumes where it committed: exactly the 30 new records.
    let mut resumed = consume(&bootstrap, 30);
    resumed.sort();
    let mut expected = values("after", 30);
    expected.sort();
    assert_eq!(resumed, expected);
}

/// The leader of `topic`'s partition `p` and its ISR, from `laminar topics describe`.
/// `None` while the broker does not know the topic yet.
fn placement(bootstrap: &str, topic: &str, p: i32) -> Option<(i32, Vec<i32>)> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(["topics", "describe", topic, "--bootstrap", bootstrap])
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let out = String::from_utf8(out.stdout).unwrap();
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("partition {p} ")))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |name: &str| words[words.iter().position(|w| *w == name).unwrap() + 1];
    let isr = at("isr").split(',').filter_map(|x| x.parse().ok()).collect();
    Some((at("leader").parse().unwrap(), isr))
}

/// Waits until partition `p` of `topic` has a leader among `live` and all of `live` in its
/// ISR; returns the leader.
fn wait_in_sync(c: &Cluster, via: usize, topic: &str, p: i32, live: &[i32]) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (leader, mut isr) = placement(c.addr(via), topic, p).unwrap_or((-1, Vec::new()));
        isr.sort();
        if live.contains(&leader) && isr == live {
            return leader;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}-{p}: leader {leader}, ISR {isr:?}, waiting for {live:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn acks_all_loses_and_duplicates_nothing_while_leaders_are_killed() {
    // The preferred election at the end is Kafka's tool's: no automatic one before it.
    let mut c = Cluster::start_with(3, &["auto.leader.rebalance.enable=false"]);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("verified", 3, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    let r = block(a.create_topics([&t], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    for p in 0..3 {
        wait_in_sync(&c, 0, "verified", p, &[1, 2, 3]);
    }
    // librdkafka's idempotent producer at acks=all (the delivery verifier), while the
    // leader of partition 0 is SIGKILLed three times, each time restarted and caught up.
    let cfg = laminar_load::verify::VerifyConfig {
        bootstrap: c.bootstrap(),
        topic: "verified".into(),
        partitions: 3,
        records_per_s: 400,
        duration_s: 25,
        record_bytes: 100,
        message_timeout_ms: 60_000,
    };
    let verifier = std::thread::spawn(move || laminar_load::verify::verify(&cfg));
    std::thread::sleep(Duration::from_secs(3));
    for round in 0..3 {
        let via = (0..3).find(|i| c.nodes[*i].serve.is_some()).unwrap();
        let leader = wait_in_sync(&c, via, "verified", 0, &[1, 2, 3]);
        let victim = (leader - 1) as usize;
        c.kill9(victim);
        let survivor = (0..3).find(|i| *i != victim).unwrap();
        let live: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
        let new_leader = wait_in_sync(&c, survivor, "verified", 0, &live);
        assert_ne!(new_leader, leader, "round {round}: a new leader from the ISR");
        std::thread::sleep(Duration::from_secs(1));
        c.launch(victim);
        // Back in the ISR: it truncated what it had beyond the new leader's log, caught up,
        // and was added again.
        wait_in_sync(&c, survivor, "verified", 0, &[1, 2, 3]);
    }
    let report = serde_json::to_value(verifier.join().unwrap().unwrap()).unwrap();
    eprintln!("verifier: {report}");
    assert!(report["acked"].as_u64().unwrap() > 1000, "{report}");
    assert_eq!(report["lost"], 0, "{report}");
    assert_eq!(report["duplicated"], 0, "{report}");
    assert_eq!(report["reordered"], 0, "{report}");
    assert_eq!(report["corrupted"], 0, "{report}");

    // The kills moved leaderships off the preferred replicas; Kafka's preferred election
    // tool moves them back, and what was written stays readable through the new leaders.
    for p in 0..3 {
        wait_in_sync(&c, 0, "verified", p, &[1, 2, 3]);
    }
    // --all-topic-partitions elects the internal topics' partitions too: their preferred
    // replicas must be back in sync, or the tool reports PREFERRED_LEADER_NOT_AVAILABLE.
    for internal in ["__consumer_offsets", "__transaction_state"] {
        wait_in_sync(&c, 0, internal, 0, &[1, 2, 3]);
    }
    let moved: Vec<i32> = (0..3)
        .filter(|p| {
            placement(c.addr(0), "verified", *p).unwrap().0 != replicas_of(c.addr(0), "verified", *p)[0]
        })
        .collect();
    assert!(
        !moved.is_empty(),
        "three kills of partition 0's leader moved it off its first replica"
    );
    let elected = kafka_tool(
        "org.apache.kafka.tools.LeaderElectionCommand",
        &c.bootstrap(),
        &["--election-type", "preferred", "--all-topic-partitions"],
    );
    assert!(
        elected.contains("Successfully completed leader election (PREFERRED)"),
        "{elected}"
    );
    for p in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(20);
        let preferred = replicas_of(c.addr(0), "verified", p)[0];
        while placement(c.addr(0), "verified", p).unwrap().0 != preferred {
            assert!(
                Instant::now() < deadline,
                "verified-{p} led by its first replica again"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert_eq!(
        read_to_end(&c.bootstrap(), "verified", 3, "read_uncommitted").len() as u64,
        report["read"].as_u64().unwrap(),
        "every acknowledged record readable after the election"
    );
}

fn signal(node: &Node, sig: i32) {
    let pid = node.serve.as_ref().unwrap().child.id() as i32;
    // SAFETY: signalling a child this test started.
    unsafe { libc::kill(pid, sig) };
}

fn produce_acks(bootstrap: &str, topic: &str, acks: &str, values: &[String]) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let p: FutureProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "30000")
        .create()
        .unwrap();
    block(async {
        for v in values {
            p.send(
                FutureRecord::<(), _>::to(topic).payload(v).partition(0),
                Duration::from_secs(30),
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("send {v}: {e}"));
        }
    });
}

#[test]
fn a_diverged_follower_is_truncated_by_leader_epoch() {
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("diverge", 1, TopicReplication::Fixed(3));
    assert!(block(a.create_topics([&t], &opts)).unwrap()[0].is_ok());
    let old = wait_in_sync(&c, 0, "diverge", 0, &[1, 2, 3]);
    let old_i = (old - 1) as usize;
    let followers: Vec<usize> = (0..3).filter(|i| *i != old_i).collect();
    let mut expected = values("kept", 10);
    produce_acks(c.addr(old_i), "diverge", "all", &expected);

    // The followers stop (SIGSTOP); the leader alone takes three records at acks=1, and
    // dies with them. They were never below the high watermark: no consumer saw them.
    for i in &followers {
        signal(&c.nodes[*i], libc::SIGSTOP);
    }
    produce_acks(c.addr(old_i), "diverge", "1", &values("unreplicated", 3));
    c.kill9(old_i);
    for i in &followers {
        signal(&c.nodes[*i], libc::SIGCONT);
    }
    let live: Vec<i32> = (1..=3).filter(|id| *id != old).collect();
    let new = wait_in_sync(&c, followers[0], "diverge", 0, &live);
    let later = values("after", 5);
    produce_acks(c.addr((new - 1) as usize), "diverge", "all", &later);
    // The new leader's log: the first unreplicated record may be in it (a fetch in flight
    // when the followers stopped carries it to them, and Kafka keeps it too), the last one
    // cannot be.
    let new_log: Vec<String> = read_to_end(c.addr((new - 1) as usize), "diverge", 1, "read_uncommitted")
        .into_iter()
        .map(|(_, _, v)| String::from_utf8(v).unwrap())
        .collect();
    expected.extend(later);
    let unreplicated: Vec<&String> = new_log.iter().filter(|v| v.starts_with("unreplicated")).collect();
    assert!(unreplicated.len() <= 1, "{new_log:?}");
    let kept: Vec<String> = new_log
        .iter()
        .filter(|v| !v.starts_with("unreplicated"))
        .cloned()
        .collect();
    assert_eq!(kept, expected);

    // The old leader returns as a follower: it asks where its epoch ends, cuts its three
    // records, and catches up.
    c.launch(old_i);
    wait_in_sync(&c, followers[0], "diverge", 0, &[1, 2, 3]);
    // Make it the leader again (the first replica, in the ISR): what it serves is exactly
    // the new leader's log.
    c.kill9((new - 1) as usize);
    let remaining: Vec<i32> = (1..=3).filter(|id| *id != new).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let led = placement(c.addr(old_i), "diverge", 0).map(|(l, _)| l);
        if led == Some(old) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker {old} leads again: {led:?} ({remaining:?} live)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let got: Vec<String> = read_to_end(c.addr(old_i), "diverge", 1, "read_uncommitted")
        .into_iter()
        .map(|(_, _, v)| String::from_utf8(v).unwrap())
        .collect();
    assert_eq!(
        got, new_log,
        "the old leader's log is the new leader's: what it alone had is gone"
    );
}

#[test]
fn acks_all_waits_for_the_in_sync_replicas_and_min_insync_replicas_holds() {
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let waits = NewTopic::new("waits", 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    let strict = NewTopic::new("strict", 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "3");
    for r in block(a.create_topics([&waits, &strict], &opts)).unwrap() {
        assert!(r.is_ok(), "{r:?}");
    }
    let leader = wait_in_sync(&c, 0, "waits", 0, &[1, 2, 3]);
    let strict_leader = wait_in_sync(&c, 0, "strict", 0, &[1, 2, 3]);
    // Sends below do not retry: every broker must know both topics first.
    let _ = wait_placed_everywhere(&c, "waits", 0);
    let _ = wait_placed_everywhere(&c, "strict", 0);
    let li = (leader - 1) as usize;
    let followers: Vec<usize> = (0..3).filter(|i| *i != li).collect();
    let send = |to: &str, topic: &str, acks: &str, value: &str, timeout_ms: &str| {
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let p: FutureProducer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", to)
            .set("acks", acks)
            .set("message.timeout.ms", timeout_ms)
            // The broker's own error, not a retry's timeout.
            .set("retries", "0")
            .create()
            .unwrap();
        block(p.send(
            FutureRecord::<(), _>::to(topic).payload(value).partition(0),
            Duration::from_secs(30),
        ))
        .map(|_| ())
        .map_err(|(e, _)| e)
    };
    let bootstrap = c.bootstrap();
    send(&bootstrap, "waits", "all", "flows", "10000").unwrap();
    // Followers that cannot fetch hold an acks=all produce back: it is not acknowledged
    // (it times out, or the ISR shrinks below min.insync.replicas after its append).
    for i in &followers {
        signal(&c.nodes[*i], libc::SIGSTOP);
    }
    let held = send(&bootstrap, "waits", "all", "held", "1500");
    for i in &followers {
        signal(&c.nodes[*i], libc::SIGCONT);
    }
    assert!(
        held.is_err(),
        "acks=all was answered while no follower could fetch: {held:?}"
    );
    wait_in_sync(&c, li, "waits", 0, &[1, 2, 3]);
    wait_in_sync(&c, li, "strict", 0, &[1, 2, 3]);
    // A broker that leads neither topic goes: two in sync, as many as "waits" asks and
    // fewer than "strict" does.
    let victim = (1..=3).find(|id| *id != leader && *id != strict_leader).unwrap();
    c.kill9((victim - 1) as usize);
    let two: Vec<i32> = (1..=3).filter(|id| *id != victim).collect();
    // Each leader's own view: it decides what a produce gets.
    wait_in_sync(&c, li, "waits", 0, &two);
    wait_in_sync(&c, (strict_leader - 1) as usize, "strict", 0, &two);
    let bootstrap = c.bootstrap();
    send(&bootstrap, "waits", "all", "two in sync", "10000").unwrap();
    let refused = send(&bootstrap, "strict", "all", "two of three", "10000");
    assert!(
        matches!(
            refused,
            Err(rdkafka::error::KafkaError::MessageProduction(
                rdkafka::types::RDKafkaErrorCode::NotEnoughReplicas
            ))
        ),
        "{refused:?}"
    );
    send(&bootstrap, "strict", "1", "acks=1 takes it", "10000").unwrap();
}

#[test]
fn the_java_clients_idempotent_acks_all_loses_and_duplicates_nothing_while_leaders_are_killed() {
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("java-verified", 3, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    assert!(block(a.create_topics([&t], &opts)).unwrap()[0].is_ok());
    for p in 0..3 {
        wait_in_sync(&c, 0, "java-verified", p, &[1, 2, 3]);
    }
    let program = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/AcksAllDelivery.java");
    let java = common::Program::spawn(
        std::process::Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(format!("{}/*", common::kafka_lib().display()))
            .arg(&program)
            .args([&c.bootstrap(), "java-verified", "3", "8000", "400"]),
    );
    // Kafka's Java client starts slowly: let it produce before the first kill.
    std::thread::sleep(Duration::from_secs(5));
    for round in 0..3 {
        let via = (0..3).find(|i| c.nodes[*i].serve.is_some()).unwrap();
        let leader = wait_in_sync(&c, via, "java-verified", round, &[1, 2, 3]);
        let victim = (leader - 1) as usize;
        c.kill9(victim);
        let survivor = (0..3).find(|i| *i != victim).unwrap();
        let live: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
        wait_in_sync(&c, survivor, "java-verified", round, &live);
        c.launch(victim);
        wait_in_sync(&c, survivor, "java-verified", round, &[1, 2, 3]);
    }
    let printed = java.finish(Duration::from_secs(240));
    let acked: Vec<String> = printed
        .lines()
        .filter_map(|l| l.strip_prefix("acked "))
        .map(|l| format!("j-{}", l.split_whitespace().next().unwrap()))
        .collect();
    let failed = printed.lines().filter(|l| l.starts_with("failed ")).count();
    for l in printed.lines().filter(|l| l.starts_with("failed ")).take(3) {
        eprintln!("{l}");
    }
    assert!(printed.lines().any(|l| l.starts_with("done ")), "{printed}");
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for (_, _, v) in read_to_end(&c.bootstrap(), "java-verified", 3, "read_uncommitted") {
        *seen.entry(String::from_utf8(v).unwrap()).or_default() += 1;
    }
    let lost: Vec<&String> = acked.iter().filter(|v| !seen.contains_key(*v)).collect();
    let duplicated: Vec<(&String, &usize)> = seen.iter().filter(|(_, n)| **n > 1).collect();
    eprintln!(
        "java: acked {}, failed {failed}, read {}, lost {}, duplicated {}",
        acked.len(),
        seen.len(),
        lost.len(),
        duplicated.len()
    );
    assert_eq!(
        (acked.len(), failed),
        (8000, 0),
        "every record acknowledged within delivery.timeout.ms"
    );
    assert!(
        lost.is_empty(),
        "acknowledged and lost: {:?}",
        &lost[..lost.len().min(10)]
    );
    assert!(
        duplicated.is_empty(),
        "written twice: {:?}",
        &duplicated[..duplicated.len().min(10)]
    );
}

/// Partition `p`'s replicas as `laminar topics describe` shows them.
fn replicas_of(bootstrap: &str, topic: &str, p: i32) -> Vec<i32> {
    let out = laminar(&["topics", "describe", topic, "--bootstrap", bootstrap]);
    replicas_in(&out, p).unwrap_or_else(|| panic!("{topic}-{p} in {out}"))
}

/// The replicas of partition `p` in the output of `laminar topics describe`.
fn replicas_in(described: &str, p: i32) -> Option<Vec<i32>> {
    let line = described
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("partition {p} ")))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "replicas")? + 1;
    Some(words[at].split(',').filter_map(|x| x.parse().ok()).collect())
}

/// Waits until every broker's metadata names partition `p` of `topic` with the replicas
/// broker `c.nodes[0]` names. A broker learns of a placement some time after the controller
/// commits it (and a new partition's ISR is all its replicas at once, so `wait_in_sync` through
/// one broker does not show that the others know it), while Kafka's tools ask whichever broker
/// they like and take UNKNOWN_TOPIC_OR_PARTITION as final, as they would from Kafka.
fn wait_placed_everywhere(c: &Cluster, topic: &str, p: i32) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let described = |i: usize| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_laminar"))
            .args(["topics", "describe", topic, "--bootstrap", c.addr(i)])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| replicas_in(&String::from_utf8_lossy(&out.stdout), p))
            .flatten()
    };
    let wanted = loop {
        if let Some(r) = described(0) {
            break r;
        }
        assert!(Instant::now() < deadline, "broker 1 does not place {topic}-{p}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for i in 1..c.nodes.len() {
        loop {
            if described(i).as_ref() == Some(&wanted) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "broker {} does not place {topic}-{p} on {wanted:?}",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    wanted
}

/// A directory `name` under `dir`, at any depth.
fn find_dir(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .find_map(|e| {
            let path = e.path();
            if !path.is_dir() {
                None
            } else if e.file_name() == name {
                Some(path)
            } else {
                find_dir(&path, name)
            }
        })
}

/// Kafka's `kafka-reassign-partitions` (the Java tool), its stdout.
fn reassign_tool(bootstrap: &str, args: &[&str]) -> String {
    kafka_tool(
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        bootstrap,
        args,
    )
}

/// Runs one of Kafka's command-line tools (its main class) against `bootstrap`; its output.
fn kafka_tool(class: &str, bootstrap: &str, args: &[&str]) -> String {
    common::Program::spawn(
        std::process::Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(format!("{}/*", common::kafka_lib().display()))
            .arg(class)
            .args(["--bootstrap-server", bootstrap])
            .args(args),
    )
    .finish(Duration::from_secs(120))
}

#[test]
fn kafkas_reassign_tool_moves_a_partition_and_its_leadership_to_a_new_broker() {
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    c.add_broker();
    c.wait_for_brokers(0, &[1, 2, 3, 4]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("moving", 1, TopicReplication::Fixed(3));
    assert!(block(a.create_topics([&t], &opts)).unwrap()[0].is_ok());
    let before = wait_placed_everywhere(&c, "moving", 0);
    let leader = wait_in_sync(&c, 0, "moving", 0, &{
        let mut r = before.clone();
        r.sort();
        r
    });
    let written = values("moving", 500);
    produce_acks(&c.bootstrap(), "moving", "all", &written);

    // The new broker first, the leader removed: the move must copy the log to a broker that
    // had none of it, then hand the leadership over to it.
    let newcomer = (1..=4).find(|b| !before.contains(b)).unwrap();
    let mut target = vec![newcomer];
    target.extend(before.iter().copied().filter(|r| *r != leader));
    let plan = c.nodes[0].dir.parent().unwrap().join("reassign.json");
    std::fs::write(
        &plan,
        format!(r#"{{"version":1,"partitions":[{{"topic":"moving","partition":0,"replicas":{target:?}}}]}}"#),
    )
    .unwrap();
    let plan = plan.to_str().unwrap();
    let executed = reassign_tool(&c.bootstrap(), &["--reassignment-json-file", plan, "--execute"]);
    assert!(
        executed.contains("Successfully started partition reassignment"),
        "{executed}"
    );
    // --verify asks ListPartitionReassignments and compares the replicas (it leaves the
    // throttles alone: none were set).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let verified = reassign_tool(
            &c.bootstrap(),
            &[
                "--reassignment-json-file",
                plan,
                "--verify",
                "--preserve-throttles",
            ],
        );
        if verified.contains("Reassignment of partition moving-0 is completed") {
            break;
        }
        assert!(Instant::now() < deadline, "the move completes: {verified}");
        std::thread::sleep(Duration::from_millis(500));
    }
    // --verify asked any broker; broker 2 may learn the completed move a little later.
    let deadline = Instant::now() + Duration::from_secs(30);
    while replicas_of(c.addr(1), "moving", 0) != target {
        assert!(
            Instant::now() < deadline,
            "broker 2 places moving-0 on {target:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut in_sync = target.clone();
    in_sync.sort();
    assert_eq!(
        wait_in_sync(&c, 1, "moving", 0, &in_sync),
        newcomer,
        "the first target replica leads once the old leader is removed"
    );
    let listed = reassign_tool(&c.bootstrap(), &["--list"]);
    assert!(listed.contains("No partition reassignments found"), "{listed}");
    // Everything acknowledged before is read from the newcomer, the leader now.
    let mut expected = written.clone();
    expected.sort();
    assert_eq!(
        sorted_values(read_to_end(
            c.addr(newcomer as usize - 1),
            "moving",
            1,
            "read_uncommitted"
        )),
        expected
    );
    // The removed broker deletes its copy.
    let removed = &c.nodes[leader as usize - 1].dir;
    let deadline = Instant::now() + Duration::from_secs(20);
    while find_dir(removed, "moving-0").is_some() {
        assert!(Instant::now() < deadline, "broker {leader} removes moving-0");
        std::thread::sleep(Duration::from_millis(100));
    }
    // And the partition keeps taking writes at acks=all on its new replicas.
    produce_acks(&c.bootstrap(), "moving", "all", &values("after", 50));
}

#[test]
fn a_follower_behind_its_leaders_log_start_starts_again_there_and_rejoins() {
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("trimmed", 1, TopicReplication::Fixed(3));
    assert!(block(a.create_topics([&t], &opts)).unwrap()[0].is_ok());
    let leader = wait_in_sync(&c, 0, "trimmed", 0, &[1, 2, 3]);
    produce_acks(&c.bootstrap(), "trimmed", "all", &values("first", 100));
    // A follower goes down; the others take 100 more, and Kafka's kafka-delete-records
    // moves the log start past everything the follower has.
    let down = (1..=3).find(|b| *b != leader).unwrap();
    let live: Vec<i32> = (1..=3).filter(|b| *b != down).collect();
    c.kill9(down as usize - 1);
    wait_in_sync(&c, leader as usize - 1, "trimmed", 0, &live);
    produce_acks(&c.bootstrap(), "trimmed", "all", &values("second", 100));
    let plan = c.nodes[0].dir.parent().unwrap().join("delete.json");
    std::fs::write(
        &plan,
        r#"{"version":1,"partitions":[{"topic":"trimmed","partition":0,"offset":150}]}"#,
    )
    .unwrap();
    let deleted = common::Program::spawn(
        std::process::Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(format!("{}/*", common::kafka_lib().display()))
            .arg("org.apache.kafka.tools.DeleteRecordsCommand")
            .args(["--bootstrap-server", &c.bootstrap()])
            .args(["--offset-json-file", plan.to_str().unwrap()]),
    )
    .finish(Duration::from_secs(120));
    assert!(deleted.contains("low_watermark: 150"), "{deleted}");
    // It comes back: its fetch from offset 100 is below the leader's start. It empties its
    // log to start at 150, catches up from there and rejoins the ISR.
    c.launch(down as usize - 1);
    wait_in_sync(&c, 0, "trimmed", 0, &[1, 2, 3]);
    let dir = find_dir(&c.nodes[down as usize - 1].dir, "trimmed-0").expect("its log");
    let mut logs: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    let first = logs.first().cloned();
    assert_eq!(first.as_deref(), Some("00000000000000000150.log"));
    let expected: Vec<String> = {
        let mut v: Vec<String> = values("second", 100).split_off(50);
        v.sort();
        v
    };
    assert_eq!(
        sorted_values(read_to_end(&c.bootstrap(), "trimmed", 1, "read_uncommitted")),
        expected
    );
}

#[test]
fn partitions_topic_configs_and_quotas_change_through_the_controller() {
    use rdkafka::admin::{AlterConfig, NewPartitions, ResourceSpecifier};
    let c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(c.addr(0));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("grow", 2, TopicReplication::Fixed(2));
    assert!(block(a.create_topics([&t], &opts)).unwrap()[0].is_ok());
    let r = block(a.create_partitions([&NewPartitions::new("grow", 5)], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    // Fewer than it has is refused, as Kafka refuses it.
    let r = block(a.create_partitions([&NewPartitions::new("grow", 3)], &opts)).unwrap();
    assert_eq!(
        r[0].as_ref().unwrap_err().1,
        rdkafka::types::RDKafkaErrorCode::InvalidPartitions
    );
    // Every broker learns the new partitions, each with a leader and two replicas.
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..3 {
        loop {
            let (led, _) = leaders(c.addr(i), "grow");
            if led.len() == 5 && led.iter().all(|l| *l > 0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} sees 5 led partitions: {led:?}",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for p in 2..5 {
        assert_eq!(replicas_of(c.addr(1), "grow", p).len(), 2);
    }
    let written = values("grow", 100);
    produce_values(&c.bootstrap(), "grow", 5, written.clone());
    let mut expected = written;
    expected.sort();
    assert_eq!(
        sorted_values(read_to_end(c.addr(2), "grow", 5, "read_uncommitted")),
        expected
    );

    // A config set through one broker (AlterConfigs) is what every broker describes.
    let change = AlterConfig::new(ResourceSpecifier::Topic("grow")).set("retention.ms", "123456");
    let r = block(a.alter_configs([&change], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    for i in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let described =
                block(admin(c.addr(i)).describe_configs([&ResourceSpecifier::Topic("grow")], &opts))
                    .unwrap()
                    .into_iter()
                    .next()
                    .unwrap()
                    .unwrap();
            let value = described.get("retention.ms").and_then(|e| e.value.clone());
            if value.as_deref() == Some("123456") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {}: retention.ms {value:?}",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // An invalid value is refused (IncrementalAlterConfigs, as `kafka-configs` sends it) and
    // changes nothing.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args([
            "topics",
            "alter",
            "grow",
            "--add-config",
            "cleanup.policy=sometimes",
        ])
        .args(["--bootstrap", c.addr(1)])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let described = block(a.describe_configs([&ResourceSpecifier::Topic("grow")], &opts))
        .unwrap()
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        described
            .get("cleanup.policy")
            .and_then(|e| e.value.clone())
            .as_deref(),
        Some("delete")
    );

    // Dynamic broker configs set with Kafka's kafka-configs through one broker: the cluster
    // default holds on every broker, one broker's own value on it alone.
    for (entity, value) in [("--entity-default", "7200000"), ("3", "3600000")] {
        let mut args = vec!["--entity-type", "brokers"];
        if entity == "--entity-default" {
            args.push(entity);
        } else {
            args.extend(["--entity-name", entity]);
        }
        let config = format!("log.retention.ms={value}");
        args.extend(["--alter", "--add-config", &config]);
        let set = kafka_tool("kafka.admin.ConfigCommand", c.addr(0), &args);
        assert!(set.contains("Completed updating"), "{set}");
    }
    for (i, want) in [(0, "7200000"), (1, "7200000"), (2, "3600000")] {
        let broker = ResourceSpecifier::Broker(i + 1);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let described = block(admin(c.addr(i as usize)).describe_configs([&broker], &opts))
                .unwrap()
                .into_iter()
                .next()
                .unwrap()
                .unwrap();
            let value = described.get("log.retention.ms").and_then(|e| e.value.clone());
            if value.as_deref() == Some(want) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "broker {}: log.retention.ms {value:?}, want {want}",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // Client quotas set with Kafka's kafka-configs through one broker hold on every broker.
    let set = common::Program::spawn(
        std::process::Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(format!("{}/*", common::kafka_lib().display()))
            .arg("kafka.admin.ConfigCommand")
            .args(["--bootstrap-server", c.addr(0)])
            .args([
                "--entity-type",
                "clients",
                "--entity-name",
                "reporting",
                "--alter",
            ])
            .args(["--add-config", "consumer_byte_rate=1048576"]),
    )
    .finish(Duration::from_secs(120));
    assert!(
        set.contains("Completed updating config for client reporting."),
        "{set}"
    );
    for i in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let described = laminar(&["quotas", "describe", "--bootstrap", c.addr(i)]);
            if described.contains("client-id reporting: consumer_byte_rate=1048576") {
                break;
            }
            assert!(Instant::now() < deadline, "node {}: {described}", i + 1);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Transactions in a cluster: Kafka's Java client runs a consume-transform-produce loop with
/// `sendOffsetsToTransaction` while the brokers of the transaction coordinator and of the
/// group coordinator are killed with SIGKILL in turn; a read_committed consumer of the output
/// then sees every input record exactly once. The coordinators move with the leaderships of
/// `__transaction_state-0` and `__consumer_offsets-0`: markers go to the partitions' leaders
/// with WriteTxnMarkers, the leaders check each transaction's first batch with the
/// coordinator (AddPartitionsToTxn v4), and the group coordinator applies the offsets with
/// the transaction's marker in the group log, wherever the transaction coordinator is.
#[test]
fn the_java_clients_exactly_once_loop_survives_its_coordinators_being_killed() {
    const INPUT_RECORDS: usize = 2_000;
    let mut c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let topics = [
        NewTopic::new("eos-in", 2, TopicReplication::Fixed(3)),
        NewTopic::new("eos-out", 2, TopicReplication::Fixed(3)).set("min.insync.replicas", "2"),
    ];
    for r in block(a.create_topics(&topics, &opts)).unwrap() {
        assert!(r.is_ok(), "{r:?}");
    }
    for (topic, partitions) in [
        ("eos-in", 2),
        ("eos-out", 2),
        ("__consumer_offsets", 1),
        ("__transaction_state", 1),
    ] {
        for p in 0..partitions {
            wait_in_sync(&c, 0, topic, p, &[1, 2, 3]);
        }
    }
    // Both coordinators on one broker (the placements of the two logs start at random, and a
    // failover moves both alike when their replicas are in the same order): move the
    // transaction coordinator off it first, so that the rounds below see them apart.
    let txn = wait_in_sync(&c, 0, "__transaction_state", 0, &[1, 2, 3]);
    if txn == wait_in_sync(&c, 0, "__consumer_offsets", 0, &[1, 2, 3]) {
        move_leadership_off(&c, "__transaction_state", txn);
    }
    produce_values(
        &c.bootstrap(),
        "eos-in",
        2,
        (0..INPUT_RECORDS).map(|i| i.to_string()),
    );
    let program =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/TransformExactlyOnce.java");
    let mut java = common::Program::spawn(
        std::process::Command::new("java")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(format!("{}/*", common::kafka_lib().display()))
            .arg(&program)
            .args([&c.bootstrap(), "eos-in", "eos-out", "eos-group", "eos-txn"])
            .arg(INPUT_RECORDS.to_string()),
    );
    std::thread::sleep(Duration::from_secs(6));
    let mut apart = false;
    for round in 0..4 {
        let txn = wait_in_sync(&c, 0, "__transaction_state", 0, &[1, 2, 3]);
        let group = wait_in_sync(&c, 0, "__consumer_offsets", 0, &[1, 2, 3]);
        apart |= txn != group;
        let (log, victim) = if round % 2 == 0 {
            ("__transaction_state", txn)
        } else {
            ("__consumer_offsets", group)
        };
        eprintln!(
            "round {round}: transaction coordinator {txn}, group coordinator {group}; killing {victim}"
        );
        assert!(
            java.running(),
            "the loop finished before round {round}: the kills must land while it runs"
        );
        let i = (victim - 1) as usize;
        c.kill9(i);
        let live: Vec<i32> = (1..=3).filter(|id| *id != victim).collect();
        let via = (live[0] - 1) as usize;
        let moved = wait_in_sync(&c, via, log, 0, &live);
        let (t, g) = (
            placement(c.addr(via), "__transaction_state", 0).map_or(-1, |p| p.0),
            placement(c.addr(via), "__consumer_offsets", 0).map_or(-1, |p| p.0),
        );
        apart |= t != g && t != victim && g != victim;
        eprintln!(
            "round {round}: {log} now led by {moved}; transaction coordinator {t}, group coordinator {g}"
        );
        std::thread::sleep(Duration::from_secs(2));
        c.launch(i);
        wait_in_sync(&c, via, log, 0, &[1, 2, 3]);
        std::thread::sleep(Duration::from_secs(2));
    }
    let printed = java.finish(Duration::from_secs(300));
    eprintln!("{printed}");
    assert!(
        apart,
        "the two coordinators were on one broker throughout: the test must see them apart"
    );
    common::assert_exactly_once_output(&c.bootstrap(), "eos-out", 2, INPUT_RECORDS);
}

/// Moves the leadership of `topic`-0 off broker `from` with Kafka's reassignment tool, and
/// keeps its three replicas: the partition without `from` (its leadership moves), then with
/// it again, last.
fn move_leadership_off(c: &Cluster, topic: &str, from: i32) {
    let others: Vec<i32> = (1..=3).filter(|b| *b != from).collect();
    let plan = c.nodes[0].dir.parent().unwrap().join("move.json");
    for target in [others.clone(), vec![others[0], others[1], from]] {
        std::fs::write(
            &plan,
            format!(
                r#"{{"version":1,"partitions":[{{"topic":"{topic}","partition":0,"replicas":{target:?}}}]}}"#
            ),
        )
        .unwrap();
        let _ = wait_placed_everywhere(c, topic, 0);
        let executed = reassign_tool(
            &c.bootstrap(),
            &["--reassignment-json-file", plan.to_str().unwrap(), "--execute"],
        );
        assert!(
            executed.contains("Successfully started partition reassignment"),
            "{executed}"
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while replicas_of(c.addr(0), topic, 0) != target {
            assert!(Instant::now() < deadline, "{topic}-0 moves to {target:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
        let mut in_sync = target.clone();
        in_sync.sort();
        let leader = wait_in_sync(c, 0, topic, 0, &in_sync);
        assert_ne!(leader, from, "{topic}-0 led by {leader}");
    }
}

/// librdkafka's transactions in a cluster, without faults: a topic whose three partitions
/// are led by three brokers, transactions committed and aborted through a coordinator that
/// leads none of some of them; a read_committed consumer sees exactly the committed records,
/// and a second instance of the transactional id fences the first everywhere.
#[test]
fn librdkafkas_transactions_commit_and_abort_on_partitions_led_elsewhere() {
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
    let c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("txn-spread", 3, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    assert!(block(a.create_topics([&t], &opts)).unwrap()[0].is_ok());
    let mut leaders = Vec::new();
    for p in 0..3 {
        leaders.push(wait_in_sync(&c, 0, "txn-spread", p, &[1, 2, 3]));
    }
    let coordinator = wait_in_sync(&c, 0, "__transaction_state", 0, &[1, 2, 3]);
    wait_in_sync(&c, 0, "__consumer_offsets", 0, &[1, 2, 3]);
    assert!(
        leaders.iter().any(|l| *l != coordinator),
        "some partition led away from the coordinator ({coordinator}): {leaders:?}"
    );
    let producer = |id: &str| -> ThreadedProducer<DefaultProducerContext> {
        let p: ThreadedProducer<DefaultProducerContext> = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", c.bootstrap())
            .set("transactional.id", id)
            .set("linger.ms", "1")
            .create()
            .unwrap();
        p.init_transactions(Duration::from_secs(30)).unwrap();
        p
    };
    let p = producer("spread");
    let mut committed = Vec::new();
    for t in 0..12 {
        p.begin_transaction().unwrap();
        let batch: Vec<String> = (0..9).map(|i| format!("t{t}-{i}")).collect();
        for (i, v) in batch.iter().enumerate() {
            p.send(
                BaseRecord::<(), _>::to("txn-spread")
                    .payload(v)
                    .partition(i as i32 % 3),
            )
            .unwrap();
        }
        p.flush(Duration::from_secs(30)).unwrap();
        if t % 3 == 2 {
            p.abort_transaction(Duration::from_secs(30)).unwrap();
        } else {
            p.commit_transaction(Duration::from_secs(30)).unwrap();
            committed.extend(batch);
        }
    }
    // A new instance of the id fences the old one: its next transaction fails.
    p.begin_transaction().unwrap();
    p.send(
        BaseRecord::<(), _>::to("txn-spread")
            .payload("zombie")
            .partition(0),
    )
    .unwrap();
    let _ = p.flush(Duration::from_secs(10));
    let q = producer("spread");
    assert!(
        p.commit_transaction(Duration::from_secs(30)).is_err(),
        "the fenced instance cannot commit"
    );
    q.begin_transaction().unwrap();
    for i in 0..3 {
        let v = format!("q-{i}");
        q.send(BaseRecord::<(), _>::to("txn-spread").payload(&v).partition(i))
            .unwrap();
        committed.push(v);
    }
    q.commit_transaction(Duration::from_secs(30)).unwrap();
    common::wait_transactions_decided(&c.bootstrap(), "txn-spread", 3);
    let mut got = sorted_values(read_to_end(&c.bootstrap(), "txn-spread", 3, "read_committed"));
    committed.sort();
    got.sort();
    assert_eq!(
        got, committed,
        "read_committed sees exactly the committed records"
    );
    // Every record reached the logs, the aborted ones too.
    let all = read_to_end(&c.bootstrap(), "txn-spread", 3, "read_uncommitted");
    assert!(all.len() >= 12 * 9 + 3, "{} records in the logs", all.len());
}

/// One request encoded by the `kafka-protocol` crate on a new connection to `addr`, and its
/// decoded response: what a client that forges a broker's request sends.
fn raw_call<Req, Resp>(addr: &str, key: kafka_protocol::messages::ApiKey, version: i16, req: &Req) -> Resp
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    common::raw::Raw::connect(addr)
        .call(key, version, req)
        .unwrap_or_else(|| panic!("{key:?} v{version} answered"))
}

/// Issue 29, item 1: any client can send a Fetch naming a follower. One that names it with
/// the leader's epoch and the log end (Fetch v12, or v15 without the follower's broker epoch)
/// must not count as that follower's progress: while both followers are stopped, an
/// `acks=all` produce is not acknowledged however many such fetches arrive, and each is
/// answered NOT_LEADER_OR_FOLLOWER with no records.
#[test]
fn a_client_posing_as_a_follower_acknowledges_nothing() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{
        ApiKey, BrokerId, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;

    let c = Cluster::start(3);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let posed = NewTopic::new("posed", 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    for r in block(a.create_topics([&posed], &opts)).unwrap() {
        assert!(r.is_ok(), "{r:?}");
    }
    let leader = wait_in_sync(&c, 0, "posed", 0, &[1, 2, 3]);
    let _ = wait_placed_everywhere(&c, "posed", 0);
    let li = (leader - 1) as usize;
    let leader_addr = c.addr(li).to_string();
    let send = |value: &str, timeout_ms: &str| {
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let p: FutureProducer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", &leader_addr)
            .set("acks", "all")
            .set("message.timeout.ms", timeout_ms)
            .set("retries", "0")
            .create()
            .unwrap();
        block(p.send(
            FutureRecord::<(), _>::to("posed").payload(value).partition(0),
            Duration::from_secs(30),
        ))
        .map(|d| d.offset)
        .map_err(|(e, _)| e)
    };
    assert_eq!(send("flows", "10000").unwrap(), 0);

    // The leader epoch, as any client learns it.
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(StrBytes::from_static_str("posed")));
    let mut m = MetadataRequest::default();
    m.topics = Some(vec![t]);
    let meta: MetadataResponse = raw_call(&leader_addr, ApiKey::Metadata, 12, &m);
    let epoch = meta.topics[0].partitions[0].leader_epoch;

    let followers: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    for id in &followers {
        signal(&c.nodes[(*id - 1) as usize], libc::SIGSTOP);
    }
    let held = std::thread::scope(|scope| {
        let held = scope.spawn(|| send("held", "3000"));
        // "held" is offset 1: a fetch from offset 2 claims the follower has it.
        let forge = |version: i16, follower: i32, broker_epoch: i64| {
            let mut p = FetchPartition::default();
            p.partition = 0;
            p.current_leader_epoch = epoch;
            p.fetch_offset = 2;
            p.last_fetched_epoch = epoch;
            p.partition_max_bytes = 1 << 20;
            let mut t = FetchTopic::default();
            t.topic = TopicName(StrBytes::from_static_str("posed"));
            t.topic_id = meta.topics[0].topic_id;
            t.partitions = vec![p];
            let mut f = FetchRequest::default();
            if version >= 15 {
                f.replica_state.replica_id = BrokerId(follower);
                f.replica_state.replica_epoch = broker_epoch;
            } else {
                f.replica_id = BrokerId(follower);
            }
            f.max_wait_ms = 0;
            f.max_bytes = 1 << 20;
            f.session_epoch = -1;
            f.topics = vec![t];
            let resp: FetchResponse = raw_call(&leader_addr, ApiKey::Fetch, version, &f);
            let p = &resp.responses[0].partitions[0];
            (p.error_code, p.records.as_ref().map_or(0, |r| r.len()))
        };
        let until = Instant::now() + Duration::from_millis(2500);
        let mut answers = Vec::new();
        while Instant::now() < until {
            for id in &followers {
                answers.push(forge(12, *id, -1));
                answers.push(forge(15, *id, -1));
                answers.push(forge(16, *id, 1 << 40));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (held.join().unwrap(), answers)
    });
    for id in &followers {
        signal(&c.nodes[(*id - 1) as usize], libc::SIGCONT);
    }
    let (held, answers) = held;
    assert!(
        held.is_err(),
        "acks=all was answered while no follower could fetch: {held:?}"
    );
    assert!(
        answers.iter().all(|a| *a == (6, 0)),
        "every forged fetch answered NOT_LEADER_OR_FOLLOWER with no records: {:?}",
        answers.iter().find(|a| **a != (6, 0))
    );
    // The real followers still count. (Through any broker, with retries: the pause may have
    // stopped the active controller, which may then move the leadership.)
    wait_in_sync(&c, li, "posed", 0, &[1, 2, 3]);
    produce_values(&c.bootstrap(), "posed", 1, ["after".to_string()]);
}

/// Issue 29, item 3: a leader whose fsync fails takes its log offline, and the controller is
/// told: the leadership moves to an in-sync replica and the broker leaves the ISR, so that
/// an idempotent `acks=all` producer's retries go on there, and every record acknowledged
/// is read back once. (Before, the partition kept its leader, whose log refused every
/// append with KAFKA_STORAGE_ERROR until the producer gave up.) Node 1's data directory is
/// on laminar-faultfs, which fails its fsyncs of the partition's files with EIO.
#[test]
fn a_leader_whose_fsync_fails_hands_its_leadership_over() {
    use laminar_faultfs::{Mount, Options};
    let tmp = tempfile::tempdir().unwrap();
    let (mount, mnt) = Mount::in_dir(tmp.path(), Options::default()).unwrap();
    let c = Cluster::start_in(3, &[], &[(1, mnt.clone())]);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let topic = NewTopic::new("failing", 3, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    for r in block(a.create_topics([&topic], &opts)).unwrap() {
        assert!(r.is_ok(), "{r:?}");
    }
    // The partition node 1 leads (three partitions of three replicas: one each).
    let led = (0..3)
        .find(|p| {
            let _ = wait_in_sync(&c, 0, "failing", *p, &[1, 2, 3]);
            placement(c.addr(0), "failing", *p).is_some_and(|(leader, _)| leader == 1)
        })
        .expect("node 1 leads a partition");
    for p in 0..3 {
        let _ = wait_placed_everywhere(&c, "failing", p);
    }
    let before = values("before", 300);
    produce_values(&c.bootstrap(), "failing", 3, before.clone());

    mount
        .command(&format!("fail fsync **/failing-{led}/* EIO"))
        .unwrap();
    // Retried for 30 s at most: a leadership that stays fails them.
    let after = values("after", 300);
    {
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let p: FutureProducer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", c.bootstrap())
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "30000")
            .create()
            .unwrap();
        block(async {
            let sends: Vec<_> = after
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    p.send_result(
                        FutureRecord::<(), _>::to("failing")
                            .payload(v)
                            .partition(i as i32 % 3),
                    )
                    .unwrap()
                })
                .collect();
            for s in sends {
                s.await.unwrap().expect("delivered within 30 s");
            }
        });
    }
    let (leader, isr) = placement(c.addr(1), "failing", led).unwrap();
    assert!(leader != 1 && !isr.contains(&1), "leader {leader}, ISR {isr:?}");
    let mut want: Vec<String> = before.into_iter().chain(after).collect();
    want.sort();
    let got = sorted_values(read_to_end(c.addr(1), "failing", 3, "read_uncommitted"));
    assert_eq!(got, want, "every record acknowledged, once");
    drop(c);
    mount.unmount().unwrap();
}

/// The batches of every segment file in `dir` (a partition's directory), in file order:
/// `Err` at the first one whose CRC, length or magic is wrong. Stops at preallocated zeros.
fn sound_batches(dir: &std::path::Path) -> Result<Vec<(i64, i64)>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    let mut batches = Vec::new();
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let mut pos = 0;
        while pos + 12 <= data.len() {
            let len = i32::from_be_bytes(data[pos + 8..pos + 12].try_into().unwrap());
            if len == 0 {
                break;
            }
            let end = pos + 12 + len.max(0) as usize;
            let Some(batch) = data.get(pos..end) else {
                return Err(format!("{f:?}: a batch at {pos} runs past the file"));
            };
            let h =
                laminar_records::validate_stored_batch(batch).map_err(|e| format!("{f:?} at {pos}: {e}"))?;
            batches.push((h.base_offset, h.next_offset()));
            pos = end;
        }
    }
    Ok(batches)
}

/// A byte that changes on a leader's disk while it is down is found by the first read of it
/// and never served: the leader hands its leadership to an in-sync replica that has the
/// batch whole (the consumer reads every record as written), and, following, cuts its own
/// log at the damaged batch and fetches it again.
#[test]
fn a_leaders_damaged_batch_is_never_served_and_is_fetched_again() {
    let mut c = Cluster::start_with(3, &["leader.imbalance.check.interval.seconds=1"]);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("flipped", 1, TopicReplication::Fixed(3));
    let r = block(a.create_topics([&t], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    wait_in_sync(&c, 0, "flipped", 0, &[1, 2, 3]);
    // In many batches (one produce each), so that the damaged one has others after it.
    let written = values("flipped", 3000);
    for some in written.chunks(100) {
        produce_values(&c.bootstrap(), "flipped", 1, some.to_vec());
    }
    let preferred = replicas_of(c.addr(0), "flipped", 0)[0];
    let i = (preferred - 1) as usize;
    let other = (i + 1) % 3;
    let end = high_watermark(c.addr(other), "flipped");
    assert_eq!(end, 3000);

    // Stopped cleanly (its checkpoint then vouches for every byte, which recovery does not
    // read again), a byte of a batch in the middle of its log changes on the disk.
    c.nodes[i].serve.take().unwrap().terminate();
    let live: Vec<i32> = (1..=3).filter(|b| *b != preferred).collect();
    c.wait_for_brokers(other, &live);
    let deadline = Instant::now() + Duration::from_secs(30);
    while placement(c.addr(other), "flipped", 0).is_none_or(|(leader, _)| leader == preferred) {
        assert!(Instant::now() < deadline, "flipped-0 led by another broker");
        std::thread::sleep(Duration::from_millis(200));
    }
    let dir = find_dir(&c.nodes[i].dir, "flipped-0").expect("its partition directory");
    let batches = sound_batches(&dir).unwrap();
    let (victim, _) = batches[batches.len() / 2];
    let segment = dir.join("00000000000000000000.log");
    let mut data = std::fs::read(&segment).unwrap();
    let mut pos = 0;
    loop {
        let base = i64::from_be_bytes(data[pos..pos + 8].try_into().unwrap());
        let len = i32::from_be_bytes(data[pos + 8..pos + 12].try_into().unwrap()) as usize;
        if base == victim {
            data[pos + 12 + len / 2] ^= 0x10;
            break;
        }
        pos += 12 + len;
    }
    std::fs::write(&segment, &data).unwrap();
    assert!(sound_batches(&dir).is_err());

    // Back, in sync, and leading again as the preferred replica: its first read of the log
    // (the producer-state rebuild that precedes serving, or a consumer's fetch) finds the
    // damage; it hands the leadership over and, following, fetches the batch again.
    c.launch(i);
    c.wait_for_brokers(other, &[1, 2, 3]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match sound_batches(&dir) {
            Ok(b) if b.last().is_some_and(|(_, next)| *next == 3000) => break,
            now => assert!(
                Instant::now() < deadline,
                "broker {preferred}'s copy whole again: {:?}",
                now.map(|b| b.last().copied())
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let (leader, isr) = placement(c.addr(other), "flipped", 0).unwrap();
    assert!(
        leader != preferred && !isr.contains(&preferred),
        "leader {leader}, ISR {isr:?}"
    );
    let mut want = written;
    want.sort();
    assert_eq!(
        sorted_values(read_to_end(&c.bootstrap(), "flipped", 1, "read_uncommitted")),
        want,
        "every record read once, as written"
    );
}

/// A power cut of the whole cluster: every broker keeps its data on its own lazy faultfs
/// mount. Records are acknowledged at `acks=all` while the followers' fsyncs are slow (held
/// back 1 s); then all three brokers are frozen, every mount loses power, and they are
/// killed. The two followers start first: having registered again after an unclean stop,
/// they have left the ISR, and the partition waits for its last member, the old leader.
/// Every acknowledged record is read back once. Two guards stand between a cut and a loss
/// here: a follower counts towards `acks=all` only for what it has fsynced, and a broker that
/// registers again leaves every ISR until it has caught up; either one alone passes this
/// test, without both it fails (see ARCHITECTURE.md, "What survives which fault").
#[test]
fn acknowledged_records_survive_a_power_cut_of_the_whole_cluster() {
    use laminar_faultfs::{Mount, Options};
    let tmp = tempfile::tempdir().unwrap();
    let lazy = Options {
        lazy: true,
        ..Options::default()
    };
    let mounts: Vec<(Mount, std::path::PathBuf)> = (1..=3)
        .map(|i| Mount::in_dir(&tmp.path().join(format!("m{i}")), lazy.clone()).unwrap())
        .collect();
    let dirs: Vec<(i32, std::path::PathBuf)> =
        (1..=3).map(|i| (i, mounts[i as usize - 1].1.clone())).collect();
    let mut c = Cluster::start_in(3, &["auto.leader.rebalance.enable=false"], &dirs);
    c.wait_for_brokers(0, &[1, 2, 3]);
    let a = admin(&c.bootstrap());
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("cut", 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    for r in block(a.create_topics([&t], &opts)).unwrap() {
        assert!(r.is_ok(), "{r:?}");
    }
    let leader = wait_in_sync(&c, 0, "cut", 0, &[1, 2, 3]);
    let followers: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    let mut sent = values("before", 300);
    produce_values(&c.bootstrap(), "cut", 1, sent.clone());
    for f in &followers {
        mounts[*f as usize - 1]
            .0
            .command("delay fsync **/cut-0/* 1000")
            .unwrap();
    }
    let slow = values("slow", 200);
    produce_values(&c.bootstrap(), "cut", 1, slow.clone());
    sent.extend(slow);

    for n in &c.nodes {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(n.serve.as_ref().unwrap().child.id() as i32, libc::SIGSTOP) };
    }
    for (m, _) in &mounts {
        m.command("powercut").unwrap();
    }
    for i in 0..3 {
        c.kill9(i);
    }
    for (m, _) in &mounts {
        m.command("clear").unwrap();
    }
    for f in &followers {
        c.launch(*f as usize - 1);
    }
    let via = followers[0] as usize - 1;
    c.wait_for_brokers(via, &followers);
    c.launch(leader as usize - 1);
    let _ = wait_in_sync(&c, via, "cut", 0, &[1, 2, 3]);
    let mut read: Vec<String> = read_to_end(&c.bootstrap(), "cut", 1, "read_committed")
        .into_iter()
        .map(|(_, _, v)| String::from_utf8(v).unwrap())
        .collect();
    read.sort();
    sent.sort();
    assert_eq!(read.len(), sent.len(), "every acknowledged record, once");
    assert_eq!(read, sent);
    for n in c.nodes.iter_mut() {
        n.serve.take().unwrap().terminate();
    }
    for (m, _) in mounts {
        m.unmount().unwrap();
    }
}

/// Issue 30: brokers that authenticate to each other. Every node's one listener, BROKER, is
/// SASL_SSL (TLS from a test CA, PLAIN users from its JAAS configuration), and it is the
/// inter-broker listener; with Kafka's StandardAuthorizer, only the brokers' user and the
/// admin are super users. `acks=all` with `min.insync.replicas=3` is answered only when
/// both followers replicate over that listener, as user `broker` in TLS; a client
/// authenticated as alice that sends a follower's Fetch is refused
/// (CLUSTER_AUTHORIZATION_FAILED, no records), and so is a plaintext connection. The
/// controllers' port is mutual TLS for principals allowed CLUSTER_ACTION: alice's client
/// certificate from the brokers' CA does not get her a heartbeat answered until an ACL
/// allows her that.
#[test]
fn brokers_replicate_over_sasl_ssl_and_a_client_posing_as_a_follower_is_refused() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use laminar_cluster::client::{BrokerConnection, InterBrokerSecurity, SaslLogin};

    let certs = tempfile::tempdir().unwrap();
    let (ca_file, keystore) = test_ca(certs.path());
    let jaas = "listener.name.broker.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
                username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\" \
                user_admin=\"admin-secret\" user_alice=\"alice-secret\";";
    let settings = [
        "listeners=BROKER://{listen}".to_string(),
        "listener.security.protocol.map=BROKER:SASL_SSL,CONTROLLER:SSL".to_string(),
        "inter.broker.listener.name=BROKER".to_string(),
        "controller.listener.names=CONTROLLER".to_string(),
        "sasl.enabled.mechanisms=PLAIN".to_string(),
        "sasl.mechanism.inter.broker.protocol=PLAIN".to_string(),
        jaas.to_string(),
        "ssl.keystore.type=PEM".to_string(),
        format!("ssl.keystore.location={}", keystore.display()),
        format!("ssl.truststore.location={}", ca_file.display()),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_string(),
        "super.users=User:broker;User:admin".to_string(),
        // The brokers' certificates (CN=broker) name the super user `broker` too, as the
        // controller port asks.
        "ssl.principal.mapping.rules=RULE:^CN=([a-z]+)$/$1/,DEFAULT".to_string(),
    ];
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let c = Cluster::start_with(3, &settings);
    let as_user = |user: &str, password: &str| {
        let mut config = rdkafka::config::ClientConfig::new();
        config
            .set("bootstrap.servers", c.bootstrap())
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "PLAIN")
            .set("sasl.username", user)
            .set("sasl.password", password)
            .set("ssl.ca.location", ca_file.to_str().unwrap());
        config
    };
    {
        // The brokers register and unfence first: until then a broker names itself alone.
        let probe: BaseConsumer = as_user("admin", "admin-secret").create().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let brokers = probe
                .fetch_metadata(None, Duration::from_secs(10))
                .map(|m| m.brokers().len());
            if brokers.as_ref().is_ok_and(|n| *n == 3) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "three brokers in the metadata: {brokers:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let admin_config = as_user("admin", "admin-secret");
    let a: AdminClient<DefaultClientContext> = admin_config.create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let t = NewTopic::new("secured", 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "3");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // The brokers register and unfence first: until then there is no broker to place on.
        let r = block(a.create_topics([&t], &opts)).unwrap();
        if r[0].is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "create the topic: {r:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let values = values("secured", 50);
    {
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let p: FutureProducer = as_user("admin", "admin-secret")
            .set("acks", "all")
            .set("message.timeout.ms", "30000")
            .create()
            .unwrap();
        block(async {
            for v in &values {
                p.send(
                    FutureRecord::<(), _>::to("secured").payload(v).partition(0),
                    Duration::from_secs(30),
                )
                .await
                .unwrap_or_else(|(e, _)| panic!("send {v} with acks=all to 3 in-sync replicas: {e}"));
            }
        });
    }
    let consumer: BaseConsumer = as_user("admin", "admin-secret")
        .set("group.id", "secured-reader")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["secured"]).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < values.len() && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            use rdkafka::Message;
            got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    assert_eq!(got, values);

    // Alice, authenticated in TLS but no broker, fetches as broker 2 and 3 would.
    let meta = consumer
        .fetch_metadata(Some("secured"), Duration::from_secs(10))
        .unwrap();
    let leader = meta.topics()[0].partitions()[0].leader();
    let leader_addr = c.addr((leader - 1) as usize).to_string();
    let roots = {
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        for cert in rustls::pki_types::CertificateDer::pem_file_iter(&ca_file).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        roots
    };
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots.clone())
    .with_no_client_auth();
    let alice = InterBrokerSecurity {
        tls: Some(std::sync::Arc::new(tls)),
        sasl: Some(SaslLogin {
            mechanism: "PLAIN".into(),
            username: "alice".into(),
            password: "alice-secret".into(),
        }),
    };
    let forged: Vec<(i16, usize)> = block(async {
        let mut conn = BrokerConnection::connect(&leader_addr, "posing", &alice)
            .await
            .unwrap();
        let mut answers = Vec::new();
        for follower in (1..=3).filter(|b| *b != leader) {
            for version in [12i16, 15] {
                let mut p = FetchPartition::default();
                p.partition = 0;
                p.fetch_offset = values.len() as i64;
                p.partition_max_bytes = 1 << 20;
                let mut t = FetchTopic::default();
                t.topic = TopicName(StrBytes::from_static_str("secured"));
                // (v13+ names topics by id; the refusal comes before any topic is looked up.)
                t.partitions = vec![p];
                let mut f = FetchRequest::default();
                if version >= 15 {
                    f.replica_state.replica_id = BrokerId(follower);
                    f.replica_state.replica_epoch = 1;
                } else {
                    f.replica_id = BrokerId(follower);
                }
                f.max_bytes = 1 << 20;
                f.session_epoch = -1;
                f.topics = vec![t];
                let r: FetchResponse = conn.call(ApiKey::Fetch, version, &f).await.unwrap();
                let records = r
                    .responses
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
                    .sum();
                answers.push((r.error_code, records));
            }
        }
        answers
    });
    assert_eq!(
        forged,
        vec![(31, 0); 4],
        "CLUSTER_AUTHORIZATION_FAILED, nothing read"
    );
    // Without TLS and SASL nothing is answered at all.
    let plain = block(async {
        let mut conn =
            BrokerConnection::connect(&leader_addr, "plain", &InterBrokerSecurity::default()).await?;
        conn.call::<_, FetchResponse>(ApiKey::Fetch, 12, &FetchRequest::default())
            .await
    });
    assert!(
        plain.is_err(),
        "a plaintext fetch on a SASL_SSL listener: {:?}",
        plain.map(|r| r.error_code)
    );
    // The controller port speaks mutual TLS and serves super users only: a request in plain
    // text, one in TLS without a certificate, and one with alice's certificate from the
    // brokers' own CA get no answer.
    let voter = c
        .voters
        .split(',')
        .next()
        .unwrap()
        .split_once('@')
        .unwrap()
        .1
        .to_string();
    let heartbeat = || {
        laminar_cluster::rpc::ControllerRequest::Heartbeat(laminar_cluster::rpc::Heartbeat {
            id: laminar_cluster::BrokerId(9),
            incarnation: "posing".into(),
            host: "127.0.0.1".into(),
            port: 1,
            endpoints: Vec::new(),
            known_version: 0,
            leaving: false,
        })
    };
    let without_certificate = {
        let roots = roots.clone();
        let client = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        // (The server half is not used by a client.)
        let server = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(std::sync::Arc::new(
            rustls::server::ResolvesServerCertUsingSni::new(),
        ));
        laminar_cluster::rpc::ControllerTls {
            server: std::sync::Arc::new(server),
            client: std::sync::Arc::new(client),
            admit: None,
        }
    };
    // alice's certificate, from the brokers' CA: TLS succeeds, but she is no super user.
    let as_alice = {
        let chain = vec![rustls::pki_types::CertificateDer::from(
            std::fs::read(certs.path().join("alice.der")).unwrap(),
        )];
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
            std::fs::read(certs.path().join("alice.key.der")).unwrap(),
        ));
        let client = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_client_auth_cert(chain, key)
        .unwrap();
        laminar_cluster::rpc::ControllerTls {
            server: without_certificate.server.clone(),
            client: std::sync::Arc::new(client),
            admit: None,
        }
    };
    // Each holds the quorum's secret too (the harness sets one): what is judged is the TLS.
    let secret = || {
        laminar_auth::peer_secret::PeerSecret::from_file_contents(&std::fs::read(&c.secret_file).unwrap())
            .unwrap()
    };
    for (described, tls) in [
        ("plain text", None),
        ("TLS without a certificate", Some(without_certificate)),
        ("TLS with alice's certificate", Some(as_alice.clone())),
    ] {
        let answer = block(async {
            let auth = laminar_cluster::rpc::ControllerAuth {
                tls,
                secret: Some(secret()),
            };
            laminar_cluster::rpc::Connection::new(voter.clone(), auth)
                .call(&heartbeat(), Duration::from_secs(5))
                .await
        });
        assert!(
            answer.is_err(),
            "{described} to the controller port was answered: {answer:?}"
        );
    }
    // The port admits through the authorizer, as Kafka's controllers: once an ACL allows
    // alice CLUSTER_ACTION on the cluster, her certificate is served (a topic creation she
    // only validates, which changes nothing).
    let admin_props = certs.path().join("admin.properties");
    std::fs::write(
        &admin_props,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nssl.truststore.type=PEM\nssl.truststore.location={}\n\
             sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-secret\";\n",
            ca_file.display()
        ),
    )
    .unwrap();
    laminar(&[
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "ClusterAction",
        "--cluster",
        "--bootstrap",
        c.bootstrap().split(',').next().unwrap(),
        "--command-config",
        admin_props.to_str().unwrap(),
    ]);
    let validate = laminar_cluster::rpc::ControllerRequest::CreateTopic(laminar_cluster::rpc::TopicRequest {
        name: "only-validated".into(),
        partitions: 1,
        replication_factor: 1,
        configs: Default::default(),
        validate_only: true,
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = block(async {
            let auth = laminar_cluster::rpc::ControllerAuth {
                tls: Some(as_alice.clone()),
                secret: Some(secret()),
            };
            laminar_cluster::rpc::Connection::new(voter.clone(), auth)
                .call(&validate, Duration::from_secs(5))
                .await
        });
        if answer.is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "alice, allowed CLUSTER_ACTION, to the controller port: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Still in sync: the followers' fetches were the real ones.
    let meta = consumer
        .fetch_metadata(Some("secured"), Duration::from_secs(10))
        .unwrap();
    let isr = meta.topics()[0].partitions()[0].isr();
    assert_eq!(isr.len(), 3, "ISR {isr:?}");
}

/// A CA and a broker certificate (CN=broker) for 127.0.0.1 and localhost, signed by it: (the
/// CA's PEM, the keystore PEM of the broker's key and chain). Also alice's client certificate
/// (CN=alice) from the same CA, in `alice.der` and `alice.key.der`.
fn test_ca(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "Laminar test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, "broker");
    let leaf = leaf.signed_by(&key, &ca, &ca_key).unwrap();
    // A client's certificate from the same CA (an mTLS client, not a broker): its DER and
    // its key's (PKCS#8).
    let alice_key = KeyPair::generate().unwrap();
    let mut alice = CertificateParams::new(Vec::<String>::new()).unwrap();
    alice.distinguished_name.push(DnType::CommonName, "alice");
    let alice = alice.signed_by(&alice_key, &ca, &ca_key).unwrap();
    std::fs::write(dir.join("alice.der"), alice.der()).unwrap();
    std::fs::write(dir.join("alice.key.der"), alice_key.serialize_der()).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let keystore = dir.join("broker.pem");
    std::fs::write(
        &keystore,
        format!("{}{}{}", key.serialize_pem(), leaf.pem(), ca.pem()),
    )
    .unwrap();
    (ca_file, keystore)
}
