//! The workload kinds (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob) through
//! typed `kube::Api`s: discovery with short names, create, a strategic merge patch that merges
//! the pod template's containers by name, generation bumps, list by label, status, delete.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kcr_envtest::{TestNamespace, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// How long the real backend's garbage collector may take.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A pod template with one container, `app`.
fn pod_template(name: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]}
    })
}

/// The object's pod template (`spec.template`, or `spec.jobTemplate.spec.template`).
fn template_of(object: &Value) -> &Value {
    let spec = &object["spec"];
    if spec.get("jobTemplate").is_some() {
        &spec["jobTemplate"]["spec"]["template"]
    } else {
        &spec["template"]
    }
}

/// The same path as a patch body around `template`.
fn around_template(cron: bool, template: Value) -> Value {
    if cron {
        json!({"spec": {"jobTemplate": {"spec": {"template": template}}}})
    } else {
        json!({"spec": {"template": template}})
    }
}

async fn exercise<K>(ns: &TestNamespace, spec: Value, status: Value)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let kind = K::kind(&()).to_string();
    let cron = spec.get("jobTemplate").is_some();
    let api: Api<K> = Api::default_namespaced(ns.client());
    let object: K = serde_json::from_value(json!({
        "apiVersion": K::api_version(&()),
        "kind": kind,
        "metadata": {"name": "w", "labels": {"tier": "back"}},
        "spec": spec,
    }))
    .expect("a valid object");
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("{kind}: create: {e}"));
    assert_eq!(created.meta().generation, Some(1), "{kind}");

    // Strategic merge: containers merge by name, so patching in `sidecar` keeps `app` (an
    // atomic list would be replaced by the patch's one element). Without `$setElementOrder`
    // the real server orders the result by the patch: the new `sidecar` comes first.
    let patch = around_template(
        cron,
        json!({"spec": {"containers": [{"name": "sidecar", "image": "proxy:1"}]}}),
    );
    if kind == "Job" {
        // A Job's pod template is immutable (the real server's ValidateJobUpdate): the same
        // patch is refused, and a mutable spec field is what bumps the generation.
        let err = api
            .patch("w", &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .expect_err("Job: the pod template is immutable");
        let kube::Error::Api(status) = err else {
            panic!("Job: expected an API error, got {err:?}");
        };
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        assert!(
            status.message.contains("field is immutable"),
            "{}",
            status.message
        );
        assert_eq!(
            status.details.expect("details").causes[0].field,
            "spec.template"
        );
        let patched = api
            .patch(
                "w",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"parallelism": 2}})),
            )
            .await
            .unwrap_or_else(|e| panic!("{kind}: strategic merge: {e}"));
        assert_eq!(patched.meta().generation, Some(2), "{kind}: spec change");
    } else {
        strategic_merge_of_containers(&api, &kind, patch).await;
    }
    finish(&api, &kind, status).await;
}

/// Patch in a `sidecar` container and check that `app` stays, after it.
async fn strategic_merge_of_containers<K>(api: &Api<K>, kind: &str, patch: Value)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let patched = api
        .patch("w", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap_or_else(|e| panic!("{kind}: strategic merge: {e}"));
    let value = serde_json::to_value(&patched).expect("serialises");
    let containers = template_of(&value)["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let images: Vec<(&str, &str)> = containers
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or(""),
                c["image"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        images,
        vec![("sidecar", "proxy:1"), ("app", "app:1")],
        "{kind}: containers merged by name"
    );
    assert_eq!(patched.meta().generation, Some(2), "{kind}: spec change");
}

/// Status, list by label and delete, with the generation at 2.
async fn finish<K>(api: &Api<K>, kind: &str, status: Value)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    // Status goes through its subresource and does not bump the generation.
    let with_status = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("{kind}: status: {e}"));
    assert_eq!(
        with_status.meta().generation,
        Some(2),
        "{kind}: status only"
    );
    let value = serde_json::to_value(&with_status).expect("serialises");
    for (field, expected) in status.as_object().expect("a status object") {
        assert_eq!(&value["status"][field], expected, "{kind}: status.{field}");
    }

    let listed = api
        .list(&ListParams::default().labels("tier=back"))
        .await
        .unwrap_or_else(|e| panic!("{kind}: list: {e}"));
    assert_eq!(
        listed
            .items
            .iter()
            .map(|o| o.name_any())
            .collect::<Vec<_>>(),
        vec!["w"],
        "{kind}"
    );
    // An annotation change bumps the generation of a Deployment only (upstream copies a
    // Deployment's annotations to its ReplicaSets).
    let annotated = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"note": "x"}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{kind}: annotate: {e}"));
    let expected = if kind == "Deployment" { 3 } else { 2 };
    assert_eq!(
        annotated.meta().generation,
        Some(expected),
        "{kind}: annotations"
    );
    api.delete("w", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{kind}: delete: {e}"));
    // A Job deleted without a propagation policy orphans its pods (upstream's batch/v1
    // default): the real server finishes the deletion once its garbage collector has.
    eventually(&format!("{kind} w is gone"), LIMIT, || async {
        api.get_opt("w").await.expect("get").is_none()
    })
    .await;
}

