//! Role files: the permissions a ClusterRole or Role grants ([`read_role_file`],
//! [`rules_of`]), and the YAML `cargo kcr rbac` writes ([`render`]).
//!
//! Written roles are deterministic: one rule per API group and set of verbs, holding every
//! resource of that group with exactly those verbs; rules sorted by group (the core group
//! first) and first resource; resources sorted by name, verbs in [`VERB_ORDER`]
//! (`get, list, watch, create, update, patch, delete, deletecollection`, then others).
//!
//! [`VERB_ORDER`]: crate::permission::VERB_ORDER

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use crate::error::RbacError;
use crate::permission::{Permission, compare_verbs};

/// The two kinds of role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleKind {
    /// A ClusterRole: cluster-scoped resources, and namespaced ones in every namespace.
    ClusterRole,
    /// A Role: namespaced resources in its own namespace.
    Role,
}

impl RoleKind {
    /// The kind's name, as in `kind:`.
    pub fn as_str(self) -> &'static str {
        match self {
            RoleKind::ClusterRole => "ClusterRole",
            RoleKind::Role => "Role",
        }
    }
}

/// One YAML document of a role file, as far as permissions go.
#[derive(Debug, Deserialize)]
struct Document {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    rules: Option<Vec<Rule>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resource_names: Option<Vec<String>>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Option<Vec<String>>,
}

/// One document of a role file: its kind and what its rules grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleDocument {
    /// The document's `kind` (`None` when it has none).
    pub kind: Option<String>,
    /// Every rule's groups, resources and verbs multiplied out; `*` stays as it is.
    pub permissions: BTreeSet<Permission>,
}

/// The documents of the YAML `text` (from the file `path`, named in errors).
pub fn rules_of(text: &str, path: &Path) -> Result<Vec<RoleDocument>, RbacError> {
    let documents: Vec<Option<Document>> =
        serde_saphyr::from_multiple(text).map_err(|e| RbacError::BadRole {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    let mut out = Vec::new();
    for document in documents.into_iter().flatten() {
        let mut permissions = BTreeSet::new();
        for rule in document.rules.unwrap_or_default() {
            if rule.resource_names.is_some_and(|n| !n.is_empty()) {
                return Err(RbacError::Unsupported {
                    path: path.to_owned(),
                    field: "resourceNames",
                });
            }
            if rule.non_resource_urls.is_some_and(|n| !n.is_empty()) {
                return Err(RbacError::Unsupported {
                    path: path.to_owned(),
                    field: "nonResourceURLs",
                });
            }
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    for verb in &rule.verbs {
                        permissions.insert(Permission::new(verb, group, resource));
                    }
                }
            }
        }
        out.push(RoleDocument {
            kind: document.kind,
            permissions,
        });
    }
    Ok(out)
}

/// The permissions the role file `path` grants, every document of it being a `kind`;
/// `None` if the file does not exist.
pub fn read_role_file(
    path: &Path,
    kind: RoleKind,
) -> Result<Option<BTreeSet<Permission>>, RbacError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(RbacError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut granted = BTreeSet::new();
    for RoleDocument {
        kind: found,
        permissions,
    } in rules_of(&text, path)?
    {
        if found.as_deref() != Some(kind.as_str()) {
            return Err(RbacError::UnexpectedKind {
                path: path.to_owned(),
                found: found.unwrap_or_else(|| "document without kind".to_owned()),
                expected: kind.as_str(),
            });
        }
        granted.extend(permissions);
    }
    Ok(Some(granted))
}

/// A YAML scalar: plain when YAML reads it back as the same string, quoted otherwise.
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'/'))
        && s.bytes().any(|b| b.is_ascii_alphabetic())
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.parse::<f64>().is_err()
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        s.to_owned()
    } else {
        // A JSON string is a YAML double-quoted scalar.
        serde_json::Value::String(s.to_owned()).to_string()
    }
}

