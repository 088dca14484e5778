//! TLS listeners (SSL and SASL_SSL) with Kafka's PEM settings, with real clients: librdkafka
//! over SSL and over SASL_SSL with SCRAM-SHA-512 (the user made with Kafka's `kafka-configs`
//! over the PLAINTEXT listener), the Java client over SSL; a client that does not trust the
//! certificate, and one that speaks plaintext to a TLS port, get nothing, and the broker
//! carries on.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::tools::Tools;
use common::{free_port, try_serve_with, Serve};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// A CA, and a broker certificate it signed for 127.0.0.1 and localhost. Returns the
/// keystore (the broker's key and certificate chain, one PEM file) and the CA's certificate.
fn certificates(dir: &Path) -> (PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "Laminar test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let keystore = dir.join("broker.pem");
    std::fs::write(
        &keystore,
        format!("{}{}{}", key.serialize_pem(), cert.pem(), ca.pem()),
    )
    .unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    (keystore, ca_file)
}

struct Broker {
    serve: Serve,
    plain: String,
    ssl: String,
    sasl_ssl: String,
}

fn start(data: &Path, keystore: &Path) -> Broker {
    for _ in 0..5 {
        let (p, s, ss) = (free_port(), free_port(), free_port());
        let settings = [
            format!("listeners=PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:{s},SASL_SSL://127.0.0.1:{ss}"),
            "ssl.keystore.type=PEM".to_string(),
            format!("ssl.keystore.location={}", keystore.display()),
            "sasl.enabled.mechanisms=SCRAM-SHA-512".to_string(),
        ];
        let args: Vec<&str> = settings.iter().flat_map(|s| ["--set", s.as_str()]).collect();
        if let Some(serve) = try_serve_with(data, &format!("127.0.0.1:{p}"), &args) {
            return Broker {
                serve,
                plain: format!("127.0.0.1:{p}"),
                ssl: format!("127.0.0.1:{s}"),
                sasl_ssl: format!("127.0.0.1:{ss}"),
            };
        }
    }
    panic!("no free ports in five tries");
}

#[test]
fn ssl_and_sasl_ssl_listeners_serve_real_clients() {
    let tmp = tempfile::tempdir().unwrap();
    let (keystore, ca) = certificates(tmp.path());
    let b = start(&tmp.path().join("data"), &keystore);

    // SSL: librdkafka checks the broker's certificate against the CA.
    let mut ssl = ClientConfig::new();
    ssl.set("bootstrap.servers", &b.ssl)
        .set("security.protocol", "SSL")
        .set("ssl.ca.location", ca.to_str().unwrap());
    common::write_and_read_as(&ssl, "over-tls", 300);

    // SASL_SSL with SCRAM-SHA-512: the user made over PLAINTEXT with Kafka's tool.
    let tools = Tools::new(&b.plain, tmp.path());
    tools.ok(
        "kafka.admin.ConfigCommand",
        &[
            "--alter",
            "--add-config",
            "SCRAM-SHA-512=[iterations=4096,password=alice-secret]",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
    );
    let mut alice = ssl.clone();
    alice
        .set("bootstrap.servers", &b.sasl_ssl)
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", "alice")
        .set("sasl.password", "alice-secret");
    common::write_and_read_as(&alice, "over-sasl-ssl", 100);

    // The Java client (Kafka's kafka-topics) over SSL, trusting the CA's PEM file.
    let props = tmp.path().join("ssl.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
            ca.display()
        ),
    )
    .unwrap();
    let listed = Tools::new(&b.ssl, tmp.path()).ok(
        "org.apache.kafka.tools.TopicCommand",
        &["--list", "--command-config", props.to_str().unwrap()],
    );
    assert!(
        listed.contains("over-tls") && listed.contains("over-sasl-ssl"),
        "{listed}"
    );

    // A client that does not trust the certificate gets no metadata.
    let untrusting: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b.ssl)
        .set("security.protocol", "SSL")
        .create()
        .unwrap();
    assert!(untrusting.fetch_metadata(None, Duration::from_secs(3)).is_err());
    // Plaintext to a TLS port: the handshake fails and the connection closes.
    let mut raw = TcpStream::connect(&b.ssl).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let body: &[u8] = &[0, 18, 0, 0, 0, 0, 0, 1, 0, 1, b'x'];
    raw.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
    raw.write_all(body).unwrap();
    let mut buf = Vec::new();
    let _ = raw.read_to_end(&mut buf);
    assert!(
        buf.is_empty() || buf[0] == 0x15,
        "nothing but a TLS alert answers plaintext: {buf:?}"
    );
    // And the broker serves on.
    common::write_and_read_as(&ssl, "after", 10);
    b.serve.terminate();
}
