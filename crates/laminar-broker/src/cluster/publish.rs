//! Applies each new cluster image to this broker: the topics it lists become the broker's
//! topics, the partitions placed here get their logs, and each of them is led, followed
//! (a fetcher started) or left idle as the image says; a coordinator whose internal
//! partition this broker begins to lead loads from it (`Groups::load`, `Txns::load`), and one
//! whose partition it stops leading unloads.

use std::sync::Arc;

use tokio::sync::watch;

use crate::broker::Broker;
use laminar_cluster::image::ClusterImage;
use laminar_cluster::replica::Transition;
use laminar_cluster::{LeaderEpoch, TopicPartition};

/// Runs until the image channel closes. Creating and deleting logs are directory
/// operations: they run on the I/O pool.
pub async fn run(b: Arc<Broker>, mut images: watch::Receiver<Arc<ClusterImage>>) {
    let mut previous: Option<Arc<ClusterImage>> = None;
    loop {
        let image = images.borrow_and_update().clone();
        let newer = previous
            .as_ref()
            .map_or(image.version > 0, |p| image.version > p.version);
        if newer {
            let topics = b.topics.clone();
            let node = b.config.node_id;
            let before = previous.clone();
            let now = image.clone();
            b.io.run(move || topics.apply_image(before.as_deref(), &now, laminar_cluster::BrokerId(node)))
                .await;
            // Client quotas live in the cluster metadata: the same on every broker.
            b.quotas.set_entries(image.quotas.clone());
            // So do the dynamic broker configs: the cluster default and this broker's own.
            let dynamic = image.dynamic_configs_of(laminar_cluster::BrokerId(node));
            if dynamic != b.topics.dynamic_configs() {
                let topics = b.topics.clone();
                if let Err(e) = b.io.run(move || topics.set_dynamic_configs(dynamic)).await {
                    crate::warn!("applying the dynamic broker configs of the cluster metadata: {e}");
                }
            }
            apply_roles(&b, &image).await;
            // Consumers waiting in long poll: an ISR change may have moved a high watermark.
            b.partitions.wake_all();
            b.applied.set(image.version);
            previous = Some(image);
        }
        if images.changed().await.is_err() {
            return;
        }
    }
}

/// Leads, follows or stops each partition placed here (or placed here before).
async fn apply_roles(b: &Arc<Broker>, image: &ClusterImage) {
    let cluster = &b.cluster;
    let node = cluster.node_id;
    let fenced = !image.serves(node, &cluster.incarnation);
    let mut partitions: Vec<TopicPartition> = image
        .topics
        .values()
        .flat_map(|t| (0..t.partitions.len() as i32).map(move |p| TopicPartition::new(t.name.clone(), p)))
        .collect();
    for p in b.partitions.all() {
        partitions.push(TopicPartition::new(p.topic.clone(), p.partition));
    }
    partitions.sort();
    partitions.dedup();
    // The coordinators load once every partition has its role: a transaction found decided
    // then has the partitions it writes markers into led already, where this image leads
    // them.
    let mut loads = Vec::new();
    for TopicPartition { topic, partition } in partitions {
        let info = image.partition(&topic, partition);
        let Some(transition) = b.partitions.apply(&topic, partition, info, fenced) else {
            continue;
        };
        let hosted = b.partitions.get(&topic, partition);
        match transition {
            Transition::BecameLeader { epoch } => {
                crate::info!("leading {topic}-{partition} at epoch {epoch}");
                if let Some(hosted) = hosted {
                    // Before it serves: the epoch's start recorded ahead of anything appended
                    // in it, and the idempotent producers' state rebuilt from the log as it
                    // is now (after a restart, or what it replicated as a follower), so that
                    // retries across the failover are de-duplicated.
                    // On the partition's storage thread: after any append a fetcher of the
                    // old role had queued, before any of the new leadership.
                    let h2 = hosted.clone();
                    let ready = b
                        .storage
                        .run(hosted.storage_key(), move || {
                            // A partition placed here without a log (it could not be
                            // created) serves nothing: clients see it as unknown.
                            let Some(log) = h2.log() else { return Ok(0) };
                            log.begin_epoch(epoch.0)?;
                            h2.rebuild_producers(&log)
                        })
                        .await;
                    match ready {
                        Ok(Ok(_)) => hosted.replica.start_serving(),
                        // It does not serve: clients see NOT_LEADER_OR_FOLLOWER.
                        Ok(Err(e)) => {
                            crate::warn!("preparing {topic}-{partition} to lead at epoch {epoch}: {e}")
                        }
                        Err(e) => crate::warn!("preparing {topic}-{partition} to lead at epoch {epoch}: {e}"),
                    }
                }
                if b.groups.hold.is_partition(&topic, partition) {
                    loads.push(Load::Groups(epoch));
                }
                if b.txns.hold.is_partition(&topic, partition) {
                    loads.push(Load::Txns(epoch));
                }
            }
            Transition::BecameFollower { leader, epoch } => {
                crate::info!("following broker {leader} for {topic}-{partition} at epoch {epoch}");
                if b.groups.hold.is_partition(&topic, partition) {
                    b.groups.unload();
                }
                if b.txns.hold.is_partition(&topic, partition) {
                    b.txns.unload();
                }
                if let Some(hosted) = hosted {
                    let generation = hosted.replica.generation();
                    tokio::spawn(laminar_data::follow::follow(
                        b.follower.clone(),
                        hosted,
                        leader,
                        epoch,
                        generation,
                    ));
                }
            }
            Transition::Stopped => {
                crate::info!("neither leading nor following {topic}-{partition} now");
                if b.groups.hold.is_partition(&topic, partition) {
                    b.groups.unload();
                }
                if b.txns.hold.is_partition(&topic, partition) {
                    b.txns.unload();
                }
            }
        }
    }
    for load in loads {
        match load {
            Load::Groups(epoch) => b.groups.load(&b.io, b.store.clone(), epoch).await,
            Load::Txns(epoch) => b.txns.load(&b.io, epoch).await,
        }
    }
}

/// A coordinator to load, at its partition's new leader epoch here.
enum Load {
    Groups(LeaderEpoch),
    Txns(LeaderEpoch),
}
