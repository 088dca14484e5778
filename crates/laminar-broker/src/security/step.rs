//! The one authorization step, between decoding a request and its handler.
//!
//! [`rule`] states, for every API the broker serves, what Kafka's `KafkaApis` asks of the
//! principal: the checks on the request as a whole (a group API's group, a cluster admin
//! API's operation on the cluster), made here before the handler runs and refused in the
//! request's own shape (`handlers::refused_whole`); and the operations on each
//! resource the request names (each topic of a Produce, each group of a DescribeGroups),
//! which the split (`security/split.rs`) checks through [`Grants`], taking the refused ones out of the
//! request. The handler may then ask [`Grants`] the rule's questions to filter what it lists,
//! and nothing else. The `match` has no wildcard arm: a new API does not compile until its
//! rule is written here. A question the rule does not state is a bug: a debug build panics,
//! a release build refuses (and logs).

use std::sync::Arc;

use laminar_auth::acl::{supported_operations, Operation, ResourceType, CLUSTER_NAME};
use laminar_auth::principal::Principal;
use laminar_protocol::requests::Request;
use laminar_protocol::{ApiKey, ErrorCode};

use super::authz::Authz;

/// One check on a request as a whole: the operation on the resource, and the code its
/// refusal answers with.
#[derive(Debug, Clone, Copy)]
pub struct Whole<'r> {
    pub operation: Operation,
    pub resource: ResourceType,
    pub name: &'r str,
    pub refused: ErrorCode,
}

/// What an API asks of the principal.
#[derive(Debug, Clone, Default)]
pub struct Rule<'r> {
    /// Checked in this order before the handler; the first refused answers the request.
    pub whole: Vec<Whole<'r>>,
    /// The operations on resources of a type decided resource by resource: by the split
    /// (a refused one answered with its error code) or by the handler (left out of a list).
    pub each: &'static [(Operation, ResourceType)],
    /// Operations asked of a resource type as a whole (Kafka's `authorizeByResourceType`:
    /// may the principal do this to some resource of the type).
    pub any: &'static [(Operation, ResourceType)],
    /// The resource types whose authorized-operations bitmask the answer carries.
    pub operations: &'static [ResourceType],
}

use Operation::{
    Alter, AlterConfigs, ClusterAction, Create, Delete, Describe, DescribeConfigs, IdempotentWrite, Read,
    Write,
};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

fn group(operation: Operation, id: &str) -> Whole<'_> {
    Whole {
        operation,
        resource: Group,
        name: id,
        refused: ErrorCode::GroupAuthorizationFailed,
    }
}

fn cluster(operation: Operation) -> Whole<'static> {
    Whole {
        operation,
        resource: Cluster,
        name: CLUSTER_NAME,
        refused: ErrorCode::ClusterAuthorizationFailed,
    }
}

