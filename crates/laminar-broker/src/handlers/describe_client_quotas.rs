//! DescribeClientQuotas v0-1: the client-id quotas that match the filter.

use laminar_protocol::ErrorCode;

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::DescribeClientQuotasResponse;
use laminar_protocol::requests::DescribeClientQuotasRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::context::RequestContext;
use crate::quotas::Quotas;
use crate::quotas::CLIENT_ID;

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

pub fn handle(quotas: &Quotas, ctx: &RequestContext, r: DescribeClientQuotasRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = DescribeClientQuotasResponse::default();
    let invalid = r.components.iter().enumerate().find_map(|(i, c)| {
        if !(MATCH_EXACT..=MATCH_SPECIFIED).contains(&c.match_type) {
            Some(format!("unknown match type {}", c.match_type))
        } else if c.match_type == MATCH_EXACT && c.name.is_none() {
            Some("an exact match needs a name".to_string())
        } else if r.components[..i].iter().any(|o| o.entity_type == c.entity_type) {
            Some(format!("entity type {} is given twice", c.entity_type))
        } else {
            None
        }
    });
    if let Some(message) = invalid {
        resp.error_code = ErrorCode::InvalidRequest.code();
        resp.error_message = Some(sb(&message));
        return responses::encode(ApiKey::DescribeClientQuotas, version, correlation_id, &resp);
    }
    // With `strict`, an entity matches only if the filter names each of its entity types:
    // Laminar's entities have exactly one, a client-id.
    let names_client = r.components.iter().any(|c| c.entity_type == CLIENT_ID);
    let mut entries = Vec::new();
    for e in quotas.entries() {
        // Every component must match the entity, which has only a client-id (so a filter on
        // any other entity type matches nothing).
        let matches = (!r.strict || names_client)
            && r.components.iter().all(|c| {
                c.entity_type == CLIENT_ID
                    && match c.match_type {
                        MATCH_EXACT => c.name.is_some() && e.client_id == c.name,
                        MATCH_DEFAULT => e.client_id.is_none(),
                        MATCH_SPECIFIED => e.client_id.is_some(),
                        _ => false,
                    }
            });
        if !matches {
            continue;
        }
        let mut entry = EntryData::default();
        let mut entity = EntityData::default();
        entity.entity_type = sb(CLIENT_ID);
        entity.entity_name = e.client_id.as_deref().map(sb);
        entry.entity = vec![entity];
        entry.values = e
            .values
            .iter()
            .map(|(k, v)| {
                let mut d = ValueData::default();
                d.key = sb(k);
                d.value = *v;
                d
            })
            .collect();
        entries.push(entry);
    }
    resp.entries = Some(entries);
    responses::encode(ApiKey::DescribeClientQuotas, version, correlation_id, &resp)
}
