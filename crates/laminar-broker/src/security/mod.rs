//! Security settings and what the broker keeps per connection of who a client is: SASL
//! (`sasl.enabled.mechanisms`, a listener's JAAS configuration for PLAIN, re-authentication)
//! on the listeners whose protocol is SASL_PLAINTEXT or SASL_SSL. The exchanges themselves
//! are `laminar-auth`'s; the SASL requests' handlers are `handlers::sasl_*`.

pub mod authz;
pub mod split;
pub mod step;
pub mod tls;
pub mod users;

use std::collections::BTreeMap;
use std::sync::Arc;

use laminar_auth::Authenticator;
use laminar_cluster::Cluster;

use crate::listeners::{Listener, SecurityProtocol};

/// The authorizer requests are checked with.
pub fn authz(settings: &SecuritySettings, cluster: &Arc<Cluster>) -> Arc<authz::Authz> {
    Arc::new(authz::Authz {
        authorizer: settings.authorizer.then(|| authorizer(settings)),
        cluster: cluster.clone(),
    })
}

/// The authorizer the settings configure (`super.users`, `allow.everyone.if.no.acl.found`).
fn authorizer(settings: &SecuritySettings) -> laminar_auth::acl::Authorizer {
    laminar_auth::acl::Authorizer {
        super_users: settings.super_users.clone(),
        allow_if_no_acl: settings.allow_everyone_if_no_acl_found,
    }
}

/// How the controller port knows its peers: mutual TLS when its listener
/// (`controller.listener.names`) is SSL, and the secret of `controller.quorum.secret.file`
/// when set (a single node makes its own). A cluster whose port would take anyone who
/// reaches it does not start with an authorizer (a peer there writes ACLs and SCRAM users
/// past it, and reads every user's SCRAM keys), and warns without one.
pub fn controller_auth(
    config: &crate::config::BrokerConfig,
) -> Result<laminar_cluster::rpc::ControllerAuth, String> {
    let tls = match config.listeners.controller_protocol()? {
        SecurityProtocol::Plaintext => None,
        SecurityProtocol::Ssl => Some(tls::controller_tls(&config.security).map_err(|e| e.to_string())?),
        other => {
            return Err(format!(
                "controller.listener.names: the controller port speaks PLAINTEXT or SSL (mutual TLS), not {other:?}"
            ))
        }
    };
    let secret = match &config.controller_quorum_secret_file {
        None => None,
        Some(path) => {
            let shown = path.display();
            let bytes =
                std::fs::read(path).map_err(|e| format!("controller.quorum.secret.file {shown}: {e}"))?;
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)
                .map(|m| m.permissions().mode())
                .unwrap_or(0);
            if mode & 0o077 != 0 {
                crate::warn!(
                    "controller.quorum.secret.file {shown} may be read by other users (mode {:o}): chmod 600 it",
                    mode & 0o777
                );
            }
            Some(
                laminar_auth::peer_secret::PeerSecret::from_file_contents(&bytes)
                    .map_err(|e| format!("controller.quorum.secret.file {shown}: {e}"))?,
            )
        }
    };
    if !config.controller_quorum_voters.is_empty() && tls.is_none() && secret.is_none() {
        let why = "the controller port (controller.quorum.voters) would take any peer that reaches it: map controller.listener.names to SSL (mutual TLS) or set controller.quorum.secret.file";
        if config.security.authorizer {
            return Err(format!("{why}; with an authorizer this broker does not start so"));
        }
        crate::warn!("{why}");
    }
    Ok(laminar_cluster::rpc::ControllerAuth { tls, secret })
}

