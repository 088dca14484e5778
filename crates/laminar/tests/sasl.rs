//! SASL on a SASL_PLAINTEXT listener, with real clients: SCRAM users made with Kafka's own
//! `kafka-configs` (AlterUserScramCredentials) over the PLAINTEXT listener, then librdkafka
//! and the Java client authenticating with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; a wrong
//! password refused; a restart keeps the users; the stored credentials hold no password.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::raw::Raw;
use common::tools::Tools;
use common::{free_port, try_serve_with, Serve};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

const CONFIGS: &str = "kafka.admin.ConfigCommand";
const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";

/// A broker with a PLAINTEXT listener and a SASL_PLAINTEXT one that enables PLAIN (user
/// bob) and both SCRAM mechanisms. Returns it with the two addresses.
fn start(data: &Path, ports: Option<(u16, u16)>) -> (Serve, String, String) {
    for _ in 0..5 {
        let (plain, sasl) = ports.unwrap_or_else(|| (free_port(), free_port()));
        let settings = [
            format!("listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"),
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".to_string(),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"bob-secret\";".to_string(),
        ];
        let args: Vec<&str> = settings.iter().flat_map(|s| ["--set", s.as_str()]).collect();
        if let Some(b) = try_serve_with(data, &format!("127.0.0.1:{plain}"), &args) {
            return (b, format!("127.0.0.1:{plain}"), format!("127.0.0.1:{sasl}"));
        }
        assert!(ports.is_none(), "the broker restarts on its ports");
    }
    panic!("no free ports in five tries");
}

/// librdkafka's settings for `user` over SASL_PLAINTEXT.
fn sasl_client(addr: &str, mechanism: &str, user: &str, password: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", addr)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", mechanism)
        .set("sasl.username", user)
        .set("sasl.password", password);
    c
}

/// The errors librdkafka reports to the application (an authentication failure is one).
#[derive(Default)]
struct Errors(std::sync::Mutex<Vec<String>>);

impl rdkafka::ClientContext for Errors {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.0.lock().unwrap().push(format!("{error}: {reason}"));
    }
}

impl rdkafka::consumer::ConsumerContext for Errors {}

/// How many brokers a librdkafka client with these settings is told of (it must
/// authenticate first), or the errors it reported.
fn metadata(config: &ClientConfig) -> Result<usize, String> {
    let c: BaseConsumer<Errors> = config.create_with_context(Errors::default()).unwrap();
    // A refused client would wait all of it: the answer comes in well under a second.
    c.fetch_metadata(None, Duration::from_secs(3))
        .map(|m| m.brokers().len())
        .map_err(|e| {
            // Errors reach the context when the client is polled.
            for _ in 0..10 {
                let _ = c.poll(Duration::from_millis(100));
            }
            format!("{e}; reported: {:?}", c.context().0.lock().unwrap())
        })
}

