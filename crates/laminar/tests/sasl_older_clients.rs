//! SASL with the clients distributions ship, not only the newest librdkafka: Debian's kcat
//! (librdkafka 2.0.2 on Debian 12) over SASL_PLAINTEXT and SASL_SSL with PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512, and kafka-python 2.0.2, which authenticates with
//! SaslHandshake v0 and bare tokens.
//!
//! What they need of the broker: SaslHandshake v0 in the ApiVersions range (librdkafka
//! before 2.x turns SASL on only then, though it sends v1), v0's bare-token exchange
//! (kafka-python 2.0.2), and a SCRAM final message whose nonce only ends with the server's
//! (librdkafka up to 2.6.0 sends its own nonce twice; Kafka 4.3.1 compares the nonces with
//! `equals`, so against it those clients cannot use SCRAM).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::pki::certificates;
use common::{free_port, try_serve_with, Serve};

const PASSWORDS: [(&str, &str, &str); 3] = [
    ("PLAIN", "bob", "bob-secret"),
    ("SCRAM-SHA-256", "alice", "alice-secret"),
    ("SCRAM-SHA-512", "alice", "alice-secret"),
];

struct Broker {
    serve: Serve,
    sasl_plaintext: String,
    sasl_ssl: String,
}

/// A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners, PLAIN (user bob) and
/// both SCRAM mechanisms enabled; alice made with `laminar users alter` for both.
fn start(data: &Path, keystore: &Path) -> Broker {
    for _ in 0..5 {
        let (p, s, ss) = (free_port(), free_port(), free_port());
        let settings = [
            format!("listeners=PLAINTEXT://127.0.0.1:{p},SASL_PLAINTEXT://127.0.0.1:{s},SASL_SSL://127.0.0.1:{ss}"),
            "ssl.keystore.type=PEM".to_string(),
            format!("ssl.keystore.location={}", keystore.display()),
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".to_string(),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"bob-secret\";".to_string(),
            "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"bob-secret\";".to_string(),
        ];
        let args: Vec<&str> = settings.iter().flat_map(|s| ["--set", s.as_str()]).collect();
        if let Some(serve) = try_serve_with(data, &format!("127.0.0.1:{p}"), &args) {
            let plain = format!("127.0.0.1:{p}");
            for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
                common::laminar(&[
                    "users",
                    "alter",
                    "--user",
                    "alice",
                    "--password",
                    "alice-secret",
                    "--mechanism",
                    mechanism,
                    "--bootstrap",
                    &plain,
                ]);
            }
            return Broker {
                serve,
                sasl_plaintext: format!("127.0.0.1:{s}"),
                sasl_ssl: format!("127.0.0.1:{ss}"),
            };
        }
    }
    panic!("no free ports in five tries");
}

/// kcat's arguments to connect to `addr` as `user` with `mechanism`.
fn kcat_sasl(
    addr: &str,
    protocol: &str,
    ca: &Path,
    mechanism: &str,
    user: &str,
    password: &str,
) -> Vec<String> {
    let mut args = vec!["-b".to_string(), addr.to_string()];
    for (k, v) in [
        ("security.protocol", protocol),
        ("sasl.mechanism", mechanism),
        ("sasl.username", user),
        ("sasl.password", password),
    ] {
        args.extend(["-X".to_string(), format!("{k}={v}")]);
    }
    if protocol == "SASL_SSL" {
        args.extend(["-X".to_string(), format!("ssl.ca.location={}", ca.display())]);
    }
    args
}

