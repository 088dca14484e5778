//! TLS listeners (SSL and SASL_SSL) with Kafka's PEM settings, with real clients: librdkafka
//! over SSL and over SASL_SSL with SCRAM-SHA-512 (the user made with Kafka's `kafka-configs`
//! over the PLAINTEXT listener), the Java client over SSL; a client that does not trust the
//! certificate, and one that speaks plaintext to a TLS port, get nothing, and the broker
//! carries on.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::pki::{certificates, Pki};
use common::tools::Tools;
use common::{free_port, try_serve_with, Serve};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

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
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512".to_string(),
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

/// Produces one record to `topic` with `config`: its error, if any.
fn produce_as(config: &ClientConfig, topic: &str) -> Result<(), String> {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let p: FutureProducer = config.create().unwrap();
    common::block(async {
        p.send(
            FutureRecord::<(), _>::to(topic).payload("x"),
            Duration::from_secs(15),
        )
        .await
        .map(|_| ())
        .map_err(|(e, _)| e.to_string())
    })
}

/// Kafka's `kafka-configs` gives alice a SCRAM-SHA-512 password.
fn add_alice(tools: &Tools) {
    tools.ok(
        "kafka.admin.ConfigCommand",
        &[
            "--alter",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[iterations=4096,password=alice-secret]",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
    );
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
    add_alice(&tools);
    let mut alice = ssl.clone();
    alice
        .set("bootstrap.servers", &b.sasl_ssl)
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", "alice")
        .set("sasl.password", "alice-secret");
    common::write_and_read_as(&alice, "over-sasl-ssl", 100);
    alice.set("sasl.mechanism", "SCRAM-SHA-256");
    common::write_and_read_as(&alice, "over-sasl-ssl-256", 10);

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
    // And over SASL_SSL as alice, with each SCRAM mechanism.
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let props = tmp.path().join(format!("{mechanism}.properties"));
        std::fs::write(
            &props,
            format!(
                "security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\n\
                 sasl.mechanism={mechanism}\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \
                 required username=\"alice\" password=\"alice-secret\";\n",
                ca.display()
            ),
        )
        .unwrap();
        let listed = Tools::new(&b.sasl_ssl, tmp.path()).ok(
            "org.apache.kafka.tools.TopicCommand",
            &["--list", "--command-config", props.to_str().unwrap()],
        );
        assert!(listed.contains("over-sasl-ssl-256"), "{mechanism}: {listed}");
    }

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

/// Issue 30's acceptance as far as it is built: a `--config` file with Kafka's names (a
/// PLAINTEXT and a SASL_SSL listener, a PEM keystore, SCRAM-SHA-512, the StandardAuthorizer,
/// `User:ANONYMOUS` a super user); Kafka's `kafka-configs` makes alice and `kafka-acls` lets
/// her write topic `t`, over PLAINTEXT; librdkafka as alice over SASL_SSL writes `t`, is
/// refused on `u` as unauthorized, a wrong password is refused as an authentication failure,
/// and after a restart alice still authenticates and may still write `t`.
#[test]
fn scram_users_and_acls_made_with_kafkas_tools_hold_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (keystore, ca) = certificates(tmp.path());
    let (plain_port, sasl_port) = (free_port(), free_port());
    let config = tmp.path().join("laminar.toml");
    std::fs::write(
        &config,
        format!(
            r#""listeners" = "PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{sasl_port}"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "{}"
"sasl.enabled.mechanisms" = "SCRAM-SHA-512"
"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "User:ANONYMOUS"
"#,
            keystore.display()
        ),
    )
    .unwrap();
    let data = tmp.path().join("data");
    let plain = format!("127.0.0.1:{plain_port}");
    let sasl = format!("127.0.0.1:{sasl_port}");
    let serve = || {
        common::try_serve_args(&data, &["--config", config.to_str().unwrap()])
            .expect("the broker starts on its ports")
    };
    let broker = serve();
    let tools = Tools::new(&plain, tmp.path());
    add_alice(&tools);
    tools.t_writable_by_alice();
    let listed = tools.ok("org.apache.kafka.tools.AclCommand", &["--list", "--topic", "t"]);
    assert!(
        listed.contains("User:alice") && listed.contains("WRITE"),
        "{listed}"
    );

    let alice = |password: &str| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &sasl)
            .set("security.protocol", "SASL_SSL")
            .set("ssl.ca.location", ca.to_str().unwrap())
            .set("sasl.mechanism", "SCRAM-SHA-512")
            .set("sasl.username", "alice")
            .set("sasl.password", password)
            .set("message.timeout.ms", "10000");
        c
    };
    let produce = |topic: &str| produce_as(&alice("alice-secret"), topic);
    produce("t").expect("alice may write t");
    let refused = produce("u").unwrap_err();
    assert!(
        refused.contains("TopicAuthorizationFailed") || refused.contains("authorization"),
        "{refused}"
    );
    let wrong: BaseConsumer = alice("not-hers").create().unwrap();
    assert!(
        wrong.fetch_metadata(None, Duration::from_secs(3)).is_err(),
        "a wrong password gets nothing"
    );

    broker.terminate();
    let broker = serve();
    produce("t").expect("after a restart, alice still authenticates and may write t");
    assert!(produce("u").is_err());
    broker.terminate();
}

