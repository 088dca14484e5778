//! Kafka's listeners: `listeners` names each address the broker accepts connections on
//! (`NAME://host:port,...`), `listener.security.protocol.map` gives each name its security
//! protocol, `advertised.listeners` what clients are told to connect to, and
//! `inter.broker.listener.name` the one other brokers use. A client is told the endpoints of
//! the listener it came in on, so that clients inside and outside a network each get
//! addresses they can reach. The older `host:port` form is one listener named PLAINTEXT.

use std::net::SocketAddr;

/// Kafka's `SecurityProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// One `NAME://host:port` of `listeners` or `advertised.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerAddr {
    pub name: String,
    /// Empty: every interface (for `listeners`).
    pub host: String,
    pub port: u16,
}

/// The listener settings as given.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenerSettings {
    pub listeners: Vec<ListenerAddr>,
    /// Empty: each listener advertises where it is bound.
    pub advertised: Vec<ListenerAddr>,
    pub protocol_map: Vec<(String, SecurityProtocol)>,
    pub inter_broker: Option<String>,
    /// `controller.listener.names`: the name whose security protocol the controller port
    /// (`controller.quorum.voters`) speaks, PLAINTEXT or SSL; none: PLAINTEXT.
    pub controller: Option<String>,
}

/// The name the older `host:port` form gives its one listener.
pub const DEFAULT_LISTENER: &str = "PLAINTEXT";

impl Default for ListenerSettings {
    fn default() -> ListenerSettings {
        ListenerSettings {
            listeners: vec![ListenerAddr {
                name: DEFAULT_LISTENER.into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            advertised: Vec::new(),
            // Kafka's default map: each protocol's name is a listener name of that protocol.
            protocol_map: [
                SecurityProtocol::Plaintext,
                SecurityProtocol::Ssl,
                SecurityProtocol::SaslPlaintext,
                SecurityProtocol::SaslSsl,
            ]
            .into_iter()
            .map(|p| (p.name().to_string(), p))
            .collect(),
            inter_broker: None,
            controller: None,
        }
    }
}

impl ListenerSettings {
    /// One plaintext listener at `addr` (`--listen`).
    pub fn plaintext(addr: SocketAddr) -> ListenerSettings {
        ListenerSettings {
            listeners: vec![ListenerAddr {
                name: DEFAULT_LISTENER.into(),
                host: addr.ip().to_string(),
                port: addr.port(),
            }],
            ..ListenerSettings::default()
        }
    }

    pub fn set_listeners(&mut self, value: &str) -> Result<(), String> {
        self.listeners = parse_list("listeners", value)?;
        if self.listeners.is_empty() {
            return Err("listeners: none given".into());
        }
        Ok(())
    }

    pub fn set_advertised(&mut self, value: &str) -> Result<(), String> {
        self.advertised = parse_list("advertised.listeners", value)?;
        Ok(())
    }

    /// `listener.security.protocol.map`: `NAME:PROTOCOL,...`.
    pub fn set_protocol_map(&mut self, value: &str) -> Result<(), String> {
        let key = "listener.security.protocol.map";
        let mut map = Vec::new();
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, protocol) = item
                .split_once(':')
                .ok_or_else(|| format!("{key}: {item:?} is not NAME:PROTOCOL"))?;
            let protocol = SecurityProtocol::parse(protocol.trim())
                .ok_or_else(|| format!("{key}: {protocol:?} is not a security protocol"))?;
            map.push((check_name(key, name.trim())?, protocol));
        }
        self.protocol_map = map;
        Ok(())
    }

    /// Kafka's list takes several names; the controller port has one protocol, the first's.
    pub fn set_controller(&mut self, value: &str) -> Result<(), String> {
        let first = value.split(',').next().unwrap_or("").trim();
        self.controller = Some(check_name("controller.listener.names", first)?);
        Ok(())
    }

    /// The controller port's security protocol.
    pub fn controller_protocol(&self) -> Result<SecurityProtocol, String> {
        match &self.controller {
            None => Ok(SecurityProtocol::Plaintext),
            Some(name) => self.protocol(name).ok_or_else(|| {
                format!("controller.listener.names={name} has no security protocol in listener.security.protocol.map")
            }),
        }
    }

    pub fn set_inter_broker(&mut self, value: &str) -> Result<(), String> {
        self.inter_broker = Some(check_name("inter.broker.listener.name", value.trim())?);
        Ok(())
    }

