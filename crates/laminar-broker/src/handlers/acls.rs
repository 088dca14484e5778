//! DescribeAcls, CreateAcls and DeleteAcls v1-3 (`kafka-acls`): ACLs kept in the cluster
//! metadata, so every broker authorizes alike; a change is durable and in effect on this
//! broker before it is answered. Without an authorizer they answer SECURITY_DISABLED, as
//! Kafka does; describing needs DESCRIBE on the cluster, changing ALTER.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse};
use laminar_auth::acl::{AclBinding, Operation};
use laminar_cluster::image::Command;
use laminar_cluster::Cluster;
use laminar_protocol::requests::{AclFilterSpec, CreateAclsRequest, DeleteAclsRequest};
use laminar_protocol::{responses, ApiKey, ErrorCode};

use super::{sb, Encoded};
use crate::context::RequestContext;
use crate::security::authz::{binding, filter};

/// Why no ACL request can be served, if none can: no authorizer, or not allowed.
fn refused(ctx: &RequestContext, operation: Operation) -> Option<(ErrorCode, String)> {
    if !ctx.grants.authorizer_enabled() {
        return Some((
            ErrorCode::SecurityDisabled,
            "No Authorizer is configured on the broker".into(),
        ));
    }
    if !ctx.may_on_cluster(operation) {
        return Some((
            ErrorCode::ClusterAuthorizationFailed,
            format!("{} may not {operation:?} the cluster's ACLs", ctx.principal),
        ));
    }
    None
}

pub fn describe(cluster: &Cluster, ctx: &RequestContext, r: AclFilterSpec) -> Encoded {
    let mut resp = DescribeAclsResponse::default();
    match refused(ctx, Operation::Describe)
        .map_or_else(|| filter(&r).map_err(|e| (ErrorCode::InvalidRequest, e)), Err)
    {
        Err((code, why)) => {
            resp.error_code = code.code();
            resp.error_message = Some(sb(&why));
        }
        Ok(f) => {
            let image = cluster.image();
            for b in image.acls.iter().filter(|b| f.matches(b)) {
                let same = |x: &&mut DescribeAclsResource| {
                    x.resource_type == b.resource_type.code()
                        && x.resource_name.as_str() == b.name
                        && x.pattern_type == b.pattern.code()
                };
                let entry = match resp.resources.iter_mut().position(|x| same(&x)) {
                    Some(i) => &mut resp.resources[i],
                    None => {
                        let mut x = DescribeAclsResource::default();
                        x.resource_type = b.resource_type.code();
                        x.resource_name = sb(&b.name);
                        x.pattern_type = b.pattern.code();
                        resp.resources.push(x);
                        resp.resources.last_mut().unwrap()
                    }
                };
                let mut d = AclDescription::default();
                d.principal = sb(&b.principal);
                d.host = sb(&b.host);
                d.operation = b.operation.code();
                d.permission_type = b.permission.code();
                entry.acls.push(d);
            }
        }
    }
    responses::encode(ApiKey::DescribeAcls, ctx.api_version, ctx.correlation_id, &resp)
}

pub async fn create(cluster: &Cluster, ctx: &RequestContext, r: CreateAclsRequest) -> Encoded {
    let refused = refused(ctx, Operation::Alter);
    let checked: Vec<Result<AclBinding, (ErrorCode, String)>> = r
        .creations
        .iter()
        .map(|c| match &refused {
            Some(why) => Err(why.clone()),
            None => binding(c).map_err(|e| (ErrorCode::InvalidRequest, e)),
        })
        .collect();
    let bindings: Vec<AclBinding> = checked.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
    let written = write(
        cluster,
        Command::CreateAcls {
            bindings: bindings.clone(),
        },
        bindings.is_empty(),
    )
    .await;
    if written.is_ok() {
        cluster
            .wait_for(|i| bindings.iter().all(|b| i.acls.contains(b)))
            .await;
    }
    let mut resp = CreateAclsResponse::default();
    resp.results = checked
        .into_iter()
        .map(|c| {
            let mut x = AclCreationResult::default();
            if let Err((code, why)) = c.map(|_| ()).and(written.clone()) {
                x.error_code = code.code();
                x.error_message = Some(sb(&why));
            }
            x
        })
        .collect();
    responses::encode(ApiKey::CreateAcls, ctx.api_version, ctx.correlation_id, &resp)
}

pub async fn delete(cluster: &Cluster, ctx: &RequestContext, r: DeleteAclsRequest) -> Encoded {
    let refused = refused(ctx, Operation::Alter);
    let image = cluster.image();
    let found: Vec<Result<Vec<AclBinding>, (ErrorCode, String)>> = r
        .filters
        .iter()
        .map(|f| match &refused {
            Some(why) => Err(why.clone()),
            None => filter(f)
                .map(|f| image.acls.iter().filter(|b| f.matches(b)).cloned().collect())
                .map_err(|e| (ErrorCode::InvalidRequest, e)),
        })
        .collect();
    let mut bindings: Vec<AclBinding> = found.iter().flatten().flatten().cloned().collect();
    bindings.sort();
    bindings.dedup();
    let written = write(
        cluster,
        Command::DeleteAcls {
            bindings: bindings.clone(),
        },
        bindings.is_empty(),
    )
    .await;
    if written.is_ok() {
        cluster
            .wait_for(|i| bindings.iter().all(|b| !i.acls.contains(b)))
            .await;
    }
    let mut resp = DeleteAclsResponse::default();
    resp.filter_results = found
        .into_iter()
        .map(|f| {
            let mut x = DeleteAclsFilterResult::default();
            match f.and_then(|m| written.clone().map(|()| m)) {
                Err((code, why)) => {
                    x.error_code = code.code();
                    x.error_message = Some(sb(&why));
                }
                Ok(matching) => {
                    x.matching_acls = matching
                        .iter()
                        .map(|b| {
                            let mut m = DeleteAclsMatchingAcl::default();
                            m.resource_type = b.resource_type.code();
                            m.resource_name = sb(&b.name);
                            m.pattern_type = b.pattern.code();
                            m.principal = sb(&b.principal);
                            m.host = sb(&b.host);
                            m.operation = b.operation.code();
                            m.permission_type = b.permission.code();
                            m
                        })
                        .collect()
                }
            }
            x
        })
        .collect();
    responses::encode(ApiKey::DeleteAcls, ctx.api_version, ctx.correlation_id, &resp)
}

/// Writes `command` through the controller, unless there is nothing to change.
async fn write(cluster: &Cluster, command: Command, nothing: bool) -> Result<(), (ErrorCode, String)> {
    if nothing {
        return Ok(());
    }
    cluster
        .write(command)
        .await
        .and_then(|r| r.into_result())
        .map_err(|e| (ErrorCode::UnknownServerError, e.to_string()))
}
