//! ApiVersions v0-4.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;
use laminar_protocol::requests::ApiVersionsRequest;
use laminar_protocol::{responses, ApiKey, API_TABLE};

use super::Encoded;
use crate::broker::Broker;

pub fn handle(_b: &Broker, version: i16, correlation_id: i32, _r: ApiVersionsRequest) -> Encoded {
    let mut resp = ApiVersionsResponse::default();
    resp.api_keys = API_TABLE
        .iter()
        .map(|s| {
            let mut v = ApiVersion::default();
            v.api_key = s.key as i16;
            v.min_version = s.min_version;
            v.max_version = s.max_version;
            v
        })
        .collect();
    responses::encode(ApiKey::ApiVersions, version, correlation_id, &resp)
}
