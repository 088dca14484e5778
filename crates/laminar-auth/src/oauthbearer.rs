//! OAUTHBEARER (RFC 7628, KIP-255 and KIP-768): the client's one message carries a JWT,
//! which is checked against the keys of a JWKS (`sasl.oauthbearer.jwks.endpoint.url`, a
//! file here): its signature (the key its header's `kid` names), its expiry and not-before
//! times (with `sasl.oauthbearer.clock.skew.seconds`), and, when configured, its audience and
//! issuer, as Kafka's `OAuthBearerValidatorCallbackHandler` checks them. The principal is
//! `User:` and the claim `sasl.oauthbearer.sub.claim.name` (`sub`).

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, DecodingKey, Validation};

/// How tokens are checked.
pub struct JwtValidator {
    keys: JwkSet,
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
        let keys: JwkSet = serde_json::from_str(jwks).map_err(|e| format!("the JWKS: {e}"))?;
        if keys.keys.is_empty() {
            return Err("the JWKS holds no key".into());
        }
        Ok(JwtValidator {
            keys,
            audience,
            issuer,
            sub_claim,
            clock_skew_s,
        })
    }

    /// Checks a compact JWT; why not, for the broker's log.
    pub fn validate(&self, token: &str) -> Result<Token, String> {
        let header = decode_header(token).map_err(|e| format!("the token's header: {e}"))?;
        let jwk = match &header.kid {
            Some(kid) => self
                .keys
                .find(kid)
                .ok_or_else(|| format!("no key {kid:?} in the JWKS"))?,
            // Without a key id, only a set of one key says which.
            None if self.keys.keys.len() == 1 => &self.keys.keys[0],
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
        validation.set_required_spec_claims(&["exp"]);
        if self.audience.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.audience);
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
        }
        let claims = decode::<serde_json::Value>(token, &key, &validation)
            .map_err(|e| format!("the token: {e}"))?
            .claims;
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
                .ok_or_else(|| format!("GS2 header field {a:?}"))?
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
            .ok_or_else(|| format!("a key-value pair without '=': {pair:?}"))?;
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

    const SECRET: &[u8] = b"a-secret-of-thirty-two-bytes-ok!";

    fn validator(audience: &[&str]) -> JwtValidator {
        use base64::Engine;
        let k = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(SECRET);
        let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"k1","alg":"HS256","k":"{k}"}}]}}"#);
        JwtValidator::new(
            &jwks,
            audience.iter().map(|s| s.to_string()).collect(),
            Some("issuer".into()),
            "sub".into(),
            30,
        )
        .unwrap()
    }

    fn token(claims: serde_json::Value, kid: &str, secret: &[u8]) -> String {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.into());
        encode(&header, &claims, &EncodingKey::from_secret(secret)).unwrap()
    }

    fn now_s() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn a_token_passes_only_signed_by_a_known_key_unexpired_for_its_audience_and_issuer() {
        let v = validator(&["laminar"]);
        let good =
            serde_json::json!({"sub": "alice", "exp": now_s() + 600, "aud": "laminar", "iss": "issuer"});
        assert_eq!(
            v.validate(&token(good.clone(), "k1", SECRET))
                .map(|t| t.principal),
            Ok("alice".to_string())
        );
        assert!(v
            .validate(&token(good.clone(), "k1", b"another-secret-of-32-bytes-long!"))
            .is_err());
        assert!(
            v.validate(&token(good.clone(), "k2", SECRET)).is_err(),
            "unknown key"
        );
        let mut expired = good.clone();
        expired["exp"] = (now_s() - 120).into();
        assert!(v.validate(&token(expired, "k1", SECRET)).is_err());
        let mut other_audience = good.clone();
        other_audience["aud"] = "elsewhere".into();
        assert!(v.validate(&token(other_audience, "k1", SECRET)).is_err());
        let mut other_issuer = good.clone();
        other_issuer["iss"] = "someone".into();
        assert!(v.validate(&token(other_issuer, "k1", SECRET)).is_err());
        let mut no_sub = good;
        no_sub.as_object_mut().unwrap().remove("sub");
        assert!(v.validate(&token(no_sub, "k1", SECRET)).is_err());
        assert!(v.validate("not.a.token").is_err());
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
