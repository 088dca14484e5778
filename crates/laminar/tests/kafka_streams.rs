//! Issue 13, acceptance: Kafka Streams (kafka-streams 4.3.1) word count with
//! `processing.guarantee=exactly_once_v2` against `laminar serve`, killed with SIGKILL twice
//! while lines keep arriving; the output topic's counts are then exactly right.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

const LINES: usize = 3_000;
const LINES_PER_TICK: usize = 50;
const TICK: Duration = Duration::from_millis(400);

fn line(i: usize) -> String {
    format!("w{} w{} w{}", i % 37, i % 11, (i * 7) % 23)
}

fn expected() -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for i in 0..LINES {
        for w in line(i).split(' ') {
            *counts.entry(w.to_string()).or_default() += 1;
        }
    }
    counts
}

struct App {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

fn start_app(addr: &str, state_dir: &Path) -> App {
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/WordCountEos.java");
    let mut child = Command::new("java")
        .arg("-Xmx384m")
        .arg("-cp")
        .arg(format!("{}/*", kafka_lib().display()))
        .arg(&program)
        .args([addr, "words-in", "words-out", "wordcount-eos"])
        .arg(state_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("java (is Java installed?)");
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let (out, l2) = (child.stdout.take().unwrap(), log.clone());
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            l2.lock().unwrap().push(line);
        }
    });
    App { child, log }
}

impl App {
    fn running(&self) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.ends_with("-> RUNNING"))
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last count of each word in the output, as a read_committed consumer reads it; every
/// count of a word must be above the one before it (a count repeated or gone back would be
/// an update that should not be there).
fn counts(addr: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (_, key, value) in read_to_end(addr, "words-out", 2, "read_committed") {
        let word = String::from_utf8(key).unwrap();
        let count = i64::from_be_bytes(value.try_into().unwrap());
        let last = out.insert(word.clone(), count);
        assert!(
            last.is_none_or(|l| l < count),
            "{word}: count {count} after {last:?}: a count went back or repeated"
        );
    }
    out
}

#[test]
fn kafka_streams_word_count_is_exactly_once_across_two_sigkills() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = serve(&tmp.path().join("data"));
    let addr = broker.addr.clone();
    create_topic(&addr, "words-in", 2);
    create_topic(&addr, "words-out", 2);
    let state_dir = tmp.path().join("streams-state");

    // Lines arrive throughout, so that each kill lands in the middle of the work: the last
    // tick's lines wait until both kills are done (on a loaded machine a new instance may
    // take longer to start than all the other ticks).
    let kills_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder_kills_done = kills_done.clone();
    let feeder_addr = addr.clone();
    let feeder = std::thread::spawn(move || {
        let p: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &feeder_addr)
            .set("enable.idempotence", "true")
            .create()
            .unwrap();
        for i in 0..LINES {
            if i == LINES - LINES_PER_TICK {
                let deadline = Instant::now() + Duration::from_secs(600);
                while !feeder_kills_done.load(std::sync::atomic::Ordering::Acquire)
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            let v = line(i);
            let k = format!("line-{i}");
            p.send(BaseRecord::to("words-in").key(&k).payload(&v)).unwrap();
            if (i + 1) % LINES_PER_TICK == 0 {
                p.flush(Duration::from_secs(30)).unwrap();
                std::thread::sleep(TICK);
            }
        }
        p.flush(Duration::from_secs(30)).unwrap();
    });

    let mut app = start_app(&addr, &state_dir);
    for _kill in 0..2 {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !app.running() {
            assert!(
                Instant::now() < deadline,
                "Streams never reached RUNNING: {:?}",
                app.log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Let it count for a while, then kill it in the middle (lines still arrive after:
        // the feeder holds its last tick until both kills are done).
        std::thread::sleep(Duration::from_secs(4));
        app.kill9();
        app = start_app(&addr, &state_dir);
    }
    kills_done.store(true, std::sync::atomic::Ordering::Release);
    feeder.join().unwrap();

    let want = expected();
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut got = counts(&addr);
    while got != want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        got = counts(&addr);
    }
    let wrong: Vec<_> = want
        .iter()
        .filter(|(w, n)| got.get(*w) != Some(n))
        .map(|(w, n)| format!("{w}: want {n}, got {:?}", got.get(w)))
        .collect();
    assert!(
        wrong.is_empty(),
        "counts wrong: {wrong:?}\nStreams printed: {:?}",
        app.log.lock().unwrap()
    );
    assert_eq!(got.len(), want.len());
    eprintln!("the last instance printed: {:?}", app.log.lock().unwrap());
    app.kill9();
    broker.terminate();
}
