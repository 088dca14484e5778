//! DescribeUserScramCredentials v0 (`kafka-configs --describe --entity-type users`): each
//! user's SCRAM mechanisms and iteration counts, never a key or salt.

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::DescribeUserScramCredentialsResponse;
use laminar_auth::ScramMechanism;
use laminar_cluster::Cluster;
use laminar_protocol::requests::DescribeUserScramCredentialsRequest;
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::RequestContext;

pub fn handle(cluster: &Cluster, ctx: &RequestContext, r: DescribeUserScramCredentialsRequest) -> Encoded {
    let image = cluster.image();
    let mut resp = DescribeUserScramCredentialsResponse::default();
    let users: Vec<String> = match r.users {
        Some(users) if !users.is_empty() => users,
        // All of them: the users that have a credential.
        _ => {
            let mut all: Vec<String> = image.scram.iter().map(|c| c.user.clone()).collect();
            all.dedup();
            all
        }
    };
    for (i, user) in users.iter().enumerate() {
        let mut result = DescribeUserScramCredentialsResult::default();
        result.user = sb(user);
        if users[..i].contains(user) {
            result.error_code = ErrorCode::DuplicateResource.code();
            result.error_message = Some(sb(&format!(
                "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            )));
        } else {
            result.credential_infos = image
                .scram
                .iter()
                .filter(|c| &c.user == user)
                .filter_map(|c| {
                    let mut info = CredentialInfo::default();
                    info.mechanism = ScramMechanism::from_name(&c.mechanism)?.kafka_type();
                    info.iterations = c.iterations as i32;
                    Some(info)
                })
                .collect();
            if result.credential_infos.is_empty() {
                result.error_code = ErrorCode::ResourceNotFound.code();
                result.error_message = Some(sb(&format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                )));
            }
        }
        // Duplicates are answered once, as Kafka does.
        if !resp.results.iter().any(|x| x.user == result.user) {
            resp.results.push(result);
        }
    }
    responses::encode(
        ApiKey::DescribeUserScramCredentials,
        ctx.api_version,
        ctx.correlation_id,
        &resp,
    )
}
