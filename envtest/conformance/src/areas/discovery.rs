//! Discovery, legacy (`/api`, `/apis`, per group-version) and aggregated
//! (`apidiscovery.k8s.io/v2`), for the groups kcr-envtest serves and a few it does not.

use crate::exchange::{Area, Script, get};

const AGG: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// (group-version path, resources to compare)
const GROUPS: &[(&str, &[&str])] = &[
    (
        "/api/v1",
        &[
            "configmaps",
            "secrets",
            "pods",
            "pods/status",
            "pods/ephemeralcontainers",
            "nodes",
            "nodes/status",
            "namespaces",
            "namespaces/finalize",
            "services",
            "serviceaccounts",
            "serviceaccounts/token",
            "events",
            "endpoints",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "componentstatuses",
        ],
    ),
    (
        "/apis/apps/v1",
        &[
            "deployments",
            "deployments/status",
            "deployments/scale",
            "replicasets",
            "statefulsets",
            "daemonsets",
        ],
    ),
    ("/apis/batch/v1", &["jobs", "cronjobs", "jobs/status"]),
    ("/apis/coordination.k8s.io/v1", &["leases"]),
    ("/apis/node.k8s.io/v1", &["runtimeclasses"]),
    ("/apis/events.k8s.io/v1", &["events"]),
    (
        "/apis/admissionregistration.k8s.io/v1",
        &[
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
        ],
    ),
    (
        "/apis/apiextensions.k8s.io/v1",
        &[
            "customresourcedefinitions",
            "customresourcedefinitions/status",
        ],
    ),
    (
        "/apis/rbac.authorization.k8s.io/v1",
        &[
            "roles",
            "rolebindings",
            "clusterroles",
            "clusterrolebindings",
        ],
    ),
    ("/apis/networking.k8s.io/v1", &["ingresses"]),
    ("/apis/discovery.k8s.io/v1", &["endpointslices"]),
    (
        "/apis/certificates.k8s.io/v1",
        &["certificatesigningrequests"],
    ),
    ("/apis/apiregistration.k8s.io/v1", &["apiservices"]),
];

/// The discovery area.
pub fn area() -> Area {
    let mut s = Script::new("discovery");
    s.pick("version", get("/version"), &["/major", "/minor"]);
    s.pick("api", get("/api"), &["/kind", "/versions"]);
    s.body("not-found-path", get("/no/such/path"));
    for (gv, resources) in GROUPS {
        let group_version = gv.trim_start_matches("/api/").trim_start_matches("/apis/");
        s.pick(group_version, get(gv), &["/kind", "/groupVersion"]);
        for r in *resources {
            s.pick(
                &format!("{group_version}/{r}"),
                get(gv),
                &[&format!("/resources[name={r}]")],
            );
        }
        if gv.starts_with("/apis/") {
            let group = group_version.split('/').next().unwrap_or_default();
            s.pick(
                &format!("apis/{group}"),
                get("/apis"),
                &[&format!("/groups[name={group}]")],
            );
            s.pick(
                &format!("aggregated/{group}"),
                get("/apis").h("Accept", AGG),
                &[
                    "/kind",
                    &format!("/items[metadata.name={group}]/versions/0/version"),
                    &format!("/items[metadata.name={group}]/versions/0/freshness"),
                ],
            );
            for r in *resources {
                if r.contains('/') {
                    continue;
                }
                s.pick(
                    &format!("aggregated/{group_version}/{r}"),
                    get("/apis").h("Accept", AGG),
                    &[&format!(
                        "/items[metadata.name={group}]/versions/0/resources[resource={r}]"
                    )],
                );
            }
        }
    }
    for r in ["configmaps", "pods", "nodes", "namespaces", "services"] {
        s.pick(
            &format!("aggregated/v1/{r}"),
            get("/api").h("Accept", AGG),
            &[&format!("/items/0/versions/0/resources[resource={r}]")],
        );
    }
    s.pick(
        "aggregated/core",
        get("/api").h("Accept", AGG),
        &["/kind", "/items/0/versions/0/version"],
    );
    s.done()
}
