//! Who a client is ([`Principal`], Kafka's `KafkaPrincipal`), and the principal of a client
//! that authenticated with a TLS certificate, as Kafka names it:
//! the certificate's subject as an RFC 2253 distinguished name (Java's
//! `X500Principal.getName()`: most specific attribute first, `CN=alice,OU=eng,O=Example`),
//! mapped by `ssl.principal.mapping.rules` (`DEFAULT` keeps the name; `RULE:regex/replacement/`
//! with an optional `L` or `U` rewrites it; the first rule that matches applies).

use regex::Regex;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Kafka's `KafkaPrincipal`: a type and a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    /// Who a client is without authentication, as Kafka names it (`User:ANONYMOUS`).
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }

    /// `User:NAME`, as Kafka names an authenticated user.
    pub fn user(name: &str) -> Principal {
        Principal {
            kind: "User".into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// The subject of a DER certificate, as RFC 2253 writes it.
pub fn subject_dn(der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| format!("the client certificate: {e}"))?;
    let registry = x509_parser::objects::oid_registry();
    let mut rdns: Vec<String> = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let parts: Vec<String> = rdn
            .iter()
            .map(|atv| {
                let oid = atv.attr_type();
                let name = match x509_parser::objects::oid2abbrev(oid, registry) {
                    Ok("commonName") => "CN".to_string(),
                    Ok("organizationalUnitName") => "OU".to_string(),
                    Ok("organizationName") => "O".to_string(),
                    Ok("localityName") => "L".to_string(),
                    Ok("stateOrProvinceName") => "ST".to_string(),
                    Ok("countryName") => "C".to_string(),
                    Ok("streetAddress") => "STREET".to_string(),
                    Ok("domainComponent") => "DC".to_string(),
                    Ok("userId") => "UID".to_string(),
                    Ok(abbrev) if abbrev.len() <= 2 => abbrev.to_string(),
                    _ => oid.to_id_string(),
                };
                let value = atv.as_str().map(escape).unwrap_or_else(|_| {
                    // Not a string type: RFC 2253's `#` and the hex of its BER encoding.
                    let data = atv.attr_value().data;
                    format!("#{}", data.iter().map(|b| format!("{b:02x}")).collect::<String>())
                });
                format!("{name}={value}")
            })
            .collect();
        rdns.push(parts.join("+"));
    }
    // The certificate lists the least specific first; RFC 2253 writes it last.
    rdns.reverse();
    Ok(rdns.join(","))
}

/// RFC 2253's escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i + 1 == value.chars().count() && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct MappingRules(Vec<Rule>);

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

impl MappingRules {
    pub fn parse(value: &str) -> Result<MappingRules, String> {
        // Java's `$1` in a replacement is regex's `${1}`.
        let group_ref = Regex::new(r"\$(\d+)").expect("a valid pattern");
        let mut rules = Vec::new();
        let mut rest = value.trim();
        while !rest.is_empty() {
            rest = rest.trim_start_matches([',', ' ', '\n']);
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
                continue;
            }
            let Some(body) = rest.strip_prefix("RULE:") else {
                if rest.is_empty() {
                    break;
                }
                return Err(format!(
                    "ssl.principal.mapping.rules: {rest:?} is not DEFAULT or RULE:..."
                ));
            };
            // RULE:pattern/replacement/[LU], `/` inside escaped as `\/`.
            let mut fields = Vec::new();
            let mut field = String::new();
            let mut chars = body.char_indices().peekable();
            let mut end = body.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' if chars.peek().is_some_and(|(_, n)| *n == '/') => {
                        field.push('/');
                        chars.next();
                    }
                    '/' => {
                        fields.push(std::mem::take(&mut field));
                        if fields.len() == 2 {
                            end = i + 1;
                            break;
                        }
                    }
                    _ => field.push(c),
                }
            }
            if fields.len() != 2 {
                return Err(format!(
                    "ssl.principal.mapping.rules: RULE:{body} is not RULE:pattern/replacement/"
                ));
            }
            let mut after = &body[end..];
            let case = match after.chars().next() {
                Some(c @ ('L' | 'U')) => {
                    after = &after[1..];
                    Some(c)
                }
                _ => None,
            };
            let pattern = Regex::new(&format!("^(?:{})$", fields[0]))
                .map_err(|e| format!("ssl.principal.mapping.rules: {}: {e}", fields[0]))?;
            let replacement = group_ref.replace_all(&fields[1], "$${$1}").into_owned();
            rules.push(Rule::Replace {
                pattern,
                replacement,
                case,
            });
            rest = after;
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(MappingRules(rules))
    }

    /// The principal name of a certificate subject `dn`; `None` when no rule matches it
    /// (Kafka's NoMatchingRule: the client is refused, not taken as its whole DN).
    pub fn apply(&self, dn: &str) -> Option<String> {
        for rule in &self.0 {
            match rule {
                Rule::Default => return Some(dn.to_string()),
                Rule::Replace {
                    pattern,
                    replacement,
                    case,
                } => {
                    if pattern.is_match(dn) {
                        let name = pattern.replace(dn, replacement.as_str()).into_owned();
                        return Some(match case {
                            Some('L') => name.to_lowercase(),
                            Some('U') => name.to_uppercase(),
                            _ => name,
                        });
                    }
                }
            }
        }
        None
    }
}

impl Default for MappingRules {
    fn default() -> MappingRules {
        MappingRules(vec![Rule::Default])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_of_an_rcgen_certificate() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationalUnitName, "Eng");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Alice, Jr");
        let cert = params.self_signed(&key).unwrap();
        // rcgen encodes the common name first (and the rest in their order): RFC 2253 writes
        // the last encoded first.
        assert_eq!(subject_dn(cert.der()).unwrap(), r"OU=Eng,O=Example,CN=Alice\, Jr");
    }

    #[test]
    fn kafkas_mapping_rules() {
        let dn = "CN=Alice,OU=Eng,O=Example,C=US";
        assert_eq!(MappingRules::default().apply(dn).as_deref(), Some(dn));
        let rules = MappingRules::parse(r"RULE:^CN=(.*?),OU=Eng.*$/$1/L, DEFAULT").unwrap();
        assert_eq!(rules.apply(dn).as_deref(), Some("alice"));
        assert_eq!(rules.apply("CN=Bob,OU=Ops").as_deref(), Some("CN=Bob,OU=Ops"));
        let slash = MappingRules::parse(r"RULE:^CN=([^,]*),.*$/users\/$1/U").unwrap();
        assert_eq!(slash.apply(dn).as_deref(), Some("USERS/ALICE"));
        // Issue 41, item 9: no rule matches and no DEFAULT: refused, as Kafka's NoMatchingRule.
        let only_eng = MappingRules::parse(r"RULE:^CN=(.*?),OU=Eng.*$/$1/").unwrap();
        assert_eq!(only_eng.apply("CN=Bob,OU=Ops"), None);
        assert!(MappingRules::parse("RULE:broken").is_err());
        assert!(MappingRules::parse("SOMETHING").is_err());
        assert_eq!(escape("a,b+c"), r"a\,b\+c");
    }
}
