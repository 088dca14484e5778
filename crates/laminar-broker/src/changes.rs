//! What the handlers that change the cluster metadata work with (CreateTopics, DeleteTopics,
//! AlterConfigs, IncrementalAlterConfigs, and Metadata's auto-creation): the cluster to ask,
//! the topics and settings as applied here to check a change against, and how far this
//! broker has applied the metadata, since a change is answered once it is in effect here.
//! Neither the data plane nor the coordinators.

use laminar_cluster::Cluster;

use crate::applied::AppliedImages;
use crate::config::BrokerConfig;
use crate::topics::Topics;

pub struct MetadataChanges<'a> {
    pub cluster: &'a Cluster,
    pub applied: &'a AppliedImages,
    pub topics: &'a Topics,
    /// The settings read at start (`default.replication.factor`, `auto.create.topics.enable`).
    pub config: &'a BrokerConfig,
}

impl MetadataChanges<'_> {
    /// Waits until this broker has applied the image it holds now: a change the controller
    /// committed is in effect here (logs created, partitions led, configs applied).
    pub async fn applied_here(&self) {
        self.applied.wait(self.cluster).await
    }
}