#[test]
fn scram_and_plain_clients_authenticate_and_a_wrong_password_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (broker, plain, sasl) = start(&data, None);
    let tools = Tools::new(&plain, tmp.path());
    // Kafka's tool salts the password itself and sends AlterUserScramCredentials.
    tools.ok(
        CONFIGS,
        &[
            "--alter",
            "--add-config",
            "SCRAM-SHA-512=[iterations=4096,password=alice-secret],SCRAM-SHA-256=[password=alice-secret]",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
    );
    let described = tools.ok(
        CONFIGS,
        &["--describe", "--entity-type", "users", "--entity-name", "alice"],
    );
    assert!(
        described.contains("SCRAM-SHA-512=iterations=4096")
            && described.contains("SCRAM-SHA-256=iterations="),
        "{described}"
    );

    for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256"] {
        let alice = sasl_client(&sasl, mechanism, "alice", "alice-secret");
        assert_eq!(metadata(&alice), Ok(1), "{mechanism}");
        common::write_and_read_as(&alice, &format!("t-{}", &mechanism[10..]), 50);
        let wrong = sasl_client(&sasl, mechanism, "alice", "not-her-password");
        let refused = metadata(&wrong).unwrap_err();
        // Laminar's answer reached the client, as Kafka words it.
        assert!(
            refused.contains("due to invalid credentials with SASL mechanism"),
            "{mechanism}: {refused}"
        );
        let nobody = sasl_client(&sasl, mechanism, "mallory", "alice-secret");
        assert!(
            metadata(&nobody).unwrap_err().contains("Authentication"),
            "{mechanism}"
        );
    }
    let bob = sasl_client(&sasl, "PLAIN", "bob", "bob-secret");
    common::write_and_read_as(&bob, "t-plain", 20);
    assert!(metadata(&sasl_client(&sasl, "PLAIN", "bob", "bob"))
        .unwrap_err()
        .contains("Authentication"));

    // The Java client (an Admin client, in Kafka's own kafka-topics) authenticates too.
    let props = tmp.path().join("alice.properties");
    std::fs::write(
        &props,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"alice-secret\";\n",
    )
    .unwrap();
    let java = Tools::new(&sasl, tmp.path());
    let listed = java.ok(TOPICS, &["--list", "--command-config", props.to_str().unwrap()]);
    assert!(listed.contains("t-512") && listed.contains("t-plain"), "{listed}");

    // Before authenticating, a client gets nothing but the SASL requests: the connection
    // closes on a Metadata request.
    let mut raw = TcpStream::connect(&sasl).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Metadata v1, correlation id 7, client id "x", all topics (null array).
    let body: &[u8] = &[0, 3, 0, 1, 0, 0, 0, 7, 0, 1, b'x', 0xff, 0xff, 0xff, 0xff];
    raw.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
    raw.write_all(body).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(raw.read(&mut buf).unwrap(), 0, "closed without an answer");

    // Nor may it spend the request budget: a frame over 512 KiB before authenticating
    // closes the connection at its size prefix (Kafka's sasl.server.max.receive.size).
    let mut raw = TcpStream::connect(&sasl).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(&(1i32 << 20).to_be_bytes()).unwrap();
    raw.write_all(&[0u8; 1024]).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(raw.read(&mut buf).unwrap_or(0), 0, "closed without an answer");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "at once, not after a timeout"
    );

    // And a client that never authenticates is closed after a bounded time (10 s).
    let mut idle = TcpStream::connect(&sasl).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(idle.read(&mut buf).unwrap_or(99), 0, "closed");
    assert!(
        (Duration::from_secs(9)..Duration::from_secs(20)).contains(&started.elapsed()),
        "after {:?}",
        started.elapsed()
    );

    // The users are in the cluster metadata: a restart keeps them. No file holds a password.
    broker.terminate();
    for file in walk(&data) {
        let bytes = std::fs::read(&file).unwrap();
        for secret in [&b"alice-secret"[..], b"bob-secret"] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret),
                "{} holds a password",
                file.display()
            );
        }
    }
    let ports = (
        plain.rsplit(':').next().unwrap().parse().unwrap(),
        sasl.rsplit(':').next().unwrap().parse().unwrap(),
    );
    let (broker, _, sasl) = start(&data, Some(ports));
    assert_eq!(
        metadata(&sasl_client(&sasl, "SCRAM-SHA-512", "alice", "alice-secret")),
        Ok(1)
    );
    broker.terminate();
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Remembers librdkafka's connection counts to the brokers it learned of (not bootstrap).
#[derive(Clone, Default)]
struct Connects(std::sync::Arc<std::sync::Mutex<(i64, i64)>>);

impl rdkafka::ClientContext for Connects {
    fn stats(&self, stats: rdkafka::statistics::Statistics) {
        let (mut connects, mut disconnects) = (0, 0);
        for b in stats.brokers.values().filter(|b| b.nodeid >= 0) {
            connects += b.connects.unwrap_or(0);
            disconnects += b.disconnects.unwrap_or(0);
        }
        *self.0.lock().unwrap() = (connects, disconnects);
    }
}

impl rdkafka::producer::ProducerContext for Connects {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
}

