//! ApiVersions v0-4, with the features (v3+): `transaction.version` 2 (KIP-890), which Kafka 4
//! clients read to use the second version of the transaction protocol.

use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::ApiVersionsResponse;
use laminar_protocol::requests::ApiVersionsRequest;
use laminar_protocol::{responses, ApiKey, API_TABLE};

use super::Encoded;
use crate::context::RequestContext;

pub const TRANSACTION_VERSION: &str = "transaction.version";
/// KIP-890 part 2: implicit partitions, an epoch bump at every transaction's end.
pub const TRANSACTION_VERSION_LEVEL: i16 = 2;

pub fn handle(ctx: &RequestContext, _r: ApiVersionsRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
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
    if version >= 3 {
        let mut supported = SupportedFeatureKey::default();
        supported.name = super::sb(TRANSACTION_VERSION);
        supported.min_version = 0;
        supported.max_version = TRANSACTION_VERSION_LEVEL;
        resp.supported_features = vec![supported];
        let mut finalized = FinalizedFeatureKey::default();
        finalized.name = super::sb(TRANSACTION_VERSION);
        finalized.min_version_level = TRANSACTION_VERSION_LEVEL;
        finalized.max_version_level = TRANSACTION_VERSION_LEVEL;
        resp.finalized_features = vec![finalized];
        // Never changes on a single node.
        resp.finalized_features_epoch = 1;
    }
    responses::encode(ApiKey::ApiVersions, version, correlation_id, &resp)
}
