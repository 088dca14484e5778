//! Authentication, apart from the broker: SASL exchanges (PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512, on the `rsasl` crate) and SCRAM credentials. It does no I/O and keeps no
//! state of its own: the broker gives it the users (SCRAM credentials from the cluster
//! metadata, PLAIN passwords from a listener's JAAS configuration) through [`Users`].

pub mod acl;
pub mod client;
pub mod jaas;
pub mod oauthbearer;
pub mod peer_secret;
pub mod principal;
pub mod sasl;
pub mod scram;
pub mod scram_server;

pub use client::{ClientExchange, ClientStep};
pub use sasl::{AuthError, Authenticator, Exchange, Step, Users};
pub use scram::{ScramKeys, ScramMechanism};
