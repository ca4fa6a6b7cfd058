//! `TestWebhooks::install` on the backend `KCR_ENVTEST_BACKEND` names: the webhooks are in
//! effect when it returns (no waiting in the test), limited to the test's namespace on a
//! shared server, and gone after `uninstall`.

use std::time::Duration;

use kcr_envtest::{TestApiServer, TestNamespace};
use kcr_testkit::{RunningManager, TestWebhooks, eventually};
use kcr_webhook::ManagerWebhookExt;
use kcr_webhook::example::{WidgetDefaulter, WidgetValidator, v1};
use kube::api::{Api, PostParams};
use serde_json::json;

fn widget(name: &str, spec: serde_json::Value) -> v1::Widget {
    serde_json::from_value(json!({
        "apiVersion": "example.kcr.dev/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn crd() -> serde_json::Value {
    serde_json::to_value(kcr_webhook::example::crd().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_webhooks_apply_at_once_and_go_on_uninstall() {
    let ns = TestNamespace::new("webhooks").await.unwrap();
    ns.install_crd_value(crd()).await.unwrap();
    let mgr = kcr_testkit::manager(&ns).await.unwrap();
    let hooks = TestWebhooks::install(&mgr, &ns, |server| {
        mgr.webhook::<v1::Widget>(server)
            .defaulter(WidgetDefaulter)
            .validator(WidgetValidator)
            .complete()
    })
    .await
    .unwrap();
    assert_eq!(hooks.paths().len(), 2, "{:?}", hooks.paths());
    let running = RunningManager::start(mgr);

    let widgets: Api<v1::Widget> = Api::default_namespaced(ns.client());
    // No wait: the configurations are in effect when install returns.
    let created = widgets
        .create(&PostParams::default(), &widget("plain", json!({})))
        .await
        .unwrap();
    assert_eq!(created.spec.replicas, Some(1), "defaulted by the webhook");
    let err = widgets
        .create(
            &PostParams::default(),
            &widget("big", json!({"replicas": 1000})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("spec.replicas"), "{err}");

    // A widget in another namespace of the shared server is not this test's business.
    let other = TestNamespace::new("webhooks-other").await.unwrap();
    let elsewhere: Api<v1::Widget> = Api::default_namespaced(other.client());
    let untouched = elsewhere
        .create(&PostParams::default(), &widget("plain", json!({})))
        .await
        .unwrap();
    assert_eq!(
        untouched.spec.replicas, None,
        "not defaulted outside the namespace"
    );

    let name = hooks.configuration_name().to_string();
    hooks.uninstall().await.unwrap();
    let configs: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(ns.client());
    assert!(configs.get_opt(&name).await.unwrap().is_none());
    assert!(
        configs
            .get_opt(&format!("{name}-probe"))
            .await
            .unwrap()
            .is_none()
    );
    // The API server drops the webhooks (asynchronously on the real backend).
    eventually("a big widget is accepted without the validator", || async {
        let pp = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        widgets
            .create(&pp, &widget("big", json!({"replicas": 1000})))
            .await
    })
    .timeout(Duration::from_secs(30))
    .await
    .unwrap();
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_tests_webhooks_never_reach_another_servers_namespace() {
    // The flake of .ci/check-existing ("failed calling webhook ... connection refused"): on
    // the existing backend every TestApiServer is a namespace of one cluster, and the webhooks
    // of a server were installed for the whole cluster. A test that stopped its manager (its
    // webhook server gone) before its configurations were removed made another test's
    // creates fail. They are now limited to the server's namespace wherever the cluster is
    // shared; on a cluster of its own there is nothing to share.
    let (first, second) = (
        TestApiServer::start().await.unwrap(),
        TestApiServer::start().await.unwrap(),
    );
    first.install_crd_value(crd()).await.unwrap();
    second.install_crd_value(crd()).await.unwrap();
    let mgr = kcr_testkit::manager(&first).await.unwrap();
    let hooks = TestWebhooks::install(&mgr, &first, |s| {
        mgr.webhook::<v1::Widget>(s)
            .defaulter(WidgetDefaulter)
            .complete()
    })
    .await
    .unwrap();
    let running = RunningManager::start(mgr);
    let mine: Api<v1::Widget> = Api::default_namespaced(first.client());
    let created = mine
        .create(&PostParams::default(), &widget("mine", json!({})))
        .await
        .unwrap();
    assert_eq!(
        created.spec.replicas,
        Some(1),
        "defaulted in its own namespace"
    );
    // The first test ends badly: its manager (and webhook server) stops, its configurations
    // stay until its handle is dropped.
    running.stop().await.unwrap();
    let theirs: Api<v1::Widget> = Api::default_namespaced(second.client());
    let created = theirs
        .create(&PostParams::default(), &widget("theirs", json!({})))
        .await
        .expect("another server's write never goes to a stopped test's webhook");
    assert_eq!(
        created.spec.replicas, None,
        "not defaulted by another test's webhook"
    );
    drop(hooks);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_server_of_its_own_the_webhooks_cover_every_namespace() {
    let server = TestApiServer::start().await.unwrap();
    server.install_crd_value(crd()).await.unwrap();
    let mgr = kcr_testkit::manager(&server).await.unwrap();
    let hooks = TestWebhooks::install(&mgr, &server, |s| {
        mgr.webhook::<v1::Widget>(s)
            .defaulter(WidgetDefaulter)
            .complete()
    })
    .await
    .unwrap();
    assert_eq!(hooks.paths().len(), 1);
    let running = RunningManager::start(mgr);
    let widgets: Api<v1::Widget> = Api::namespaced(server.client(), "kube-public");
    let created = widgets
        .create(&PostParams::default(), &widget("w", json!({})))
        .await
        .unwrap();
    if server.shares_its_cluster() {
        // The existing backend (a namespace of a cluster other tests use too): the webhooks
        // stay in the server's namespace.
        assert_eq!(created.spec.replicas, None);
    } else {
        assert_eq!(created.spec.replicas, Some(1));
    }
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_bad_registration_is_an_error_and_installs_nothing() {
    let server = TestApiServer::start().await.unwrap();
    let mgr = kcr_testkit::manager(&server).await.unwrap();
    let err = TestWebhooks::install(&mgr, &server, |s| {
        // The same path twice.
        s.webhook::<v1::Widget>()
            .defaulter(WidgetDefaulter)
            .complete()?;
        s.webhook::<v1::Widget>()
            .defaulter(WidgetDefaulter)
            .complete()
    })
    .await
    .unwrap_err();
    assert!(
        matches!(err, kcr_testkit::TestkitError::Webhook(_)),
        "{err}"
    );
    // Nothing was written: this server's proxy saw no create of any webhook configuration
    // (it counts this test's requests only, also on an existing cluster that other tests share).
    let faults = server.faults();
    assert_eq!(
        faults.request_count("create", "mutatingwebhookconfigurations")
            + faults.request_count("create", "validatingwebhookconfigurations"),
        0,
        "{:?}",
        faults.request_counts()
    );
    if server.backend() == kcr_envtest::Backend::Existing {
        // The cluster's configurations are shared with every other test: the counters above
        // are the check there.
        return;
    }
    let configs: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(server.client());
    let names: Vec<String> = configs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("kcr-testkit-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}
