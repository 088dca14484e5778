//! EndTxn v0-5: commit or abort. v5 (transaction.version 2, KIP-890) bumps the producer's
//! epoch at every end and answers with the new one. Answered once the decision (PrepareCommit or PrepareAbort)
//! is durable; the markers follow, and the producer's next transaction waits for them
//! (CONCURRENT_TRANSACTIONS), as in Kafka.

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnResponse, ProducerId};
use laminar_protocol::requests::EndTxnRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_coordinators::txn::complete::{run, Written};
use laminar_coordinators::txn::decide_end;
use laminar_coordinators::txn::service::Txns;
use laminar_protocol::ErrorCode;

pub async fn handle(txns: &Arc<Txns>, ctx: &RequestContext, r: EndTxnRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let pr = &r.producer;
    if !ctx.may(
        Operation::Write,
        ResourceType::TransactionalId,
        &pr.transactional_id,
    ) {
        let mut resp = EndTxnResponse::default();
        resp.error_code = ErrorCode::TransactionalIdAuthorizationFailed.code();
        return responses::encode(ApiKey::EndTxn, version, correlation_id, &resp);
    }
    let now = laminar_data::now_ms();
    let mut allocate = || txns.producer_ids.allocate();
    let bump = version >= 5;
    let decision = laminar_coordinators::txn::complete::begin_when_free(txns, &pr.transactional_id, |m| {
        decide_end(
            m,
            pr.producer_id,
            pr.producer_epoch,
            r.committed,
            bump,
            now,
            &mut allocate,
        )
    })
    .await;
    let mut resp = EndTxnResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    let answer = match run(txns, &pr.transactional_id, decision).await {
        Ok(Written::Reply(producer)) => Ok(producer),
        Ok(Written::Wrote(m)) => Ok(m.producer_after()),
        Err(code) => Err(code),
    };
    match answer {
        Ok((pid, epoch)) if bump => {
            resp.producer_id = ProducerId(pid);
            resp.producer_epoch = epoch;
        }
        Ok(_) => {}
        Err(code) => resp.error_code = code.code(),
    }
    responses::encode(ApiKey::EndTxn, version, correlation_id, &resp)
}