/// The librdkafka version kcat is built with ("2.0.2").
fn kcats_librdkafka() -> String {
    let out = Command::new("kcat")
        .arg("-V")
        .output()
        .expect("kcat is not installed: apt-get install kcat (scripts/test does this)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split("librdkafka ")
        .nth(1)
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or_else(|| panic!("no librdkafka version in {text}"))
        .to_string()
}

#[test]
fn debians_kcat_authenticates_with_plain_and_scram_over_sasl_plaintext_and_sasl_ssl() {
    let version = kcats_librdkafka();
    eprintln!("kcat with librdkafka {version}");
    let tmp = tempfile::tempdir().unwrap();
    let (keystore, ca) = certificates(tmp.path());
    let broker = start(&tmp.path().join("data"), &keystore);
    for (protocol, addr) in [
        ("SASL_PLAINTEXT", &broker.sasl_plaintext),
        ("SASL_SSL", &broker.sasl_ssl),
    ] {
        for (mechanism, user, password) in PASSWORDS {
            let sasl = kcat_sasl(addr, protocol, &ca, mechanism, user, password);
            let topic = format!("{protocol}-{mechanism}");
            let mut p = Command::new("kcat")
                .args(&sasl)
                .args(["-P", "-t", &topic])
                .stdin(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            p.stdin.take().unwrap().write_all(b"one\ntwo\n").unwrap();
            let out = p.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{protocol} {mechanism}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let out = Command::new("kcat")
                .args(&sasl)
                .args(["-C", "-t", &topic, "-o", "beginning", "-e", "-f", "%s@%o\n"])
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "one@0\ntwo@1\n",
                "{protocol} {mechanism}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // A wrong password is still refused, with Kafka's words.
    let wrong = kcat_sasl(
        &broker.sasl_plaintext,
        "SASL_PLAINTEXT",
        &ca,
        "SCRAM-SHA-512",
        "alice",
        "not-hers",
    );
    let out = Command::new("kcat")
        .args(&wrong)
        .args(["-L", "-m", "3"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("invalid credentials with SASL mechanism SCRAM-SHA-512"),
        "{said}"
    );
    broker.serve.terminate();
}

/// kafka-python 2.0.2, installed once under `target/` with pip (`--target`, not into the
/// system's Python).
fn kafka_python_2_0_2() -> PathBuf {
    let dir = common::repo_root().join("target/test-deps/kafka-python-2.0.2");
    if !dir.join("kafka/__init__.py").exists() {
        let out = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
            ])
            .arg(&dir)
            .arg("kafka-python==2.0.2")
            .output()
            .expect("python3 with pip");
        assert!(
            out.status.success(),
            "pip install kafka-python==2.0.2: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir
}

#[test]
fn kafka_python_authenticates_with_sasl_handshake_v0_and_bare_tokens() {
    let site = kafka_python_2_0_2();
    let tmp = tempfile::tempdir().unwrap();
    let (keystore, _) = certificates(tmp.path());
    let broker = start(&tmp.path().join("data"), &keystore);
    let program = common::repo_root().join("crates/laminar/tests/python/sasl_produce_consume.py");
    for (mechanism, user, password) in PASSWORDS {
        let topic = format!("kp-{mechanism}");
        let out = Command::new("python3")
            .arg(&program)
            .args([
                broker.sasl_plaintext.as_str(),
                mechanism,
                user,
                password,
                &topic,
                "10",
            ])
            .env("PYTHONPATH", &site)
            .output()
            .unwrap();
        let expected: String = (0..10).map(|i| format!("{mechanism}-{i}\n")).collect();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            expected,
            "{mechanism}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The same exchange with a wrong password: after a v0 handshake there is no response to
    // carry the error, so the connection closes (as Kafka closes it).
    let mut raw = TcpStream::connect(&broker.sasl_plaintext).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // SaslHandshake v0, correlation id 1, client id "x", mechanism PLAIN.
    let handshake: &[u8] = &[
        0, 17, 0, 0, 0, 0, 0, 1, 0, 1, b'x', 0, 5, b'P', b'L', b'A', b'I', b'N',
    ];
    raw.write_all(&(handshake.len() as i32).to_be_bytes()).unwrap();
    raw.write_all(handshake).unwrap();
    let mut size = [0u8; 4];
    raw.read_exact(&mut size).unwrap();
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    raw.read_exact(&mut answer).unwrap();
    assert_eq!(&answer[..6], &[0, 0, 0, 1, 0, 0], "correlation id 1, no error");
    let token = b"\0bob\0not-bobs";
    raw.write_all(&(token.len() as i32).to_be_bytes()).unwrap();
    raw.write_all(token).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(raw.read(&mut buf).unwrap_or(0), 0, "closed without an answer");
    // The right password over a bare connection gets the empty token back, and then the
    // connection is bob's: a request is answered.
    let mut raw = TcpStream::connect(&broker.sasl_plaintext).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(&(handshake.len() as i32).to_be_bytes()).unwrap();
    raw.write_all(handshake).unwrap();
    raw.read_exact(&mut size).unwrap();
    raw.read_exact(&mut vec![0u8; i32::from_be_bytes(size) as usize])
        .unwrap();
    let token = b"\0bob\0bob-secret";
    raw.write_all(&(token.len() as i32).to_be_bytes()).unwrap();
    raw.write_all(token).unwrap();
    raw.read_exact(&mut size).unwrap();
    assert_eq!(size, [0, 0, 0, 0], "PLAIN's empty answer");
    // Metadata v1, correlation id 7, all topics.
    let metadata: &[u8] = &[0, 3, 0, 1, 0, 0, 0, 7, 0, 1, b'x', 0xff, 0xff, 0xff, 0xff];
    raw.write_all(&(metadata.len() as i32).to_be_bytes()).unwrap();
    raw.write_all(metadata).unwrap();
    raw.read_exact(&mut size).unwrap();
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    raw.read_exact(&mut answer).unwrap();
    assert_eq!(&answer[..4], &[0, 0, 0, 7]);
    broker.serve.terminate();
}

/// Issue 41, item 10: the `laminar` commands take Kafka's client properties
/// (`--command-config`), as Kafka's tools do: SCRAM over SASL_PLAINTEXT, PLAIN over SASL_SSL
/// with a PEM truststore; without them a SASL listener serves the command nothing, and a
/// wrong password is refused with Kafka's words.
#[test]
fn the_cli_authenticates_with_kafkas_client_properties() {
    let tmp = tempfile::tempdir().unwrap();
    let (keystore, ca) = certificates(tmp.path());
    let broker = start(&tmp.path().join("data"), &keystore);
    let props = |name: &str, text: String| {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let scram = props(
        "alice.properties",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"alice-secret\";\n"
            .to_string(),
    );
    let plain_ssl = props(
        "bob-ssl.properties",
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nssl.truststore.type=PEM\nssl.truststore.location={}\n\
             sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"bob\" password=\"bob-secret\";\n",
            ca.display()
        ),
    );
    let wrong = props(
        "wrong.properties",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"not-hers\";\n"
            .to_string(),
    );
    let list = |addr: &str, config: Option<&Path>| {
        let mut args = vec![
            "topics".to_string(),
            "list".into(),
            "--bootstrap".into(),
            addr.into(),
        ];
        if let Some(c) = config {
            args.extend(["--command-config".to_string(), c.display().to_string()]);
        }
        Command::new(env!("CARGO_BIN_EXE_laminar"))
            .args(&args)
            .output()
            .unwrap()
    };
    // A topic made through the command too, as alice.
    let made = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args([
            "topics",
            "create",
            "seen",
            "--partitions",
            "1",
            "--bootstrap",
            &broker.sasl_plaintext,
        ])
        .arg("--command-config")
        .arg(&scram)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let out = list(&broker.sasl_plaintext, Some(&scram));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("seen"));
    let out = list(&broker.sasl_ssl, Some(&plain_ssl));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("seen"));
    assert!(
        !list(&broker.sasl_plaintext, None).status.success(),
        "unauthenticated: nothing"
    );
    let out = list(&broker.sasl_plaintext, Some(&wrong));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid credentials"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    broker.serve.terminate();
}
