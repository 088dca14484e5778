//! ACLs with the semantics of Kafka's StandardAuthorizer (KIP-801): a binding allows or denies
//! a principal, from a host, an operation on resources named literally, by prefix, or all of
//! a type (the literal `*`). A matching DENY wins; ALLOW on READ, WRITE, DELETE or ALTER
//! implies DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL is every operation;
//! `User:*` is every principal, `*` every host. Super users may do everything; a resource no
//! binding names is open to all only with `allow.everyone.if.no.acl.found`.

use serde::{Deserialize, Serialize};

/// Kafka's `ResourceType`, by its wire number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ResourceType {
    Any = 1,
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

/// The operations an ACL can name on each resource type (Kafka's
/// `AclEntry.supportedOperations`): what authorized-operations fields report on.
pub fn supported_operations(resource: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
        ResourceType::Any => &[],
    }
}

/// Kafka's `PatternType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PatternType {
    /// Filters only: any pattern type.
    Any = 1,
    /// Filters only: the bindings that apply to a name (literal, `*` or a prefix of it).
    Match = 2,
    Literal = 3,
    Prefixed = 4,
}

/// Kafka's `AclOperation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operation {
    Any = 1,
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
    TwoPhaseCommit = 15,
}

/// Kafka's `AclPermissionType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Permission {
    Any = 1,
    Deny = 2,
    Allow = 3,
}

macro_rules! wire {
    ($t:ty, $($v:ident),+) => {
        impl $t {
            pub fn from_code(code: i8) -> Option<$t> {
                [$(<$t>::$v),+].into_iter().find(|v| *v as i8 == code)
            }
            pub fn code(self) -> i8 {
                self as i8
            }
        }
    };
}
wire!(
    ResourceType,
    Any,
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User
);
wire!(PatternType, Any, Match, Literal, Prefixed);
wire!(
    Operation,
    Any,
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
    TwoPhaseCommit
);
wire!(Permission, Any, Deny, Allow);

/// The name every literal binding of `*` matches.
pub const WILDCARD: &str = "*";
/// The principal every principal matches.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The name of the one cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// One ACL: a resource pattern and an entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern: PatternType,
    /// `User:alice`, or `User:*`.
    pub principal: String,
    /// An IP address, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// What DescribeAcls and DeleteAcls select; `None` and the `Any` values match everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclFilter {
    pub fn matches(&self, b: &AclBinding) -> bool {
        let resource_type = self.resource_type == ResourceType::Any || self.resource_type == b.resource_type;
        let resource = match (self.pattern, &self.name) {
            (PatternType::Any, None) => true,
            (PatternType::Any, Some(n)) => &b.name == n,
            (PatternType::Match, None) => true,
            (PatternType::Match, Some(n)) => applies_to(b, n),
            (p, None) => b.pattern == p,
            (p, Some(n)) => b.pattern == p && &b.name == n,
        };
        resource_type
            && resource
            && self.principal.as_ref().is_none_or(|p| p == &b.principal)
            && self.host.as_ref().is_none_or(|h| h == &b.host)
            && (self.operation == Operation::Any || self.operation == b.operation)
            && (self.permission == Permission::Any || self.permission == b.permission)
    }
}

/// The ACLs, sorted by resource (type, name, pattern, then the entry) and each once, as
/// Kafka's StandardAuthorizer keeps them: a check looks up the bindings that can apply to its
/// resource (its literal name, the literal `*`, and each prefix of its name) by binary search
/// instead of scanning every binding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<AclBinding>", into = "Vec<AclBinding>")]
pub struct Acls(Vec<AclBinding>);

impl From<Vec<AclBinding>> for Acls {
    fn from(mut bindings: Vec<AclBinding>) -> Acls {
        bindings.sort();
        bindings.dedup();
        Acls(bindings)
    }
}

impl From<Acls> for Vec<AclBinding> {
    fn from(acls: Acls) -> Vec<AclBinding> {
        acls.0
    }
}

impl Acls {
    /// Adds `bindings`; one already present stays once.
    pub fn insert(&mut self, bindings: impl IntoIterator<Item = AclBinding>) {
        for b in bindings {
            if let Err(at) = self.0.binary_search(&b) {
                self.0.insert(at, b);
            }
        }
    }