fn each(each: &'static [(Operation, ResourceType)]) -> Rule<'static> {
    Rule {
        each,
        ..Rule::default()
    }
}

/// What `request` asks of its principal, as Kafka 4.3's `KafkaApis` asks it.
pub fn rule(request: &Request, version: i16) -> Rule<'_> {
    match request {
        // Before and during authentication: nothing to authorize.
        Request::ApiVersions(_) | Request::SaslHandshake(_) | Request::SaslAuthenticate(_) => Rule::default(),
        // Topics the principal may not DESCRIBE are left out (listed) or answered
        // TOPIC_AUTHORIZATION_FAILED (named); auto-creation needs CREATE on the cluster or
        // the topic.
        Request::Metadata(_) => Rule {
            each: &[(Describe, Topic), (Create, Cluster), (Create, Topic)],
            operations: &[Topic, Cluster],
            ..Rule::default()
        },
        // WRITE on each topic; a transactional producer's records need WRITE on its
        // transactional id, named by the request or found by its producer id.
        Request::Produce(_) => each(&[(Write, Topic), (Write, TransactionalId)]),
        // A follower's fetch needs CLUSTER_ACTION, for the request as a whole; a consumer's
        // READ on each topic.
        Request::Fetch(r) if r.replica_id >= 0 => whole(vec![cluster(ClusterAction)]),
        Request::Fetch(_) => each(&[(Read, Topic)]),
        Request::ListOffsets(_) => each(&[(Describe, Topic)]),
        Request::CreateTopics(_) => each(&[(Create, Cluster), (Create, Topic)]),
        // DELETE on each; by topic id, a topic the principal may not DESCRIBE is not named.
        Request::DeleteTopics(_) => each(&[(Delete, Topic), (Describe, Topic)]),
        // WRITE on the transactional id; without one (idempotence), IDEMPOTENT_WRITE on the
        // cluster or WRITE on some topic.
        Request::InitProducerId(_) => Rule {
            each: &[(Write, TransactionalId), (IdempotentWrite, Cluster)],
            any: &[(Write, Topic)],
            ..Rule::default()
        },
        Request::DescribeConfigs(_) => each(&[(DescribeConfigs, Topic), (DescribeConfigs, Cluster)]),
        Request::AlterConfigs(_) => each(&[(AlterConfigs, Topic), (AlterConfigs, Cluster)]),
        Request::CreatePartitions(_) => each(&[(Alter, Topic)]),
        Request::FindCoordinator(_) => each(&[(Describe, Group), (Describe, TransactionalId)]),
        // The classic group protocol: READ on the group, for the request as a whole.
        Request::JoinGroup(r) => whole(vec![group(Read, &r.group_id)]),
        Request::SyncGroup(r) => whole(vec![group(Read, &r.group_id)]),
        Request::Heartbeat(r) => whole(vec![group(Read, &r.group_id)]),
        Request::LeaveGroup(r) => whole(vec![group(Read, &r.group_id)]),
        // READ on the group, then on each topic.
        Request::OffsetCommit(r) => Rule {
            whole: vec![group(Read, &r.group_id)],
            each: &[(Read, Topic)],
            ..Rule::default()
        },
        // DESCRIBE on the group (one group: the request as a whole; several, from v8: each),
        // then each topic's partitions the principal may not DESCRIBE are refused.
        Request::OffsetFetch(r) => Rule {
            whole: match r.groups.as_slice() {
                [one] => vec![group(Describe, &one.group_id)],
                _ => Vec::new(),
            },
            each: &[(Describe, Group), (Describe, Topic)],
            ..Rule::default()
        },
        // Every group the principal may DESCRIBE, or all with DESCRIBE on the cluster.
        Request::ListGroups(_) => each(&[(Describe, Cluster), (Describe, Group)]),
        Request::DescribeGroups(_) => Rule {
            each: &[(Describe, Group)],
            operations: &[Group],
            ..Rule::default()
        },
        Request::DeleteGroups(_) => each(&[(Delete, Group)]),
        // DELETE on the group, then READ on each topic.
        Request::OffsetDelete(r) => Rule {
            whole: vec![group(Delete, &r.group_id)],
            each: &[(Read, Topic)],
            ..Rule::default()
        },
        // The cluster's admin APIs: an operation on the cluster, for the request as a whole.
        Request::DescribeClientQuotas(_) => whole(vec![cluster(DescribeConfigs)]),
        Request::AlterClientQuotas(_) => whole(vec![cluster(AlterConfigs)]),
        Request::DescribeLogDirs(_) => whole(vec![cluster(Describe)]),
        Request::ElectLeaders(_) => whole(vec![cluster(Alter)]),
        Request::AlterPartitionReassignments(_) => whole(vec![cluster(Alter)]),
        Request::ListPartitionReassignments(_) => whole(vec![cluster(Describe)]),
        Request::DescribeUserScramCredentials(_) => whole(vec![cluster(Describe)]),
        Request::AlterUserScramCredentials(_) => whole(vec![cluster(Alter)]),
        // The cluster's authorized operations, when asked for.
        Request::DescribeCluster(_) => Rule {
            operations: &[Cluster],
            ..Rule::default()
        },
        Request::DeleteRecords(_) => each(&[(Delete, Topic)]),
        // A follower's (CLUSTER_ACTION) or a client's (DESCRIBE on each topic).
        Request::OffsetForLeaderEpoch(_) => each(&[(ClusterAction, Cluster), (Describe, Topic)]),
        Request::DescribeProducers(_) => each(&[(Read, Topic)]),
        // A client's (v0-3): WRITE on the transactional id and on each topic; a broker's
        // (v4+) needs CLUSTER_ACTION, for the request as a whole.
        Request::AddPartitionsToTxn(_) if version >= 4 => whole(vec![cluster(ClusterAction)]),
        Request::AddPartitionsToTxn(_) => each(&[(Write, TransactionalId), (Write, Topic)]),
        Request::AddOffsetsToTxn(_) => each(&[(Write, TransactionalId), (Read, Group)]),
        Request::EndTxn(_) => each(&[(Write, TransactionalId)]),
        // WRITE on the transactional id, READ on the group, then READ on each topic.
        Request::TxnOffsetCommit(r) => Rule {
            whole: vec![
                Whole {
                    operation: Write,
                    resource: TransactionalId,
                    name: &r.producer.transactional_id,
                    refused: ErrorCode::TransactionalIdAuthorizationFailed,
                },
                group(Read, &r.group_id),
            ],
            each: &[(Read, Topic)],
            ..Rule::default()
        },
        Request::WriteTxnMarkers(_) => each(&[(ClusterAction, Cluster)]),
        // Transactions the principal may not DESCRIBE are refused, and the partitions of
        // topics it may not DESCRIBE left out.
        Request::DescribeTransactions(_) => each(&[(Describe, TransactionalId), (Describe, Topic)]),
        Request::ListTransactions(_) => each(&[(Describe, TransactionalId)]),
        // ACLs: DESCRIBE or ALTER on the cluster; SECURITY_DISABLED without an authorizer
        // (the handler answers that first, so these are decided per request there).
        Request::DescribeAcls(_) => each(&[(Describe, Cluster)]),
        Request::CreateAcls(_) | Request::DeleteAcls(_) => each(&[(Alter, Cluster)]),
    }
}