/// Each listener's SASL exchanges, in the order of `listeners` (`None` for a listener
/// without SASL), or why the settings cannot serve.
pub fn authenticators(
    settings: &SecuritySettings,
    listeners: &[Arc<Listener>],
    cluster: &Arc<Cluster>,
) -> Result<Vec<Option<Arc<Authenticator>>>, String> {
    let sasl = |l: &Listener| {
        matches!(
            l.protocol,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    };
    let oauth = if listeners
        .iter()
        .any(|l| sasl(l) && settings.mechanisms_of(&l.name).iter().any(|m| m == "OAUTHBEARER"))
    {
        let (validator, jwks, every) = oauth_validator(settings)?;
        let validator = Arc::new(validator);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(refresh_jwks(validator.clone(), jwks, every));
        }
        Some(validator)
    } else {
        None
    };
    listeners
        .iter()
        .map(|l| {
            if !matches!(l.protocol, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl) {
                return Ok(None);
            }
            let mechanisms = settings.mechanisms_of(&l.name);
            let plain = if mechanisms.iter().any(|m| m == "PLAIN") {
                let jaas = settings.of_listener(&l.name, "plain.sasl.jaas.config").ok_or_else(|| {
                    format!(
                        "listener {} enables PLAIN but has no listener.name.{}.plain.sasl.jaas.config (its users)",
                        l.name,
                        l.name.to_ascii_lowercase()
                    )
                })?;
                laminar_auth::jaas::plain_users(jaas)
                    .map_err(|e| format!("listener.name.{}.plain.sasl.jaas.config: {e}", l.name.to_ascii_lowercase()))?
            } else {
                BTreeMap::new()
            };
            let users = users::BrokerUsers {
                cluster: cluster.clone(),
                plain,
            };
            if let Some(handler) = settings.of_listener(&l.name, "oauthbearer.sasl.server.callback.handler.class") {
                if handler.trim() != OAUTHBEARER_VALIDATOR {
                    return Err(format!(
                        "listener.name.{}.oauthbearer.sasl.server.callback.handler.class={handler}: only {OAUTHBEARER_VALIDATOR} is supported",
                        l.name.to_ascii_lowercase()
                    ));
                }
            }
            Authenticator::new(mechanisms, Arc::new(users), oauth.clone())
                .map(|a| Some(Arc::new(a)))
                .map_err(|e| format!("listener {}: {e}", l.name))
        })
        .collect()
}

/// How this broker connects to the others' inter-broker listener (`listener`, its own of
/// the same name): TLS that trusts `ssl.truststore.location` and offers its keystore's
/// certificate, and SASL with `sasl.mechanism.inter.broker.protocol` as the user of
/// `listener.name.<listener>.<mechanism>.sasl.jaas.config` (`username`, `password`), as in
/// Kafka.
pub fn inter_broker(
    settings: &SecuritySettings,
    listener: &Listener,
) -> Result<laminar_cluster::client::InterBrokerSecurity, String> {
    let tls = matches!(
        listener.protocol,
        SecurityProtocol::Ssl | SecurityProtocol::SaslSsl
    )
    .then(|| tls::client_config(settings))
    .transpose()?;
    let sasl = if matches!(
        listener.protocol,
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
    ) {
        let lower = listener.name.to_ascii_lowercase();
        let mechanism = settings.sasl_mechanism_inter_broker.clone().ok_or_else(|| {
            format!(
                "the inter-broker listener {} is {:?}: set sasl.mechanism.inter.broker.protocol",
                listener.name, listener.protocol
            )
        })?;
        if !settings.mechanisms_of(&listener.name).contains(&mechanism) {
            return Err(format!(
                "sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on listener {}",
                listener.name
            ));
        }
        let key = format!("{}.sasl.jaas.config", mechanism.to_ascii_lowercase());
        let jaas = settings.of_listener(&listener.name, &key).ok_or_else(|| {
            format!("brokers authenticate to each other with listener.name.{lower}.{key}: it is not set")
        })?;
        let options =
            laminar_auth::jaas::options(jaas).map_err(|e| format!("listener.name.{lower}.{key}: {e}"))?;
        let field = |name: &str| {
            options
                .get(name)
                .cloned()
                .ok_or_else(|| format!("listener.name.{lower}.{key} has no {name}=\"...\" for this broker"))
        };
        Some(laminar_cluster::client::SaslLogin {
            mechanism,
            username: field("username")?,
            password: field("password")?,
        })
    } else {
        None
    };
    Ok(laminar_cluster::client::InterBrokerSecurity { tls, sasl })
}

/// The security settings, by Kafka's names.
/// Whether a setting holds a secret (Kafka's PASSWORD settings, and ours): its value is
/// never printed, in the startup log, in `Debug`, or in an error.
pub fn is_secret(name: &str) -> bool {
    name.contains("password")
        || name.ends_with("jaas.config")
        || name.ends_with("keystore.key")
        || name.ends_with("client.secret")
}

/// What a secret setting's value shows as.
pub const HIDDEN: &str = "[hidden]";

/// A settings map for `Debug`, its secret values hidden.
struct Shown<'a>(&'a BTreeMap<String, String>);

impl std::fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.0
                    .iter()
                    .map(|(k, v)| (k, if is_secret(k) { HIDDEN } else { v.as_str() })),
            )
            .finish()
    }
}