/// Mutual TLS: with `ssl.client.auth=required`, a client certificate's subject is the
/// principal (mapped by `ssl.principal.mapping.rules`), which the ACLs then see: alice's
/// certificate may write `t` and not `u`; a client without a certificate is refused at the
/// handshake.
#[test]
fn a_client_certificate_names_the_principal_the_acls_see() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(tmp.path());
    let (cert, key) = pki.client(
        "alice",
        &[
            (rcgen::DnType::OrganizationName, "Example"),
            (rcgen::DnType::OrganizationalUnitName, "Eng"),
            (rcgen::DnType::CommonName, "Alice"),
        ],
    );
    let (plain_port, ssl_port) = (free_port(), free_port());
    let config = tmp.path().join("laminar.toml");
    std::fs::write(
        &config,
        format!(
            r#""listeners" = "PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "{}"
"ssl.truststore.type" = "PEM"
"ssl.truststore.location" = "{}"
"ssl.client.auth" = "required"
"ssl.principal.mapping.rules" = "RULE:^OU=Eng,.*CN=([^,]*)$/$1/L,DEFAULT"
"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "User:ANONYMOUS"
"#,
            pki.keystore.display(),
            pki.ca_file.display()
        ),
    )
    .unwrap();
    let plain = format!("127.0.0.1:{plain_port}");
    let ssl = format!("127.0.0.1:{ssl_port}");
    let broker = common::try_serve_args(&tmp.path().join("data"), &["--config", config.to_str().unwrap()])
        .expect("the broker starts on its ports");
    let tools = Tools::new(&plain, tmp.path());
    tools.t_writable_by_alice();
    let mut alice = ClientConfig::new();
    alice
        .set("bootstrap.servers", &ssl)
        .set("security.protocol", "SSL")
        .set("ssl.ca.location", pki.ca_file.to_str().unwrap())
        .set("ssl.certificate.location", cert.to_str().unwrap())
        .set("ssl.key.location", key.to_str().unwrap())
        .set("message.timeout.ms", "10000");
    let produce = produce_as;
    produce(&alice, "t").expect("the certificate's alice may write t");
    let refused = produce(&alice, "u").unwrap_err();
    assert!(refused.contains("TopicAuthorizationFailed"), "{refused}");
    // Without a certificate: no handshake, nothing served.
    let mut anonymous = alice.clone();
    anonymous.remove("ssl.certificate.location");
    anonymous.remove("ssl.key.location");
    let c: BaseConsumer = anonymous.create().unwrap();
    assert!(c.fetch_metadata(None, Duration::from_secs(3)).is_err());
    // The Java client (Kafka's kafka-topics) with alice's certificate in a PEM keystore: the
    // same principal, which may describe only t.
    let keystore = tmp.path().join("alice-keystore.pem");
    std::fs::write(
        &keystore,
        format!(
            "{}{}",
            std::fs::read_to_string(&key).unwrap(),
            std::fs::read_to_string(&cert).unwrap()
        ),
    )
    .unwrap();
    let props = tmp.path().join("alice-mtls.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={}\n\
             ssl.truststore.type=PEM\nssl.truststore.location={}\n",
            keystore.display(),
            pki.ca_file.display()
        ),
    )
    .unwrap();
    let listed = Tools::new(&ssl, tmp.path()).ok(
        "org.apache.kafka.tools.TopicCommand",
        &["--list", "--command-config", props.to_str().unwrap()],
    );
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["t"], "{listed}");
    broker.terminate();
}

