//! InitProducerId v0-4: idempotent producers, and transactional ones (a transactional id:
//! the coordinator gives the id's producer a new epoch, fencing every older instance).

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdResponse, ProducerId};
use laminar_protocol::requests::InitProducerIdRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_coordinators::txn::complete::{run, Written};
use laminar_coordinators::txn::service::Txns;
use laminar_coordinators::txn::{decide_init, TxnStatus};
use laminar_protocol::ErrorCode;

pub async fn handle(txns: &Arc<Txns>, ctx: &RequestContext, r: InitProducerIdRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    // A transactional producer needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on
    // the cluster or WRITE on some topic (KIP-679), as Kafka checks them.
    let refused = match &r.transactional_id {
        Some(id) if !id.is_empty() => (!ctx.may(Operation::Write, ResourceType::TransactionalId, id))
            .then_some(ErrorCode::TransactionalIdAuthorizationFailed),
        _ => (!ctx.may_on_cluster(Operation::IdempotentWrite)
            && !ctx.may_any(Operation::Write, ResourceType::Topic))
        .then_some(ErrorCode::ClusterAuthorizationFailed),
    };
    if let Some(code) = refused {
        resp.error_code = code.code();
        return responses::encode(ApiKey::InitProducerId, version, correlation_id, &resp);
    }
    match &r.transactional_id {
        None => {
            // An idempotent producer that already has an id and asks for a new epoch gets a
            // new id instead: it fences nothing on a single node and keeps sequences simple.
            resp.producer_id = ProducerId(txns.producer_ids.allocate());
            resp.producer_epoch = 0;
        }
        Some(id) if id.is_empty() => resp.error_code = ErrorCode::InvalidRequest.code(),
        Some(id) => {
            let timeout = r.transaction_timeout_ms;
            if timeout <= 0 || timeout as u64 > txns.settings.max_timeout_ms {
                resp.error_code = ErrorCode::InvalidTransactionTimeout.code();
            } else {
                let now = laminar_data::now_ms();
                let mut allocate = || txns.producer_ids.allocate();
                let requested = (r.producer_id, r.producer_epoch);
                let decision = laminar_coordinators::txn::complete::begin_when_free(txns, id, |m| {
                    decide_init(m, id, timeout, requested, now, &mut allocate)
                })
                .await;
                match run(txns, id, decision).await {
                    Ok(Written::Reply((pid, epoch))) => {
                        resp.producer_id = ProducerId(pid);
                        resp.producer_epoch = epoch;
                    }
                    // A transaction in progress was aborted to fence its producer: the new
                    // instance retries once the abort is complete.
                    Ok(Written::Wrote(m)) if m.status == TxnStatus::PrepareAbort => {
                        resp.error_code = ErrorCode::ConcurrentTransactions.code()
                    }
                    Ok(Written::Wrote(m)) => {
                        resp.producer_id = ProducerId(m.producer_id);
                        resp.producer_epoch = m.producer_epoch;
                    }
                    Err(code) => resp.error_code = code.code(),
                }
            }
        }
    }
    responses::encode(ApiKey::InitProducerId, version, correlation_id, &resp)
}