#[tokio::test]
async fn workload_kinds_are_served() {
    let ns = TestNamespace::new("workloads")
        .await
        .expect("envtest starts");
    let selector = json!({"matchLabels": {"app": "w"}});
    let controller_spec = json!({"selector": selector, "template": pod_template("w")});
    let replicas = json!({"replicas": 1, "readyReplicas": 1});
    exercise::<Deployment>(&ns, controller_spec.clone(), replicas.clone()).await;
    exercise::<ReplicaSet>(&ns, controller_spec.clone(), replicas.clone()).await;
    let mut sts = controller_spec.clone();
    sts["serviceName"] = json!("w");
    exercise::<StatefulSet>(&ns, sts, replicas).await;
    exercise::<DaemonSet>(
        &ns,
        controller_spec,
        json!({"currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 1}),
    )
    .await;
    // Job pods must not restart Always (the real server validates the template).
    let mut job_template = pod_template("w");
    job_template["spec"]["restartPolicy"] = json!("Never");
    exercise::<Job>(
        &ns,
        json!({"template": job_template.clone()}),
        json!({"active": 1}),
    )
    .await;
    exercise::<CronJob>(
        &ns,
        json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": job_template}}}),
        json!({"lastScheduleTime": "2026-11-29T18:00:00Z"}),
    )
    .await;
}

#[tokio::test]
async fn workload_kinds_are_discoverable_with_short_names() {
    let ns = TestNamespace::new("short-names")
        .await
        .expect("envtest starts");
    let client = ns.client();
    let apps = client
        .list_api_group_resources("apps/v1")
        .await
        .expect("apps/v1 discovery");
    let batch = client
        .list_api_group_resources("batch/v1")
        .await
        .expect("batch/v1 discovery");
    let short = |list: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
                 plural: &str| {
        list.resources
            .iter()
            .find(|r| r.name == plural)
            .map(|r| r.short_names.clone().unwrap_or_default())
    };
    assert_eq!(
        short(&apps, "deployments"),
        Some(vec!["deploy".to_string()])
    );
    assert_eq!(short(&apps, "replicasets"), Some(vec!["rs".to_string()]));
    assert_eq!(short(&apps, "statefulsets"), Some(vec!["sts".to_string()]));
    assert_eq!(short(&apps, "daemonsets"), Some(vec!["ds".to_string()]));
    assert_eq!(short(&batch, "jobs"), Some(vec![]));
    assert_eq!(short(&batch, "cronjobs"), Some(vec!["cj".to_string()]));
    assert!(
        apps.resources
            .iter()
            .any(|r| r.name == "statefulsets/status"),
        "status subresources are listed"
    );
}

#[tokio::test]
async fn a_job_deleted_without_a_policy_orphans_its_pods() {
    use k8s_openapi::api::core::v1::Pod;
    let ns = TestNamespace::new("job-orphans")
        .await
        .expect("envtest starts");
    let jobs: Api<Job> = Api::default_namespaced(ns.client());
    let pods: Api<Pod> = Api::default_namespaced(ns.client());
    let mut template = pod_template("j");
    template["spec"]["restartPolicy"] = json!("Never");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "j"},
        "spec": {"template": template},
    }))
    .expect("a valid Job");
    let job = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("job");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "j-pod", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "j",
            "uid": job.metadata.uid, "controller": true, "blockOwnerDeletion": true,
        }]},
        "spec": {"containers": [{"name": "app", "image": "app:1"}], "restartPolicy": "Never"},
    }))
    .expect("a valid Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    // batch/v1's default propagation for Jobs is Orphan (kubectl asks for Background).
    jobs.delete("j", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the Job is gone", LIMIT, || async {
        jobs.get_opt("j").await.expect("get").is_none()
    })
    .await;
    let kept = pods
        .get("j-pod")
        .await
        .expect("the pod is orphaned, not deleted");
    assert_eq!(kept.metadata.owner_references.unwrap_or_default(), vec![]);
}
