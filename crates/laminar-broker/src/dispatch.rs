//! The request dispatch: what the network layer calls for each frame. It decodes the
//! request, refuses what this broker cannot answer, and calls the API's handler.

use std::sync::Arc;

use bytes::Bytes;
use laminar_protocol::requests::{self, peek_header, Request};
use laminar_protocol::responses::{self, ResponseFrame};
use laminar_protocol::{ApiKey, ProtocolError};

use crate::broker::Broker;
use crate::context::{Refused, RequestContext, Session};
use crate::handlers;
use crate::response::{Dispatched, RecordsFile};
use laminar_auth::principal::Principal;
use laminar_net::{CloseConnection, Handled, HandlerFuture, RequestKind, Service};

impl Service for Broker {
    type File = RecordsFile;
    type Session = Session;

    fn open(
        &self,
        peer: std::net::SocketAddr,
        listener: usize,
        tls: Option<&laminar_net::TlsPeer>,
    ) -> Arc<Session> {
        let l = self.listeners[listener].clone();
        // On an SSL listener a client certificate names the principal (mutual TLS); on
        // SASL_SSL the SASL exchange does.
        let certified = match (l.protocol, tls.and_then(|t| t.certificates.first())) {
            (crate::listeners::SecurityProtocol::Ssl, Some(der)) => {
                // As Kafka: a subject that cannot be read, or that no mapping rule maps
                // (NoMatchingRule), fails the authentication; it is nobody's principal.
                let named = laminar_auth::principal::subject_dn(der).and_then(|dn| {
                    self.tls_principals
                        .apply(&dn)
                        .ok_or_else(|| format!("no ssl.principal.mapping.rules rule matches {dn}"))
                });
                match named {
                    Ok(name) => Some(Principal::user(&name)),
                    Err(e) => {
                        crate::warn!("connection from {peer}: {e}; it is refused");
                        return Arc::new(Session::refused(peer, l));
                    }
                }
            }
            _ => None,
        };
        Arc::new(Session::new(peer, l, self.sasl[listener].clone(), certified))
    }

    fn frame_limit(&self, session: &Session) -> Option<usize> {
        session
            .unauthenticated()
            .then_some(crate::context::UNAUTHENTICATED_FRAME_BYTES)
    }

    fn authenticate_by(&self, session: &Session) -> Option<std::time::Instant> {
        session.authenticate_by()
    }

    fn kind(&self, session: &Session, frame: &[u8]) -> RequestKind {
        if session.expects_raw_token() {
            return RequestKind {
                name: "a SASL token (after SaslHandshake v0)",
                phases: Some(self.metrics.phases(ApiKey::SaslAuthenticate)),
            };
        }
        match peek_header(frame).and_then(|(key, _, _)| ApiKey::from_i16(key)) {
            Some(api) => RequestKind {
                name: api.name(),
                phases: Some(self.metrics.phases(api)),
            },
            None => RequestKind {
                name: "an unknown request",
                phases: None,
            },
        }
    }

    fn call(self: Arc<Self>, frame: Bytes, session: Arc<Session>) -> HandlerFuture<RecordsFile> {
        Box::pin(async move {
            match self.dispatch(frame, &session).await {
                Ok(Dispatched::Now(response)) => Handled::Now(Ok(response)),
                Ok(Dispatched::Later(rest)) => Handled::Later(rest),
                Err(close) => Handled::Now(Err(close)),
            }
        })
    }
}