/// Certificates reload without a restart: the broker's keystore file is replaced (atomically,
/// as a certificate manager does) by one a new CA signed; within `ssl.reload.interval.ms`
/// new connections get the new certificate (a client trusting only the new CA connects, one
/// trusting only the old no longer does). A keystore that does not parse is logged and the
/// current one kept.
#[test]
fn a_replaced_keystore_is_used_without_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (old_dir, new_dir) = (tmp.path().join("old"), tmp.path().join("new"));
    std::fs::create_dir_all(&old_dir).unwrap();
    std::fs::create_dir_all(&new_dir).unwrap();
    let (old, new) = (Pki::new(&old_dir), Pki::new(&new_dir));
    let live = tmp.path().join("live.pem");
    std::fs::copy(&old.keystore, &live).unwrap();
    let replace = |from: &Path| {
        let staged = tmp.path().join("staged.pem");
        std::fs::copy(from, &staged).unwrap();
        std::fs::rename(&staged, &live).unwrap();
    };
    let serve = (0..5)
        .find_map(|_| {
            let (p, s) = (free_port(), free_port());
            let settings = [
                format!("listeners=PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:{s}"),
                format!("ssl.keystore.location={}", live.display()),
                "ssl.reload.interval.ms=100".to_string(),
            ];
            let args: Vec<&str> = settings.iter().flat_map(|s| ["--set", s.as_str()]).collect();
            try_serve_with(&tmp.path().join("data"), &format!("127.0.0.1:{p}"), &args)
                .map(|serve| (serve, format!("127.0.0.1:{s}")))
        })
        .expect("free ports");
    let (serve, ssl) = serve;
    let trusts = |ca: &Path| {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &ssl)
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", ca.to_str().unwrap())
            .create()
            .unwrap();
        c.fetch_metadata(None, Duration::from_secs(2)).is_ok()
    };
    assert!(
        trusts(&old.ca_file) && !trusts(&new.ca_file),
        "the old certificate first"
    );
    replace(&new.keystore);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !trusts(&new.ca_file) {
        assert!(std::time::Instant::now() < deadline, "the new certificate in use");
    }
    assert!(!trusts(&old.ca_file), "the old certificate no longer served");
    // Half a file: logged, and the new certificate stays in use.
    std::fs::write(
        tmp.path().join("broken.pem"),
        "-----BEGIN PRIVATE KEY-----\nnot base64",
    )
    .unwrap();
    replace(&tmp.path().join("broken.pem"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        trusts(&new.ca_file),
        "a broken keystore leaves the current one in use"
    );
    serve.terminate();
}

/// Issue 41, item 9: a client certificate whose subject no `ssl.principal.mapping.rules`
/// rule maps (no DEFAULT) is refused, as Kafka's NoMatchingRule refuses it, instead of
/// being taken as its whole DN.
#[test]
fn a_certificate_no_mapping_rule_maps_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(tmp.path());
    let subject = |ou: &'static str, cn: &'static str| {
        vec![
            (rcgen::DnType::OrganizationName, "Example"),
            (rcgen::DnType::OrganizationalUnitName, ou),
            (rcgen::DnType::CommonName, cn),
        ]
    };
    let alice = pki.client("alice", &subject("Eng", "Alice"));
    let bob = pki.client("bob", &subject("Ops", "Bob"));
    let (plain_port, ssl_port) = (free_port(), free_port());
    let config = tmp.path().join("laminar.toml");
    std::fs::write(
        &config,
        format!(
            r#""listeners" = "PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "{}"
"ssl.truststore.type" = "PEM"
"ssl.truststore.location" = "{}"
"ssl.client.auth" = "required"
"ssl.principal.mapping.rules" = "RULE:^OU=Eng,.*CN=([^,]*)$/$1/L"
"#,
            pki.keystore.display(),
            pki.ca_file.display()
        ),
    )
    .unwrap();
    let broker = common::try_serve_args(&tmp.path().join("data"), &["--config", config.to_str().unwrap()])
        .expect("the broker starts on its ports");
    let client = |(cert, key): &(std::path::PathBuf, std::path::PathBuf)| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", format!("127.0.0.1:{ssl_port}"))
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", pki.ca_file.to_str().unwrap())
            .set("ssl.certificate.location", cert.to_str().unwrap())
            .set("ssl.key.location", key.to_str().unwrap());
        let c: BaseConsumer = c.create().unwrap();
        c.fetch_metadata(None, Duration::from_secs(3)).map(|_| ())
    };
    assert!(client(&alice).is_ok(), "a rule maps alice's subject");
    assert!(client(&bob).is_err(), "none maps bob's: refused");
    broker.terminate();
}

