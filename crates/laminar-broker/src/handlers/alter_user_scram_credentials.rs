//! AlterUserScramCredentials v0 (`kafka-configs --alter --add-config
//! 'SCRAM-SHA-512=[iterations=4096,password=...]' --entity-type users`): the client salts the
//! password itself; the broker keeps StoredKey and ServerKey derived from the salted password
//! (and the salt and iteration count), in the cluster metadata, so that every broker
//! authenticates the user. Nothing from which a client could log in is stored. Durable
//! before it is answered.

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::AlterUserScramCredentialsResponse;
use laminar_auth::scram::{MAX_ITERATIONS, MIN_ITERATIONS};
use laminar_auth::{ScramKeys, ScramMechanism};
use laminar_cluster::image::Command;
use laminar_cluster::scram::ScramCredential;
use laminar_cluster::Cluster;
use laminar_protocol::requests::AlterUserScramCredentialsRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::RequestContext;

pub async fn handle(cluster: &Cluster, ctx: &RequestContext, r: AlterUserScramCredentialsRequest) -> Encoded {
    let image = cluster.image();
    // Per user, the first error found; a user with any error has none of its changes made.
    let mut errors: Vec<(String, ErrorCode, String)> = Vec::new();
    let mut refuse = |user: &str, code: ErrorCode, why: String| {
        if !errors.iter().any(|(u, _, _)| u == user) {
            errors.push((user.to_string(), code, why));
        }
    };
    let mut named: Vec<(&str, i8)> = Vec::new();
    for (user, mechanism) in r
        .deletions
        .iter()
        .map(|(u, m)| (u.as_str(), *m))
        .chain(r.upsertions.iter().map(|u| (u.user.as_str(), u.mechanism)))
    {
        if named.contains(&(user, mechanism)) {
            refuse(
                user,
                ErrorCode::DuplicateResource,
                format!("A user credential cannot be altered twice in the same request: {user}"),
            );
        }
        named.push((user, mechanism));
        if user.is_empty() {
            refuse(
                user,
                ErrorCode::UnacceptableCredential,
                "Username must not be empty".into(),
            );
        }
        if ScramMechanism::from_kafka_type(mechanism).is_none() {
            refuse(
                user,
                ErrorCode::UnsupportedSaslMechanism,
                format!("Unknown SCRAM mechanism type {mechanism}"),
            );
        }
    }
    let mut deletions = Vec::new();
    for (user, mechanism) in &r.deletions {
        let Some(m) = ScramMechanism::from_kafka_type(*mechanism) else {
            continue;
        };
        if !image
            .scram
            .iter()
            .any(|c| &c.user == user && c.mechanism == m.name())
        {
            refuse(
                user,
                ErrorCode::ResourceNotFound,
                format!("Attempt to delete a user credential that does not exist: {user}"),
            );
        }
        deletions.push((user.clone(), m.name().to_string()));
    }
    let mut upsertions = Vec::new();
    for u in &r.upsertions {
        let Some(m) = ScramMechanism::from_kafka_type(u.mechanism) else {
            continue;
        };
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            refuse(
                &u.user,
                ErrorCode::UnacceptableCredential,
                format!(
                    "Iterations {} must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}",
                    u.iterations
                ),
            );
            continue;
        }
        if u.salt.is_empty() || u.salted_password.len() != m.hash_len() {
            refuse(
                &u.user,
                ErrorCode::UnacceptableCredential,
                "Salt or salted password missing or of the wrong length".into(),
            );
            continue;
        }
        let keys = ScramKeys::from_salted_password(m, &u.salted_password, &u.salt, iterations);
        upsertions.push(ScramCredential {
            user: u.user.clone(),
            mechanism: m.name().to_string(),
            iterations,
            salt: keys.salt,
            stored_key: keys.stored_key,
            server_key: keys.server_key,
        });
    }
    let refused = |user: &str| errors.iter().any(|(u, _, _)| u == user);
    deletions.retain(|(u, _)| !refused(u));
    upsertions.retain(|c| !refused(&c.user));
    let written = if deletions.is_empty() && upsertions.is_empty() {
        Ok(())
    } else {
        let changed = upsertions.clone();
        let done = cluster
            .write(Command::AlterScramCredentials {
                deletions,
                upsertions,
            })
            .await
            .and_then(|r| r.into_result());
        if done.is_ok() {
            // Answered once this broker authenticates with them.
            cluster
                .wait_for(|i| changed.iter().all(|c| i.scram.contains(c)))
                .await;
        }
        done.map_err(|e| e.to_string())
    };
    let mut resp = AlterUserScramCredentialsResponse::default();
    let mut users: Vec<&str> = named.iter().map(|(u, _)| *u).collect();
    users.dedup();
    for user in users {
        if resp.results.iter().any(|x| x.user.as_str() == user) {
            continue;
        }
        let mut result = AlterUserScramCredentialsResult::default();
        result.user = sb(user);
        if let Some((_, code, why)) = errors.iter().find(|(u, _, _)| u == user) {
            result.error_code = code.code();
            result.error_message = Some(sb(why));
        } else if let Err(e) = &written {
            result.error_code = ErrorCode::UnknownServerError.code();
            result.error_message = Some(sb(e));
        }
        resp.results.push(result);
    }
    responses::encode(
        ApiKey::AlterUserScramCredentials,
        ctx.api_version,
        ctx.correlation_id,
        &resp,
    )
}
