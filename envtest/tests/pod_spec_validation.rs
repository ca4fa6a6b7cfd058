//! Pod specs are validated as kube-apiserver validates them, on Pods and on workload templates:
//! no containers, a container without a name or image, a duplicate name, a restart policy the
//! kind does not allow; on create, dry-run and update, and nothing refused is stored. Through
//! the API, so it holds on a real API server too (`KCR_ENVTEST_BACKEND=real`).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kcr_envtest::TestNamespace;
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn of<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The 422's causes as `(field, message)`.
fn invalid(e: kube::Error) -> Vec<(String, String)> {
    match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
            s.details
                .expect("details")
                .causes
                .into_iter()
                .map(|c| (c.field, c.message))
                .collect()
        }
        other => panic!("expected 422, got {other:?}"),
    }
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect()
}

#[tokio::test]
async fn pods_without_valid_containers_are_refused() {
    let ns = TestNamespace::new("pod-spec").await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(ns.client());
    let pp = PostParams::default();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let pod = |spec: Value| -> Pod { of(json!({"metadata": {"name": "p"}, "spec": spec})) };
    for params in [&pp, &dry] {
        let causes = invalid(
            pods.create(params, &pod(json!({"containers": []})))
                .await
                .unwrap_err(),
        );
        assert_eq!(causes, pairs(&[("spec.containers", "Required value")]));
    }
    let causes = invalid(
        pods.create(&pp, &pod(json!({"containers": [{}]})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[
            ("spec.containers[0].name", "Required value"),
            ("spec.containers[0].image", "Required value")
        ])
    );
    let causes = invalid(
        pods.create(
            &pp,
            &pod(json!({"containers": [{"name": "c", "image": "a"}, {"name": "c", "image": "b"}]})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[("spec.containers[1].name", "Duplicate value: \"c\"")])
    );
    let mut causes = invalid(
        pods.create(
            &pp,
            &pod(json!({"containers": [{"name": "c", "image": "a",
                "ports": [{"containerPort": 0}], "env": [{"value": "x"}],
                "livenessProbe": {"periodSeconds": 5}}]})),
        )
        .await
        .unwrap_err(),
    );
    causes.sort();
    assert_eq!(
        causes,
        pairs(&[
            ("spec.containers[0].env[0].name", "Required value"),
            (
                "spec.containers[0].livenessProbe",
                "Required value: must specify a handler type"
            ),
            (
                "spec.containers[0].ports[0].containerPort",
                "Required value"
            ),
        ])
    );
    // Nothing refused was stored; a valid pod is accepted.
    assert!(pods.get_opt("p").await.unwrap().is_none());
    pods.create(
        &pp,
        &pod(json!({"containers": [{"name": "c", "image": "a"}]})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn workload_templates_are_validated_on_create_and_update() {
    let ns = TestNamespace::new("template-spec").await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(ns.client());
    let pp = PostParams::default();
    let deployment = |pod_spec: Value| -> Deployment {
        of(json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec}}}))
    };
    let causes = invalid(
        deployments
            .create(&pp, &deployment(json!({"containers": []})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[("spec.template.spec.containers", "Required value")])
    );
    let causes = invalid(
        deployments
            .create(
                &pp,
                &deployment(
                    json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "a"}]}),
                ),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[(
            "spec.template.spec.restartPolicy",
            "Unsupported value: \"Never\": supported values: \"Always\""
        )])
    );
    let created = deployments
        .create(
            &pp,
            &deployment(json!({"containers": [{"name": "c", "image": "a"}]})),
        )
        .await
        .unwrap();
    // An update that empties the containers is refused and changes nothing.
    let mut emptied = deployment(json!({"containers": []}));
    emptied.metadata.resource_version = created.metadata.resource_version.clone();
    let causes = invalid(deployments.replace("web", &pp, &emptied).await.unwrap_err());
    assert_eq!(
        causes,
        pairs(&[("spec.template.spec.containers", "Required value")])
    );
    let read = deployments.get("web").await.unwrap();
    assert_eq!(
        read.metadata.resource_version,
        created.metadata.resource_version
    );

    // A Job's template may not restart Always (which a missing policy defaults to).
    let jobs: Api<Job> = Api::default_namespaced(ns.client());
    let causes = invalid(
        jobs.create(
            &pp,
            &of(
                json!({"metadata": {"name": "once"}, "spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "a"}]}}}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[(
            "spec.template.spec.restartPolicy",
            "Required value: valid values: \"OnFailure\", \"Never\""
        )])
    );
}
