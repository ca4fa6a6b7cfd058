//! `TestNamespace`: the tests of this binary share one server (on the backend
//! `KCR_ENVTEST_BACKEND` names), each in a namespace of its own.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kcr_envtest::{TestNamespace, eventually};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

/// A namespaced CRD of group `shared.kcr.dev`, one served version, any fields.
fn shared_crd(plural: &str, singular: &str, kind: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("{plural}.shared.kcr.dev")},
        "spec": {"group": "shared.kcr.dev", "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

fn cm(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm
}

/// Several tests run this at once: each sees its own ConfigMap only, under the same name.
async fn isolated(prefix: &str) {
    let ns = TestNamespace::new(prefix).await.unwrap();
    assert!(ns.namespace().starts_with(&format!("{prefix}-")), "{ns:?}");
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = cms
        .create(&PostParams::default(), &cm("same-name"))
        .await
        .unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some(ns.namespace()));
    let names: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    assert_eq!(names, ["same-name"]);
}

#[tokio::test]
async fn namespaces_isolate_tests_a() {
    isolated("iso-a").await;
}

#[tokio::test]
async fn namespaces_isolate_tests_b() {
    isolated("iso-b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_isolate_tests_c() {
    isolated("iso-c").await;
}

#[tokio::test]
async fn every_test_gets_the_same_server() {
    let a = TestNamespace::new("same").await.unwrap();
    let b = TestNamespace::new("same").await.unwrap();
    assert_eq!(a.addr(), b.addr());
    assert_ne!(a.namespace(), b.namespace());
    assert_ne!(a.unique_name("role"), b.unique_name("role"));
    // A unique name never is a test namespace's name, even with the namespace's own prefix.
    assert_ne!(a.unique_name("same"), a.namespace());
    assert_eq!(a.unique_name("same"), a.unique_name("same"));
}

#[tokio::test]
async fn cluster_scoped_objects_get_unique_names_and_helpers_default_to_the_namespace() {
    let ns = TestNamespace::new("helpers").await.unwrap();
    let name = ns.unique_name("reader");
    assert!(name.starts_with("reader-"), "{name}");
    let roles: Api<ClusterRole> = Api::all(ns.client());
    let mut role = ClusterRole::default();
    role.metadata.name = Some(name.clone());
    roles.create(&PostParams::default(), &role).await.unwrap();
    assert!(roles.get_opt(&name).await.unwrap().is_some());

    // upsert puts a namespaced object without a namespace into the test's namespace.
    let stored = ns
        .upsert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "upserted"}, "data": {"k": "v"}}))
        .await
        .unwrap();
    assert_eq!(stored["metadata"]["namespace"], ns.namespace());
    // ...and leaves a cluster-scoped one cluster-scoped.
    let other = ns.unique_name("upserted-role");
    let stored = ns
        .upsert(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": other}}),
        )
        .await
        .unwrap();
    assert!(stored["metadata"].get("namespace").is_none(), "{stored}");

    // The kubeconfig's context works in the namespace too.
    let kubeconfig = ns.kubeconfig();
    assert_eq!(
        kubeconfig.contexts[0]
            .context
            .as_ref()
            .unwrap()
            .namespace
            .as_deref(),
        Some(ns.namespace())
    );
    assert!(ns.kubeconfig_yaml().unwrap().contains(ns.namespace()));
    assert!(ns.resource_version().await.unwrap() > 0);
}

#[tokio::test]
async fn a_dropped_namespace_is_deleted() {
    let keeper = TestNamespace::new("keeper").await.unwrap();
    let ns = TestNamespace::new("dropped").await.unwrap();
    let name = ns.namespace().to_string();
    let namespaces: Api<Namespace> = Api::all(keeper.client());
    assert!(namespaces.get_opt(&name).await.unwrap().is_some());
    drop(ns);
    // Deleted in the background: gone, or terminating while the namespace controller empties
    // it (real backend).
    eventually(
        "the dropped namespace is going",
        Duration::from_secs(30),
        || async {
            match namespaces.get_opt(&name).await {
                Ok(None) => Ok(()),
                Ok(Some(n)) if n.metadata.deletion_timestamp.is_some() => Ok(()),
                Ok(Some(_)) => Err("still there, not terminating".to_string()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn crds_install_on_the_shared_server() {
    let ns = TestNamespace::new("crd").await.unwrap();
    let crd = shared_crd("gizmos", "gizmo", "Gizmo");
    // Twice (as two tests of a binary would): harmless.
    ns.install_crd_value(crd.clone()).await.unwrap();
    ns.install_crd_value(crd).await.unwrap();
    let stored = ns
        .upsert(json!({"apiVersion": "shared.kcr.dev/v1", "kind": "Gizmo",
            "metadata": {"name": "g"}, "spec": {"size": 3}}))
        .await
        .unwrap();
    assert_eq!(stored["metadata"]["namespace"], ns.namespace());
}

/// Concurrent installs of one CRD, as the tests of one binary do on their shared server: each
/// succeeds, whoever overtakes whom between its read and its replace (on the real backend the
/// API server also writes the new CRD's status in between), and the CRD is served after. Seen
/// failing with 409 "replacing CustomResourceDefinition" under load before the install started
/// over on a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_installs_of_one_crd_all_succeed() {
    let ns = TestNamespace::new("crd-race").await.unwrap();
    let crd = shared_crd("racers", "racer", "Racer");
    let installs = 8;
    let results =
        futures::future::join_all((0..installs).map(|_| ns.install_crd_value(crd.clone()))).await;
    for (i, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "install {i}: {r:?}");
    }
    let stored = ns
        .upsert(json!({"apiVersion": "shared.kcr.dev/v1", "kind": "Racer",
            "metadata": {"name": "r"}}))
        .await
        .unwrap();
    assert_eq!(stored["metadata"]["namespace"], ns.namespace());
}

/// Concurrent upserts of one object (the tests of a binary installing the same CRD at once):
/// each succeeds, whoever overtakes whom between its read and its replace, and the object ends
/// as one of them wrote it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_upserts_of_one_object_all_succeed() {
    let ns = TestNamespace::new("upserts").await.unwrap();
    let name = ns.unique_name("shared");
    let writers = 8;
    let tasks: Vec<_> = (0..writers)
        .map(|i| {
            let ns = &ns;
            let name = name.clone();
            async move {
                ns.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name}, "data": {"writer": i.to_string()}}))
                    .await
            }
        })
        .collect();
    let results = futures::future::join_all(tasks).await;
    for (i, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "writer {i}: {r:?}");
    }
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let last = cms.get(&name).await.unwrap();
    let writer: usize = last.data.unwrap()["writer"].parse().unwrap();
    assert!(writer < writers, "{writer}");
}
