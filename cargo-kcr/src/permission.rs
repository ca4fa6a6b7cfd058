//! [`Permission`]: one verb on one resource of one API group, as an RBAC rule grants it, and
//! the order roles are written in.

use std::cmp::Ordering;

/// The verbs of resources in the order roles list them; other verbs (`bind`, `escalate`,
/// `impersonate`, `use`, ...) follow, alphabetically.
pub const VERB_ORDER: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// The wildcard of RBAC rules (any group, resource or verb).
pub const WILDCARD: &str = "*";

/// One verb on one resource of one API group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Permission {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource as a rule names it: the plural, with `/<subresource>` appended.
    pub resource: String,
    /// The verb.
    pub verb: String,
}

impl Permission {
    /// A permission; `group` is `""` for the core group, `resource` may end in
    /// `/<subresource>`.
    pub fn new(verb: &str, group: &str, resource: &str) -> Permission {
        Permission {
            group: group.to_owned(),
            resource: resource.to_owned(),
            verb: verb.to_owned(),
        }
    }

    /// Whether this permission, read as a granted one (`*` matches anything), grants `other`.
    pub fn grants(&self, other: &Permission) -> bool {
        let matches = |granted: &str, wanted: &str| granted == WILDCARD || granted == wanted;
        matches(&self.group, &other.group)
            && matches(&self.resource, &other.resource)
            && matches(&self.verb, &other.verb)
    }

    /// Whether any of the group, resource or verb is the wildcard.
    pub fn is_wildcard(&self) -> bool {
        [&self.group, &self.resource, &self.verb]
            .iter()
            .any(|s| s.as_str() == WILDCARD)
    }
}

/// Orders verbs as [`VERB_ORDER`], then alphabetically.
pub fn compare_verbs(a: &str, b: &str) -> Ordering {
    let rank = |v: &str| {
        VERB_ORDER
            .iter()
            .position(|o| *o == v)
            .unwrap_or(VERB_ORDER.len())
    };
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

impl Ord for Permission {
    fn cmp(&self, other: &Self) -> Ordering {
        self.group
            .cmp(&other.group)
            .then_with(|| self.resource.cmp(&other.resource))
            .then_with(|| compare_verbs(&self.verb, &other.verb))
    }
}

impl PartialOrd for Permission {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for Permission {
    /// `verb group/resource`, `core` for the core group: `patch apps/deployments/status`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn permissions_sort_by_group_resource_then_verb_order() {
        let set: BTreeSet<Permission> = [
            Permission::new("delete", "apps", "deployments"),
            Permission::new("get", "apps", "deployments"),
            Permission::new("escalate", "", "pods"),
            Permission::new("watch", "", "pods"),
            Permission::new("bind", "", "pods"),
        ]
        .into_iter()
        .collect();
        let shown: Vec<String> = set.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "watch core/pods",
                "bind core/pods",
                "escalate core/pods",
                "get apps/deployments",
                "delete apps/deployments"
            ]
        );
    }

    #[test]
    fn wildcards_grant_anything_in_their_place() {
        let get_pods = Permission::new("get", "", "pods");
        assert!(Permission::new("*", "", "pods").grants(&get_pods));
        assert!(Permission::new("get", "*", "*").grants(&get_pods));
        assert!(!Permission::new("get", "", "pods/status").grants(&get_pods));
        assert!(!Permission::new("list", "", "pods").grants(&get_pods));
        assert!(Permission::new("*", "", "pods").is_wildcard());
        assert!(!get_pods.is_wildcard());
    }
}
