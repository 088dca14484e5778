//! The authorization step's second half: each resource a request names, checked as its
//! API's [`super::step::rule`] states, and the refused ones taken out of the request.
//!
//! [`split`] leaves in the request only what the principal may touch and returns the rest,
//! each with Kafka's code, as a [`Refused`] that the handler hands its response to
//! ([`crate::handlers::refused`] builds the refused parts). A topic named by an id no topic
//! has is taken out too (UNKNOWN_TOPIC_ID, as Kafka answers it before authorizing), and a
//! known id is resolved to its name here, so that the handler reads what was checked.
//! What stays with the handler: filtering what it lists (Metadata's and OffsetFetch's "all",
//! ListGroups, ListTransactions, a transaction's partitions), Metadata's auto-creation, and
//! the single-answer requests that a refusal answers whole (InitProducerId, EndTxn,
//! AddOffsetsToTxn, the ACL APIs).

use laminar_auth::acl::{Operation, ResourceType, CLUSTER_NAME};
use laminar_protocol::requests::{Request, TopicPartitions, Uuid};
use laminar_protocol::ErrorCode;

use super::step::Grants;
use crate::handlers::refused::{Refusal, Refused};
use crate::topics::Topics;

use ErrorCode::{TopicAuthorizationFailed, UnknownTopicId};
use Operation::{Alter, ClusterAction, Create, Delete, Describe, DescribeConfigs, Read, Write};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

/// Kafka's config resource type for a topic (the others are the broker's, checked on the
/// cluster).
const RESOURCE_TOPIC: i8 = 2;