    /// Removes `bindings`, those present.
    pub fn remove(&mut self, bindings: &[AclBinding]) {
        for b in bindings {
            if let Ok(at) = self.0.binary_search(b) {
                self.0.remove(at);
            }
        }
    }

    pub fn contains(&self, b: &AclBinding) -> bool {
        self.0.binary_search(b).is_ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, AclBinding> {
        self.0.iter()
    }

    /// The bindings on the resource `resource_type`:`name` itself, of every pattern type.
    fn named(&self, resource_type: ResourceType, name: &str) -> &[AclBinding] {
        fn key(b: &AclBinding) -> (ResourceType, &str) {
            (b.resource_type, b.name.as_str())
        }
        let start = self.0.partition_point(|b| key(b) < (resource_type, name));
        let end = start + self.0[start..].partition_point(|b| key(b) <= (resource_type, name));
        &self.0[start..end]
    }

    /// The bindings of one resource type.
    fn of_type(&self, resource_type: ResourceType) -> &[AclBinding] {
        let start = self.0.partition_point(|b| b.resource_type < resource_type);
        let end = start + self.0[start..].partition_point(|b| b.resource_type <= resource_type);
        &self.0[start..end]
    }

    /// Every binding whose pattern covers the resource `resource_type`:`name`: LITERAL on the
    /// name or on `*`, PREFIXED on any prefix of the name (the name itself included).
    pub fn applicable<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let literal = |n: &'a str| {
            self.named(resource_type, n)
                .iter()
                .filter(|b| b.pattern == PatternType::Literal)
        };
        let wildcard = (name != WILDCARD)
            .then(|| literal(WILDCARD))
            .into_iter()
            .flatten();
        let prefixed = (1..=name.len())
            .filter(|end| name.is_char_boundary(*end))
            .flat_map(move |end| {
                self.named(resource_type, &name[..end])
                    .iter()
                    .filter(|b| b.pattern == PatternType::Prefixed)
            });
        literal(name).chain(wildcard).chain(prefixed)
    }
}

/// Whether binding `b`'s resource pattern covers the resource named `name` (of its type).
fn applies_to(b: &AclBinding, name: &str) -> bool {
    match b.pattern {
        PatternType::Literal => b.name == name || b.name == WILDCARD,
        PatternType::Prefixed => name.starts_with(b.name.as_str()),
        PatternType::Any | PatternType::Match => false,
    }
}

/// Whether an entry with operation `granted` covers a request for `wanted`.
fn covers(granted: Operation, wanted: Operation, permission: Permission) -> bool {
    if granted == Operation::All || granted == wanted {
        return true;
    }
    // Implications hold for ALLOW only: DENY READ does not deny DESCRIBE.
    permission == Permission::Allow
        && match wanted {
            Operation::Describe => matches!(
                granted,
                Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
            ),
            Operation::DescribeConfigs => granted == Operation::AlterConfigs,
            _ => false,
        }
}

/// The authorizer's settings and its bindings.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    /// `super.users`: principals that may do everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

/// Who asks, and from where.
pub struct Requester<'a> {
    /// `User:alice`.
    pub principal: &'a str,
    pub host: &'a str,
}

