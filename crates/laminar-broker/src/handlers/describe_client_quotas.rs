//! DescribeClientQuotas v0-1: the user and client-id quotas that match the filter.

use laminar_protocol::ErrorCode;

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::DescribeClientQuotasResponse;
use laminar_protocol::requests::DescribeClientQuotasRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::context::RequestContext;
use crate::quotas::Quotas;
use crate::quotas::{EntityName, CLIENT_ID, USER};

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
        } else if c.match_type != MATCH_EXACT && c.name.is_some() {
            Some(if c.match_type == MATCH_DEFAULT {
                "a default match has no name".to_string()
            } else {
                "a match of any name has no name".to_string()
            })
        } else if c.entity_type != USER && c.entity_type != CLIENT_ID {
            Some(format!(
                "entity type {} has no quotas here ({USER}, {CLIENT_ID})",
                c.entity_type
            ))
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
    // As Kafka's cluster metadata answers (`ClientQuotasImage.describe`): the entities that
    // match any exact (or default) component, and those that have any type a "specified"
    // component names; none named, every entity. With `strict`, only entities with exactly
    // the types named (and, for exact components, exactly those names).
    let exact: Vec<(&str, EntityName)> = r
        .components
        .iter()
        .filter(|c| c.match_type != MATCH_SPECIFIED)
        .map(|c| (c.entity_type.as_str(), EntityName::from_wire(c.name.as_deref())))
        .collect();
    let typed: Vec<&str> = r
        .components
        .iter()
        .filter(|c| c.match_type == MATCH_SPECIFIED)
        .map(|c| c.entity_type.as_str())
        .collect();
    let mut entries = Vec::new();
    for e in quotas.entries() {
        let parts: Vec<(&str, &EntityName)> = [
            (USER, e.entity.user.as_ref()),
            (CLIENT_ID, e.entity.client_id.as_ref()),
        ]
        .into_iter()
        .filter_map(|(t, n)| Some((t, n?)))
        .collect();
        let has = |t: &str, n: Option<&EntityName>| {
            parts
                .iter()
                .any(|(pt, pn)| *pt == t && n.is_none_or(|n| n == *pn))
        };
        let sized = !r.strict || parts.len() == exact.len() + typed.len();
        let by_exact = exact.iter().any(|(t, n)| has(t, Some(n)))
            && (!r.strict || exact.iter().all(|(t, n)| has(t, Some(n))));
        let by_type = typed.iter().any(|t| has(t, None));
        let everything = !r.strict && exact.is_empty() && typed.is_empty();
        if !(everything || (sized && (by_exact || by_type))) {
            continue;
        }
        let mut entry = EntryData::default();
        entry.entity = parts
            .iter()
            .map(|(t, n)| {
                let mut entity = EntityData::default();
                entity.entity_type = sb(t);
                entity.entity_name = n.to_wire().map(sb);
                entity
            })
            .collect();
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
