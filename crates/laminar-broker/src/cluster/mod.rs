//! This broker's side of the cluster: applying each new metadata image to its logs and
//! replicas (`publish`), and a follower's fetches from its leaders (`fetcher`). The control
//! plane itself (the controller quorum, the image, replica states) is `laminar-cluster`.

pub mod fetcher;
pub mod publish;