impl Authorizer {
    /// Whether `principal` (`User:alice`) is in `super.users`.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.iter().any(|s| s == principal)
    }

    /// Whether `who` may do `operation` on the resource `resource_type`:`name`, given
    /// `acls`.
    pub fn authorize(
        &self,
        acls: &Acls,
        who: &Requester<'_>,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(who.principal) {
            return true;
        }
        let mut any_acl = false;
        let mut allowed = false;
        for b in acls.applicable(resource_type, name) {
            debug_assert!(b.resource_type == resource_type && applies_to(b, name));
            any_acl = true;
            let principal = b.principal == who.principal || b.principal == WILDCARD_PRINCIPAL;
            let host = b.host == WILDCARD || b.host == who.host;
            if !(principal && host && covers(b.operation, operation, b.permission)) {
                continue;
            }
            match b.permission {
                Permission::Deny => return false,
                Permission::Allow => allowed = true,
                Permission::Any => {}
            }
        }
        allowed || (!any_acl && self.allow_if_no_acl)
    }

    /// Whether `who` may do `operation` on some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`, e.g. IDEMPOTENT_WRITE for an idempotent producer that may
    /// WRITE some topic): some ALLOW applies to it and no DENY covers every such resource.
    pub fn authorize_any(
        &self,
        acls: &Acls,
        who: &Requester<'_>,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.is_super_user(who.principal) {
            return true;
        }
        let acls = acls.of_type(resource_type);
        let mine = |b: &&AclBinding| {
            b.resource_type == resource_type
                && (b.principal == who.principal || b.principal == WILDCARD_PRINCIPAL)
                && (b.host == WILDCARD || b.host == who.host)
                && covers(b.operation, operation, b.permission)
        };
        let denied_all = acls.iter().filter(mine).any(|b| {
            b.permission == Permission::Deny && b.pattern == PatternType::Literal && b.name == WILDCARD
        });
        if denied_all {
            return false;
        }
        // An allowed name (or prefix) some DENY covers does not count, as Kafka's
        // `authorizeByResourceType` judges: a LITERAL DENY covers the same LITERAL name, a
        // PREFIXED DENY every name and prefix that starts with its prefix.
        let covers_allow = |d: &AclBinding, a: &AclBinding| match (d.pattern, a.pattern) {
            (PatternType::Literal, PatternType::Literal) => d.name == a.name,
            (PatternType::Prefixed, PatternType::Literal | PatternType::Prefixed) => {
                a.name.starts_with(&d.name)
            }
            _ => false,
        };
        acls.iter().filter(mine).any(|b| {
            b.permission == Permission::Allow
                && !acls
                    .iter()
                    .filter(mine)
                    .any(|d| d.permission == Permission::Deny && covers_allow(d, b))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        rt: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn alice() -> Requester<'static> {
        Requester {
            principal: "User:alice",
            host: "10.0.0.1",
        }
    }

    /// Issue 41, item 9: a PREFIXED DENY cancels the ALLOWs it covers for
    /// `authorizeByResourceType` (IDEMPOTENT_WRITE from WRITE on some topic), as in Kafka.
    #[test]
    fn a_prefixed_deny_cancels_the_allows_it_covers_by_resource_type() {
        let a = Authorizer {
            super_users: vec![],
            allow_if_no_acl: false,
        };
        let (t, w) = (ResourceType::Topic, Operation::Write);
        let allow = |name: &str, pattern| acl(t, name, pattern, "User:alice", w, Permission::Allow);
        let deny = |name: &str, pattern| acl(t, name, pattern, "User:alice", w, Permission::Deny);
        let any = |acls: &[AclBinding]| a.authorize_any(&Acls::from(acls.to_vec()), &alice(), w, t);
        assert!(any(&[allow("orders", PatternType::Literal)]));
        assert!(!any(&[
            allow("orders", PatternType::Literal),
            deny("ord", PatternType::Prefixed)
        ]));
        assert!(!any(&[
            allow("orders-", PatternType::Prefixed),
            deny("ord", PatternType::Prefixed)
        ]));
        assert!(any(&[
            allow("orders", PatternType::Literal),
            deny("pay", PatternType::Prefixed)
        ]));
        assert!(
            any(&[
                allow("ord", PatternType::Prefixed),
                deny("orders", PatternType::Literal)
            ]),
            "a literal DENY leaves the rest of a prefix"
        );
    }

    #[test]
    fn standard_authorizer_semantics() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let a = Authorizer {
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        };
        let list = vec![
            acl(Topic, "t", Literal, "User:alice", Write, Allow),
            acl(Topic, "logs-", Prefixed, "User:alice", Read, Allow),
            acl(Topic, "logs-secret", Literal, "User:*", Read, Deny),
            acl(Group, "*", Literal, "User:alice", All, Allow),
            acl(Topic, "cfg", Literal, "User:alice", AlterConfigs, Allow),
            acl(Topic, "t2", Literal, "User:alice", Read, Deny),
        ];
        let acls = Acls::from(list.clone());
        let who = alice();
        assert!(a.authorize(&acls, &who, Write, Topic, "t"));
        assert!(
            a.authorize(&acls, &who, Describe, Topic, "t"),
            "WRITE implies DESCRIBE"
        );
        assert!(!a.authorize(&acls, &who, Read, Topic, "t"));
        assert!(!a.authorize(&acls, &who, Write, Topic, "other"), "no ACL: denied");
        assert!(a.authorize(&acls, &who, Read, Topic, "logs-app"), "a prefix");
        assert!(
            !a.authorize(&acls, &who, Read, Topic, "logs-secret"),
            "a DENY wins"
        );
        assert!(
            a.authorize(&acls, &who, Read, Group, "any-group"),
            "ALL on the wildcard"
        );
        assert!(
            a.authorize(&acls, &who, DescribeConfigs, Topic, "cfg"),
            "ALTER_CONFIGS implies DESCRIBE_CONFIGS"
        );
        assert!(
            !a.authorize(&acls, &who, Describe, Topic, "t2"),
            "DENY READ implies nothing, and nothing allows"
        );
        assert!(
            a.authorize(
                &acls,
                &Requester {
                    principal: "User:admin",
                    host: "h"
                },
                Write,
                Topic,
                "x"
            ),
            "a super user"
        );
        let bob = Requester {
            principal: "User:bob",
            host: "10.0.0.1",
        };
        assert!(!a.authorize(&acls, &bob, Write, Topic, "t"));
        // allow.everyone.if.no.acl.found: a resource no binding names is open; one with
        // bindings for others is not.
        let open = Authorizer {
            allow_if_no_acl: true,
            ..a.clone()
        };
        assert!(open.authorize(&acls, &bob, Write, Topic, "unnamed"));
        assert!(!open.authorize(&acls, &bob, Write, Topic, "t"));
        // Hosts.
        let mut from = acls.clone();
        from.insert([AclBinding {
            host: "10.0.0.9".into(),
            ..acl(Topic, "h", Literal, "User:alice", Write, Allow)
        }]);
        assert!(!a.authorize(&from, &who, Write, Topic, "h"));
        // By resource type: alice may write some topic.
        assert!(a.authorize_any(&acls, &who, Write, Topic));
        assert!(!a.authorize_any(&acls, &bob, Write, Topic));
    }

    /// The index finds exactly the bindings a scan of all of them would: literal names, the
    /// literal `*`, every prefix (multi-byte names included), and nothing of another type.
    #[test]
    fn the_index_finds_what_a_scan_finds() {
        use PatternType::*;
        let names = ["*", "a", "ab", "abc", "abd", "b", "é", "éa", "t-1", "t-"];
        let mut all = Vec::new();
        for rt in [ResourceType::Topic, ResourceType::Group] {
            for n in names {
                for p in [Literal, Prefixed] {
                    if n == "*" && p == Prefixed {
                        continue;
                    }
                    all.push(acl(rt, n, p, "User:alice", Operation::Read, Permission::Allow));
                    all.push(acl(rt, n, p, "User:*", Operation::Write, Permission::Deny));
                }
            }
        }
        let acls = Acls::from(all.iter().rev().cloned().collect::<Vec<_>>());
        assert_eq!(acls.len(), all.len());
        for rt in [ResourceType::Topic, ResourceType::Group, ResourceType::Cluster] {
            for wanted in ["a", "abc", "abcd", "b", "éa", "éb", "t-1", "t-12", "z", "*"] {
                let mut found: Vec<_> = acls.applicable(rt, wanted).cloned().collect();
                found.sort();
                let mut scanned: Vec<_> = all
                    .iter()
                    .filter(|b| b.resource_type == rt && applies_to(b, wanted))
                    .cloned()
                    .collect();
                scanned.sort();
                assert_eq!(found, scanned, "{rt:?} {wanted}");
            }
        }
        let mut fewer = acls.clone();
        fewer.remove(&all[..2]);
        assert_eq!(fewer.len(), all.len() - 2);
        assert!(!fewer.contains(&all[0]) && fewer.contains(&all[2]));
        fewer.insert(all[..3].to_vec());
        assert_eq!(fewer, acls);
    }

    #[test]
    fn filters_select_as_kafka_does() {
        use PatternType::*;
        let b = acl(
            ResourceType::Topic,
            "logs-",
            Prefixed,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        );
        let all = AclFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern: Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        };
        assert!(all.matches(&b));
        let matching = AclFilter {
            name: Some("logs-app".into()),
            pattern: Match,
            ..all.clone()
        };
        assert!(matching.matches(&b));
        let literal = AclFilter {
            name: Some("logs-".into()),
            pattern: Literal,
            ..all.clone()
        };
        assert!(!literal.matches(&b));
        assert_eq!(Operation::from_code(8), Some(Operation::Describe));
        assert_eq!(ResourceType::from_code(5), Some(ResourceType::TransactionalId));
    }
}
