//! How far this broker has applied the cluster metadata: the version of the newest image
//! whose logs are created, partitions led or followed, configs and quotas in effect here
//! (`cluster/publish.rs` moves it). A change through the controller is answered once it is
//! applied here, so that the client's next request to this broker finds it in effect.

use std::time::Duration;

use laminar_cluster::Cluster;
use tokio::sync::watch;

/// How long a change through the controller waits to be applied here.
const APPLY_WAIT: Duration = Duration::from_secs(5);

pub struct AppliedImages {
    version: watch::Sender<u64>,
}

impl Default for AppliedImages {
    fn default() -> Self {
        AppliedImages {
            version: watch::channel(0).0,
        }
    }
}

impl AppliedImages {
    /// The image of `version` is applied here.
    pub fn set(&self, version: u64) {
        self.version.send_replace(version);
    }

    /// Waits until the image `cluster` holds now is applied here (at most `APPLY_WAIT`):
    /// called after a change the controller committed and this broker's image shows.
    pub async fn wait(&self, cluster: &Cluster) {
        let version = cluster.image().version;
        let mut applied = self.version.subscribe();
        let _ = tokio::time::timeout(APPLY_WAIT, applied.wait_for(|v| *v >= version)).await;
    }
}
