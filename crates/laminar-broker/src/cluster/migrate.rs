//! A single node's data directory from before it was a cluster of one voter: its topics
//! (`topics.json`), client quotas (`quotas.json`) and dynamic broker configs
//! (`broker_configs.json`) become the cluster metadata's at its first start, with the same
//! topic ids, so that clients holding them carry on. The files are rewritten (the topics
//! file keeps the internal topics, as every broker's does) or removed once the controller
//! holds them; a start interrupted before that migrates again, and what the controller
//! holds already is skipped.

use std::sync::Arc;

use laminar_cluster::image::{Command, CommandResult};
use laminar_cluster::ClusterError;

use crate::broker::Broker;
use crate::quotas::{QuotaChange, Quotas};

/// How long the migration waits for this broker's registration.
const REGISTER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn single_node(b: &Arc<Broker>) {
    let legacy = b.topics.legacy();
    let store = b.store.clone();
    let quotas = match b.io.run(move || Quotas::read_legacy(&store)).await {
        Ok(q) => q,
        Err(e) => {
            crate::warn!("reading the quotas of the single node: {e}; not migrated");
            None
        }
    };
    if legacy.topics.is_empty() && legacy.dynamic.is_none() && quotas.is_none() {
        return;
    }
    if !b.cluster.alone() {
        crate::warn!(
            "this data directory holds a single node's topics, quotas or dynamic broker configs: \
             they are not used in a cluster of several, whose metadata holds them (create them again)"
        );
        return;
    }
    crate::info!(
        "migrating the single node's {} topics, {} quota entities and dynamic broker configs into its cluster metadata",
        legacy.topics.len(),
        quotas.as_ref().map_or(0, Vec::len)
    );
    match import(b, &legacy, quotas.unwrap_or_default()).await {
        Ok(()) => {
            let topics = b.topics.clone();
            let store = b.store.clone();
            let forgotten =
                b.io.run(move || topics.forget_legacy().and_then(|_| Quotas::forget_legacy(&store)))
                    .await;
            match forgotten {
                Ok(()) => crate::info!("the single node's metadata is the cluster metadata's now"),
                Err(e) => {
                    crate::warn!("removing the migrated files: {e} (the next start skips what is migrated)")
                }
            }
        }
        Err(e) => crate::warn!("migrating the single node's metadata: {e}; the next start tries again"),
    }
}

async fn import(
    b: &Arc<Broker>,
    legacy: &crate::topics::Legacy,
    quotas: Vec<crate::quotas::QuotaEntry>,
) -> Result<(), String> {
    let c = &b.cluster;
    let node = c.node_id;
    // A topic's replicas must be registered brokers.
    if !c
        .wait_within(REGISTER_WAIT, |i| i.brokers.contains_key(&node))
        .await
    {
        return Err(format!(
            "broker {node} was not registered within {REGISTER_WAIT:?}"
        ));
    }
    for t in &legacy.topics {
        if let Some(held) = c.image().topics.get(&t.name) {
            if held.id != t.id {
                crate::warn!(
                    "topic {} is in the cluster metadata with another id ({}, not {}): kept as it is there",
                    t.name,
                    held.id,
                    t.id
                );
            }
            continue;
        }
        let command = Command::CreateTopic {
            name: t.name.clone(),
            id: t.id.clone(),
            configs: t.configs.clone(),
            assignments: vec![vec![node]; t.partitions as usize],
        };
        checked(c.write(command).await, &format!("topic {}", t.name))?;
        crate::info!(
            "migrated topic {} ({} partitions, id {})",
            t.name,
            t.partitions,
            t.id
        );
    }
    if !quotas.is_empty() {
        let changes: Vec<QuotaChange> = quotas
            .into_iter()
            .map(|e| {
                (
                    e.entity,
                    e.values.into_iter().map(|(k, v)| (k, Some(v))).collect(),
                )
            })
            .collect();
        let command = Command::AlterClientQuotas { changes };
        checked(c.write(command).await, "the client quotas")?;
    }
    if let Some(dynamic) = &legacy.dynamic {
        for (entity, configs) in [
            (String::new(), &dynamic.cluster_default),
            (node.0.to_string(), &dynamic.broker),
        ] {
            let target = laminar_cluster::image::ConfigTarget::Broker(entity.clone());
            let previous = c.image().configs_of(&target).unwrap_or_default();
            if configs.is_empty() || previous == *configs {
                continue;
            }
            let command = Command::AlterBrokerConfigs {
                entity,
                configs: configs.clone(),
                previous,
            };
            checked(c.write(command).await, "the dynamic broker configs")?;
        }
    }
    Ok(())
}

fn checked(written: Result<CommandResult, ClusterError>, what: &str) -> Result<(), String> {
    written
        .and_then(CommandResult::into_result)
        .map_err(|e| format!("{what}: {e} ({})", e.code()))
}