impl Broker {
    async fn dispatch(
        self: Arc<Self>,
        frame: Bytes,
        session: &Session,
    ) -> Result<Dispatched, CloseConnection> {
        // After a SaslHandshake v0 the frames are bare SASL tokens until the exchange ends.
        if session.expects_raw_token() {
            return handlers::sasl_authenticate::raw_token(session, &self.config.security, frame).await;
        }
        let (key, version, correlation_id) =
            peek_header(&frame).ok_or_else(|| CloseConnection("request shorter than its header".into()))?;
        let Some(api) = ApiKey::from_i16(key) else {
            // Kafka closes the connection on an unknown API key; so do we, with a reason.
            return Err(CloseConnection(format!("unknown API key {key}")));
        };
        if !api.supports(version) {
            if api == ApiKey::ApiVersions {
                return Ok(Dispatched::Now(Some(ResponseFrame::from_bytes(
                    responses::api_versions_unsupported(correlation_id),
                ))));
            }
            return Err(CloseConnection(format!("{api:?} v{version} is not supported")));
        }
        if trace_requests() {
            eprintln!("TRACE api {api:?} v{version}");
        }
        // Before a SASL client has authenticated, nothing but the SASL requests is decoded.
        let principal = session
            .principal_for(api, std::time::Instant::now())
            .map_err(|Refused(why)| CloseConnection(why))?;
        let (header, request) = match requests::decode(frame) {
            Ok(r) => r,
            Err(
                e @ (ProtocolError::Truncated { .. }
                | ProtocolError::CountTooLarge { .. }
                | ProtocolError::DecodesTooLarge { .. }
                | ProtocolError::Malformed(_)),
            ) => {
                return Err(CloseConnection(format!(
                    "malformed {api:?} v{version} request: {e}"
                )));
            }
            Err(e) => return Err(CloseConnection(e.to_string())),
        };
        let b = &self;
        let v = version;
        let c = header.correlation_id;
        if let Err(code) = b.groups.ready() {
            if let Some(refused) = handlers::not_coordinator::refuse(&request, v, c, code) {
                return refused
                    .map(|bytes| Dispatched::Now(Some(ResponseFrame::from_bytes(bytes))))
                    .map_err(|e| CloseConnection(format!("encoding {api:?} v{version} response: {e}")));
            }
        }
        // The one authorization step: what the request asks as a whole is checked here and
        // a refusal answered in the request's own shape; the handler may ask only what its
        // API's rule states.
        let rule = crate::security::step::rule(&request, v);
        let grants =
            match crate::security::step::Grants::decide(api, rule, &principal, session.peer.ip(), &b.authz) {
                Ok(grants) => grants,
                Err(code) => {
                    return handlers::refused_whole(&request, v, c, code)
                        .map(|bytes| Dispatched::Now(Some(ResponseFrame::from_bytes(bytes))))
                        .map_err(|e| CloseConnection(format!("encoding {api:?} v{version} response: {e}")));
                }
            };
        // Then what it names resource by resource: the refused resources are taken out, to
        // be answered beside the handler's answers.
        let mut request = request;
        let refused = crate::security::split::split(&mut request, v, &grants, &b.topics);
        let ctx = RequestContext {
            api_version: v,
            correlation_id: c,
            client_id: header.client_id.clone().unwrap_or_default(),
            peer: session.peer,
            listener: session.listener.clone(),
            principal,
            grants,
        };
        let encoded = match request {
            Request::ApiVersions(r) => handlers::api_versions::handle(&ctx, r),
            Request::Metadata(r) => {
                handlers::metadata::handle(&b.changes(), &b.cluster_id, &ctx, r, refused).await
            }
            Request::Produce(r) => return handlers::produce::handle(&b.produce, &ctx, r, refused).await,
            Request::Fetch(r) => {
                return Ok(Dispatched::Now(Some(
                    handlers::fetch::handle(&b.fetch, &ctx, r, refused).await,
                )))
            }
            Request::ListOffsets(r) => {
                handlers::list_offsets::handle(&b.io, &b.partitions, &ctx, r, refused).await
            }
            Request::CreateTopics(r) => handlers::create_topics::handle(&b.changes(), &ctx, r, refused).await,
            Request::DeleteTopics(r) => handlers::delete_topics::handle(&b.changes(), &ctx, r, refused).await,
            Request::InitProducerId(r) => handlers::init_producer_id::handle(&b.txns, &ctx, r).await,
            Request::DescribeConfigs(r) => {
                handlers::describe_configs::handle(&b.config, &b.topics, &ctx, r, refused)
            }
            Request::CreatePartitions(r) => {
                handlers::create_partitions::handle(&b.cluster, &b.applied, &ctx, r, refused).await
            }
            Request::FindCoordinator(r) => handlers::find_coordinator::handle(&b.cluster, &ctx, r, refused),
            Request::JoinGroup(r) => handlers::join_group::handle(&b.groups.coordinator, &ctx, r).await,
            Request::SyncGroup(r) => handlers::sync_group::handle(&b.groups.coordinator, &ctx, r).await,
            Request::Heartbeat(r) => handlers::heartbeat::handle(&b.groups.coordinator, &ctx, r),
            Request::LeaveGroup(r) => handlers::leave_group::handle(&b.groups, &ctx, r).await,
            Request::OffsetCommit(r) => {
                handlers::offset_commit::handle(&b.groups, &b.topics, &ctx, r, refused).await
            }
            Request::OffsetFetch(r) => {
                handlers::offset_fetch::handle(&b.groups.coordinator, &b.groups.store, &ctx, r, refused)
            }
            Request::ListGroups(r) => handlers::list_groups::handle(&b.groups.coordinator, &ctx, r),
            Request::DescribeGroups(r) => {
                handlers::describe_groups::handle(&b.groups.coordinator, &ctx, r, refused)
            }
            Request::DeleteGroups(r) => handlers::delete_groups::handle(&b.groups, &ctx, r, refused).await,
            Request::OffsetDelete(r) => handlers::offset_delete::handle(&b.groups, &ctx, r, refused).await,
            Request::DescribeClientQuotas(r) => handlers::describe_client_quotas::handle(&b.quotas, &ctx, r),
            Request::AlterClientQuotas(r) => {
                handlers::alter_client_quotas::handle(&b.cluster, &b.applied, &ctx, r).await
            }
            Request::DescribeLogDirs(r) => {
                let dir = handlers::describe_log_dirs::LogDir {
                    path: b.config.data_dir.clone(),
                    topics: b.topics.clone(),
                    hosted: b.partitions.clone(),
                };
                handlers::describe_log_dirs::handle(&b.io, dir, &ctx, r).await
            }
            Request::DeleteRecords(r) => {
                handlers::delete_records::handle(&b.io, &b.partitions, &ctx, r, refused).await
            }
            Request::DescribeCluster(r) => {
                handlers::describe_cluster::handle(&b.cluster, &b.cluster_id, &ctx, r)
            }
            Request::OffsetForLeaderEpoch(r) => {
                handlers::offset_for_leader_epoch::handle(&b.partitions, &ctx, r, refused)
            }
            Request::AlterConfigs(r) => handlers::alter_configs::handle(&b.changes(), &ctx, r, refused).await,
            Request::ElectLeaders(r) => handlers::elect_leaders::handle(&b.cluster, &ctx, r).await,
            Request::DescribeProducers(r) => {
                handlers::describe_producers::handle(&b.partitions, &ctx, r, refused)
            }
            Request::AlterPartitionReassignments(r) => {
                handlers::alter_partition_reassignments::handle(&b.cluster, &ctx, r).await
            }
            Request::ListPartitionReassignments(r) => {
                handlers::list_partition_reassignments::handle(&b.cluster, &ctx, r)
            }
            Request::AddPartitionsToTxn(r) => {
                handlers::add_partitions_to_txn::handle(&b.txns, &b.topics, &ctx, r, refused).await
            }
            Request::AddOffsetsToTxn(r) => handlers::add_offsets_to_txn::handle(&b.txns, &ctx, r).await,
            Request::EndTxn(r) => handlers::end_txn::handle(&b.txns, &ctx, r).await,
            Request::TxnOffsetCommit(r) => {
                handlers::txn_offset_commit::handle(&b.txns, &b.topics, &ctx, r, refused).await
            }
            Request::WriteTxnMarkers(r) => handlers::write_txn_markers::handle(&b.txns, &ctx, r).await,
            Request::DescribeTransactions(r) => {
                handlers::describe_transactions::handle(&b.txns, &ctx, r, refused)
            }
            Request::ListTransactions(r) => handlers::list_transactions::handle(&b.txns.coordinator, &ctx, r),
            Request::SaslHandshake(r) => handlers::sasl_handshake::handle(session, &ctx, r),
            Request::SaslAuthenticate(r) => {
                handlers::sasl_authenticate::handle(session, &b.config.security, &ctx, r).await
            }
            Request::DescribeUserScramCredentials(r) => {
                handlers::describe_user_scram_credentials::handle(&b.cluster, &ctx, r)
            }
            Request::DescribeAcls(r) => handlers::acls::describe(&b.cluster, &ctx, r),
            Request::CreateAcls(r) => handlers::acls::create(&b.cluster, &ctx, r).await,
            Request::DeleteAcls(r) => handlers::acls::delete(&b.cluster, &ctx, r).await,
            Request::AlterUserScramCredentials(r) => {
                handlers::alter_user_scram_credentials::handle(&b.cluster, &ctx, r).await
            }
        };
        encoded
            .map(|bytes| Dispatched::Now(Some(ResponseFrame::from_bytes(bytes))))
            .map_err(|e| CloseConnection(format!("encoding {api:?} v{version} response: {e}")))
    }
}

/// `LAMINAR_TRACE` set: print every request's API and version. Read once: `getenv` on every
/// request took measurable time on the socket threads.
fn trace_requests() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("LAMINAR_TRACE").is_some())
}
