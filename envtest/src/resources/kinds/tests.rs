//! Unit tests of the built-in kinds' descriptors.

use std::collections::BTreeSet;

use serde_json::json;

use super::*;
use crate::patch::{ListType, MergeStrategy};
use crate::resources::Registry;

/// Every served built-in has a merge strategy and printed columns, found the way the server
/// finds them (by apiVersion and kind for strategies, by resource for printing).
#[test]
fn every_built_in_has_a_strategy_and_columns() {
    let reg = Registry::with_builtins();
    let served: Vec<_> = reg.all().filter(|t| t.custom.is_none()).collect();
    assert_eq!(served.len(), KINDS.len());
    for t in served {
        let api_version = t.api_version(t.storage_version());
        let strategy = MergeStrategy::builtin(&api_version, &t.kind)
            .unwrap_or_else(|| panic!("{} has no merge strategy", t.key()));
        assert_eq!(
            strategy.list_type("metadata.ownerReferences"),
            &ListType::Map(vec!["uid".into()]),
            "{}",
            t.key()
        );
        assert!(t.strategic_merge, "{}", t.key());
        let object =
            json!({"metadata": {"name": "x", "creationTimestamp": "2020-01-01T00:00:00Z"}});
        let table = crate::table::table(t, t.storage_version(), &[&object], false, None);
        let columns: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        let complete = matches!(of(t).map(|k| k.printer), Some(Printer::Complete(_)));
        assert!(
            complete || (columns.first() == Some(&"Name") && columns.contains(&"Age")),
            "{}: {columns:?}",
            t.key()
        );
        assert_eq!(
            table["rows"][0]["cells"].as_array().map(Vec::len),
            Some(columns.len()),
            "{}",
            t.key()
        );
    }
}

#[test]
fn descriptors_do_not_collide() {
    let mut resources = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for k in KINDS {
        assert!(
            resources.insert((k.group, k.plural)),
            "{}/{}",
            k.group,
            k.plural
        );
        assert!(kinds.insert((k.group, k.kind)), "{}/{}", k.group, k.kind);
        assert!(!k.plural.is_empty() && !k.kind.is_empty());
    }
    for (kind, _) in UNSERVED_LISTS {
        assert!(!kinds.contains(&("", *kind)), "{kind} is served");
    }
}

#[test]
fn descriptors_reach_the_registry() {
    let reg = Registry::with_builtins();
    let nodes = reg.get("nodes").unwrap();
    assert!(!nodes.namespaced);
    assert_eq!(nodes.short_names, ["no"]);
    let deploy = reg.get("apps/deployments").unwrap();
    assert_eq!(deploy.categories, ["all"]);
    assert!(deploy.scale.is_some() && deploy.status_subresource);
    assert!(reg.get("apps/daemonsets").unwrap().scale.is_none());
    let pvc = reg.get("persistentvolumeclaims").unwrap();
    assert!(pvc.namespaced && pvc.status_subresource && pvc.categories.is_empty());
    assert_eq!(of(nodes).map(|k| k.fields.len()), Some(1));
    assert!(lists("", "ReplicationController").is_some());
    assert!(lists("apps", "Pod").is_none());
}

/// Verbs are upstream's names, subresources are unique per kind and not `status` or `scale`
/// (those come from `status` and `scale`), and a subresource of another API names its version.
#[test]
fn verbs_and_subresources_are_well_formed() {
    for k in KINDS {
        assert!(!k.verbs.is_empty(), "{}", k.plural);
        for v in k.verbs {
            assert!(VERBS.contains(v), "{}: {v}", k.plural);
        }
        let mut names = BTreeSet::new();
        for s in k.subresources {
            assert!(names.insert(s.name), "{}/{}", k.plural, s.name);
            assert!(!["status", "scale"].contains(&s.name), "{}", k.plural);
            assert!(!s.verbs.is_empty() && !s.kind.is_empty());
            assert_eq!(
                s.group.is_empty(),
                s.version.is_empty(),
                "{}/{}",
                k.plural,
                s.name
            );
        }
    }
    let reg = Registry::with_builtins();
    let namespaces = reg.get("namespaces").unwrap();
    assert!(namespaces.allows("delete") && !namespaces.allows("deletecollection"));
    assert!(namespaces.subresource("finalize").is_some());
    let cs = reg.get("componentstatuses").unwrap();
    assert!(cs.allows("list") && !cs.allows("watch") && !cs.allows("create"));
    assert_eq!(
        reg.get("serviceaccounts")
            .unwrap()
            .subresource("token")
            .map(|s| (s.group, s.kind)),
        Some(("authentication.k8s.io", "TokenRequest"))
    );
    assert!(reg.get("pods").unwrap().subresource("log").is_none());
}
