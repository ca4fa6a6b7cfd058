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
    // Services, RBAC and Leases.
    let svcs = "/api/v1/namespaces/{ns}/services";
    s.body(
        "service-no-ports",
        post(
            svcs,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s0"},
            "spec": {"selector": {"app": "x"}}}),
        ),
    );
    s.body(
        "service-port-out-of-range",
        post(
            svcs,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s1"},
            "spec": {"ports": [{"port": 70000}]}}),
        ),
    );
    s.body(
        "service-duplicate-port-names",
        post(
            svcs,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s2"},
            "spec": {"ports": [{"name": "a", "port": 80}, {"name": "a", "port": 81}]}}),
        ),
    );
    s.body(
        "service-bad-type",
        post(
            svcs,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s3"},
            "spec": {"type": "Magic", "ports": [{"port": 80}]}}),
        ),
    );
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles";
    s.body(
        "role-rule-without-verbs",
        post(
            roles,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r0"}, "rules": [{"apiGroups": [""], "resources": ["pods"]}]}),
        ),
    );
    s.body(
        "role-rule-without-resources",
        post(
            roles,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r1"}, "rules": [{"apiGroups": [""], "verbs": ["get"]}]}),
        ),
    );
    s.body(
        "rolebinding-without-roleref-name",
        post(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "rb0"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ""},
                "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ),
    );
    s.body(
        "rolebinding-bad-subject-kind",
        post(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "rb1"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "Robot", "name": "r2d2"}]}),
        ),
    );
    s.body(
        "pod-probe-without-handler",
        post(
            PODS,
            pod(
                "p5",
                json!({"containers": [{"name": "c", "image": "a",
            "livenessProbe": {"periodSeconds": 5}}]}),
            ),
        ),
    );
    s.body(
        "pod-container-port-out-of-range",
        post(
            PODS,
            pod(
                "p6",
                json!({"containers": [{"name": "c", "image": "a",
            "ports": [{"containerPort": 0}]}]}),
            ),
        ),
    );
    s.body(
        "pod-env-without-name",
        post(
            PODS,
            pod(
                "p7",
                json!({"containers": [{"name": "c", "image": "a",
            "env": [{"value": "x"}]}]}),
            ),
        ),
    );
    s.done()
}