/// KIP-368 with a real client: with `connections.max.reauth.ms` at 1 s, librdkafka told the
/// session's lifetime re-authenticates on its connection before it ends, and produces for 5 s
/// on the one connection it made (a session left to expire would have been closed by the
/// broker, and the client would have connected again).
#[test]
fn librdkafka_reauthenticates_before_its_session_expires() {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let tmp = tempfile::tempdir().unwrap();
    let (b, plain, sasl) = common::serve_plaintext_and(
        &tmp.path().join("data"),
        "SASL_PLAINTEXT",
        &[
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"bob-secret\";",
            "connections.max.reauth.ms=1000",
        ],
    );
    common::create_topic(&plain, "reauth", 1);
    let seen = Connects::default();
    let p: ThreadedProducer<Connects> = sasl_client(&sasl, "PLAIN", "bob", "bob-secret")
        .set("statistics.interval.ms", "100")
        .set("linger.ms", "0")
        .create_with_context(seen.clone())
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let mut sent = 0;
    while std::time::Instant::now() < until {
        p.send(BaseRecord::<(), _>::to("reauth").payload("r")).unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    p.flush(Duration::from_secs(10)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (connects, disconnects) = *seen.0.lock().unwrap();
    assert_eq!(common::high_watermark(&plain, "reauth"), sent);
    assert_eq!(
        (connects, disconnects),
        (1, 0),
        "one connection to the broker for 5 s of 1 s sessions"
    );
    b.terminate();
}

/// `laminar users`: a SCRAM user set with `laminar users alter` (salted on the client)
/// authenticates with librdkafka, is listed with its mechanism and iterations, and is refused
/// once `laminar users delete` removed the credential.
#[test]
fn laminar_users_sets_lists_and_removes_scram_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let (b, plain, sasl) = start(&tmp.path().join("data"), None);
    let users = |args: &[&str]| {
        let mut all = vec!["users"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--bootstrap", &plain]);
        common::laminar(&all)
    };
    users(&[
        "alter",
        "--user",
        "carol",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password",
        "carol-secret",
        "--iterations",
        "8192",
    ]);
    assert_eq!(
        metadata(&sasl_client(&sasl, "SCRAM-SHA-256", "carol", "carol-secret")),
        Ok(1)
    );
    assert!(metadata(&sasl_client(&sasl, "SCRAM-SHA-256", "carol", "wrong")).is_err());
    // Without --password, the password is read from standard input (issue 41, item 10).
    let mut alter = std::process::Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args([
            "users",
            "alter",
            "--user",
            "carol",
            "--mechanism",
            "SCRAM-SHA-512",
            "--bootstrap",
            &plain,
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    alter
        .stdin
        .take()
        .unwrap()
        .write_all(b"carol-from-stdin\n")
        .unwrap();
    assert!(alter.wait().unwrap().success());
    assert_eq!(
        metadata(&sasl_client(&sasl, "SCRAM-SHA-512", "carol", "carol-from-stdin")),
        Ok(1)
    );
    let listed = users(&["describe"]);
    assert!(
        listed.contains("user carol: SCRAM-SHA-256 (iterations 8192)"),
        "{listed}"
    );
    users(&["delete", "--user", "carol", "--mechanism", "SCRAM-SHA-256"]);
    assert!(metadata(&sasl_client(&sasl, "SCRAM-SHA-256", "carol", "carol-secret")).is_err());
    users(&["delete", "--user", "carol", "--mechanism", "SCRAM-SHA-512"]);
    assert!(!users(&["describe"]).contains("carol"));
    b.terminate();
}

/// Issue 41, hole 1: a re-authentication serves nothing until it completes, keeps its
/// mechanism, and must complete in bounded time; an expired session serves nothing but the
/// SaslHandshake that begins a re-authentication. (Before: a PLAIN client that sent
/// SaslHandshake again and never SaslAuthenticate was served Metadata after its session had
/// ended, and could change mechanism.)
#[test]
fn a_re_authentication_serves_nothing_until_it_completes_and_keeps_its_mechanism() {
    let tmp = tempfile::tempdir().unwrap();
    let (b, _plain, sasl) = common::serve_plaintext_and(
        &tmp.path().join("data"),
        "SASL_PLAINTEXT",
        &[
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"bob-secret\";",
            "connections.max.reauth.ms=2000",
        ],
    );
    let authenticated = || {
        let mut c = Raw::connect(&sasl);
        assert_eq!(c.handshake("PLAIN"), Some(0));
        assert_eq!(c.plain("bob", "bob-secret"), Some(0));
        assert!(c.metadata(), "served once authenticated");
        c
    };
    // Re-authentication begun, then another request: closed, not served.
    let mut c = authenticated();
    assert_eq!(c.handshake("PLAIN"), Some(0));
    assert!(
        !c.metadata(),
        "a Metadata request during re-authentication closes the connection"
    );
    // A re-authentication that completes serves on.
    let mut c = authenticated();
    assert_eq!(c.handshake("PLAIN"), Some(0));
    assert_eq!(c.plain("bob", "bob-secret"), Some(0));
    assert!(c.metadata(), "served again once re-authenticated");
    // It may not change mechanism.
    let mut c = authenticated();
    assert_eq!(
        c.handshake("SCRAM-SHA-512"),
        Some(33),
        "UNSUPPORTED_SASL_MECHANISM"
    );
    assert!(!c.metadata(), "and the connection serves nothing more");
    // One begun and left silent is closed at the authentication deadline (10 s), though the
    // client sends nothing more.
    let mut c = authenticated();
    assert_eq!(c.handshake("PLAIN"), Some(0));
    let started = std::time::Instant::now();
    assert!(c.closed_within(Duration::from_secs(20)), "closed");
    assert!(
        started.elapsed() < Duration::from_secs(13),
        "at the deadline: {:?}",
        started.elapsed()
    );
    // An expired session: ApiVersions is no way around it either.
    let mut c = authenticated();
    std::thread::sleep(Duration::from_millis(2300));
    let versions = kafka_protocol::messages::ApiVersionsRequest::default();
    let answered: Option<kafka_protocol::messages::ApiVersionsResponse> =
        c.call(kafka_protocol::messages::ApiKey::ApiVersions, 3, &versions);
    assert!(answered.is_none(), "closed: its session expired");
    b.terminate();
}