fn whole(whole: Vec<Whole<'_>>) -> Rule<'_> {
    Rule {
        whole,
        ..Rule::default()
    }
}

/// Whether a controller-port peer, `principal` from `host`, is admitted: CLUSTER_ACTION on
/// the cluster, as Kafka's controllers ask of their clients, judged against `acls`, the
/// controller's own (the port serves the quorum the broker's ACLs come through).
pub fn controller_peer(
    authorizer: &laminar_auth::acl::Authorizer,
    acls: &laminar_auth::acl::Acls,
    principal: &Principal,
    host: std::net::IpAddr,
) -> bool {
    let host = host.to_canonical().to_string();
    let who = laminar_auth::acl::Requester {
        principal: &principal.to_string(),
        host: &host,
    };
    authorizer.authorize(acls, &who, ClusterAction, Cluster, CLUSTER_NAME)
}

/// What one request's handler may ask: the decisions its API's [`Rule`] states, for its
/// principal and host.
#[derive(Debug, Clone)]
pub struct Grants {
    api: ApiKey,
    principal: String,
    host: String,
    authz: Arc<Authz>,
    each: &'static [(Operation, ResourceType)],
    any: &'static [(Operation, ResourceType)],
    operations: &'static [ResourceType],
}

impl Grants {
    /// Checks `rule`'s whole-request checks in order: the code of the first refused, if one
    /// is; else what the handler may ask.
    pub fn decide(
        api: ApiKey,
        rule: Rule<'_>,
        principal: &Principal,
        host: std::net::IpAddr,
        authz: &Arc<Authz>,
    ) -> Result<Grants, ErrorCode> {
        let principal = principal.to_string();
        let host = host.to_string();
        if let Some(w) = rule
            .whole
            .iter()
            .find(|w| !authz.allows(&principal, &host, w.operation, w.resource, w.name))
        {
            return Err(w.refused);
        }
        Ok(Grants {
            api,
            principal,
            host,
            authz: authz.clone(),
            each: rule.each,
            any: rule.any,
            operations: rule.operations,
        })
    }

    /// Whether the principal may do `operation` on the resource: one the rule states.
    pub fn may(&self, operation: Operation, resource: ResourceType, name: &str) -> bool {
        self.stated(self.each.contains(&(operation, resource)), operation, resource)
            && self
                .authz
                .allows(&self.principal, &self.host, operation, resource, name)
    }

    /// Whether it may do `operation` on some resource of the type.
    pub fn may_any(&self, operation: Operation, resource: ResourceType) -> bool {
        self.stated(self.any.contains(&(operation, resource)), operation, resource)
            && self
                .authz
                .allows_any(&self.principal, &self.host, operation, resource)
    }

    /// Kafka's authorized-operations field for one resource: bit `1 << code` set for each
    /// operation of the resource type the principal may do there (every one of them
    /// without an authorizer, as Kafka answers); 0 to a principal that may not DESCRIBE it.
    pub fn authorized_operations(&self, resource: ResourceType, name: &str) -> i32 {
        if !self.stated(self.operations.contains(&resource), Describe, resource) {
            return 0;
        }
        let may = |op: Operation| self.authz.allows(&self.principal, &self.host, op, resource, name);
        if !may(Describe) {
            return 0;
        }
        supported_operations(resource)
            .iter()
            .filter(|op| may(**op))
            .fold(0, |bits, op| bits | 1 << (*op as i32))
    }

    /// Whether an authorizer is configured (the ACL APIs answer SECURITY_DISABLED without).
    pub fn authorizer_enabled(&self) -> bool {
        self.authz.enabled()
    }

    /// `stated`, or a bug: a handler asked what its API's rule does not state.
    fn stated(&self, stated: bool, operation: Operation, resource: ResourceType) -> bool {
        if !stated {
            crate::warn!(
                "{:?}: the handler asked {operation:?} on {resource:?}, which the authorization step does not state for it; refused",
                self.api
            );
            debug_assert!(stated, "{:?}: {operation:?} on {resource:?} not stated", self.api);
        }
        stated
    }
}
