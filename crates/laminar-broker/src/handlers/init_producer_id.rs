//! InitProducerId v0-4: idempotent producers (transactions are not supported yet).

use kafka_protocol::messages::{InitProducerIdResponse, ProducerId};
use laminar_protocol::requests::InitProducerIdRequest;
use laminar_protocol::{responses, ApiKey};

use super::Encoded;
use crate::broker::Broker;
use crate::error_codes as ec;

/// Kafka's error for a transactional id when transactions are unavailable.
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

pub fn handle(b: &Broker, version: i16, correlation_id: i32, r: InitProducerIdRequest) -> Encoded {
    let mut resp = InitProducerIdResponse::default();
    if r.transactional_id.is_some() {
        resp.error_code = TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        resp.producer_id = ProducerId(-1);
        resp.producer_epoch = -1;
    } else if r.producer_id >= 0 {
        // A producer that already has an id asks for a new epoch: give it a new id instead,
        // which fences nothing on a single node and keeps sequence state simple.
        resp.error_code = ec::NONE;
        resp.producer_id = ProducerId(b.producers.allocate());
        resp.producer_epoch = 0;
    } else {
        resp.producer_id = ProducerId(b.producers.allocate());
        resp.producer_epoch = 0;
    }
    responses::encode(ApiKey::InitProducerId, version, correlation_id, &resp)
}