impl std::fmt::Debug for SecuritySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let listeners: BTreeMap<&String, Shown<'_>> =
            self.per_listener.iter().map(|(l, m)| (l, Shown(m))).collect();
        f.debug_struct("SecuritySettings")
            .field("sasl_enabled_mechanisms", &self.sasl_enabled_mechanisms)
            .field("connections_max_reauth_ms", &self.connections_max_reauth_ms)
            .field(
                "failed_authentication_delay_ms",
                &self.failed_authentication_delay_ms,
            )
            .field("per_listener", &listeners)
            .field("ssl", &Shown(&self.ssl))
            .field("authorizer", &self.authorizer)
            .field("super_users", &self.super_users)
            .field(
                "allow_everyone_if_no_acl_found",
                &self.allow_everyone_if_no_acl_found,
            )
            .field("sasl_mechanism_inter_broker", &self.sasl_mechanism_inter_broker)
            .field("oauthbearer", &Shown(&self.oauthbearer))
            .finish_non_exhaustive()
    }
}

#[derive(Clone, PartialEq)]
pub struct SecuritySettings {
    /// `sasl.enabled.mechanisms`: the broker-wide default of every SASL listener.
    pub sasl_enabled_mechanisms: Vec<String>,
    /// `connections.max.reauth.ms`: 0, a session never expires; else a client must
    /// authenticate again within this long (KIP-368), or its connection is closed.
    pub connections_max_reauth_ms: u64,
    /// `connection.failed.authentication.delay.ms`: how long a failed authentication's
    /// answer is held back (a client guessing passwords gets one guess per this).
    pub failed_authentication_delay_ms: u64,
    /// `listener.name.<listener>.<setting>`, by listener name (upper case).
    pub per_listener: BTreeMap<String, BTreeMap<String, String>>,
    /// The `ssl.*` settings of TLS listeners, by Kafka's names (see `tls.rs`).
    pub ssl: BTreeMap<String, String>,
    /// `authorizer.class.name` set to Kafka's standard authorizer.
    pub authorizer: bool,
    /// `super.users`: `User:NAME;User:OTHER`.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
    /// `sasl.mechanism.inter.broker.protocol`: how this broker authenticates to the others
    /// when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL.
    pub sasl_mechanism_inter_broker: Option<String>,
    /// OAUTHBEARER's `sasl.oauthbearer.*` settings, by Kafka's names (see `oauth_validator`).
    pub oauthbearer: BTreeMap<String, String>,
}

impl Default for SecuritySettings {
    fn default() -> SecuritySettings {
        SecuritySettings {
            sasl_enabled_mechanisms: vec!["SCRAM-SHA-256".into(), "SCRAM-SHA-512".into()],
            connections_max_reauth_ms: 0,
            failed_authentication_delay_ms: 100,
            per_listener: BTreeMap::new(),
            ssl: BTreeMap::new(),
            authorizer: false,
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            sasl_mechanism_inter_broker: None,
            oauthbearer: BTreeMap::new(),
        }
    }
}

/// The settings a listener may have its own of.
const PER_LISTENER: &[&str] = &[
    "sasl.enabled.mechanisms",
    // Whether the listener asks for client certificates (Kafka's per-listener override).
    "ssl.client.auth",
    "plain.sasl.jaas.config",
    "scram-sha-256.sasl.jaas.config",
    "scram-sha-512.sasl.jaas.config",
    // Kafka wants both for OAUTHBEARER; the JAAS line has no options on a broker, and the
    // only handler is the one that validates JWTs (below).
    "oauthbearer.sasl.jaas.config",
    "oauthbearer.sasl.server.callback.handler.class",
];

/// The `sasl.oauthbearer.*` settings read.
const OAUTHBEARER_SETTINGS: &[&str] = &[
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
];

