//! What the server answers and streams around deletions, as the real API server does: the
//! update that removes the last finalizer, a pod's delete, an orphaning delete, and a watch
//! whose selector an object leaves. Everything goes through the Kubernetes API, so these hold
//! on a real API server too.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcr_envtest::TestNamespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn cm(value: serde_json::Value) -> ConfigMap {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn removing_the_last_finalizer_answers_the_object_without_it() {
    let ns = TestNamespace::new("finalizer").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    cms.create(
        &PostParams::default(),
        &cm(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})),
    )
    .await
    .unwrap();
    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let answer = cms
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert_eq!(answer.metadata.finalizers, None);
    assert!(answer.metadata.deletion_timestamp.is_some());
    assert!(cms.get_opt("held").await.unwrap().is_none());
}

#[tokio::test]
async fn a_pod_without_a_node_is_answered_marked_deleted_and_is_gone() {
    let ns = TestNamespace::new("pod-delete").await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(ns.client());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let answer = pods
        .delete("p", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the pod");
    assert!(answer.metadata.deletion_timestamp.is_some());
    assert_eq!(answer.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(
        answer.metadata.generation,
        created.metadata.generation.map(|g| g + 1)
    );
    assert!(pods.get_opt("p").await.unwrap().is_none());
}

#[tokio::test]
async fn an_orphaning_delete_answers_the_owner_with_the_orphan_finalizer() {
    let ns = TestNamespace::new("orphan").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let owner = cms
        .create(
            &PostParams::default(),
            &cm(json!({"metadata": {"name": "owner"}})),
        )
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &cm(
            json!({"metadata": {"name": "dependent", "ownerReferences": [{"apiVersion": "v1",
            "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid.clone().unwrap()}]}}),
        ),
    )
    .await
    .unwrap();
    let answer = cms
        .delete("owner", &DeleteParams::orphan())
        .await
        .unwrap()
        .left()
        .expect("the owner");
    assert_eq!(answer.metadata.finalizers, Some(vec!["orphan".to_string()]));
    assert!(answer.metadata.deletion_timestamp.is_some());
    // The dependent stays, without its owner reference, once the owner is gone.
    kcr_envtest::eventually(
        "the owner is gone and the dependent orphaned",
        std::time::Duration::from_secs(30),
        || async {
            let gone = cms.get_opt("owner").await.unwrap().is_none();
            let dependent = cms.get("dependent").await.unwrap();
            gone && dependent
                .metadata
                .owner_references
                .unwrap_or_default()
                .is_empty()
        },
    )
    .await;
}

#[tokio::test]
async fn an_object_leaving_the_selector_is_deleted_with_its_last_matching_state() {
    let ns = TestNamespace::new("selector-leave").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = cms
        .create(
            &PostParams::default(),
            &cm(json!({"metadata": {"name": "w", "labels": {"w": "1"}}})),
        )
        .await
        .unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().labels("w=1"), &rv)
        .await
        .unwrap()
        .boxed();
    let moved = cms
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"w": "2"}}})),
        )
        .await
        .unwrap();
    match stream.try_next().await.unwrap().expect("an event") {
        WatchEvent::Deleted(o) => {
            assert_eq!(o.metadata.labels.unwrap()["w"], "1");
            assert_eq!(o.metadata.resource_version, moved.metadata.resource_version);
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
}

#[tokio::test]
async fn a_replication_controller_orphans_by_default_and_its_deletion_bumps_the_generation() {
    let ns = TestNamespace::new("rc-orphan").await.unwrap();
    let rcs: Api<k8s_openapi::api::core::v1::ReplicationController> =
        Api::default_namespaced(ns.client());
    let rc = serde_json::from_value(json!({"metadata": {"name": "rc"},
        "spec": {"replicas": 0, "selector": {"app": "rc"},
                 "template": {"metadata": {"labels": {"app": "rc"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}))
    .unwrap();
    let created = rcs.create(&PostParams::default(), &rc).await.unwrap();
    // No propagation policy: core/v1 ReplicationControllers orphan (upstream's legacy default),
    // so the answer is the object with the `orphan` finalizer, not a Status.
    let answer = rcs
        .delete("rc", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the replication controller, not a Status");
    assert_eq!(answer.metadata.finalizers, Some(vec!["orphan".to_string()]));
    assert!(answer.metadata.deletion_timestamp.is_some());
    assert_eq!(
        answer.metadata.generation,
        created.metadata.generation.map(|g| g + 1),
        "the generation moves when the deletion starts"
    );
    kcr_envtest::eventually(
        "the orphaned RC gone",
        std::time::Duration::from_secs(30),
        || async { rcs.get_opt("rc").await.unwrap().is_none() },
    )
    .await;
}

#[tokio::test]
async fn an_object_held_by_a_finalizer_gets_its_generation_bumped_once() {
    let ns = TestNamespace::new("held-generation").await.unwrap();
    // Deployments track generation; a finalizer keeps one while it is deleted.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::default_namespaced(ns.client());
    let d = serde_json::from_value(
        json!({"metadata": {"name": "d", "finalizers": ["example.com/hold"]},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    )
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let generation = created.metadata.generation.unwrap();
    deployments
        .delete("d", &DeleteParams::default())
        .await
        .unwrap();
    let marked = deployments.get("d").await.unwrap();
    assert_eq!(marked.metadata.generation, Some(generation + 1));
    // A second delete does not move it again.
    deployments
        .delete("d", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        deployments.get("d").await.unwrap().metadata.generation,
        Some(generation + 1)
    );
    deployments
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
}