/// The role `name` of `kind` (in `namespace` for a Role) granting `permissions`, as YAML,
/// after a comment line saying where it comes from.
pub fn render(
    kind: RoleKind,
    name: &str,
    namespace: Option<&str>,
    permissions: &BTreeSet<Permission>,
) -> String {
    // group -> verbs (in verb order) -> resources.
    let mut by_group: BTreeMap<&str, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for p in permissions {
        by_group
            .entry(&p.group)
            .or_default()
            .entry(&p.resource)
            .or_default()
            .push(&p.verb);
    }
    let mut rules: Vec<(&str, Vec<&str>, Vec<&str>)> = Vec::new();
    for (group, resources) in by_group {
        let mut by_verbs: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
        for (resource, mut verbs) in resources {
            verbs.sort_by(|a, b| compare_verbs(a, b));
            by_verbs.entry(verbs).or_default().push(resource);
        }
        let mut group_rules: Vec<_> = by_verbs
            .into_iter()
            .map(|(verbs, resources)| (group, resources, verbs))
            .collect();
        group_rules.sort_by(|a, b| a.1.cmp(&b.1));
        rules.extend(group_rules);
    }
    let mut out = String::from(
        "# Generated by `cargo kcr rbac` from the requests the operator's tests made: regenerate, do not edit.\n",
    );
    out.push_str("apiVersion: rbac.authorization.k8s.io/v1\n");
    out.push_str(&format!("kind: {}\nmetadata:\n", kind.as_str()));
    out.push_str(&format!("  name: {}\n", scalar(name)));
    if let Some(namespace) = namespace {
        out.push_str(&format!("  namespace: {}\n", scalar(namespace)));
    }
    if rules.is_empty() {
        out.push_str("rules: []\n");
        return out;
    }
    out.push_str("rules:\n");
    for (group, resources, verbs) in rules {
        out.push_str(&format!(
            "- apiGroups:\n  - {}\n  resources:\n",
            scalar(group)
        ));
        for resource in resources {
            out.push_str(&format!("  - {}\n", scalar(resource)));
        }
        out.push_str("  verbs:\n");
        for verb in verbs {
            out.push_str(&format!("  - {}\n", scalar(verb)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[(&str, &str, &str)]) -> BTreeSet<Permission> {
        items
            .iter()
            .map(|(v, g, r)| Permission::new(v, g, r))
            .collect()
    }

    #[test]
    fn a_role_is_rendered_in_a_stable_order_and_reads_back() -> Result<(), RbacError> {
        let permissions = set(&[
            ("patch", "apps", "deployments"),
            ("get", "apps", "deployments"),
            ("get", "apps", "statefulsets"),
            ("patch", "apps", "statefulsets"),
            ("patch", "apps", "deployments/status"),
            ("watch", "", "pods"),
            ("list", "", "pods"),
        ]);
        let text = render(RoleKind::ClusterRole, "manager-role", None, &permissions);
        let expected = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules:
- apiGroups:
  - \"\"
  resources:
  - pods
  verbs:
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  verbs:
  - get
  - patch
- apiGroups:
  - apps
  resources:
  - deployments/status
  verbs:
  - patch
";
        assert_eq!(text.split_once('\n').map(|(_, rest)| rest), Some(expected));
        let read = rules_of(&text, Path::new("role.yaml"))?;
        let document = RoleDocument {
            kind: Some("ClusterRole".to_owned()),
            permissions,
        };
        assert_eq!(read, vec![document]);
        Ok(())
    }

    #[test]
    fn names_yaml_would_misread_are_quoted() {
        for (name, shown) in [
            ("manager-role", "manager-role"),
            ("", "\"\""),
            ("yes", "\"yes\""),
            ("1.5", "\"1.5\""),
            ("1e5", "\"1e5\""),
            ("a: b", "\"a: b\""),
            ("-x", "\"-x\""),
        ] {
            assert_eq!(scalar(name), shown);
        }
        let text = render(RoleKind::Role, "yes", Some("123"), &BTreeSet::new());
        assert!(
            text.contains("  name: \"yes\"\n  namespace: \"123\"\nrules: []\n"),
            "{text}"
        );
    }

    #[test]
    fn unsupported_and_malformed_roles_are_errors_naming_the_file() {
        let names = "kind: ClusterRole\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  resourceNames: [a]\n  verbs: [get]\n";
        let urls = "kind: ClusterRole\nrules:\n- nonResourceURLs: [/metrics]\n  verbs: [get]\n";
        for (text, wanted) in [
            (names, "resourceNames"),
            (urls, "nonResourceURLs"),
            ("rules: {a: [", "not a role"),
            ("rules: 5", "not a role"),
        ] {
            let shown = rules_of(text, Path::new("x/role.yaml"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(shown.starts_with("x/role.yaml: "), "{shown}");
            assert!(shown.contains(wanted), "{shown} lacks {wanted}");
        }
    }

    #[test]
    fn a_role_file_must_hold_the_kind_asked_for() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("role.yaml");
        assert_eq!(read_role_file(&path, RoleKind::Role)?, None, "absent");
        std::fs::write(
            &path,
            "kind: ClusterRole\nrules: []\n---\nkind: Role\nrules: []\n",
        )?;
        let err = read_role_file(&path, RoleKind::ClusterRole)
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("a Role where a ClusterRole was expected")));
        Ok(())
    }
}
