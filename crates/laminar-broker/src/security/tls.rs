//! The TLS of SSL and SASL_SSL listeners, from Kafka's `ssl.*` settings with PEM files: the
//! keystore holds the private key and the certificate chain (`ssl.keystore.type=PEM`,
//! `ssl.keystore.location`, or the two inline as `ssl.keystore.key` and
//! `ssl.keystore.certificate.chain`); the truststore the certificates client certificates
//! must chain to (`ssl.truststore.location`), for `ssl.client.auth`.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::SecuritySettings;

/// The `ssl.*` settings read.
pub const SETTINGS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules",
    KTLS_ENABLE,
    RELOAD_INTERVAL,
];

/// Kernel TLS on the TLS listeners (Laminar's own setting, off by default): after each
/// handshake the keys go to the kernel, which then encrypts, and fetched data goes out with
/// `sendfile` as in plain text; a connection the kernel does not take stays in user space
/// (`laminar_ktls_fallbacks_total`).
pub const KTLS_ENABLE: &str = "ssl.ktls.enable";

/// `ssl.ktls.enable`.
pub fn kernel_tls(settings: &SecuritySettings) -> Result<bool, String> {
    match settings.ssl.get(KTLS_ENABLE).map(|v| v.trim()) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(format!("{KTLS_ENABLE}={other}: true or false")),
    }
}

/// How often the keystore and truststore files are looked at for a change (Laminar's own
/// setting; 0: never). A changed file is read again and new handshakes use it.
pub const RELOAD_INTERVAL: &str = "ssl.reload.interval.ms";
const RELOAD_INTERVAL_DEFAULT_MS: u64 = 10_000;

/// rustls's configuration for a TLS listener, from the settings; `client_auth`: the
/// listener's own `listener.name.NAME.ssl.client.auth`, if it has one.
pub fn server_config(
    settings: &SecuritySettings,
    client_auth: Option<&str>,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let get = |k: &str| settings.ssl.get(k).map(String::as_str);
    let (chain, key) = keystore(settings)?;
    let versions = versions(settings)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS versions: {e}"))?;
    let client_auth = client_auth.or(get("ssl.client.auth")).unwrap_or("none");
    let builder = match client_auth {
        "none" => builder.with_no_client_auth(),
        "required" | "requested" => {
            let roots = truststore(settings).map_err(|e| format!("ssl.client.auth={client_auth}: {e}"))?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if client_auth == "requested" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("client certificates: {e}"))?,
            )
        }
        other => return Err(format!("ssl.client.auth={other}: required, requested or none")),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))?;
    // Kernel TLS takes the traffic keys out of rustls after the handshake.
    config.enable_secret_extraction = kernel_tls(settings)?;
    Ok(Arc::new(config))
}

/// The controller port's mutual TLS: each side presents its keystore's certificate and
/// checks the other's against the truststore, whatever `ssl.client.auth` says (a
/// controller port that took any client would take cluster metadata commands from anyone).
/// With an authorizer, the client certificate's principal (after `ssl.principal.mapping.rules`)
/// must also be allowed CLUSTER_ACTION on the cluster, as Kafka's controllers ask of their
/// clients (a super user is; clients of an mTLS listener often hold certificates of the same
/// CA, and are not), judged by the authorization step against the controller's own ACLs.
pub fn controller_tls(settings: &SecuritySettings) -> Result<laminar_cluster::rpc::ControllerTls, String> {
    let (chain, key) = keystore(settings)?;
    let roots = truststore(settings).map_err(|e| format!("an SSL controller port: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("client certificates: {e}"))?;
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(settings)?)
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))?;
    let admit: Option<laminar_cluster::rpc::AdmitCertificate> = if settings.authorizer {
        let rules = principal_rules(settings)?;
        let authorizer = super::authorizer(settings);
        Some(Arc::new(
            move |der: &[u8], host: std::net::IpAddr, acls: &laminar_auth::acl::Acls| {
                let dn = laminar_auth::principal::subject_dn(der)?;
                let name = rules
                    .apply(&dn)
                    .ok_or_else(|| format!("no ssl.principal.mapping.rules rule matches {dn}"))?;
                let principal = laminar_auth::principal::Principal::user(&name);
                if super::step::controller_peer(&authorizer, acls, &principal, host) {
                    Ok(())
                } else {
                    Err(format!(
                    "{principal} may not CLUSTER_ACTION the cluster: the controller port serves brokers and controllers only"
                ))
                }
            },
        ))
    } else {
        None
    };
    Ok(laminar_cluster::rpc::ControllerTls {
        server: Arc::new(server),
        client: client_config(settings)?,
        admit,
    })
}

