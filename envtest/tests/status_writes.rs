//! What a write through a built-in kind's `status` subresource keeps besides the status, per
//! kind as upstream's status strategies decide (the spec is always the stored one; a
//! Deployment resets its labels, most kinds keep every metadata change), and a dry-run create
//! that carries a resourceVersion (upstream answers it: the store's check never runs on a dry
//! run). Through the API, so it holds on a real API server too (`KCR_ENVTEST_BACKEND=real`).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestNamespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn of<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn template(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": app, "image": app}]}})
}

#[tokio::test]
async fn a_deployment_status_write_keeps_annotations_and_resets_labels_and_spec() {
    let ns = TestNamespace::new("status-meta").await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(ns.client());
    deployments
        .create(
            &PostParams::default(),
            &of(
                json!({"metadata": {"name": "web", "labels": {"tier": "front"}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                         "template": template("web")}}),
            ),
        )
        .await
        .unwrap();
    let patched = deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"kcr.dev/seen": "yes"},
                             "labels": {"tier": "back", "extra": "x"}},
                "spec": {"replicas": 7},
                "status": {"observedGeneration": 1, "replicas": 1}})),
        )
        .await
        .unwrap();
    let meta = &patched.metadata;
    assert_eq!(
        meta.annotations
            .as_ref()
            .and_then(|a| a.get("kcr.dev/seen")),
        Some(&"yes".to_string()),
        "annotation changes through /status are kept: {meta:?}"
    );
    let labels = meta.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("tier").map(String::as_str),
        Some("front"),
        "{labels:?}"
    );
    assert!(
        !labels.contains_key("extra"),
        "labels are reset: {labels:?}"
    );
    assert_eq!(patched.spec.replicas, Some(1));
    assert_eq!(patched.status.as_ref().and_then(|s| s.replicas), Some(1));
    // And so it is stored.
    let read = deployments.get("web").await.unwrap();
    assert_eq!(read.metadata.annotations, patched.metadata.annotations);
    assert_eq!(read.metadata.labels, Some(labels));
}

#[tokio::test]
async fn a_job_status_write_keeps_every_metadata_change_but_not_the_spec() {
    let ns = TestNamespace::new("status-job").await.unwrap();
    let jobs: Api<Job> = Api::default_namespaced(ns.client());
    let mut tpl = template("batch");
    tpl["spec"]["restartPolicy"] = json!("Never");
    jobs.create(
        &PostParams::default(),
        &of(json!({"metadata": {"name": "once"},
            "spec": {"suspend": true, "template": tpl}})),
    )
    .await
    .unwrap();
    let patched = jobs
        .patch_status(
            "once",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"labels": {"stage": "two"}, "annotations": {"note": "n"}},
                "spec": {"suspend": false},
                "status": {"active": 0}})),
        )
        .await
        .unwrap();
    let meta = &patched.metadata;
    assert_eq!(
        meta.labels
            .as_ref()
            .and_then(|l| l.get("stage"))
            .map(String::as_str),
        Some("two"),
        "a Job's status strategy resets no metadata: {meta:?}"
    );
    assert_eq!(
        meta.annotations
            .as_ref()
            .and_then(|a| a.get("note"))
            .map(String::as_str),
        Some("n")
    );
    assert_eq!(patched.spec.as_ref().and_then(|s| s.suspend), Some(true));
}

#[tokio::test]
async fn a_dry_run_create_with_a_resource_version_is_answered() {
    let ns = TestNamespace::new("dry-rv").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let cm: ConfigMap = of(
        json!({"metadata": {"name": "c", "resourceVersion": "12345"},
                                  "data": {"k": "v"}}),
    );
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = cms.create(&dry, &cm).await.unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("c"));
    assert_eq!(answered.metadata.resource_version.as_deref(), Some("12345"));
    assert!(answered.metadata.uid.is_some());
    // Nothing was stored, and a real create with a resourceVersion is still refused.
    assert!(cms.get_opt("c").await.unwrap().is_none());
    match cms.create(&PostParams::default(), &cm).await.unwrap_err() {
        kube::Error::Api(s) => {
            // The store's error, unclassified: a 500 without a reason.
            assert_eq!((s.code, s.reason.as_str()), (500, ""), "{s:?}");
            assert!(
                s.message
                    .contains("resourceVersion should not be set on objects to be created"),
                "{s:?}"
            );
        }
        other => panic!("expected 500, got {other:?}"),
    }
}

#[tokio::test]
async fn dry_run_answers_are_what_a_real_write_would_store() {
    let ns = TestNamespace::new("dry-answers").await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(ns.client());
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let body = |meta: Value| -> Deployment {
        of(
            json!({"metadata": meta, "spec": {"selector": {"matchLabels": {"app": "d"}},
            "template": template("d")}}),
        )
    };
    // A create: a generated name, the defaults and the workload's first status.
    let answered = deployments
        .create(&dry, &body(json!({"generateName": "dry-"})))
        .await
        .unwrap();
    let name = answered.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("dry-") && name.len() == 9, "{name}");
    assert_eq!(answered.spec.replicas, Some(1));
    assert!(answered.status.is_some(), "the first status, {{}}");
    assert!(deployments.get_opt(&name).await.unwrap().is_none());
    // An update that changes the spec: the generation a real update would store.
    let created = deployments
        .create(&PostParams::default(), &body(json!({"name": "real"})))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let patched = deployments
        .patch(
            "real",
            &kube::api::PatchParams {
                dry_run: true,
                ..Default::default()
            },
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(
        patched.metadata.resource_version,
        created.metadata.resource_version
    );
    let stored = deployments.get("real").await.unwrap();
    assert_eq!(stored.metadata.generation, Some(1));
    assert_eq!(stored.spec.replicas, Some(1));
}
