//! AlterClientQuotas v0-1: set or remove `consumer_byte_rate` and `producer_byte_rate` of a
//! client-id or of the default client. Durable before it is answered: in the cluster metadata
//! (through the controller), from which every broker applies them.

use std::sync::Arc;

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::AlterClientQuotasResponse;
use laminar_protocol::requests::AlterClientQuotasRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::applied::AppliedImages;
use crate::context::RequestContext;
use crate::error::BrokerError;
use crate::quotas::{apply_changes, checked_change, QuotaChange};
use laminar_cluster::image::Command;
use laminar_cluster::Cluster;
use laminar_protocol::ErrorCode;

pub async fn handle(
    cluster: &Cluster,
    applied: &AppliedImages,
    ctx: &RequestContext,
    r: AlterClientQuotasRequest,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let results = alter(cluster, &r).await;
    // Answered once in effect here: the client's next request finds it.
    applied.wait(cluster).await;
    let mut resp = AlterClientQuotasResponse::default();
    for ((entity, _), result) in r.entries.iter().zip(results) {
        let mut e = EntryData::default();
        match result {
            Ok(()) => e.error_code = ErrorCode::None.code(),
            Err(refused) => {
                e.error_code = refused.code().code();
                e.error_message = Some(sb(&refused.to_string()));
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

/// The checked entries go to the controller in one command; each entry is all-or-nothing.
/// Answered once this broker's image has them.
async fn alter(
    cluster: &laminar_cluster::Cluster,
    r: &AlterClientQuotasRequest,
) -> Vec<Result<(), Arc<BrokerError>>> {
    let checked: Vec<Result<QuotaChange, BrokerError>> = r
        .entries
        .iter()
        .map(|(entity, ops)| checked_change(entity, ops))
        .collect();
    let changes: Vec<QuotaChange> = checked.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
    let written = if r.validate_only || changes.is_empty() {
        Ok(())
    } else {
        let done = cluster
            .write(Command::AlterClientQuotas {
                changes: changes.clone(),
            })
            .await
            .and_then(|r| r.into_result());
        match done {
            Ok(()) => {
                // Applied again, the changes change nothing once the image has them.
                cluster
                    .wait_for(|i| {
                        let mut again = i.quotas.clone();
                        apply_changes(&mut again, &changes);
                        again == i.quotas
                    })
                    .await;
                Ok(())
            }
            Err(e) => Err(Arc::new(BrokerError::from(e))),
        }
    };
    // Each entry all-or-nothing: its own check's refusal, else the command's outcome.
    checked
        .into_iter()
        .map(|c| c.map_err(Arc::new).and_then(|_| written.clone()))
        .collect()
}