/// Reads the JWKS file again every `every` (`sasl.oauthbearer.jwks.endpoint.refresh.ms`,
/// Kafka's default an hour), on a blocking thread (a disk read), so that keys the identity
/// provider rotates in are taken and those it drops stop passing. A file that cannot be
/// read or holds no good keys is logged and the keys in use stay.
async fn refresh_jwks(
    validator: Arc<laminar_auth::oauthbearer::JwtValidator>,
    jwks: std::path::PathBuf,
    every: std::time::Duration,
) {
    loop {
        tokio::time::sleep(every).await;
        let path = jwks.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(path)).await;
        let outcome = match read {
            Ok(Ok(text)) => validator.replace_keys(&text).map(|_| ()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = outcome {
            crate::warn!(
                "reading the JWKS {} again: {e}; the keys in use stay",
                jwks.display()
            );
        }
    }
}

/// Kafka's handler that validates JWTs against a JWKS, the one OAUTHBEARER does here.
const OAUTHBEARER_VALIDATOR: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";

/// How OAUTHBEARER tokens are checked, from `sasl.oauthbearer.*`: the JWKS is read from a
/// file (`file:///path` or a path; Kafka also fetches it over HTTPS, which is not built).
fn oauth_validator(
    settings: &SecuritySettings,
) -> Result<
    (
        laminar_auth::oauthbearer::JwtValidator,
        std::path::PathBuf,
        std::time::Duration,
    ),
    String,
> {
    let get = |k: &str| {
        settings
            .oauthbearer
            .get(k)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    };
    let url = get("sasl.oauthbearer.jwks.endpoint.url")
        .ok_or("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (a file:// URL of the JWKS its tokens are signed with)")?;
    let path = match url.split_once("://") {
        Some(("file", path)) => path,
        Some((scheme, _)) => {
            return Err(format!(
                "sasl.oauthbearer.jwks.endpoint.url={url}: only file:// is supported, not {scheme}"
            ))
        }
        None => url,
    };
    let jwks = std::fs::read_to_string(path)
        .map_err(|e| format!("sasl.oauthbearer.jwks.endpoint.url {path}: {e}"))?;
    let audience = get("sasl.oauthbearer.expected.audience")
        .map(|a| {
            a.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let skew = match get("sasl.oauthbearer.clock.skew.seconds") {
        None => 30,
        Some(v) => v
            .parse()
            .map_err(|_| format!("sasl.oauthbearer.clock.skew.seconds: {v:?} is not a number of seconds"))?,
    };
    let refresh_ms = match get("sasl.oauthbearer.jwks.endpoint.refresh.ms") {
        None => 3_600_000,
        Some(v) => v.parse::<u64>().ok().filter(|ms| *ms > 0).ok_or_else(|| {
            format!("sasl.oauthbearer.jwks.endpoint.refresh.ms: {v:?} is not a positive number of ms")
        })?,
    };
    let validator = laminar_auth::oauthbearer::JwtValidator::new(
        &jwks,
        audience,
        get("sasl.oauthbearer.expected.issuer").map(str::to_string),
        get("sasl.oauthbearer.sub.claim.name")
            .unwrap_or("sub")
            .to_string(),
        skew,
    )
    .map_err(|e| format!("sasl.oauthbearer.jwks.endpoint.url {path}: {e}"))?;
    Ok((
        validator,
        std::path::PathBuf::from(path),
        std::time::Duration::from_millis(refresh_ms),
    ))
}

impl SecuritySettings {
    /// Sets `key` if it is one of these; `None` if it is not.
    pub fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let number = || {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("{key}: {value:?} is not a non-negative integer"))
        };
        let result = match key {
            "sasl.enabled.mechanisms" => {
                self.sasl_enabled_mechanisms = mechanisms(value);
                Ok(())
            }
            "connections.max.reauth.ms" => number().map(|v| self.connections_max_reauth_ms = v),
            "connection.failed.authentication.delay.ms" => {
                number().map(|v| self.failed_authentication_delay_ms = v)
            }
            "authorizer.class.name" => match value.trim() {
                "" => {
                    self.authorizer = false;
                    Ok(())
                }
                v if authz::STANDARD_AUTHORIZERS.contains(&v) => {
                    self.authorizer = true;
                    Ok(())
                }
                v => Err(format!(
                    "authorizer.class.name={v}: only Kafka's standard authorizer is supported ({})",
                    authz::STANDARD_AUTHORIZERS[0]
                )),
            },
            "super.users" => {
                self.super_users = value
                    .split(';')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_string)
                    .collect();
                Ok(())
            }
            "sasl.mechanism.inter.broker.protocol" => {
                self.sasl_mechanism_inter_broker = Some(value.trim().to_ascii_uppercase());
                Ok(())
            }
            "allow.everyone.if.no.acl.found" => value
                .trim()
                .parse::<bool>()
                .map(|v| self.allow_everyone_if_no_acl_found = v)
                .map_err(|_| format!("{key}: {value:?} is not true or false")),
            _ if OAUTHBEARER_SETTINGS.contains(&key) => {
                self.oauthbearer.insert(key.to_string(), value.to_string());
                Ok(())
            }
            _ if tls::SETTINGS.contains(&key) => {
                self.ssl.insert(key.to_string(), value.to_string());
                Ok(())
            }
            _ => {
                let rest = key.strip_prefix("listener.name.")?;
                let (listener, setting) = rest.split_once('.')?;
                if !PER_LISTENER.contains(&setting.to_ascii_lowercase().as_str()) {
                    return Some(Err(format!(
                        "unknown setting {key:?} (a listener may set {} of its own)",
                        PER_LISTENER.join(", ")
                    )));
                }
                self.per_listener
                    .entry(listener.to_ascii_uppercase())
                    .or_default()
                    .insert(setting.to_ascii_lowercase(), value.to_string());
                Ok(())
            }
        };
        Some(result)
    }

    /// A listener's own value of `setting`, if it set one.
    pub fn of_listener(&self, listener: &str, setting: &str) -> Option<&str> {
        self.per_listener
            .get(&listener.to_ascii_uppercase())
            .and_then(|s| s.get(setting))
            .map(String::as_str)
    }

    /// The mechanisms a SASL listener enables: its own, else the broker's.
    pub fn mechanisms_of(&self, listener: &str) -> Vec<String> {
        self.of_listener(listener, "sasl.enabled.mechanisms")
            .map(mechanisms)
            .unwrap_or_else(|| self.sasl_enabled_mechanisms.clone())
    }

    /// `name = value` lines for the startup log. JAAS configurations are not printed: they
    /// hold passwords.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "authorizer.class.name = {}",
                if self.authorizer {
                    authz::STANDARD_AUTHORIZERS[0]
                } else {
                    ""
                }
            ),
            format!("super.users = {}", self.super_users.join(";")),
            format!(
                "allow.everyone.if.no.acl.found = {}",
                self.allow_everyone_if_no_acl_found
            ),
            format!(
                "sasl.enabled.mechanisms = {}",
                self.sasl_enabled_mechanisms.join(",")
            ),
            format!("connections.max.reauth.ms = {}", self.connections_max_reauth_ms),
            format!(
                "connection.failed.authentication.delay.ms = {}",
                self.failed_authentication_delay_ms
            ),
        ];
        for (name, value) in &self.ssl {
            let shown = if is_secret(name) { HIDDEN } else { value.as_str() };
            lines.push(format!("{name} = {shown}"));
        }
        for (listener, settings) in &self.per_listener {
            for (name, value) in settings {
                let shown = if is_secret(name) { HIDDEN } else { value.as_str() };
                lines.push(format!(
                    "listener.name.{}.{name} = {shown}",
                    listener.to_ascii_lowercase()
                ));
            }
        }
        lines
    }
}

