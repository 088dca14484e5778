//! ListTransactions v0-2 (`kafka-transactions list`): the transactional ids, filtered by
//! state, producer id, how long the transaction has run (v1) and a pattern (v2, a regular
//! expression the whole id must match, as Java's `matches`).

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsResponse, ProducerId, TransactionalId};
use laminar_protocol::requests::ListTransactionsRequest;
use laminar_protocol::{responses, ApiKey};

use super::{sb, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_coordinators::txn::TxnCoordinator;
use laminar_coordinators::txn::TxnStatus;
use laminar_protocol::ErrorCode;

pub fn handle(txns: &TxnCoordinator, ctx: &RequestContext, r: ListTransactionsRequest) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = ListTransactionsResponse::default();
    let known = |name: &str| (0..8).filter_map(TxnStatus::from_i8).any(|s| s.name() == name);
    resp.unknown_state_filters = r
        .state_filters
        .iter()
        .filter(|f| !known(f))
        .map(|f| sb(f))
        .collect();
    let pattern = match r.transactional_id_pattern.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => match regex::Regex::new(&format!("^(?:{p})$")) {
            Ok(re) => Some(re),
            Err(_) => {
                resp.error_code = ErrorCode::InvalidRequest.code();
                return responses::encode(ApiKey::ListTransactions, version, correlation_id, &resp);
            }
        },
        None => None,
    };
    let now = laminar_data::now_ms();
    resp.transaction_states = txns
        .list()
        .into_iter()
        // Only what the principal may describe, as Kafka lists them.
        .filter(|m| {
            ctx.may(
                Operation::Describe,
                ResourceType::TransactionalId,
                &m.transactional_id,
            )
        })
        .filter(|m| r.state_filters.is_empty() || r.state_filters.iter().any(|f| f == m.status.name()))
        .filter(|m| r.producer_id_filters.is_empty() || r.producer_id_filters.contains(&m.producer_id))
        // As Kafka: only transactions in progress have a duration.
        .filter(|m| {
            r.duration_filter_ms < 0
                || (m.status == TxnStatus::Ongoing && now - m.start_ms > r.duration_filter_ms)
        })
        .filter(|m| pattern.as_ref().is_none_or(|re| re.is_match(&m.transactional_id)))
        .map(|m| {
            let mut s = TransactionState::default();
            s.transactional_id = TransactionalId(sb(&m.transactional_id));
            s.producer_id = ProducerId(m.producer_id);
            s.transaction_state = sb(m.status.name());
            s
        })
        .collect();
    responses::encode(ApiKey::ListTransactions, version, correlation_id, &resp)
}
