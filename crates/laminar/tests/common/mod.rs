//! `laminar serve` as a child process, for tests that need a real process to kill.
#![allow(dead_code)]

pub mod pki;
pub mod raw;
pub mod tools;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Serve {
    pub child: Child,
    pub addr: String,
    /// Where its Prometheus endpoint listens (`host:port`).
    pub metrics: Option<String>,
}

/// Starts `laminar serve` on an ephemeral port with `dir` as its data directory, and waits
/// for the line that says where it listens.
pub fn serve(dir: &Path) -> Serve {
    serve_at(dir, "127.0.0.1:0")
}

/// Like [`serve`], listening on `listen` (a restart on the address clients already know).
pub fn serve_at(dir: &Path, listen: &str) -> Serve {
    serve_with(dir, listen, &[])
}

/// Like [`serve_at`], with more arguments for `laminar serve` (a `--config` file).
pub fn serve_with(dir: &Path, listen: &str, extra: &[&str]) -> Serve {
    try_serve_with(dir, listen, extra).expect("broker printed its address")
}

/// Like [`serve_with`], `None` if the broker exits before it listens (a port taken).
pub fn try_serve_with(dir: &Path, listen: &str, extra: &[&str]) -> Option<Serve> {
    let mut args = vec!["--listen", listen];
    args.extend_from_slice(extra);
    try_serve_args(dir, &args)
}

/// A broker with a PLAINTEXT listener and a second one named `second` (its protocol by
/// Kafka's default map: the name), on free ports, and `settings` (`key=value`); tried on
/// other ports if one was taken meanwhile. Returns it with the two addresses.
pub fn serve_plaintext_and(dir: &Path, second: &str, settings: &[&str]) -> (Serve, String, String) {
    for _ in 0..5 {
        let (p, s) = (free_port(), free_port());
        let listeners = format!("listeners=PLAINTEXT://127.0.0.1:{p},{second}://127.0.0.1:{s}");
        let mut args = vec!["--set", listeners.as_str()];
        for setting in settings {
            args.extend(["--set", setting]);
        }
        if let Some(b) = try_serve_with(dir, &format!("127.0.0.1:{p}"), &args) {
            return (b, format!("127.0.0.1:{p}"), format!("127.0.0.1:{s}"));
        }
    }
    panic!("no free ports in five tries");
}

/// `laminar serve --data-dir DIR ARGS` (its listeners from ARGS, a `--config` file for
/// example), `None` if it exits before it listens.
pub fn try_serve_args(dir: &Path, extra: &[&str]) -> Option<Serve> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(["serve", "--metrics-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut metrics = None;
    let addr = loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        };
        if let Some(rest) = line.split("metrics on http://").nth(1) {
            metrics = rest.split('/').next().map(str::to_string);
        }
        if let Some(rest) = line.split("laminar listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining stderr so the broker never blocks on a full pipe; with
    // LAMINAR_TEST_LOG_DIR set, into a file per broker address, to read after a failure.
    let keep = std::env::var_os("LAMINAR_TEST_LOG_DIR").map(|d| {
        let path = std::path::Path::new(&d).join(format!("{}.log", addr.replace(':', "-")));
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
    });
    std::thread::spawn(move || {
        use std::io::Write;
        let mut keep = keep;
        for line in lines.map_while(Result::ok) {
            if let Some(f) = keep.as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    });
    Some(Serve { child, addr, metrics })
}

impl Drop for Serve {
    /// A test that fails half-way must not leave its broker running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Serve {
    /// The value of the Prometheus sample `name` (with its labels, as the endpoint prints
    /// it), if the endpoint shows it.
    #[allow(dead_code)]
    pub fn metric(&self, name: &str) -> Option<f64> {
        metric_at(self.metrics.as_ref()?, name)
    }

    /// SIGKILL: no flush, no clean-shutdown marker.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGSTOP: frozen, it issues nothing more (before a power cut, so that nothing it
    /// does after the cut reaches the disk; a SIGKILL then ends it).
    pub fn freeze(&self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGSTOP) };
    }

    /// SIGTERM: a clean shutdown, which must exit 0.
    pub fn terminate(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "clean shutdown exits 0: {status}");
    }
}

/// Runs the `laminar` CLI, which must succeed, and returns its stdout.
pub fn laminar(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "laminar {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The high watermark of `topic` partition 0, as a librdkafka consumer sees it.
pub fn high_watermark(addr: &str, topic: &str) -> i64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    c.fetch_watermarks(topic, 0, std::time::Duration::from_secs(30))
        .unwrap()
        .1
}

