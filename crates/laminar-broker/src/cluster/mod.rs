//! This broker's side of the cluster: applying each new metadata image to its logs and
//! replicas (`publish`), starting a follower's fetches from its leaders
//! (`laminar_data::follow`). The control plane itself (the controller quorum, the image,
//! replica states) is `laminar-cluster`.

pub mod publish;
