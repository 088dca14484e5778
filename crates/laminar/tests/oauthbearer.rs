//! OAUTHBEARER with real clients: JWTs signed (ES256) by a test identity provider whose key
//! the broker reads from a JWKS file (`sasl.oauthbearer.jwks.endpoint.url=file://...`), with
//! Kafka's settings for the expected audience and issuer. librdkafka hands its token over
//! through its refresh callback, the Java client (Kafka's own tools) reads it from a file
//! (`OAuthBearerLoginCallbackHandler`, a `file:` token endpoint) and lists and writes with
//! Kafka's tools. The principal is the
//! token's `sub`: the authorizer lets alice write `t` and nothing else. An expired token, one
//! for another audience and one signed by another key are refused as authentication failures.

mod common;

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use common::tools::Tools;
use common::Serve;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// The test identity provider: its signing key and the JWKS that publishes it.
struct Idp {
    key: jsonwebtoken::EncodingKey,
    jwks: String,
}

impl Idp {
    fn new(kid: &str) -> Idp {
        let pair = rcgen::KeyPair::generate().unwrap(); // ECDSA P-256
        let point = pair.public_key_raw(); // 0x04, x, y
        assert_eq!(point.len(), 65);
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwks = format!(
            r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"{kid}","alg":"ES256","use":"sig","x":"{}","y":"{}"}}]}}"#,
            b64(&point[1..33]),
            b64(&point[33..])
        );
        let key = jsonwebtoken::EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap();
        Idp { key, jwks }
    }

    /// A token for `sub`, valid for `valid_s` seconds from now (negative: expired), for
    /// `audience`.
    fn token(&self, kid: &str, sub: &str, valid_s: i64, audience: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let claims = serde_json::json!({
            "sub": sub, "iss": "test-idp", "aud": audience, "iat": now - 5, "exp": now + valid_s,
            "scope": "kafka"
        });
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, &claims, &self.key).unwrap()
    }
}

fn start(data: &Path, jwks: &Path) -> (Serve, String, String) {
    start_with(data, jwks, &[])
}

fn start_with(data: &Path, jwks: &Path, more: &[&str]) -> (Serve, String, String) {
    let jwks = format!("sasl.oauthbearer.jwks.endpoint.url=file://{}", jwks.display());
    common::serve_plaintext_and(
        data,
        "SASL_PLAINTEXT",
        &[
            "sasl.enabled.mechanisms=OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            &jwks,
            "sasl.oauthbearer.expected.audience=laminar",
            "sasl.oauthbearer.expected.issuer=test-idp",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS",
        ]
        .into_iter()
        .chain(more.iter().copied())
        .collect::<Vec<_>>(),
    )
}

/// librdkafka's context: hands over one fixed token when asked, and keeps the errors the
/// client reports (an authentication failure is one).
struct Bearer {
    token: String,
    errors: std::sync::Mutex<Vec<String>>,
}

impl rdkafka::ClientContext for Bearer {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(
        &self,
        _config: Option<&str>,
    ) -> Result<rdkafka::client::OAuthToken, Box<dyn std::error::Error>> {
        Ok(rdkafka::client::OAuthToken {
            token: self.token.clone(),
            principal_name: "alice".into(),
            lifetime_ms: (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                + 60_000) as i64,
        })
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.errors.lock().unwrap().push(format!("{error}: {reason}"));
    }
}

impl rdkafka::consumer::ConsumerContext for Bearer {}
impl rdkafka::producer::ProducerContext for Bearer {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
}

fn config(addr: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", addr)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "OAUTHBEARER");
    c
}

fn bearer(token: String) -> Bearer {
    Bearer {
        token,
        errors: Default::default(),
    }
}

/// The topics a client with this token is told of, or what it reported.
fn topics(addr: &str, token: String) -> Result<Vec<String>, String> {
    let c: BaseConsumer<Bearer> = config(addr).create_with_context(bearer(token)).unwrap();
    // librdkafka asks for the token (the refresh callback) when the client is polled, and
    // connects once it has one.
    for _ in 0..3 {
        let _ = c.poll(Duration::from_millis(50));
    }
    c.fetch_metadata(None, Duration::from_secs(5))
        .map(|m| m.topics().iter().map(|t| t.name().to_string()).collect())
        .map_err(|e| {
            for _ in 0..10 {
                let _ = c.poll(Duration::from_millis(100));
            }
            format!("{e}; reported: {:?}", c.context().errors.lock().unwrap())
        })
}

/// Produces one record to `topic` with this token: the delivery's error, if any.
fn produce(addr: &str, token: String, topic: &str) -> Result<(), String> {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let p: ThreadedProducer<Bearer> = config(addr)
        .set("message.timeout.ms", "10000")
        .create_with_context(bearer(token))
        .unwrap();
    p.send(BaseRecord::<(), _>::to(topic).payload("by alice"))
        .map_err(|(e, _)| e.to_string())?;
    p.flush(Duration::from_secs(15)).map_err(|e| e.to_string())?;
    // The delivery report of a refused record is an error: read the partition back.
    Ok(())
}

