//! Which role holds which recorded access: [`split`].
//!
//! The tests run the operator in namespaces of their own (random names), so the namespace a
//! request was made in says only whether it was namespaced. Every access goes to the
//! ClusterRole (bound cluster-wide, it grants cluster-scoped resources and namespaced ones in
//! every namespace), except those on the resources named for the namespaced Role (by default
//! leader election's `coordination.k8s.io/leases`), which go to the Role in the operator's own
//! namespace. Such a resource used across all namespaces is an error
//! ([`RbacError::ClusterWideInRole`]): a Role cannot grant it.

use std::collections::BTreeSet;

use crate::error::RbacError;
use crate::permission::Permission;
use crate::record::RecordedAccess;

/// A resource of one API group: `coordination.k8s.io/leases`, `core/configmaps`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupResource {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural); it covers its subresources too.
    pub resource: String,
}

impl std::str::FromStr for GroupResource {
    type Err = RbacError;

    /// `<group>/<resource>`, `core/<resource>` or `<resource>` (both the core group).
    fn from_str(s: &str) -> Result<Self, RbacError> {
        let bad = || RbacError::BadResource(s.to_owned());
        let (group, resource) = match s.split_once('/') {
            Some(("core", resource)) => ("", resource),
            Some((group, resource)) => (group, resource),
            None => ("", s),
        };
        let word = |w: &str| !w.is_empty() && !w.contains(['/', '*', ' ']);
        if !word(resource) || (!group.is_empty() && !word(group)) {
            return Err(bad());
        }
        Ok(GroupResource {
            group: group.to_owned(),
            resource: resource.to_owned(),
        })
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{group}/{}", self.resource)
    }
}

/// The permissions of each role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// The ClusterRole's.
    pub cluster: BTreeSet<Permission>,
    /// The namespaced Role's.
    pub namespaced: BTreeSet<Permission>,
}

/// The permissions `accesses` need, split between the ClusterRole and the Role that holds
/// `role_resources` (see the module's doc).
pub fn split(
    accesses: &[RecordedAccess],
    role_resources: &[GroupResource],
) -> Result<Split, RbacError> {
    let mut out = Split::default();
    for access in accesses {
        let in_role = role_resources
            .iter()
            .find(|r| r.group == access.group && r.resource == access.resource);
        match (in_role, &access.namespace) {
            (None, _) => {
                out.cluster.insert(access.permission());
            }
            (Some(_), Some(_)) => {
                out.namespaced.insert(access.permission());
            }
            (Some(resource), None) => {
                return Err(RbacError::ClusterWideInRole {
                    access: access.permission().to_string(),
                    resource: resource.to_string(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(verb: &str, group: &str, resource: &str, ns: Option<&str>) -> RecordedAccess {
        RecordedAccess {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: ns.map(Into::into),
        }
    }

    #[test]
    fn role_resources_go_to_the_role_and_the_rest_to_the_cluster_role() -> Result<(), RbacError> {
        let leases: GroupResource = "coordination.k8s.io/leases".parse()?;
        let accesses = [
            access("get", "coordination.k8s.io", "leases", Some("t1")),
            access("update", "coordination.k8s.io", "leases", Some("t2")),
            access("create", "events.k8s.io", "events", Some("t1")),
            access("list", "", "nodes", None),
            access("list", "", "nodes", None),
        ];
        let got = split(&accesses, &[leases])?;
        let show = |s: &BTreeSet<Permission>| s.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            show(&got.namespaced),
            [
                "get coordination.k8s.io/leases",
                "update coordination.k8s.io/leases"
            ]
        );
        assert_eq!(
            show(&got.cluster),
            ["list core/nodes", "create events.k8s.io/events"]
        );
        Ok(())
    }

    #[test]
    fn a_role_resource_used_cluster_wide_is_an_error() -> Result<(), RbacError> {
        let leases: GroupResource = "coordination.k8s.io/leases".parse()?;
        let err = split(
            &[access("list", "coordination.k8s.io", "leases", None)],
            &[leases],
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            err.starts_with("list coordination.k8s.io/leases: made across all namespaces"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn resources_parse_with_and_without_group() {
        let parsed = |s: &str| {
            s.parse::<GroupResource>()
                .map(|r| (r.group, r.resource))
                .ok()
        };
        assert_eq!(
            parsed("core/configmaps"),
            Some(("".into(), "configmaps".into()))
        );
        assert_eq!(parsed("configmaps"), Some(("".into(), "configmaps".into())));
        assert_eq!(
            parsed("apps/deployments"),
            Some(("apps".into(), "deployments".into()))
        );
        for bad in ["", "apps/", "/x/y", "a/b/c", "*", "apps/*"] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
    }
}
