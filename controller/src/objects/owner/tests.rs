use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;

use super::*;

fn deployment(name: &str, ns: &str, uid: &str) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = Some(name.into());
    d.metadata.namespace = Some(ns.into());
    d.metadata.uid = Some(uid.into());
    d
}

fn configmap(name: &str, ns: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.namespace = Some(ns.into());
    c
}

#[test]
fn controller_reference_is_added_once_and_refreshed() {
    let mut cm = configmap("c", "ns");
    set_controller_reference(&deployment("web", "ns", "u1"), &mut cm).unwrap();
    // The owner was re-created: same name, new uid: the reference is replaced, not doubled.
    set_controller_reference(&deployment("web", "ns", "u2"), &mut cm).unwrap();
    let refs = cm.metadata.owner_references.as_ref().unwrap();
    assert_eq!(refs.len(), 1);
    let r = &refs[0];
    assert_eq!(
        (
            r.api_version.as_str(),
            r.kind.as_str(),
            r.name.as_str(),
            r.uid.as_str()
        ),
        ("apps/v1", "Deployment", "web", "u2")
    );
    assert_eq!(
        (r.controller, r.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert!(has_controller_reference(&cm));
}

#[test]
fn a_second_controller_is_refused_and_nothing_changes() {
    let mut cm = configmap("c", "ns");
    set_controller_reference(&deployment("web", "ns", "u1"), &mut cm).unwrap();
    let before = cm.clone();
    let err = set_controller_reference(&deployment("other", "ns", "u3"), &mut cm).unwrap_err();
    assert_eq!(
        err,
        OwnerError::AlreadyOwned {
            object: "ns/c".into(),
            kind: "Deployment".into(),
            name: "web".into()
        }
    );
    assert!(
        err.to_string()
            .contains("already owned by another Deployment controller web")
    );
    assert_eq!(cm, before);
    // Another kind with the same name is another owner too.
    let mut rs = ReplicaSet::default();
    rs.metadata.name = Some("web".into());
    rs.metadata.namespace = Some("ns".into());
    rs.metadata.uid = Some("u9".into());
    assert!(matches!(
        set_controller_reference(&rs, &mut cm),
        Err(OwnerError::AlreadyOwned { .. })
    ));
}

#[test]
fn plain_owner_references_sit_beside_the_controller_and_keep_its_flags() {
    let mut cm = configmap("c", "ns");
    set_owner_reference(&deployment("a", "ns", "ua"), &mut cm).unwrap();
    set_owner_reference(&deployment("b", "ns", "ub"), &mut cm).unwrap();
    assert!(!has_controller_reference(&cm));
    set_controller_reference(&deployment("a", "ns", "ua"), &mut cm).unwrap();
    // Setting a plain reference to the controller again keeps it the controller.
    set_owner_reference(&deployment("a", "ns", "ua"), &mut cm).unwrap();
    let refs = cm.metadata.owner_references.as_ref().unwrap();
    assert_eq!(refs.len(), 2);
    assert_eq!(controller_of(&cm).map(|r| r.name.as_str()), Some("a"));
    assert_eq!(refs[1].controller, None);
}

#[test]
fn scopes_and_namespaces_are_checked() {
    // Namespaced owner of a cluster-scoped object.
    let mut role = ClusterRole::default();
    role.metadata.name = Some("r".into());
    let err = set_controller_reference(&deployment("web", "ns", "u"), &mut role).unwrap_err();
    assert!(matches!(
        err,
        OwnerError::ClusterScopedObjectNamespacedOwner { ref owner_namespace, .. } if owner_namespace == "ns"
    ));
    assert!(role.metadata.owner_references.is_none());
    // Owner in another namespace.
    let mut cm = configmap("c", "other");
    let err = set_owner_reference(&deployment("web", "ns", "u"), &mut cm).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cross-namespace owner references are disallowed, owner's namespace ns, obj's namespace other"
    );
    // A cluster-scoped owner may own anything.
    let mut owner = Namespace::default();
    owner.metadata.name = Some("team".into());
    owner.metadata.uid = Some("un".into());
    set_controller_reference(&owner, &mut cm).unwrap();
    set_controller_reference(&owner, &mut role).unwrap();
    assert_eq!(controller_of(&cm).unwrap().api_version, "v1");
}

#[test]
fn an_owner_never_persisted_is_refused() {
    let mut cm = configmap("c", "ns");
    let mut owner = deployment("web", "ns", "u");
    owner.metadata.uid = None;
    let err = set_controller_reference(&owner, &mut cm).unwrap_err();
    assert!(matches!(
        err,
        OwnerError::OwnerNotPersisted {
            missing: "metadata.uid",
            ..
        }
    ));
    owner.metadata.name = None;
    assert!(
        err.to_string()
            .contains("read or create it before referencing it")
    );
    assert!(matches!(
        set_owner_reference(&owner, &mut cm),
        Err(OwnerError::OwnerNotPersisted {
            missing: "metadata.name",
            ..
        })
    ));
    assert!(cm.metadata.owner_references.is_none());
}

#[test]
fn owner_references_are_found_and_removed_by_group_kind_and_name() {
    let web = deployment("web", "ns", "u1");
    let other = deployment("other", "ns", "u2");
    let mut cm = configmap("c", "ns");
    assert!(!has_owner_reference(&web, &cm));
    let err = remove_owner_reference(&web, &mut cm).unwrap_err();
    assert!(matches!(err, OwnerError::NotOwned { .. }), "{err}");
    assert!(err.to_string().contains("Deployment web"), "{err}");

    set_controller_reference(&web, &mut cm).unwrap();
    set_owner_reference(&other, &mut cm).unwrap();
    assert!(has_owner_reference(&web, &cm) && has_owner_reference(&other, &cm));
    // A ReplicaSet of the same name is another owner.
    let mut rs = ReplicaSet::default();
    rs.metadata.name = Some("web".into());
    assert!(!has_owner_reference(&rs, &cm));

    // `other` is an owner but not the controller: remove_controller_reference refuses.
    let err = remove_controller_reference(&other, &mut cm).unwrap_err();
    assert!(matches!(err, OwnerError::NotOwned { .. }), "{err}");
    assert_eq!(cm.metadata.owner_references.as_ref().unwrap().len(), 2);
    remove_controller_reference(&web, &mut cm).unwrap();
    assert!(!has_controller_reference(&cm));
    assert!(has_owner_reference(&other, &cm));
    remove_owner_reference(&other, &mut cm).unwrap();
    assert_eq!(cm.metadata.owner_references, None);
}

#[test]
fn block_owner_deletion_is_a_choice() {
    let web = deployment("web", "ns", "u1");
    let mut cm = configmap("c", "ns");
    set_controller_reference_with(&web, &mut cm, false).unwrap();
    let r = controller_of(&cm).unwrap();
    assert_eq!(
        (r.controller, r.block_owner_deletion),
        (Some(true), Some(false))
    );
    set_controller_reference_with(&web, &mut cm, true).unwrap();
    assert_eq!(controller_of(&cm).unwrap().block_owner_deletion, Some(true));
    assert_eq!(cm.metadata.owner_references.as_ref().unwrap().len(), 1);
    // The checks of set_controller_reference still apply.
    let err =
        set_controller_reference_with(&deployment("x", "ns", "u9"), &mut cm, false).unwrap_err();
    assert!(matches!(err, OwnerError::AlreadyOwned { .. }), "{err}");
}