#[test]
fn oauthbearer_tokens_authenticate_by_their_subject_and_bad_tokens_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let idp = Idp::new("k1");
    let jwks = tmp.path().join("jwks.json");
    std::fs::write(&jwks, &idp.jwks).unwrap();
    let (broker, plain, sasl) = start(&tmp.path().join("data"), &jwks);
    let tools = Tools::new(&plain, tmp.path());
    tools.t_writable_by_alice();

    // librdkafka, as alice: she sees t (WRITE implies DESCRIBE), writes it, not u.
    let alice = idp.token("k1", "alice", 600, "laminar");
    assert_eq!(topics(&sasl, alice.clone()), Ok(vec!["t".to_string()]));
    produce(&sasl, alice.clone(), "t").unwrap();
    assert_eq!(common::high_watermark(&plain, "t"), 1, "alice's record is in t");
    let _ = produce(&sasl, alice.clone(), "u");
    assert_eq!(common::high_watermark(&plain, "u"), 0, "nothing of alice's in u");

    // Refused: expired, for another audience, signed by a key the JWKS does not hold.
    let other = Idp::new("k1");
    for (why, token) in [
        ("expired", idp.token("k1", "alice", -600, "laminar")),
        ("another audience", idp.token("k1", "alice", 600, "elsewhere")),
        ("another key", other.token("k1", "alice", 600, "laminar")),
        ("an unknown key id", idp.token("k2", "alice", 600, "laminar")),
    ] {
        let refused = topics(&sasl, token);
        let said = format!("{refused:?}");
        assert!(
            refused.is_err() && said.contains("Authentication"),
            "{why}: {said}"
        );
    }

    // The Java client (Kafka's own kafka-topics) as alice, its token read from a file.
    let token_file = tmp.path().join("alice.jwt");
    std::fs::write(&token_file, &alice).unwrap();
    let props = tmp.path().join("alice.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n\
             sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             sasl.oauthbearer.token.endpoint.url=file://{}\n\
             sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n",
            token_file.display()
        ),
    )
    .unwrap();
    let allowed = format!(
        "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://{}",
        token_file.display()
    );
    let listed = Tools::new(&sasl, tmp.path()).java(&[
        &allowed,
        "org.apache.kafka.tools.TopicCommand",
        "--list",
        "--bootstrap-server",
        &sasl,
        "--command-config",
        props.to_str().unwrap(),
    ]);
    assert!(listed.ok, "{}\n{}", listed.stdout, listed.stderr);
    assert_eq!(
        listed.stdout.lines().collect::<Vec<_>>(),
        ["t"],
        "{}",
        listed.stderr
    );
    // And writes t with Kafka's ProducerPerformance, as alice.
    let before = common::high_watermark(&plain, "t");
    let produced = Tools::new(&sasl, tmp.path()).java(&[
        &allowed,
        "org.apache.kafka.tools.ProducerPerformance",
        "--bootstrap-server",
        &sasl,
        "--topic",
        "t",
        "--num-records",
        "100",
        "--record-size",
        "64",
        "--throughput",
        "-1",
        "--command-config",
        props.to_str().unwrap(),
        "--command-property",
        "acks=all",
    ]);
    assert!(produced.ok, "{}\n{}", produced.stdout, produced.stderr);
    assert_eq!(
        common::high_watermark(&plain, "t") - before,
        100,
        "{}",
        produced.stdout
    );
    broker.terminate();
}

/// An identity provider behind librdkafka's refresh callback: each call gets a new token for
/// alice valid `valid_s` seconds, or, with `once`, only the first call does (the provider
/// then refuses). Counts the calls, the deliveries and the connections.
struct Minting {
    idp: Idp,
    valid_s: i64,
    once: bool,
    calls: std::sync::atomic::AtomicUsize,
    delivered: std::sync::atomic::AtomicUsize,
    connections: std::sync::Mutex<(i64, i64)>,
}