/// rustls's configuration for this broker as a client of another's TLS inter-broker
/// listener: the other's certificate must chain to the truststore and name the host this
/// broker connects to (Kafka's default `ssl.endpoint.identification.algorithm=https`); this
/// broker offers its keystore's certificate, for a listener with `ssl.client.auth`.
pub fn client_config(settings: &SecuritySettings) -> Result<Arc<rustls::ClientConfig>, String> {
    let get = |k: &str| settings.ssl.get(k).map(String::as_str);
    if get("ssl.endpoint.identification.algorithm").is_some_and(|a| !a.eq_ignore_ascii_case("https")) {
        return Err(
            "ssl.endpoint.identification.algorithm: only https (a broker's certificate names its host) is supported"
                .into(),
        );
    }
    let roots = truststore(settings).map_err(|e| format!("a TLS inter-broker listener: {e}"))?;
    let versions = versions(settings)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_root_certificates(roots);
    let (chain, key) = keystore(settings)?;
    let config = builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))?;
    Ok(Arc::new(config))
}

/// `ssl.truststore.location` (or `ssl.truststore.certificates` inline): the certificates
/// the other side's must chain to.
/// The CA certificates of `ssl.truststore.location` (or `ssl.truststore.certificates`), PEM.
pub fn truststore(settings: &SecuritySettings) -> Result<rustls::RootCertStore, String> {
    let get = |k: &str| settings.ssl.get(k).map(String::as_str);
    let pem = match (get("ssl.truststore.location"), get("ssl.truststore.certificates")) {
        (Some(path), _) => std::fs::read(path).map_err(|e| format!("ssl.truststore.location {path}: {e}"))?,
        (None, Some(inline)) => inline.as_bytes().to_vec(),
        (None, None) => return Err("it needs ssl.truststore.location".into()),
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("the truststore: {e}"))?;
        roots.add(cert).map_err(|e| format!("the truststore: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the truststore holds no certificate".into());
    }
    Ok(roots)
}

/// The keystore: this broker's certificate chain and private key.
fn keystore(
    settings: &SecuritySettings,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let get = |k: &str| settings.ssl.get(k).map(String::as_str);
    for (key, want) in [("ssl.keystore.type", "PEM"), ("ssl.truststore.type", "PEM")] {
        if let Some(t) = get(key) {
            if !t.eq_ignore_ascii_case(want) {
                return Err(format!("{key}={t}: only PEM is supported"));
            }
        }
    }
    if get("ssl.key.password").is_some_and(|p| !p.is_empty()) {
        return Err("ssl.key.password: encrypted private keys are not supported; give the key unencrypted (PKCS#8 or PKCS#1 PEM)".into());
    }
    let (chain_pem, key_pem) =
        match (
            get("ssl.keystore.location"),
            get("ssl.keystore.certificate.chain"),
            get("ssl.keystore.key"),
        ) {
            (Some(path), None, None) => {
                let text = std::fs::read(path).map_err(|e| format!("ssl.keystore.location {path}: {e}"))?;
                (text.clone(), text)
            }
            (None, Some(chain), Some(key)) => (chain.as_bytes().to_vec(), key.as_bytes().to_vec()),
            _ => return Err(
                "a TLS listener needs ssl.keystore.location (a PEM file of its key and certificate chain), \
                 or ssl.keystore.key and ssl.keystore.certificate.chain"
                    .into(),
            ),
        };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the keystore's certificates: {e}"))?;
    if chain.is_empty() {
        return Err("the keystore holds no certificate".into());
    }
    let key =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| format!("the keystore's private key: {e}"))?;
    Ok((chain, key))
}

