//! The authorizer as requests see it: `authorizer.class.name` set (Kafka's
//! StandardAuthorizer), each request's principal and host are checked against the ACLs in
//! the cluster metadata with `laminar-auth`'s semantics; unset, every request is allowed (as
//! in Kafka without an authorizer).

use std::sync::Arc;

use laminar_auth::acl::{Authorizer, Operation, Requester, ResourceType};
use laminar_cluster::Cluster;

/// The class names taken as Kafka's standard authorizer.
pub const STANDARD_AUTHORIZERS: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

impl std::fmt::Debug for Authz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authz")
            .field("authorizer", &self.authorizer)
            .finish()
    }
}

pub struct Authz {
    /// `None`: no authorizer configured.
    pub authorizer: Option<Authorizer>,
    pub cluster: Arc<Cluster>,
}

impl Authz {
    /// Whether `principal` (`User:alice`) from `host` may do `operation` on the resource.
    pub fn allows(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource: ResourceType,
        name: &str,
    ) -> bool {
        let Some(a) = &self.authorizer else {
            return true;
        };
        let image = self.cluster.image();
        a.authorize(
            &image.acls,
            &Requester { principal, host },
            operation,
            resource,
            name,
        )
    }

    /// Whether it may do `operation` on some resource of the type.
    pub fn allows_any(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource: ResourceType,
    ) -> bool {
        let Some(a) = &self.authorizer else {
            return true;
        };
        let image = self.cluster.image();
        a.authorize_any(&image.acls, &Requester { principal, host }, operation, resource)
    }

    pub fn enabled(&self) -> bool {
        self.authorizer.is_some()
    }
}

/// A binding CreateAcls may store, from its wire form, or why not (INVALID_REQUEST, with
/// Kafka's reasons).
pub fn binding(
    spec: &laminar_protocol::requests::AclFilterSpec,
) -> Result<laminar_auth::acl::AclBinding, String> {
    use laminar_auth::acl::{AclBinding, PatternType, Permission, CLUSTER_NAME};
    let resource_type = ResourceType::from_code(spec.resource_type)
        .filter(|t| *t != ResourceType::Any)
        .ok_or("Invalid resource type: it must be a concrete type")?;
    let pattern = PatternType::from_code(spec.pattern_type)
        .filter(|p| matches!(p, PatternType::Literal | PatternType::Prefixed))
        .ok_or("Invalid pattern type: LITERAL or PREFIXED")?;
    let operation = Operation::from_code(spec.operation)
        .filter(|o| *o != Operation::Any)
        .ok_or("Invalid operation")?;
    let permission = Permission::from_code(spec.permission)
        .filter(|p| *p != Permission::Any)
        .ok_or("Invalid permission type: ALLOW or DENY")?;
    let name = spec.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err("Resource name should not be empty".into());
    }
    if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    let principal = spec.principal.clone().unwrap_or_default();
    if !principal
        .split_once(':')
        .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())
    {
        return Err(format!(
            "Could not parse principal from `{principal}` (it should be TYPE:NAME)"
        ));
    }
    let host = spec
        .host
        .clone()
        .filter(|h| !h.is_empty())
        .ok_or("Host should not be empty")?;
    Ok(AclBinding {
        resource_type,
        name,
        pattern,
        principal,
        host,
        operation,
        permission,
    })
}

/// A filter of DescribeAcls or DeleteAcls, from its wire form, or why not.
pub fn filter(
    spec: &laminar_protocol::requests::AclFilterSpec,
) -> Result<laminar_auth::acl::AclFilter, String> {
    use laminar_auth::acl::{AclFilter, PatternType, Permission};
    Ok(AclFilter {
        resource_type: ResourceType::from_code(spec.resource_type).ok_or("Invalid resource type")?,
        name: spec.name.clone(),
        pattern: PatternType::from_code(spec.pattern_type).ok_or("Invalid pattern type")?,
        principal: spec.principal.clone(),
        host: spec.host.clone(),
        operation: Operation::from_code(spec.operation).ok_or("Invalid operation")?,
        permission: Permission::from_code(spec.permission).ok_or("Invalid permission type")?,
    })
}
