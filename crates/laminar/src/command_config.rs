//! `--command-config FILE`: Kafka's client properties, as Kafka's own tools take them, for
//! the `laminar` commands that talk to a broker: `security.protocol` (PLAINTEXT, SSL,
//! SASL_PLAINTEXT, SASL_SSL), `sasl.mechanism` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with the
//! user and password of `sasl.jaas.config`, and a PEM truststore for TLS
//! (`ssl.truststore.type=PEM`, `ssl.truststore.location` or `ssl.truststore.certificates`).
//! The password stays in the file, off the command line and the process list.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use anyhow::{bail, Context};

/// How the commands connect.
#[derive(Default)]
pub struct ClientSecurity {
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// (mechanism, user, password).
    pub sasl: Option<(String, String, String)>,
}

/// Reads a properties file (`key=value` lines; `#` and `!` start comments).
pub fn load(path: &std::path::Path) -> anyhow::Result<ClientSecurity> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--command-config {}", path.display()))?;
    let mut props = std::collections::BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let (k, v) = line.split_once(['=', ':']).with_context(|| {
            format!(
                "--command-config: a line that is not key=value (after {:?})",
                props.keys().last()
            )
        })?;
        props.insert(k.trim().to_string(), v.trim().to_string());
    }
    let get = |k: &str| props.get(k).map(String::as_str);
    let protocol = get("security.protocol")
        .unwrap_or("PLAINTEXT")
        .to_ascii_uppercase();
    let (tls, sasl) = match protocol.as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => bail!("security.protocol={other}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    };
    let tls = if tls {
        if get("ssl.truststore.type").is_some_and(|t| !t.eq_ignore_ascii_case("PEM")) {
            bail!("ssl.truststore.type: only PEM is read here");
        }
        let mut settings = laminar_broker::security::SecuritySettings::default();
        for key in ["ssl.truststore.location", "ssl.truststore.certificates"] {
            if let Some(v) = get(key) {
                settings.ssl.insert(key.to_string(), v.to_string());
            }
        }
        let roots = laminar_broker::security::tls::truststore(&settings).map_err(anyhow::Error::msg)?;
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots)
                .with_no_client_auth();
        Some(Arc::new(config))
    } else {
        None
    };
    let sasl = if sasl {
        let mechanism =
            get("sasl.mechanism").context("sasl.mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")?;
        let jaas = get("sasl.jaas.config").context("sasl.jaas.config: the user and password")?;
        let options =
            laminar_auth::jaas::options(jaas).map_err(|e| anyhow::anyhow!("sasl.jaas.config: {e}"))?;
        let field = |k: &str| {
            options
                .get(k)
                .cloned()
                .with_context(|| format!("sasl.jaas.config has no {k}"))
        };
        Some((mechanism.to_string(), field("username")?, field("password")?))
    } else {
        None
    };
    Ok(ClientSecurity { tls, sasl })
}

/// A connection to a broker: plain, or TLS over it.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    /// Over `tcp` to `host`, as `security` says (TLS only; SASL is the caller's, in requests).
    pub fn open(tcp: TcpStream, host: &str, security: &ClientSecurity) -> anyhow::Result<Conn> {
        let Some(tls) = &security.tls else {
            return Ok(Conn::Plain(tcp));
        };
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .with_context(|| format!("{host} as a TLS server name"))?;
        let connection = rustls::ClientConnection::new(tls.clone(), name)?;
        Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(connection, tcp))))
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

static SECURITY: std::sync::OnceLock<ClientSecurity> = std::sync::OnceLock::new();

/// Set once, by `main`, from `--command-config`.
pub fn set(security: ClientSecurity) {
    let _ = SECURITY.set(security);
}

/// What the commands connect with (plain text when nothing was given).
pub fn get() -> &'static ClientSecurity {
    SECURITY.get_or_init(ClientSecurity::default)
}
