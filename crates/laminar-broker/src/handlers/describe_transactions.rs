//! DescribeTransactions v0 (`kafka-transactions describe`): each transactional id's state,
//! producer, timeout, start time and partitions (of the topics the caller may describe).

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{DescribeTransactionsResponse, ProducerId, TransactionalId};
use laminar_protocol::requests::DescribeTransactionsRequest;
use laminar_protocol::{responses, ApiKey};

use super::refused::Refused;
use super::{sb, topic_name, Encoded};
use crate::context::RequestContext;
use laminar_auth::acl::{Operation, ResourceType};
use laminar_coordinators::txn::service::Txns;
use laminar_protocol::ErrorCode;

pub fn handle(
    txns: &Txns,
    ctx: &RequestContext,
    r: DescribeTransactionsRequest,
    refused: Refused,
) -> Encoded {
    let (version, correlation_id) = (ctx.api_version, ctx.correlation_id);
    let mut resp = DescribeTransactionsResponse::default();
    resp.transaction_states = r
        .transactional_ids
        .iter()
        .map(|id| {
            let mut s = TransactionState::default();
            s.transactional_id = TransactionalId(sb(id));
            let found = txns
                .epoch()
                .and_then(|_| txns.coordinator.get(id).ok_or(ErrorCode::TransactionalIdNotFound));
            let m = match found {
                Ok(m) => m,
                Err(code) => {
                    s.error_code = code.code();
                    s.producer_id = ProducerId(-1);
                    s.producer_epoch = -1;
                    s.transaction_start_time_ms = -1;
                    return s;
                }
            };
            s.error_code = ErrorCode::None.code();
            s.transaction_state = sb(m.status.name());
            s.transaction_timeout_ms = m.timeout_ms;
            s.transaction_start_time_ms = m.start_ms;
            s.producer_id = ProducerId(m.producer_id);
            s.producer_epoch = m.producer_epoch;
            let mut topics: Vec<TopicData> = Vec::new();
            // As Kafka's KafkaApis: only the topics the caller may DESCRIBE.
            for tp in m
                .partitions
                .iter()
                .filter(|tp| ctx.may(Operation::Describe, ResourceType::Topic, &tp.topic))
            {
                if topics.last().is_none_or(|t| t.topic.0.as_str() != tp.topic) {
                    let mut t = TopicData::default();
                    t.topic = topic_name(&tp.topic);
                    topics.push(t);
                }
                topics.last_mut().unwrap().partitions.push(tp.partition);
            }
            s.topics = topics;
            s
        })
        .collect();
    refused.answer(&mut resp);
    responses::encode(ApiKey::DescribeTransactions, version, correlation_id, &resp)
}