/// `laminar topics create NAME --partitions N` against `addr`.
pub fn create_topic(addr: &str, name: &str, partitions: u32) {
    laminar(&[
        "topics",
        "create",
        name,
        "--partitions",
        &partitions.to_string(),
        "--bootstrap",
        addr,
    ]);
}

pub fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory of Kafka's jars (clients, tools, Streams, Connect), fetched once per test
/// binary by `bench/kafka/fetch-kafka.sh` (Maven; idempotent) into `KAFKA_LIB` (default
/// /tmp/kafka-lib).
pub fn kafka_lib() -> &'static Path {
    use std::path::PathBuf;
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let lib =
            std::env::var_os("KAFKA_LIB").map_or_else(|| PathBuf::from("/tmp/kafka-lib"), PathBuf::from);
        let out = Command::new("bash")
            .arg(repo_root().join("bench/kafka/fetch-kafka.sh"))
            .env("KAFKA_LIB", &lib)
            .output()
            .expect("run bench/kafka/fetch-kafka.sh");
        assert!(
            out.status.success(),
            "fetching Kafka's jars failed (needs mvn and Maven Central): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        lib
    })
}

/// A client program run by a test (a Java or Go program), its stdout collected, killed if
/// the test fails half-way.
pub struct Program {
    child: Child,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Program {
    /// Starts `cmd` with stdout piped (collected) and stdin and stderr closed.
    pub fn spawn(cmd: &mut Command) -> Program {
        use std::io::Read;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        Program {
            child,
            stdout: Some(stdout),
        }
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for it to exit 0 within `limit` and returns what it printed; panics otherwise.
    pub fn finish(mut self, limit: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{:?} did not finish in {limit:?}: {}",
                    self.child.id(),
                    self.printed()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let printed = self.printed();
        assert!(status.success(), "the program failed ({status}): {printed}");
        printed
    }

    fn printed(&mut self) -> String {
        self.stdout.take().map(|h| h.join().unwrap()).unwrap_or_default()
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every record of `topic`'s partitions `0..partitions`, as a consumer with `isolation`
/// (`read_committed` or `read_uncommitted`) reads them from the start to each partition's
/// end: (partition, key, value).
pub fn read_to_end(
    addr: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
) -> Vec<(i32, Vec<u8>, Vec<u8>)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::Message;
    let c: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "laminar-test-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut eof = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while eof.len() < partitions as usize && std::time::Instant::now() < deadline {
        match c.poll(std::time::Duration::from_millis(100)) {
            Some(Ok(m)) => {
                eof.remove(&m.partition());
                let key = m.key().unwrap_or_default().to_vec();
                out.push((m.partition(), key, m.payload().unwrap_or_default().to_vec()));
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                eof.insert(p);
            }
            Some(Err(e)) => panic!("read {topic}: {e}"),
            None => {}
        }
    }
    assert_eq!(
        eof.len(),
        partitions as usize,
        "every partition of {topic} read to its end"
    );
    out
}

/// Waits until no transaction in `topic` is undecided: every partition's last stable offset
/// (ListOffsets at read_committed, which librdkafka asks with its own isolation level) has
/// reached its high watermark. A commit is answered once its decision is durable and its
/// markers follow, as in Kafka; until they are written, a read_committed reader reaches its
/// end before the transaction's records. Call it only once every producer has finished.
pub fn wait_transactions_decided(addr: &str, topic: &str, partitions: i32) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer = |isolation: &str| -> BaseConsumer {
        rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", addr)
            .set("isolation.level", isolation)
            .create()
            .unwrap()
    };
    let (committed, uncommitted) = (consumer("read_committed"), consumer("read_uncommitted"));
    let timeout = std::time::Duration::from_secs(10);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for p in 0..partitions {
        loop {
            let stable = committed.fetch_watermarks(topic, p, timeout).map(|w| w.1);
            let high = uncommitted.fetch_watermarks(topic, p, timeout).map(|w| w.1);
            if let (Ok(stable), Ok(high)) = (&stable, &high) {
                if stable >= high {
                    break;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{topic}-{p}: last stable offset {stable:?}, high watermark {high:?}: a \
                 transaction is still undecided"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Sends `values` to `topic` (round robin over `partitions`) with an idempotent producer and
/// waits for every delivery.
pub fn produce_values(addr: &str, topic: &str, partitions: i32, values: impl IntoIterator<Item = String>) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let p: FutureProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sends: Vec<_> = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let k = format!("k{i}");
                p.send_result(
                    FutureRecord::to(topic)
                        .key(&k)
                        .payload(&v)
                        .partition(i as i32 % partitions),
                )
                .unwrap()
            })
            .collect();
        for s in sends {
            s.await.unwrap().expect("delivered");
        }
    });
}

/// A port free now, for addresses that must be known before a process starts (a restart on
/// the same address, the voters list of a cluster).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs a future of a client (librdkafka's admin, a future producer) to its end.
pub fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// What a consume-transform-produce loop (`java/TransformExactlyOnce.java`) wrote to `topic`
/// is, read committed, `out-0` to `out-{n-1}`, each exactly once.
pub fn assert_exactly_once_output(addr: &str, topic: &str, partitions: i32, n: usize) {
    wait_transactions_decided(addr, topic, partitions);
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for (_, _, v) in read_to_end(addr, topic, partitions, "read_committed") {
        *seen.entry(String::from_utf8(v).unwrap()).or_default() += 1;
    }
    let duplicated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicated.is_empty(),
        "records written twice: {:?}",
        &duplicated[..duplicated.len().min(10)]
    );
    let missing: Vec<String> = (0..n)
        .map(|i| format!("out-{i}"))
        .filter(|v| !seen.contains_key(v))
        .collect();
    assert!(
        missing.is_empty(),
        "{} records lost: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(seen.len(), n);
}

/// Writes `n` records to `topic` as the client `config` (idempotent), then reads them back
/// in a group and checks each is as written (sizes vary up to 700 bytes).
pub fn write_and_read_as(config: &rdkafka::config::ClientConfig, topic: &str, n: usize) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let p: FutureProducer = config.clone().set("enable.idempotence", "true").create().unwrap();
    block(async {
        for i in 0..n {
            let v = format!("{topic}-{i}-{}", "x".repeat(i % 700));
            p.send(
                FutureRecord::<(), _>::to(topic).payload(&v),
                std::time::Duration::from_secs(30),
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"));
        }
    });
    let c: rdkafka::consumer::BaseConsumer = config
        .clone()
        .set("group.id", format!("{topic}-group"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    rdkafka::consumer::Consumer::subscribe(&c, &[topic]).unwrap();
    let mut read = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while read.len() < n && std::time::Instant::now() < deadline {
        if let Some(m) = c.poll(std::time::Duration::from_millis(100)) {
            let m = m.unwrap();
            read.push(String::from_utf8(rdkafka::Message::payload(&m).unwrap().to_vec()).unwrap());
        }
    }
    assert_eq!(read.len(), n, "{topic}: every record read back through the group");
    for (i, v) in read.iter().enumerate() {
        assert_eq!(
            v,
            &format!("{topic}-{i}-{}", "x".repeat(i % 700)),
            "{topic}: record {i} as written"
        );
    }
}

/// A controller-port secret file (`controller.quorum.secret.file`), readable by its owner
/// alone.
pub fn write_secret(path: &Path, secret: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A broker with Kafka's StandardAuthorizer and two listeners: PLAINTEXT, whose
/// `User:ANONYMOUS` is the super user that sets things up, and SASL_PLAINTEXT with PLAIN for
/// `users` (name, password); `extra`: more settings, TOML lines. Returns it with the two
/// listeners' addresses.
#[allow(dead_code)]
pub fn serve_with_authorizer(tmp: &Path, users: &[(&str, &str)], extra: &str) -> (Serve, String, String) {
    let jaas: String = users
        .iter()
        .map(|(u, p)| format!(" user_{u}=\\\"{p}\\\""))
        .collect();
    for _ in 0..5 {
        let (p, s) = (free_port(), free_port());
        let config = tmp.join(format!("laminar-{p}.toml"));
        std::fs::write(
            &config,
            format!(
                r#""listeners" = "PLAINTEXT://127.0.0.1:{p},SASL_PLAINTEXT://127.0.0.1:{s}"
"sasl.enabled.mechanisms" = "PLAIN"
"listener.name.sasl_plaintext.plain.sasl.jaas.config" = "org.apache.kafka.common.security.plain.PlainLoginModule required{jaas};"
"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "User:ANONYMOUS"
{extra}
"#
            ),
        )
        .unwrap();
        if let Some(b) = try_serve_args(
            &tmp.join(format!("data-{p}")),
            &["--config", config.to_str().unwrap()],
        ) {
            return (b, format!("127.0.0.1:{p}"), format!("127.0.0.1:{s}"));
        }
    }
    panic!("no free ports in five tries");
}

/// The value of the Prometheus sample `name` (labels included, as printed) on the endpoint
/// at `addr` (`host:port`).
#[allow(dead_code)]
pub fn metric_at(addr: &str, name: &str) -> Option<f64> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: laminar\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}
