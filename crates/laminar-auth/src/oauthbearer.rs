//! OAUTHBEARER (RFC 7628, KIP-255 and KIP-768): the client's one message carries a JWT,
//! which is checked against the keys of a JWKS (`sasl.oauthbearer.jwks.endpoint.url`, a
//! file here, read again every `sasl.oauthbearer.jwks.endpoint.refresh.ms` by the broker):
//! its signature (the key its header's `kid` names; asymmetric keys only, as a key the broker
//! can check with must not be one it could sign with), its expiry, issue and not-before
//! times (`exp` and `iat` required; `sasl.oauthbearer.clock.skew.seconds`), and, when
//! configured, its audience and issuer, which the token must then carry, as Kafka's
//! `OAuthBearerValidatorCallbackHandler` requires them. The principal is `User:` and the
//! claim `sasl.oauthbearer.sub.claim.name` (`sub`).

use std::sync::{Arc, RwLock};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};

/// How tokens are checked.
pub struct JwtValidator {
    /// Replaced whole when the JWKS is read again ([`JwtValidator::replace_keys`]).
    keys: RwLock<Arc<JwkSet>>,
    audience: Vec<String>,
    issuer: Option<String>,
    sub_claim: String,
    clock_skew_s: u64,
}

/// A token that passed: whose it is and when it expires (seconds since the epoch).
#[derive(Debug, PartialEq, Eq)]
pub struct Token {
    pub principal: String,
    pub expires_s: u64,
}

impl JwtValidator {
    /// `jwks`: the JSON of a JWK set.
    pub fn new(
        jwks: &str,
        audience: Vec<String>,
        issuer: Option<String>,
        sub_claim: String,
        clock_skew_s: u64,
    ) -> Result<JwtValidator, String> {
        Ok(JwtValidator {
            keys: RwLock::new(Arc::new(parse_keys(jwks)?)),
            audience,
            issuer,
            sub_claim,
            clock_skew_s,
        })
    }

    /// Takes the keys of a JWKS read again (the identity provider rotated them). A JWKS
    /// that is not good (no key, or a symmetric one) is refused and the keys in use stay.
    /// Returns how many keys it holds.
    pub fn replace_keys(&self, jwks: &str) -> Result<usize, String> {
        let keys = parse_keys(jwks)?;
        let n = keys.keys.len();
        *self.keys.write().unwrap() = Arc::new(keys);
        Ok(n)
    }

    /// Checks a compact JWT; why not, for the broker's log (never the token itself).
    pub fn validate(&self, token: &str) -> Result<Token, String> {
        let header = decode_header(token).map_err(|e| format!("the token's header: {e}"))?;
        if matches!(header.alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(format!(
                "the token is signed with {:?}, a symmetric algorithm",
                header.alg
            ));
        }
        let keys = self.keys.read().unwrap().clone();
        let jwk = match &header.kid {
            Some(kid) => keys
                .find(kid)
                .ok_or_else(|| format!("no key {kid:?} in the JWKS"))?,
            // Without a key id, only a set of one key says which.
            None if keys.keys.len() == 1 => &keys.keys[0],
            None => return Err("the token names no key (kid) and the JWKS holds several".into()),
        };
        if let Some(alg) = jwk.common.key_algorithm {
            if format!("{alg:?}") != format!("{:?}", header.alg) {
                return Err(format!(
                    "the token is signed with {:?}, its key is for {alg:?}",
                    header.alg
                ));
            }
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("the JWKS key: {e}"))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.clock_skew_s;
        validation.validate_nbf = true;
        // As Kafka's validator: `exp` and `iat` always; `aud` and `iss` when expected (a
        // token without them does not pass for being silent).
        // (jsonwebtoken checks `exp`, `aud`, `iss` presence; `iat`'s is checked below.)
        let mut required = vec!["exp"];
        if self.audience.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.audience);
            required.push("aud");
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        let claims = decode::<serde_json::Value>(token, &key, &validation)
            .map_err(|e| format!("the token: {e}"))?
            .claims;
        if !claims.get("iat").is_some_and(|iat| iat.is_number()) {
            return Err("the token has no iat (issued-at) claim".into());
        }
        let principal = claims
            .get(&self.sub_claim)
            .and_then(|s| s.as_str())
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("the token has no {:?} claim", self.sub_claim))?
            .to_string();
        let expires_s = claims.get("exp").and_then(|e| e.as_u64()).unwrap_or(0);
        Ok(Token { principal, expires_s })
    }
}

