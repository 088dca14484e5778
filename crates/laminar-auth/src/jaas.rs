//! The part of a JAAS configuration a Kafka broker's listener carries that Laminar reads:
//! `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";`
//! gives PLAIN's users (`user_NAME="password"`), as Kafka's PlainServerCallbackHandler reads
//! them.

use std::collections::BTreeMap;

/// The options of a JAAS login module entry (`name="value"` pairs after `required`).
pub fn options(config: &str) -> Result<BTreeMap<String, String>, String> {
    let body = config.trim().trim_end_matches(';').trim();
    let mut words = body.splitn(3, char::is_whitespace);
    let _module = words
        .next()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| "no login module".to_string())?;
    let flag = words.next().unwrap_or("");
    // No error repeats the configuration's text: it holds passwords.
    if !["required", "requisite", "sufficient", "optional"].contains(&flag) {
        return Err("the word after the login module is not a JAAS control flag (required, requisite, sufficient, optional)".into());
    }
    let mut rest = words.next().unwrap_or("").trim();
    let mut out = BTreeMap::new();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=').ok_or_else(|| {
            format!(
                "an option after {} is not name=\"value\"",
                out.keys().last().map_or("the control flag", String::as_str)
            )
        })?;
        let after = after.trim_start();
        let value_and_rest = after
            .strip_prefix('"')
            .ok_or_else(|| format!("the value of {} is not quoted", name.trim()))?;
        let end = value_and_rest
            .find('"')
            .ok_or_else(|| format!("the value of {} is not closed", name.trim()))?;
        out.insert(name.trim().to_string(), value_and_rest[..end].to_string());
        rest = value_and_rest[end + 1..].trim_start();
    }
    Ok(out)
}

/// PLAIN's users: each `user_NAME="password"` option.
pub fn plain_users(config: &str) -> Result<BTreeMap<String, String>, String> {
    Ok(options(config)?
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_error_repeats_the_configuration() {
        for config in [
            r#"M required user_bob="hunter2-secret" oops"#,
            r#"M user_bob="hunter2-secret";"#,
            r#"M required user_bob=hunter2-secret"#,
        ] {
            let e = options(config).unwrap_err();
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn kafkas_plain_login_module_entry() {
        let config = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="admin-secret"
            user_admin="admin-secret" user_alice="with spaces and = sign";"#;
        let users = plain_users(config).unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "with spaces and = sign");
        assert_eq!(options(config).unwrap()["username"], "admin");
        assert!(options("Module maybe a=\"b\";").is_err());
        assert!(options("Module required a=b;").is_err());
        assert!(options("Module required a=\"b;").is_err());
    }
}