/// Issue 41, item 9: `listener.name.NAME.ssl.client.auth`, as Kafka takes it: one listener
/// asks for client certificates, another does not.
#[test]
fn a_listener_may_require_client_certificates_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(tmp.path());
    let alice = pki.client("alice", &[(rcgen::DnType::CommonName, "alice")]);
    let (plain_port, open_port, internal_port) = (free_port(), free_port(), free_port());
    let config = tmp.path().join("laminar.toml");
    std::fs::write(
        &config,
        format!(
            r#""listeners" = "PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{open_port},INTERNAL://127.0.0.1:{internal_port}"
"listener.security.protocol.map" = "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "{}"
"ssl.truststore.type" = "PEM"
"ssl.truststore.location" = "{}"
"listener.name.internal.ssl.client.auth" = "required"
"#,
            pki.keystore.display(),
            pki.ca_file.display()
        ),
    )
    .unwrap();
    let broker = common::try_serve_args(&tmp.path().join("data"), &["--config", config.to_str().unwrap()])
        .expect("the broker starts on its ports");
    let metadata = |port: u16, certificate: Option<&(std::path::PathBuf, std::path::PathBuf)>| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", format!("127.0.0.1:{port}"))
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", pki.ca_file.to_str().unwrap());
        if let Some((cert, key)) = certificate {
            c.set("ssl.certificate.location", cert.to_str().unwrap())
                .set("ssl.key.location", key.to_str().unwrap());
        }
        let c: BaseConsumer = c.create().unwrap();
        c.fetch_metadata(None, Duration::from_secs(3)).map(|_| ())
    };
    assert!(metadata(open_port, None).is_ok(), "SSL asks for no certificate");
    assert!(metadata(internal_port, None).is_err(), "INTERNAL requires one");
    assert!(
        metadata(internal_port, Some(&alice)).is_ok(),
        "and takes one of its CA"
    );
    broker.terminate();
}

/// Issue 41, item 3: `ssl.ktls.enable` hands each connection's keys to the kernel where it
/// has kernel TLS, and falls back to TLS in user space where it does not, counted
/// (`laminar_ktls_fallbacks_total`). Here librdkafka produces and consumes over SSL with it
/// on, and the connections are counted on the side the kernel decides: this machine's kernel
/// has no `tls` module, so they fall back (the VM test, `ktls_vm.rs`, boots a kernel that
/// has it).
#[test]
fn kernel_tls_is_taken_where_the_kernel_has_it_and_falls_back_where_not() {
    let tmp = tempfile::tempdir().unwrap();
    let (keystore, ca) = certificates(tmp.path());
    let (p, s) = (free_port(), free_port());
    let settings = [
        format!("listeners=PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:{s}"),
        "ssl.keystore.type=PEM".to_string(),
        format!("ssl.keystore.location={}", keystore.display()),
        "ssl.ktls.enable=true".to_string(),
    ];
    let args: Vec<&str> = settings.iter().flat_map(|s| ["--set", s.as_str()]).collect();
    let broker = try_serve_with(&tmp.path().join("data"), &format!("127.0.0.1:{p}"), &args)
        .expect("the broker starts");
    let ssl = format!("127.0.0.1:{s}");
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &ssl)
        .set("security.protocol", "SSL")
        .set("ssl.ca.location", ca.to_str().unwrap())
        .set("message.timeout.ms", "15000");
    for i in 0..20 {
        produce_as(&c, "k").unwrap_or_else(|e| panic!("record {i}: {e}"));
    }
    let consumer: BaseConsumer = c
        .clone()
        .set("group.id", "k")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["k"]).unwrap();
    let mut read = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while read < 20 && std::time::Instant::now() < deadline {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(200)) {
            read += 1;
        }
    }
    assert_eq!(read, 20, "every record read back over SSL");
    let kernel_has_tls = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .is_ok_and(|u| u.split_whitespace().any(|m| m == "tls"));
    let taken = broker.metric("laminar_ktls_connections_total").unwrap();
    let fell_back = broker.metric("laminar_ktls_fallbacks_total").unwrap();
    if kernel_has_tls {
        assert!(
            taken >= 1.0 && fell_back == 0.0,
            "taken {taken}, fell back {fell_back}"
        );
    } else {
        assert!(
            taken == 0.0 && fell_back >= 20.0,
            "taken {taken}, fell back {fell_back}"
        );
    }
    drop(consumer);
    broker.terminate();
}