/// Takes out of `request` what its principal may not touch; returns it with its codes.
pub fn split(request: &mut Request, version: i16, grants: &Grants, topics: &Topics) -> Refused {
    let mut refused = Refused::new(version);
    let may = |op: Operation, resource: ResourceType, name: &str| grants.may(op, resource, name);
    let may_topic = |op: Operation, name: &str| may(op, Topic, name);
    match request {
        // Nothing per resource: before authentication; the group protocol's and the
        // cluster's admin APIs (checked whole); filters and single answers (see above).
        Request::ApiVersions(_)
        | Request::SaslHandshake(_)
        | Request::SaslAuthenticate(_)
        | Request::JoinGroup(_)
        | Request::SyncGroup(_)
        | Request::Heartbeat(_)
        | Request::LeaveGroup(_)
        | Request::ListGroups(_)
        | Request::DescribeClientQuotas(_)
        | Request::AlterClientQuotas(_)
        | Request::DescribeLogDirs(_)
        | Request::ElectLeaders(_)
        | Request::AlterPartitionReassignments(_)
        | Request::ListPartitionReassignments(_)
        | Request::DescribeUserScramCredentials(_)
        | Request::AlterUserScramCredentials(_)
        | Request::DescribeCluster(_)
        | Request::InitProducerId(_)
        | Request::AddOffsetsToTxn(_)
        | Request::EndTxn(_)
        | Request::WriteTxnMarkers(_)
        | Request::ListTransactions(_)
        | Request::DescribeAcls(_)
        | Request::CreateAcls(_)
        | Request::DeleteAcls(_) => {}
        // Named topics the principal may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED, whether
        // they exist or not (nothing created); asked by id, not even the name is told.
        Request::Metadata(r) => {
            if let Some(wanted) = &mut r.topics {
                wanted.retain(|w| {
                    let named = match (&w.name, w.topic_id) {
                        (Some(name), _) => Some(name.clone()),
                        (None, Some(id)) => topics.by_id(&id).map(|t| t.name),
                        (None, None) => None,
                    };
                    match named.filter(|n| !may_topic(Describe, n)) {
                        None => true,
                        Some(name) => {
                            let refusal = Refusal::Topic {
                                name: w.name.as_ref().map(|_| name),
                                topic_id: w.topic_id,
                                code: TopicAuthorizationFailed,
                            };
                            // Asked twice, answered once, as Kafka does.
                            if !refused.items().contains(&refusal) {
                                refused.push(refusal);
                            }
                            false
                        }
                    }
                });
            }
        }
        // Records of a transaction need WRITE on the request's transactional id (without
        // one, a user allowed to write the topic could put records into another producer's
        // transaction, whose id and epoch DescribeProducers shows); each topic needs WRITE.
        Request::Produce(r) => {
            let mut known = Vec::with_capacity(r.topics.len());
            for mut t in std::mem::take(&mut r.topics) {
                if let Some(id) = t.topic_id {
                    match topics.by_id(&id) {
                        Some(meta) => t.name = meta.name,
                        None => {
                            refused.push(partitions_of(
                                &t.name,
                                Some(id),
                                &t.partitions,
                                |p| p.index,
                                UnknownTopicId,
                            ));
                            continue;
                        }
                    }
                }
                known.push(t);
            }
            let transactional = known.iter().flat_map(|t| &t.partitions).any(|p| {
                p.records
                    .as_deref()
                    .and_then(|records| laminar_records::BatchHeader::parse(records).ok())
                    .is_some_and(|h| h.is_transactional())
            });
            let txn_allowed = !transactional
                || r.transactional_id
                    .as_deref()
                    .is_some_and(|id| may(Write, TransactionalId, id));
            for t in known {
                let code = if !txn_allowed {
                    ErrorCode::TransactionalIdAuthorizationFailed
                } else if !may_topic(Write, &t.name) {
                    TopicAuthorizationFailed
                } else {
                    r.topics.push(t);
                    continue;
                };
                refused.push(partitions_of(
                    &t.name,
                    t.topic_id,
                    &t.partitions,
                    |p| p.index,
                    code,
                ));
            }
        }
        // A consumer's: READ on each topic (a follower's needs CLUSTER_ACTION, checked
        // whole by the rule).
        Request::Fetch(r) => {
            let follower = r.replica_id >= 0;
            r.topics.retain_mut(|t| {
                let resolved = match (&t.name, t.topic_id) {
                    (Some(name), _) => Some(name.clone()),
                    (None, Some(id)) => match topics.by_id(&id) {
                        Some(meta) => Some(meta.name),
                        None => {
                            refused.push(partitions_of(
                                "",
                                Some(id),
                                &t.partitions,
                                |p| p.partition,
                                UnknownTopicId,
                            ));
                            return false;
                        }
                    },
                    (None, None) => None,
                };
                t.name = resolved.clone();
                let name = resolved.unwrap_or_default();
                if follower || may_topic(Read, &name) {
                    return true;
                }
                let id = t.topic_id.or_else(|| topics.get(&name).map(|m| m.uuid()));
                refused.push(partitions_of(
                    &name,
                    id,
                    &t.partitions,
                    |p| p.partition,
                    TopicAuthorizationFailed,
                ));
                false
            });
        }
        Request::ListOffsets(r) => r.topics.retain(|t| {
            keep_or(&mut refused, may_topic(Describe, &t.name), || {
                partitions_of(
                    &t.name,
                    None,
                    &t.partitions,
                    |p| p.partition_index,
                    TopicAuthorizationFailed,
                )
            })
        }),
        // CREATE on the cluster or on the topic.
        Request::CreateTopics(r) => {
            let on_cluster = may(Create, Cluster, CLUSTER_NAME);
            r.topics.retain(|t| {
                keep_or(&mut refused, on_cluster || may_topic(Create, &t.name), || {
                    topic(Some(t.name.clone()), None)
                })
            })
        }
        // DELETE on each; asked by id, its name is told only to who may DESCRIBE it. An id
        // no topic has stays with the handler (UNKNOWN_TOPIC_ID: there is nothing to check).
        Request::DeleteTopics(r) => r.topics.retain(|t| {
            let by_name = t.name.as_deref().filter(|n| !n.is_empty());
            let named = match (by_name, t.topic_id) {
                (Some(n), _) => Some(n.to_string()),
                (None, Some(id)) => topics.by_id(&id).map(|m| m.name),
                (None, None) => None,
            };
            let Some(name) = named.filter(|n| !may_topic(Delete, n)) else {
                return true;
            };
            let shown = by_name.is_some() || may_topic(Describe, &name);
            refused.push(Refusal::Topic {
                name: shown.then_some(name),
                topic_id: t.topic_id,
                code: TopicAuthorizationFailed,
            });
            false
        }),
        Request::DescribeConfigs(r) => r.resources.retain(|res| {
            config(
                &mut refused,
                res.resource_type,
                &res.resource_name,
                DescribeConfigs,
                &may,
            )
        }),
        Request::AlterConfigs(r) => r.resources.retain(|res| {
            config(
                &mut refused,
                res.resource_type,
                &res.resource_name,
                Operation::AlterConfigs,
                &may,
            )
        }),
        Request::CreatePartitions(r) => r.topics.retain(|(name, _)| {
            keep_or(&mut refused, may_topic(Alter, name), || {
                topic(Some(name.clone()), None)
            })
        }),
        // DESCRIBE on the group or transactional id; other key types stay with the handler
        // (INVALID_REQUEST).
        Request::FindCoordinator(r) => {
            let (resource, code) = match r.key_type {
                0 => (Group, ErrorCode::GroupAuthorizationFailed),
                1 => (TransactionalId, ErrorCode::TransactionalIdAuthorizationFailed),
                _ => return refused,
            };
            r.keys.retain(|key| {
                keep_or(&mut refused, may(Describe, resource, key), || Refusal::Key {
                    key: key.clone(),
                    code,
                })
            })
        }
        // READ on each topic (the group's READ is checked whole).
        Request::OffsetCommit(r) => r.topics.retain(|t| {
            keep_or(&mut refused, may_topic(Read, &t.name), || {
                partitions_of(&t.name, None, &t.partitions, |p| p.0, TopicAuthorizationFailed)
            })
        }),
        // DESCRIBE on each group (one alone is checked whole), then on each named topic;
        // "all" topics are filtered by the handler.
        Request::OffsetFetch(r) => {
            let several = r.groups.len() > 1;
            r.groups.retain_mut(|g| {
                if several && !may(Describe, Group, &g.group_id) {
                    refused.push(Refusal::Group {
                        id: g.group_id.clone(),
                        code: ErrorCode::GroupAuthorizationFailed,
                    });
                    return false;
                }
                if let Some(named) = &mut g.topics {
                    named.retain(|(name, partitions)| {
                        keep_or(&mut refused, may_topic(Describe, name), || {
                            Refusal::GroupPartitions {
                                group: g.group_id.clone(),
                                topic: name.clone(),
                                partitions: partitions.clone(),
                                code: TopicAuthorizationFailed,
                            }
                        })
                    });
                }
                true
            });
        }
        Request::DescribeGroups(r) => r.groups.retain(|id| {
            keep_or(&mut refused, may(Describe, Group, id), || Refusal::Group {
                id: id.clone(),
                code: ErrorCode::GroupAuthorizationFailed,
            })
        }),
        Request::DeleteGroups(r) => r.groups.retain(|id| {
            keep_or(&mut refused, may(Delete, Group, id), || Refusal::Group {
                id: id.clone(),
                code: ErrorCode::GroupAuthorizationFailed,
            })
        }),
        // READ on each topic (DELETE on the group is checked whole); a refused topic keeps
        // its offsets.
        Request::OffsetDelete(r) => topic_partitions(&mut refused, &mut r.topics, |t| may_topic(Read, t)),
        Request::DeleteRecords(r) => r.topics.retain(|(name, partitions)| {
            keep_or(&mut refused, may_topic(Delete, name), || {
                partitions_of(name, None, partitions, |p| p.0, TopicAuthorizationFailed)
            })
        }),
        // A follower's needs CLUSTER_ACTION (every partition refused without it, as Kafka's
        // error response answers), a client's DESCRIBE on each topic.
        Request::OffsetForLeaderEpoch(r) => {
            let follower = r.replica_id >= 0;
            let cluster_action = follower && may(ClusterAction, Cluster, CLUSTER_NAME);
            r.topics.retain(|t| {
                let code = if follower && !cluster_action {
                    ErrorCode::ClusterAuthorizationFailed
                } else if !follower && !may_topic(Describe, &t.name) {
                    TopicAuthorizationFailed
                } else {
                    return true;
                };
                refused.push(partitions_of(&t.name, None, &t.partitions, |p| p.partition, code));
                false
            })
        }
        Request::DescribeProducers(r) => {
            topic_partitions(&mut refused, &mut r.topics, |t| may_topic(Read, t))
        }
        // A client's (v0-3): WRITE on its transactional id, then on each topic; if any is
        // refused, nothing is added and the others are OPERATION_NOT_ATTEMPTED. A broker's
        // (v4+) needs CLUSTER_ACTION, checked whole.
        Request::AddPartitionsToTxn(r) if version < 4 => {
            let Some(txn) = r.transactions.first_mut() else {
                return refused;
            };
            let txn_id_allowed = may(Write, TransactionalId, &txn.producer.transactional_id);
            let allowed: Vec<bool> = txn
                .topics
                .iter()
                .map(|(t, _)| txn_id_allowed && may_topic(Write, t))
                .collect();
            if allowed.iter().all(|a| *a) {
                return refused;
            }
            for ((name, partitions), allowed) in std::mem::take(&mut txn.topics).iter().zip(allowed) {
                let code = if !txn_id_allowed {
                    ErrorCode::TransactionalIdAuthorizationFailed
                } else if !allowed {
                    TopicAuthorizationFailed
                } else {
                    ErrorCode::OperationNotAttempted
                };
                refused.push(partitions_of(name, None, partitions, |p| *p, code));
            }
            r.transactions.clear();
        }
        Request::AddPartitionsToTxn(_) => {}
        // READ on each topic (WRITE on the transactional id and READ on the group are
        // checked whole).
        Request::TxnOffsetCommit(r) => r.topics.retain(|(name, partitions)| {
            keep_or(&mut refused, may_topic(Read, name), || {
                partitions_of(name, None, partitions, |p| p.partition, TopicAuthorizationFailed)
            })
        }),
        Request::DescribeTransactions(r) => r.transactional_ids.retain(|id| {
            keep_or(&mut refused, may(Describe, TransactionalId, id), || {
                Refusal::Key {
                    key: id.clone(),
                    code: ErrorCode::TransactionalIdAuthorizationFailed,
                }
            })
        }),
    }
    refused
}

