//! Built-in validation of pod specs, on Pods and on the templates of workloads: no containers,
//! a container without a name or an image, two containers of one name, a bad restart policy
//! (a Job's template must not restart Always, a Deployment's must), on create, on dry-run and
//! on update.

use serde_json::{Value, json};

use crate::exchange::{Area, Script, post, put};

const PODS: &str = "/api/v1/namespaces/{ns}/pods";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/{ns}/deployments";
const JOBS: &str = "/apis/batch/v1/namespaces/{ns}/jobs";

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn deployment(name: &str, pod_spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}})
}

fn job(name: &str, pod_spec: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"suspend": true, "template": {"spec": pod_spec}}})
}

/// The built-in validation area.
pub fn area() -> Area {
    let mut s = Script::new("builtin_validation");
    let one = json!({"containers": [{"name": "c", "image": "busybox:1"}]});
    s.body(
        "pod-no-containers",
        post(PODS, pod("p0", json!({"containers": []}))),
    );
    s.body("pod-no-spec", post(PODS, pod("p0", json!({}))));
    s.body(
        "pod-no-containers-dry-run",
        post(PODS, pod("p0", json!({}))).q("dryRun", "All"),
    );
    s.body(
        "pod-container-without-name-and-image",
        post(PODS, pod("p1", json!({"containers": [{}]}))),
    );
    s.body(
        "pod-duplicate-container-names",
        post(
            PODS,
            pod(
                "p2",
                json!({"containers": [{"name": "c", "image": "a"}, {"name": "c", "image": "b"}]}),
            ),
        ),
    );
    s.body(
        "pod-bad-container-name",
        post(
            PODS,
            pod(
                "p3",
                json!({"containers": [{"name": "Web_1", "image": "a"}]}),
            ),
        ),
    );
    s.body(
        "pod-bad-restart-policy",
        post(
            PODS,
            pod(
                "p4",
                json!({"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "a"}]}),
            ),
        ),
    );
    s.body(
        "deployment-template-no-containers",
        post(DEPLOYS, deployment("d0", json!({"containers": []}))),
    );
    s.body(
        "deployment-template-no-containers-dry-run",
        post(DEPLOYS, deployment("d0", json!({"containers": []}))).q("dryRun", "All"),
    );
    s.setup(post(DEPLOYS, deployment("d1", one.clone())));
    s.body(
        "deployment-update-no-containers",
        put(
            &format!("{DEPLOYS}/d1"),
            deployment("d1", json!({"containers": []})),
        ),
    );
    s.body(
        "job-template-restart-always",
        post(
            JOBS,
            job(
                "j0",
                json!({"restartPolicy": "Always", "containers": [{"name": "c", "image": "a"}]}),
            ),
        ),
    );
    s.body(
        "job-template-no-containers",
        post(
            JOBS,
            job("j1", json!({"restartPolicy": "Never", "containers": []})),
        ),
    );
    s.body(
        "deployment-template-restart-never",
        post(
            DEPLOYS,
            deployment(
                "d2",
                json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "a"}]}),
            ),
        ),
    );
    s.body(
        "deployment-template-container-without-image",
        post(
            DEPLOYS,
            deployment("d3", json!({"containers": [{"name": "c"}]})),
        ),
    );
    s.body(
        "cronjob-template-no-containers",
        post(
            "/apis/batch/v1/namespaces/{ns}/cronjobs",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj0"},
                "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
                    "spec": {"restartPolicy": "OnFailure", "containers": []}}}}}}),
        ),
    );
    s.body(
        "deployment-update-no-containers-dry-run",
        put(
            &format!("{DEPLOYS}/d1"),
            deployment("d1", json!({"containers": []})),
        )
        .q("dryRun", "All"),
    );
    s.done()
}
