//! AlterClientQuotas v0-1: set or remove `consumer_byte_rate` and `producer_byte_rate` of a
//! client-id or of the default client. Durable (quotas.json) before it is answered.

use std::sync::Arc;

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::AlterClientQuotasResponse;
use laminar_protocol::requests::AlterClientQuotasRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::broker::Broker;
use crate::error_codes as ec;

pub async fn handle(
    b: &Arc<Broker>,
    version: i16,
    correlation_id: i32,
    r: AlterClientQuotasRequest,
) -> Encoded {
    let b2 = b.clone();
    let entries = r.entries.clone();
    let results = b.io.run(move || b2.quotas.alter(&entries, r.validate_only)).await;
    let mut resp = AlterClientQuotasResponse::default();
    for ((entity, _), result) in r.entries.iter().zip(results) {
        let mut e = EntryData::default();
        match result {
            Ok(()) => e.error_code = ec::NONE,
            Err((code, message)) => {
                e.error_code = code;
                e.error_message = Some(sb(&message));
            }
        }
        e.entity = entity
            .iter()
            .map(|(t, n)| {
                let mut d = EntityData::default();
                d.entity_type = sb(t);
                d.entity_name = n.as_deref().map(sb);
                d
            })
            .collect();
        resp.entries.push(e);
    }
    responses::encode(ApiKey::AlterClientQuotas, version, correlation_id, &resp)
}