/// `allowed`, or else the refusal `refusal()` made and recorded.
fn keep_or(refused: &mut Refused, allowed: bool, refusal: impl FnOnce() -> Refusal) -> bool {
    if !allowed {
        refused.push(refusal());
    }
    allowed
}

fn partitions_of<P>(
    topic: &str,
    topic_id: Option<Uuid>,
    partitions: &[P],
    index: impl Fn(&P) -> i32,
    code: ErrorCode,
) -> Refusal {
    Refusal::Partitions {
        topic: topic.to_string(),
        topic_id,
        partitions: partitions.iter().map(index).collect(),
        code,
    }
}

fn topic(name: Option<String>, topic_id: Option<Uuid>) -> Refusal {
    Refusal::Topic {
        name,
        topic_id,
        code: TopicAuthorizationFailed,
    }
}

/// Each topic of `topics` whose `allowed` is false, refused TOPIC_AUTHORIZATION_FAILED.
fn topic_partitions(refused: &mut Refused, topics: &mut TopicPartitions, allowed: impl Fn(&str) -> bool) {
    topics.retain(|(name, partitions)| {
        keep_or(refused, allowed(name), || {
            partitions_of(name, None, partitions, |p| *p, TopicAuthorizationFailed)
        })
    });
}

/// A config resource: a topic's needs `operation` on the topic, the others (brokers,
/// loggers) on the cluster.
fn config(
    refused: &mut Refused,
    resource_type: i8,
    name: &str,
    operation: Operation,
    may: &impl Fn(Operation, ResourceType, &str) -> bool,
) -> bool {
    let (allowed, code) = if resource_type == RESOURCE_TOPIC {
        (may(operation, Topic, name), TopicAuthorizationFailed)
    } else {
        (
            may(operation, Cluster, CLUSTER_NAME),
            ErrorCode::ClusterAuthorizationFailed,
        )
    };
    keep_or(refused, allowed, || Refusal::Config {
        resource_type,
        name: name.to_string(),
        code,
    })
}