/// A JWKS's keys: at least one, none symmetric (an `oct` key checks HMAC signatures, which
/// whoever holds it can also make).
fn parse_keys(jwks: &str) -> Result<JwkSet, String> {
    let keys: JwkSet = serde_json::from_str(jwks).map_err(|e| format!("the JWKS: {e}"))?;
    if keys.keys.is_empty() {
        return Err("the JWKS holds no key".into());
    }
    if let Some(k) = keys
        .keys
        .iter()
        .find(|k| matches!(k.algorithm, AlgorithmParameters::OctetKey(_)))
    {
        return Err(format!(
            "the JWKS holds a symmetric (oct) key{}: only asymmetric keys (RSA, EC, OKP) are taken",
            k.common
                .key_id
                .as_deref()
                .map(|id| format!(" {id:?}"))
                .unwrap_or_default()
        ));
    }
    Ok(keys)
}

/// The client's first message (RFC 7628 section 3.1): a GS2 header (`n,,` or
/// `n,a=authzid,`), then `\x01`-separated key-value pairs, one `auth=Bearer <token>`, and an
/// empty one at the end. (authzid, token).
pub fn initial_response(message: &[u8]) -> Result<(Option<String>, String), String> {
    let text = std::str::from_utf8(message).map_err(|_| "not UTF-8".to_string())?;
    let rest = text
        .strip_prefix("n,")
        .ok_or_else(|| "no GS2 header (n,...)".to_string())?;
    let (authzid, rest) = rest
        .split_once(',')
        .ok_or_else(|| "an unterminated GS2 header".to_string())?;
    let authzid = match authzid {
        "" => None,
        a => Some(
            a.strip_prefix("a=")
                .ok_or_else(|| "a GS2 header field other than a=".to_string())?
                .to_string(),
        ),
    };
    let pairs = rest
        .strip_prefix('\x01')
        .and_then(|r| r.strip_suffix("\x01\x01"))
        .ok_or_else(|| "the key-value pairs are not framed by \\x01".to_string())?;
    let mut token = None;
    for pair in pairs.split('\x01') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| "a key-value pair without '='".to_string())?;
        if key == "auth" {
            let bearer = value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
                .ok_or_else(|| "auth is not a Bearer token".to_string())?;
            token = Some(bearer.trim().to_string());
        }
        // Other keys are SASL extensions (KIP-342): none is understood here, none needed.
    }
    let token = token.ok_or_else(|| "no auth=Bearer pair".to_string())?;
    Ok((authzid, token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};

    /// A test identity provider's ES256 key: (its signing key, its JWK).
    fn idp(kid: &str) -> (EncodingKey, String) {
        use base64::Engine;
        let pair = rcgen::KeyPair::generate().unwrap(); // ECDSA P-256
        let point = pair.public_key_raw(); // 0x04, x, y
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = format!(
            r#"{{"kty":"EC","crv":"P-256","kid":"{kid}","alg":"ES256","x":"{}","y":"{}"}}"#,
            b64(&point[1..33]),
            b64(&point[33..])
        );
        (
            EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap(),
            jwk,
        )
    }

    fn validator(jwks: &str, audience: &[&str], issuer: Option<&str>) -> JwtValidator {
        JwtValidator::new(
            jwks,
            audience.iter().map(|s| s.to_string()).collect(),
            issuer.map(str::to_string),
            "sub".into(),
            30,
        )
        .unwrap()
    }

    fn token(claims: &serde_json::Value, kid: &str, key: &EncodingKey) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        encode(&header, claims, key).unwrap()
    }

    fn now_s() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn a_token_passes_only_signed_by_a_known_key_unexpired_for_its_audience_and_issuer() {
        let (key, jwk) = idp("k1");
        let (other_key, _) = idp("k1");
        let v = validator(&format!(r#"{{"keys":[{jwk}]}}"#), &["laminar"], Some("issuer"));
        let good = serde_json::json!({
            "sub": "alice", "exp": now_s() + 600, "iat": now_s(), "aud": "laminar", "iss": "issuer"
        });
        assert_eq!(
            v.validate(&token(&good, "k1", &key)).map(|t| t.principal),
            Ok("alice".to_string())
        );
        assert!(
            v.validate(&token(&good, "k1", &other_key)).is_err(),
            "another key's signature"
        );
        assert!(v.validate(&token(&good, "k2", &key)).is_err(), "unknown key");
        let without = |claim: &str| {
            let mut c = good.clone();
            c.as_object_mut().unwrap().remove(claim);
            c
        };
        let with = |claim: &str, value: serde_json::Value| {
            let mut c = good.clone();
            c[claim] = value;
            c
        };
        for (why, claims) in [
            ("expired", with("exp", (now_s() - 120).into())),
            ("another audience", with("aud", "elsewhere".into())),
            ("another issuer", with("iss", "someone".into())),
            ("no sub", without("sub")),
            // Issue 41, item 5: what is expected must be there, and iat always.
            ("no aud, one expected", without("aud")),
            ("no iss, one expected", without("iss")),
            ("no iat", without("iat")),
        ] {
            assert!(v.validate(&token(&claims, "k1", &key)).is_err(), "{why}");
        }
        assert!(v.validate("not.a.token").is_err());
    }

    #[test]
    fn symmetric_keys_are_refused_and_a_new_jwks_replaces_the_keys() {
        use base64::Engine;
        let secret = b"a-secret-of-thirty-two-bytes-ok!";
        let k = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
        let oct = format!(r#"{{"kty":"oct","kid":"h1","alg":"HS256","k":"{k}"}}"#);
        let oct_jwks = format!(r#"{{"keys":[{oct}]}}"#);
        assert!(JwtValidator::new(&oct_jwks, vec![], None, "sub".into(), 30).is_err());
        let (key, jwk) = idp("k1");
        let v = validator(&format!(r#"{{"keys":[{jwk}]}}"#), &[], None);
        // An HMAC token, whatever key it names, is refused.
        let claims = serde_json::json!({"sub": "alice", "exp": now_s() + 600, "iat": now_s()});
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        let hmac = encode(&header, &claims, &EncodingKey::from_secret(secret)).unwrap();
        assert!(v.validate(&hmac).is_err());
        // The provider rotates its key: tokens of the new one pass once the JWKS is read again,
        // and a bad JWKS leaves the keys as they were.
        let (new_key, new_jwk) = idp("k2");
        assert!(v.validate(&token(&claims, "k2", &new_key)).is_err());
        assert!(v.replace_keys(&oct_jwks).is_err());
        assert!(v.validate(&token(&claims, "k1", &key)).is_ok());
        assert_eq!(v.replace_keys(&format!(r#"{{"keys":[{new_jwk}]}}"#)), Ok(1));
        assert!(v.validate(&token(&claims, "k2", &new_key)).is_ok());
        assert!(
            v.validate(&token(&claims, "k1", &key)).is_err(),
            "the old key is gone"
        );
    }

    #[test]
    fn a_malformed_message_is_refused_without_repeating_it() {
        for bad in [
            &b"n,,auth=Bearer eyJhbGciOi.secret-parteyJhbGciOi-fragment"[..],
            b"n,zeyJhbGciOi,auth=Bearer t",
        ] {
            let e = initial_response(bad).unwrap_err();
            assert!(!e.contains("eyJ"), "{e}");
        }
    }

    #[test]
    fn the_initial_response_is_parsed_as_rfc_7628_frames_it() {
        assert_eq!(
            initial_response(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01"),
            Ok((None, "abc.def.ghi".to_string()))
        );
        assert_eq!(
            initial_response(b"n,a=alice,\x01host=x\x01auth=Bearer t\x01ext=1\x01\x01"),
            Ok((Some("alice".to_string()), "t".to_string()))
        );
        for bad in [
            &b"y,,\x01auth=Bearer t\x01\x01"[..],
            b"n,,auth=Bearer t",
            b"n,,\x01host=x\x01\x01",
            b"n,,\x01auth=Basic t\x01\x01",
        ] {
            assert!(initial_response(bad).is_err(), "{bad:?}");
        }
    }
}