    pub fn protocol(&self, name: &str) -> Option<SecurityProtocol> {
        self.protocol_map
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, p)| p)
    }

    /// Checks the settings together: every listener has a protocol, advertised names are
    /// listeners', the inter-broker listener is one.
    pub fn validate(&self) -> Result<(), String> {
        for l in &self.listeners {
            if self.protocol(&l.name).is_none() {
                return Err(format!(
                    "listener {} has no security protocol in listener.security.protocol.map",
                    l.name
                ));
            }
        }
        for a in &self.advertised {
            if !self.listeners.iter().any(|l| l.name == a.name) {
                return Err(format!(
                    "advertised.listeners names {}, which is not in listeners",
                    a.name
                ));
            }
        }
        if let Some(name) = &self.inter_broker {
            if !self.listeners.iter().any(|l| &l.name == name) {
                return Err(format!("inter.broker.listener.name {name} is not in listeners"));
            }
        }
        Ok(())
    }

    /// The listeners once bound (`bound[i]` is where `listeners[i]` is), with what each
    /// advertises: the advertised address of its name, else its own (its bound port when it
    /// asked for port 0).
    pub fn resolve(&self, bound: &[SocketAddr]) -> Vec<Listener> {
        debug_assert_eq!(bound.len(), self.listeners.len());
        self.listeners
            .iter()
            .zip(bound)
            .map(|(l, at)| {
                let (host, port) = match self.advertised.iter().find(|a| a.name == l.name) {
                    Some(a) => (a.host.clone(), if a.port == 0 { at.port() } else { a.port }),
                    None => (at.ip().to_string(), at.port()),
                };
                Listener {
                    name: l.name.clone(),
                    protocol: self.protocol(&l.name).expect("validated"),
                    bound: *at,
                    host,
                    port,
                }
            })
            .collect()
    }

    /// The index of the listener other brokers use: `inter.broker.listener.name`, else the
    /// one named PLAINTEXT (Kafka's default `security.inter.broker.protocol`), else the
    /// first.
    pub fn inter_broker_index(&self) -> usize {
        let named = |name: &str| self.listeners.iter().position(|l| l.name == name);
        self.inter_broker
            .as_deref()
            .and_then(named)
            .or_else(|| named(DEFAULT_LISTENER))
            .unwrap_or(0)
    }

    /// The settings as `listeners = ...` lines, for the startup log.
    pub fn describe(&self) -> Vec<String> {
        let list = |l: &[ListenerAddr]| {
            l.iter()
                .map(|a| format!("{}://{}:{}", a.name, a.host, a.port))
                .collect::<Vec<_>>()
                .join(",")
        };
        let map = self
            .protocol_map
            .iter()
            .map(|(n, p)| format!("{n}:{}", p.name()))
            .collect::<Vec<_>>()
            .join(",");
        vec![
            format!("listeners = {}", list(&self.listeners)),
            format!("advertised.listeners = {}", list(&self.advertised)),
            format!("listener.security.protocol.map = {map}"),
            format!(
                "inter.broker.listener.name = {}",
                self.listeners[self.inter_broker_index()].name
            ),
        ]
    }
}

/// A bound listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bound: SocketAddr,
    /// What clients that come in on it are told to connect to.
    pub host: String,
    pub port: u16,
}

fn check_name(key: &str, name: &str) -> Result<String, String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!("{key}: {name:?} is not a listener name"));
    }
    Ok(name.to_ascii_uppercase())
}

/// `NAME://host:port,...`; an item without `NAME://` is named PLAINTEXT (the older form).
fn parse_list(key: &str, value: &str) -> Result<Vec<ListenerAddr>, String> {
    let mut out: Vec<ListenerAddr> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, rest) = match item.split_once("://") {
            Some((name, rest)) => (check_name(key, name)?, rest),
            None => (DEFAULT_LISTENER.to_string(), item),
        };
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("{key}: {item:?} has no port"))?;
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("{key}: {item:?} has a bad port"))?;
        // `[::1]` for an IPv6 address, as Kafka writes it.
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        if out.iter().any(|l| l.name == name) {
            return Err(format!("{key}: listener {name} is named twice"));
        }
        out.push(ListenerAddr { name, host, port });
    }
    Ok(out)
}

/// `max.connections.per.ip.overrides`: `ip:count,...` (`[v6]:count` for IPv6), as Kafka
/// takes it (addresses only: no host name is resolved).
pub fn parse_ip_overrides(value: &str) -> Result<std::collections::HashMap<std::net::IpAddr, usize>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let bad = || format!("max.connections.per.ip.overrides: {item:?} is not ip:count");
            let (ip, count) = item.rsplit_once(':').ok_or_else(bad)?;
            let ip: std::net::IpAddr = ip
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .map_err(|_| bad())?;
            let count: usize = count.parse().map_err(|_| bad())?;
            Ok((ip.to_canonical(), count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_listener_settings_parse_and_resolve() {
        let mut s = ListenerSettings::default();
        s.set_listeners("PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:9093,internal://[::1]:9094")
            .unwrap();
        assert!(
            s.validate().unwrap_err().contains("INTERNAL"),
            "no protocol for it yet"
        );
        s.set_protocol_map("PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SSL")
            .unwrap();
        s.set_advertised("SASL_SSL://broker.example:19093").unwrap();
        s.set_inter_broker("INTERNAL").unwrap();
        s.validate().unwrap();
        assert_eq!(s.listeners[2].host, "::1");
        let bound: Vec<SocketAddr> = ["127.0.0.1:40000", "127.0.0.1:9093", "[::1]:9094"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let l = s.resolve(&bound);
        assert_eq!(
            (l[0].host.as_str(), l[0].port, l[0].protocol),
            ("127.0.0.1", 40000, SecurityProtocol::Plaintext)
        );
        assert_eq!((l[1].host.as_str(), l[1].port), ("broker.example", 19093));
        assert_eq!(l[2].protocol, SecurityProtocol::Ssl);
        assert_eq!(s.inter_broker_index(), 2);

        // The older form: one PLAINTEXT listener.
        let mut old = ListenerSettings::default();
        old.set_listeners("127.0.0.1:19999").unwrap();
        old.set_advertised("broker.example:9092").unwrap();
        old.validate().unwrap();
        let l = old.resolve(&["127.0.0.1:19999".parse().unwrap()]);
        assert_eq!(
            (l[0].name.as_str(), l[0].host.as_str(), l[0].port),
            ("PLAINTEXT", "broker.example", 9092)
        );

        for bad in ["X://h", "X://h:p", "A://h:1,A://h:2", "BAD NAME://h:1"] {
            assert!(ListenerSettings::default().set_listeners(bad).is_err(), "{bad}");
        }
        assert!(s.set_protocol_map("A:TLS").is_err());
        s.set_advertised("OTHER://h:1").unwrap();
        assert!(s.validate().is_err());
    }
}