impl rdkafka::ClientContext for Minting {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(
        &self,
        _config: Option<&str>,
    ) -> Result<rdkafka::client::OAuthToken, Box<dyn std::error::Error>> {
        use std::sync::atomic::Ordering;
        if self.calls.fetch_add(1, Ordering::SeqCst) > 0 && self.once {
            return Err("the identity provider refuses".into());
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        Ok(rdkafka::client::OAuthToken {
            token: self.idp.token("k1", "alice", self.valid_s, "laminar"),
            principal_name: "alice".into(),
            // The token's `exp` is in whole seconds from now.
            lifetime_ms: (now_ms / 1000 + self.valid_s) * 1000,
        })
    }

    fn stats(&self, stats: rdkafka::statistics::Statistics) {
        let (mut connects, mut disconnects) = (0, 0);
        for b in stats.brokers.values().filter(|b| b.nodeid >= 0) {
            connects += b.connects.unwrap_or(0);
            disconnects += b.disconnects.unwrap_or(0);
        }
        *self.connections.lock().unwrap() = (connects, disconnects);
    }
}

impl rdkafka::producer::ProducerContext for Minting {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &rdkafka::message::DeliveryResult<'_>, _: ()) {
        if result.is_ok() {
            self.delivered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// A token bounds the session it opened (as Kafka's `CREDENTIAL.LIFETIME.MS` does), with no
/// `connections.max.reauth.ms` set: the broker tells librdkafka the session ends when the
/// token does. A client whose provider keeps issuing tokens re-authenticates on its one
/// connection and delivers every record across three token lifetimes; one whose provider
/// stopped after the first token is cut off once that token expires (mutation: sessions
/// unbounded by the token, and it delivered every record for 10 s on a 4 s token). Tokens
/// live 10 s: with 4 s, the client's re-authentication (at 80-90% of the session) came too
/// late under the suite's load once, and it reconnected.
#[test]
fn a_session_ends_with_its_token_unless_the_client_authenticates_again() {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    use std::sync::atomic::Ordering;
    let tmp = tempfile::tempdir().unwrap();
    let idp = Idp::new("k1");
    let jwks = tmp.path().join("jwks.json");
    std::fs::write(&jwks, &idp.jwks).unwrap();
    let (broker, plain, sasl) = start(&tmp.path().join("data"), &jwks);
    Tools::new(&plain, tmp.path()).t_writable_by_alice();
    let run = |once: bool| {
        let p: ThreadedProducer<Minting> = config(&sasl)
            .set("message.timeout.ms", "3000")
            .set("linger.ms", "0")
            .set("statistics.interval.ms", "100")
            .create_with_context(Minting {
                idp: Idp {
                    key: idp.key.clone(),
                    jwks: String::new(),
                },
                valid_s: 10,
                once,
                calls: Default::default(),
                delivered: Default::default(),
                connections: Default::default(),
            })
            .unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(24);
        let mut sent = 0;
        while std::time::Instant::now() < until {
            if p.send(BaseRecord::<(), _>::to("t").payload("by alice")).is_ok() {
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = p.flush(Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(300));
        let ctx = p.context();
        let connections = *ctx.connections.lock().unwrap();
        (
            sent,
            ctx.delivered.load(Ordering::SeqCst),
            ctx.calls.load(Ordering::SeqCst),
            connections,
        )
    };
    let (sent, delivered, calls, connections) = run(false);
    assert_eq!(delivered, sent, "every record delivered");
    assert!(calls >= 3, "a new token for each lifetime: {calls} calls");
    assert_eq!(connections, (1, 0), "re-authenticated on its one connection");
    let before = common::high_watermark(&plain, "t");
    let (sent, delivered, _, _) = run(true);
    assert_eq!(common::high_watermark(&plain, "t") - before, delivered as i64);
    assert!(
        (10..sent - 60).contains(&delivered),
        "delivered while its token held, not after: {delivered} of {sent}"
    );
    broker.terminate();
}

/// Issue 41, item 5: the JWKS is read again (`sasl.oauthbearer.jwks.endpoint.refresh.ms`):
/// when the identity provider rotates its key, tokens of the new key pass without a restart
/// and those of the old one stop passing. (Before, the JWKS was read once at start.)
#[test]
fn a_rotated_key_is_taken_without_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (Idp::new("k1"), Idp::new("k2"));
    let jwks = tmp.path().join("jwks.json");
    std::fs::write(&jwks, &old.jwks).unwrap();
    let (broker, _plain, sasl) = start_with(
        &tmp.path().join("data"),
        &jwks,
        &["sasl.oauthbearer.jwks.endpoint.refresh.ms=300"],
    );
    let old_token = old.token("k1", "alice", 600, "laminar");
    let new_token = new.token("k2", "alice", 600, "laminar");
    assert!(topics(&sasl, old_token.clone()).is_ok());
    assert!(
        topics(&sasl, new_token.clone()).is_err(),
        "k2 is not published yet"
    );
    // A JWKS with a symmetric key is refused, and the keys in use stay.
    std::fs::write(
        &jwks,
        r#"{"keys":[{"kty":"oct","kid":"k3","alg":"HS256","k":"c2VjcmV0"}]}"#,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(900));
    assert!(
        topics(&sasl, old_token.clone()).is_ok(),
        "a bad JWKS leaves the keys as they were"
    );
    std::fs::write(&jwks, &new.jwks).unwrap();
    std::thread::sleep(Duration::from_millis(900));
    assert!(topics(&sasl, new_token).is_ok(), "the rotated key is taken");
    assert!(
        topics(&sasl, old_token).is_err(),
        "the dropped key no longer passes"
    );
    broker.terminate();
}