/// `ssl.enabled.protocols`: TLSv1.2 and TLSv1.3 by default.
fn versions(settings: &SecuritySettings) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let get = |k: &str| settings.ssl.get(k).map(String::as_str);
    match get("ssl.enabled.protocols") {
        None => Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]),
        Some(list) => list
            .split(',')
            .map(|v| match v.trim() {
                "TLSv1.3" => Ok(&rustls::version::TLS13),
                "TLSv1.2" => Ok(&rustls::version::TLS12),
                other => Err(format!(
                    "ssl.enabled.protocols: {other} is not supported (TLSv1.2, TLSv1.3)"
                )),
            })
            .collect(),
    }
}

/// `ssl.principal.mapping.rules`: how a client certificate's subject becomes a principal.
pub fn principal_rules(settings: &SecuritySettings) -> Result<laminar_auth::principal::MappingRules, String> {
    match settings.ssl.get("ssl.principal.mapping.rules") {
        Some(rules) => laminar_auth::principal::MappingRules::parse(rules),
        None => Ok(Default::default()),
    }
}

/// The files TLS reads, as last seen: their modification times and lengths.
type Stamps = Vec<Option<(std::time::SystemTime, u64)>>;

fn stamps(settings: &SecuritySettings) -> Stamps {
    ["ssl.keystore.location", "ssl.truststore.location"]
        .iter()
        .map(|k| {
            let path = settings.ssl.get(*k)?;
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

/// `ssl.reload.interval.ms`, or why it is not a number.
pub fn reload_interval(settings: &SecuritySettings) -> Result<Option<std::time::Duration>, String> {
    let ms = match settings.ssl.get(RELOAD_INTERVAL) {
        None => RELOAD_INTERVAL_DEFAULT_MS,
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{RELOAD_INTERVAL}: {v:?} is not a number of milliseconds"))?,
    };
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms)))
}

/// Reloads certificates without a restart: every `interval`, looks at the keystore's and
/// truststore's files (on a blocking thread: a disk may be slow), and when one changed,
/// builds the TLS configurations again from them. New connections, both the listeners'
/// (`server`) and this broker's own to the others' inter-broker listener (`inter_broker`),
/// use the new ones; established connections keep theirs. A file that does not make a
/// configuration (half written, a key that does not fit) is logged and the old one kept.
pub async fn reload_on_change(
    settings: SecuritySettings,
    interval: std::time::Duration,
    servers: Vec<(Option<String>, Arc<laminar_net::TlsServer>)>,
    inter_broker: Option<(Arc<laminar_cluster::Cluster>, Arc<crate::listeners::Listener>)>,
) {
    let settings = Arc::new(settings);
    let look = |settings: Arc<SecuritySettings>| async move {
        tokio::task::spawn_blocking(move || stamps(&settings))
            .await
            .unwrap_or_default()
    };
    let mut seen = look(settings.clone()).await;
    loop {
        tokio::time::sleep(interval).await;
        let now = look(settings.clone()).await;
        if now == seen {
            continue;
        }
        seen = now;
        let (s, servers, inter_broker) = (settings.clone(), servers.clone(), inter_broker.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            for (client_auth, server) in &servers {
                server.replace(server_config(&s, client_auth.as_deref())?);
            }
            if let Some((cluster, listener)) = &inter_broker {
                cluster.clients.set_security(super::inter_broker(&s, listener)?);
            }
            Ok::<_, String>(())
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        match outcome {
            Ok(()) => crate::info!("TLS: the keystore or truststore changed; new connections use it"),
            Err(e) => crate::warn!(
                "TLS: the keystore or truststore changed but cannot be used, the old one stays: {e}"
            ),
        }
    }
}
