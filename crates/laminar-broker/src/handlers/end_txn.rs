//! EndTxn v0-4: commit or abort. Answered once the decision (PrepareCommit or PrepareAbort)
//! is durable; the markers follow, and the producer's next transaction waits for them
//! (CONCURRENT_TRANSACTIONS), as in Kafka.

use std::sync::Arc;

use kafka_protocol::messages::EndTxnResponse;
use laminar_protocol::requests::EndTxnRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::broker::Broker;
use crate::error_codes as ec;
use crate::txn::complete::run;
use crate::txn::decide_end;

pub async fn handle(b: &Arc<Broker>, version: i16, correlation_id: i32, r: EndTxnRequest) -> Encoded {
    let pr = &r.producer;
    let now = laminar_storage::now_ms();
    let decision = b.txns.begin(&pr.transactional_id, |m| {
        decide_end(m, pr.producer_id, pr.producer_epoch, r.committed, now)
    });
    let mut resp = EndTxnResponse::default();
    resp.error_code = match run(b, &pr.transactional_id, decision).await {
        Ok(_) => ec::NONE,
        Err(code) => code,
    };
    responses::encode(ApiKey::EndTxn, version, correlation_id, &resp)
}