fn mechanisms(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_settings_use_kafkas_prefix() {
        let mut s = SecuritySettings::default();
        assert!(s.set("num.partitions", "1").is_none());
        s.set("sasl.enabled.mechanisms", "SCRAM-SHA-512")
            .unwrap()
            .unwrap();
        s.set(
            "listener.name.sasl_ssl.sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256",
        )
        .unwrap()
        .unwrap();
        s.set(
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw";"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.mechanisms_of("SASL_SSL"), ["PLAIN", "SCRAM-SHA-256"]);
        assert_eq!(s.mechanisms_of("OTHER"), ["SCRAM-SHA-512"]);
        assert!(s.of_listener("sasl_ssl", "plain.sasl.jaas.config").is_some());
        assert!(s.set("listener.name.x.ssl.bogus", "1").unwrap().is_err());
        assert!(s.describe().iter().all(|l| !l.contains("user_alice")));
    }

    #[test]
    fn no_secret_reaches_an_error_debug_or_the_startup_log() {
        use crate::config::BrokerConfig;
        // Issue 41, item 6: no secret reaches an error, `Debug` or the startup log.
        let mut secret = BrokerConfig::default();
        let jaas =
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="hunter2-secret";"#;
        secret
            .set("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas)
            .unwrap();
        secret
            .set("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----hunter2-key")
            .unwrap();
        secret.set("ssl.keystore.password", "hunter2-password").unwrap();
        let shown = format!("{secret:?}{}", secret.security.describe().join("\n"));
        assert!(!shown.contains("hunter2"), "{shown}");
        let toml_error = secret
            .apply_toml("\"ssl.keystore.password\" = \"hunter2-password\n")
            .unwrap_err();
        assert!(
            !toml_error.contains("hunter2") && toml_error.contains("line 1"),
            "{toml_error}"
        );
    }
}
