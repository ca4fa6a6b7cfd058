//! The `scale` subresource through kube's typed scale calls (`get_scale`, `patch_scale`,
//! `replace_scale`) and raw requests: built-in workloads and a custom resource whose CRD
//! declares `subresources.scale`.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestNamespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn deployments_scale_through_the_subresource() {
    let ns = TestNamespace::new("scale").await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(ns.client());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}
    }))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();

    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let status = scale.status.clone().unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (0, Some("app=web"))
    );
    assert_eq!(scale.metadata.uid, created.metadata.uid);

    // A merge patch of the Scale changes the Deployment's spec (and so its generation).
    let patched = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.and_then(|s| s.replicas), Some(5));
    let after = deployments.get("web").await.unwrap();
    assert_eq!(after.spec.replicas, Some(5));
    assert_eq!(after.metadata.generation, Some(2));
    assert_eq!(
        after.spec.template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx"),
        "nothing else in the object changed"
    );

    // A replace with a stale resourceVersion is a conflict; a fresh one succeeds.
    let mut stale: Scale = scale.clone();
    stale.spec.get_or_insert_with(Default::default).replicas = Some(1);
    let err = api_err(
        deployments
            .replace_scale("web", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409, "{}", err.message);
    let mut fresh = deployments.get_scale("web").await.unwrap();
    fresh.spec.get_or_insert_with(Default::default).replicas = Some(1);
    let replaced = deployments
        .replace_scale("web", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(replaced.spec.and_then(|s| s.replicas), Some(1));

    // A negative count is invalid; a dry run answers without storing.
    let err = api_err(
        deployments
            .patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": -3}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    let dry = deployments
        .patch_scale(
            "web",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"spec": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(dry.spec.and_then(|s| s.replicas), Some(9));
    let stored = deployments.get("web").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(1));

    // A StatefulSet without spec.replicas reads as 1 (the server's default).
    let sets: Api<StatefulSet> = Api::default_namespaced(ns.client());
    let s: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "db", "image": "pg"}]}}}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &s).await.unwrap();
    let scale = sets.get_scale("db").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(1));

    // Kinds without replicas have no scale subresource.
    let configmaps: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("c".into());
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let err = api_err(configmaps.get_scale("c").await.unwrap_err());
    assert_eq!(err.code, 404);
}

#[tokio::test]
async fn custom_resources_scale_through_their_crd_paths() {
    let ns = TestNamespace::new("cr-scale").await.unwrap();
    ns.install_crd_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workers.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "workers", "singular": "worker", "kind": "Worker"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.ready",
                    "labelSelectorPath": ".status.selector"}}
            }]
        }
    }))
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Worker"),
        "workers",
    );
    let workers: Api<DynamicObject> = Api::default_namespaced_with(ns.client(), &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Worker",
        "metadata": {"name": "w"}, "spec": {"size": 2, "colour": "red"}
    }))
    .unwrap();
    workers.create(&PostParams::default(), &w).await.unwrap();
    workers
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": 1, "selector": "app=w"}})),
        )
        .await
        .unwrap();
    let scale = workers.get_scale("w").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
    let status = scale.status.unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (1, Some("app=w"))
    );
    workers
        .patch_scale(
            "w",
            &PatchParams::default(),
            &Patch::Json::<()>(json_patch::Patch(vec![])),
        )
        .await
        .unwrap();
    workers
        .patch_scale(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    let stored = workers.get("w").await.unwrap();
    assert_eq!(stored.data["spec"], json!({"size": 4, "colour": "red"}));
}
