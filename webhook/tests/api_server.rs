//! The webhooks called by the API server itself, on the envtest backend
//! `KCR_ENVTEST_BACKEND` names (in-process by default, `real` for kube-apiserver): the webhook
//! server listens on 127.0.0.1 and the configurations point at it by URL with the test CA as
//! `caBundle`.
//!
//! The tests share the binary's server, each in a `TestNamespace`, with webhook configurations
//! named uniquely and restricted to the test's namespace; the conversion test has a server of
//! its own (a CRD's conversion webhook serves every namespace).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    Hooks, SLOW, api_server, install_widget_crd, install_widget_crd_in, wait_for_defaulting, widget,
};
use kcr_controller::{Manager, ManagerOptions};
use kcr_envtest::TestNamespace;
use kcr_webhook::example::{WidgetDefaulter, WidgetValidator, v1, v1alpha1};
use kcr_webhook::{
    AdmissionError, AdmissionRequest, Conversion, FailurePolicy, ManagerWebhookExt, ServerOptions,
    Validator, Warnings, WebhookServer,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, CustomResource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn widgets_env(prefix: &str) -> (TestNamespace, Hooks) {
    let env = TestNamespace::new(prefix).await.unwrap();
    install_widget_crd_in(&env).await;
    let mut hooks = Hooks::bind().await;
    hooks
        .server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .validator(WidgetValidator)
        .validate_delete(true)
        .complete()
        .unwrap();
    hooks.run();
    hooks.install_in(&env, "widgets").await;
    wait_for_defaulting(&env.client(), env.namespace()).await;
    (env, hooks)
}

fn api_status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutation_shows_in_the_stored_object() {
    let (env, _hooks) = widgets_env("wh-mutation").await;
    let widgets: Api<v1::Widget> = Api::namespaced(env.client(), env.namespace());
    let created = widgets
        .create(&PostParams::default(), &widget("plain", json!({})))
        .await
        .unwrap();
    assert_eq!(created.spec.replicas, Some(1));
    assert_eq!(created.spec.appearance.colour.as_deref(), Some("blue"));
    let stored = widgets.get("plain").await.unwrap();
    assert_eq!(stored.spec, created.spec);
    // On update too: a removed field is defaulted again.
    let patched = widgets
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": null}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.replicas, Some(1));
    // What the client set is kept.
    let mine = widgets
        .create(
            &PostParams::default(),
            &widget(
                "mine",
                json!({"replicas": 4, "appearance": {"colour": "red"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(mine.spec.replicas, Some(4));
    assert_eq!(mine.spec.appearance.colour.as_deref(), Some("red"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_reaches_the_client_with_its_causes() {
    let (env, _hooks) = widgets_env("wh-denial").await;
    let widgets: Api<v1::Widget> = Api::namespaced(env.client(), env.namespace());
    let err = widgets
        .create(
            &PostParams::default(),
            &widget(
                "bad",
                json!({"replicas": 11, "appearance": {"colour": "pink"}}),
            ),
        )
        .await
        .unwrap_err();
    let status = api_status(err);
    assert_eq!(status.code, 422, "{status:?}");
    assert_eq!(status.reason, "Invalid");
    assert!(
        status.message.starts_with(
            "admission webhook \"vwidget-v1.example.kcr.dev\" denied the request: Widget.example.kcr.dev \"bad\" is invalid: [spec.replicas: Invalid value: 11"
        ),
        "{}",
        status.message
    );
    let causes: Vec<(String, String)> = status
        .details
        .as_ref()
        .expect("details")
        .causes
        .iter()
        .map(|c| (c.field.clone(), c.reason.clone()))
        .collect();
    assert_eq!(
        causes,
        vec![
            ("spec.replicas".to_string(), "FieldValueInvalid".to_string()),
            (
                "spec.appearance.colour".to_string(),
                "FieldValueNotSupported".to_string()
            ),
        ]
    );
    assert!(widgets.get_opt("bad").await.unwrap().is_none());

    // Update: the colour is immutable once set.
    widgets
        .create(
            &PostParams::default(),
            &widget("w", json!({"appearance": {"colour": "red"}})),
        )
        .await
        .unwrap();
    let err = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"appearance": {"colour": "green"}}})),
        )
        .await
        .unwrap_err();
    let status = api_status(err);
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .ends_with("spec.appearance.colour: Forbidden: field is immutable once set"),
        "{}",
        status.message
    );
    assert_eq!(
        widgets
            .get("w")
            .await
            .unwrap()
            .spec
            .appearance
            .colour
            .as_deref(),
        Some("red")
    );

    // Delete: a protected widget stays.
    widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"example.kcr.dev/protected": "true"}}})),
        )
        .await
        .unwrap();
    let status = api_status(
        widgets
            .delete("w", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403);
    assert!(
        status.message.contains("widget w is protected"),
        "{}",
        status.message
    );
    assert!(widgets.get_opt("w").await.unwrap().is_some());
}

struct Failing;

impl Validator<v1::Widget> for Failing {
    async fn validate_create(
        &self,
        _: &AdmissionRequest<v1::Widget>,
        _: &v1::Widget,
    ) -> Result<Warnings, AdmissionError> {
        Err(AdmissionError::internal("the quota service is unreachable"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_error_reaches_the_client_as_a_500() {
    let env = TestNamespace::new("wh-internal").await.unwrap();
    install_widget_crd_in(&env).await;
    let mut hooks = Hooks::bind().await;
    hooks
        .server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .validator(Failing)
        .complete()
        .unwrap();
    hooks.run();
    hooks.install_in(&env, "failing").await;
    let widgets: Api<v1::Widget> = Api::namespaced(env.client(), env.namespace());
    kcr_envtest::eventually("the failing validator answers", SLOW, || {
        let widgets = widgets.clone();
        async move {
            match widgets
                .create(&PostParams::default(), &widget("x", json!({})))
                .await
            {
                Ok(_) => {
                    // Not in effect yet (real backend): try again.
                    let _ = widgets.delete("x", &DeleteParams::default()).await;
                    Err("created".to_string())
                }
                Err(kube::Error::Api(s)) if s.code == 500 => {
                    assert!(
                        s.message.contains("internal error in webhook /validate-example-kcr-dev-v1-widget: the quota service is unreachable"),
                        "{}",
                        s.message
                    );
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
}

/// Kinds whose validators never answer (until released).
mod slow {
    use super::*;

    /// Spec.
    #[derive(CustomResource, Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
    #[kube(group = "slow.kcr.dev", version = "v1", kind = "SlowFail", namespaced)]
    pub struct SlowFailSpec {
        pub n: Option<i32>,
    }

    /// Spec.
    #[derive(CustomResource, Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
    #[kube(
        group = "slow.kcr.dev",
        version = "v1",
        kind = "SlowIgnore",
        namespaced
    )]
    pub struct SlowIgnoreSpec {
        pub n: Option<i32>,
    }
}

#[derive(Clone)]
struct Stuck {
    calls: Arc<AtomicUsize>,
    release: CancellationToken,
}

impl<K: kcr_webhook::WebhookObject> Validator<K> for Stuck {
    async fn validate_create(
        &self,
        _: &AdmissionRequest<K>,
        _: &K,
    ) -> Result<Warnings, AdmissionError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.release.cancelled().await;
        Ok(vec![])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_times_out_is_handled_by_the_failure_policy() {
    use slow::{SlowFail, SlowIgnore};
    let env = TestNamespace::new("wh-timeout").await.unwrap();
    env.install_crd::<SlowFail>().await.unwrap();
    env.install_crd::<SlowIgnore>().await.unwrap();
    let mut hooks = Hooks::bind().await;
    let release = CancellationToken::new();
    let fail_calls = Arc::new(AtomicUsize::new(0));
    let ignore_calls = Arc::new(AtomicUsize::new(0));
    hooks
        .server
        .webhook::<SlowFail>()
        .validator(Stuck {
            calls: fail_calls.clone(),
            release: release.clone(),
        })
        .failure_policy(FailurePolicy::Fail)
        .timeout_seconds(1)
        .complete()
        .unwrap();
    hooks
        .server
        .webhook::<SlowIgnore>()
        .validator(Stuck {
            calls: ignore_calls.clone(),
            release: release.clone(),
        })
        .failure_policy(FailurePolicy::Ignore)
        .timeout_seconds(1)
        .complete()
        .unwrap();
    hooks.run();
    hooks.install_in(&env, "slow").await;

    // Fail: the create is refused once the configuration is in effect.
    let fails: Api<SlowFail> = Api::namespaced(env.client(), env.namespace());
    let n = AtomicUsize::new(0);
    kcr_envtest::eventually("Fail refuses a create that times out", SLOW, || {
        let fails = fails.clone();
        let name = format!("f{}", n.fetch_add(1, Ordering::SeqCst));
        async move {
            let obj = SlowFail::new(&name, slow::SlowFailSpec::default());
            match fails.create(&PostParams::default(), &obj).await {
                Ok(_) => Err("created: the configuration is not in effect yet".to_string()),
                Err(kube::Error::Api(s)) => {
                    assert_eq!(s.code, 500, "{s:?}");
                    assert!(s.message.contains("slowfail"), "{}", s.message);
                    assert!(s.message.contains("deadline exceeded"), "{}", s.message);
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
    assert!(fail_calls.load(Ordering::SeqCst) >= 1);

    // Ignore: the create goes through although the webhook was called and never answered.
    let ignores: Api<SlowIgnore> = Api::namespaced(env.client(), env.namespace());
    kcr_envtest::eventually("Ignore lets a create that times out through", SLOW, || {
        let ignores = ignores.clone();
        let name = format!("i{}", n.fetch_add(1, Ordering::SeqCst));
        let before = ignore_calls.load(Ordering::SeqCst);
        let calls = ignore_calls.clone();
        async move {
            let obj = SlowIgnore::new(&name, slow::SlowIgnoreSpec::default());
            fails_or(ignores.create(&PostParams::default(), &obj).await)?;
            if calls.load(Ordering::SeqCst) > before {
                Ok(())
            } else {
                Err("created without calling the webhook: not in effect yet".to_string())
            }
        }
    })
    .await;
    release.cancel();
}

fn fails_or<T>(r: Result<T, kube::Error>) -> Result<T, String> {
    r.map_err(|e| format!("the create failed: {e}"))
}

/// Certificates rotated (Secret-volume style) while a writer keeps creating objects through
/// the webhooks: every request succeeds and is defaulted. The rotations happen at fixed points
/// of the writer's progress (a watch channel), not at times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_rotated_mid_test_causes_no_failed_request() {
    let (env, mut hooks) = widgets_env("wh-rotation").await;
    let widgets: Api<v1::Widget> = Api::namespaced(env.client(), env.namespace());
    let (progress_tx, mut progress) = tokio::sync::watch::channel(0usize);
    let (go_tx, mut go) = tokio::sync::watch::channel(0usize);
    const TOTAL: usize = 24;
    const EVERY: usize = 6;
    let writer = tokio::spawn(async move {
        for i in 0..TOTAL {
            // Wait until the rotation planned before request i is done.
            let _ = go.wait_for(|allowed| *allowed > i).await;
            let w = widgets
                .create(&PostParams::default(), &widget(&format!("r{i}"), json!({})))
                .await
                .unwrap_or_else(|e| panic!("request {i} failed: {e}"));
            assert_eq!(w.spec.replicas, Some(1), "request {i} was not defaulted");
            progress_tx.send_replace(i + 1);
        }
    });
    let mut rotations = 0;
    let mut allowed = EVERY;
    go_tx.send_replace(allowed);
    while allowed < TOTAL {
        progress.wait_for(|done| *done >= allowed).await.unwrap();
        let cert = hooks.rotate();
        rotations += 1;
        // The next handshake serves the new certificate.
        let (_, _, served) = common::https(
            hooks.addr(),
            hooks.ca.ca_pem(),
            "POST",
            "/convert-nothing",
            "application/json",
            vec![],
        )
        .await;
        {
            use rustls::pki_types::pem::PemObject;
            let expected =
                rustls::pki_types::CertificateDer::from_pem_slice(cert.cert_pem.as_bytes())
                    .unwrap();
            assert_eq!(served, expected.as_ref());
        }
        allowed += EVERY;
        go_tx.send_replace(allowed);
    }
    writer.await.unwrap();
    assert_eq!(rotations, TOTAL / EVERY - 1);
    assert_eq!(
        hooks.server.cert_watcher().generation(),
        1 + rotations as u64
    );
    let list = Api::<v1::Widget>::namespaced(env.client(), env.namespace())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        list.items
            .iter()
            .filter(|w| w
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with('r')))
            .count(),
        TOTAL
    );
}

/// A v1alpha1 object is stored as v1 and read in either version through the conversion
/// webhook, which the API server calls (kcr-envtest's in-process server as kube-apiserver).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_written_as_v1alpha1_is_read_as_v1_and_back() {
    // A server of its own: the CRD's conversion webhook serves every namespace, and the other
    // tests install the Widget CRD without it.
    let env = api_server().await;
    let mut hooks = Hooks::bind().await;
    hooks
        .server
        .add_conversion(Conversion::<v1::Widget>::hub().spoke::<v1alpha1::Widget>())
        .unwrap();
    hooks.run();
    install_widget_crd(&env, Some((&hooks.target(), hooks.ca.ca_pem()))).await;
    let alphas: Api<v1alpha1::Widget> = Api::namespaced(env.client(), "default");
    let v1s: Api<v1::Widget> = Api::namespaced(env.client(), "default");
    let old = v1alpha1::Widget::new(
        "old",
        v1alpha1::WidgetSpec {
            size: Some(3),
            colour: Some("red".into()),
        },
    );
    let mut old = old;
    old.metadata.namespace = Some("default".into());
    kcr_envtest::eventually(
        "a v1alpha1 create goes through the conversion",
        SLOW,
        || {
            let alphas = alphas.clone();
            let old = old.clone();
            async move {
                match alphas.create(&PostParams::default(), &old).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(e.to_string()),
                }
            }
        },
    )
    .await;
    let as_v1 = v1s.get("old").await.unwrap();
    assert_eq!(as_v1.spec.replicas, Some(3));
    assert_eq!(as_v1.spec.appearance.colour.as_deref(), Some("red"));
    let back = alphas.get("old").await.unwrap();
    assert_eq!(back.spec, old.spec);
    // Written as v1, listed as v1alpha1 together with the other.
    let mut new = v1::Widget::new(
        "new",
        v1::WidgetSpec {
            replicas: Some(5),
            appearance: v1::Appearance {
                colour: Some("green".into()),
            },
        },
    );
    new.metadata.namespace = Some("default".into());
    v1s.create(&PostParams::default(), &new).await.unwrap();
    let mut listed: Vec<(String, Option<i32>, Option<String>)> = alphas
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|w| {
            (
                w.metadata.name.unwrap_or_default(),
                w.spec.size,
                w.spec.colour,
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("new".into(), Some(5), Some("green".into())),
            ("old".into(), Some(3), Some("red".into())),
        ]
    );
}

/// The Manager runs the server on every replica; `/readyz` fails until a valid certificate
/// is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_runs_the_server_and_readiness_waits_for_a_certificate() {
    let env = TestNamespace::new("wh-manager").await.unwrap();
    install_widget_crd_in(&env).await;
    let ca = kcr_webhook::CertificateAuthority::generate("manager test CA").unwrap();
    let mut certs = common::CertDir::new();
    let server = WebhookServer::bind(
        ServerOptions::default()
            .bind_address("127.0.0.1:0".parse().unwrap())
            .cert_dir(certs.path()),
    )
    .await
    .unwrap();
    let mgr = Manager::new(
        env.client(),
        ManagerOptions::default()
            .metrics_bind_address("0")
            .unwrap()
            .health_probe_bind_address("127.0.0.1:0")
            .unwrap(),
    )
    .await
    .unwrap();
    mgr.add_webhook_server(&server).unwrap();
    mgr.webhook::<v1::Widget>(&server)
        .defaulter(WidgetDefaulter)
        .validator(WidgetValidator)
        .complete()
        .unwrap();
    let probes = mgr.health_probe_addr().unwrap();
    let mgr = Arc::new(mgr);
    let stop = CancellationToken::new();
    let running = {
        let mgr = mgr.clone();
        let stop = stop.clone();
        tokio::spawn(async move { mgr.run(stop).await })
    };
    // Serving, but without a certificate: not ready, and saying why.
    kcr_envtest::eventually("readyz names the missing certificate", SLOW, || async {
        let (code, body) = common::http_get(probes, "/readyz/webhook").await;
        if code != 200 && body.contains("no serving certificate") {
            Ok(())
        } else {
            Err(format!("{code} {body}"))
        }
    })
    .await;
    certs.publish(&ca.issue(&["localhost", "127.0.0.1"]).unwrap());
    kcr_envtest::eventually("readyz ok", SLOW, || async {
        let (code, body) = common::http_get(probes, "/readyz").await;
        if code == 200 {
            Ok(())
        } else {
            Err(format!("{code} {body}"))
        }
    })
    .await;
    // The API server reaches it.
    let (mut m, mut v) = server.webhook_configurations(
        &env.unique_name("managed"),
        &kcr_webhook::ClientTarget::url_for(server.local_addr()),
        ca.ca_pem().as_bytes(),
    );
    common::restrict_to_namespace(&mut m, &mut v, env.namespace());
    let client = env.client();
    Api::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>::all(
        client.clone(),
    )
    .create(&PostParams::default(), &m)
    .await
    .unwrap();
    Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(
        client.clone(),
    )
    .create(&PostParams::default(), &v)
    .await
    .unwrap();
    wait_for_defaulting(&client, env.namespace()).await;
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(server.ready().unwrap_err().contains("is not serving"));
}

/// The server is not a leader-only runnable: a replica that never gets the lease serves the
/// webhooks and is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_does_not_lead_serves_the_webhooks() {
    use k8s_openapi::api::coordination::v1::Lease;
    let env = TestNamespace::new("wh-follower").await.unwrap();
    // Someone else holds the lease until 2099.
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "webhook-test"},
        "spec": {"holderIdentity": "the-leader", "leaseDurationSeconds": 3600,
                 "acquireTime": "2099-01-01T00:00:00.000000Z", "renewTime": "2099-01-01T00:00:00.000000Z"}
    }))
    .unwrap();
    Api::<Lease>::namespaced(env.client(), env.namespace())
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();
    let hooks = Hooks::bind().await;
    let mgr = Manager::new(
        env.client(),
        ManagerOptions::default()
            .metrics_bind_address("0")
            .unwrap()
            .health_probe_bind_address("127.0.0.1:0")
            .unwrap()
            .leader_election(
                kcr_controller::LeaderElectionConfig::new("webhook-test")
                    .namespace(env.namespace())
                    .identity("a-follower"),
            ),
    )
    .await
    .unwrap();
    mgr.add_webhook_server(&hooks.server).unwrap();
    mgr.webhook::<v1::Widget>(&hooks.server)
        .defaulter(WidgetDefaulter)
        .complete()
        .unwrap();
    let probes = mgr.health_probe_addr().unwrap();
    let mgr = Arc::new(mgr);
    let stop = hooks.stop.clone();
    let running = {
        let mgr = mgr.clone();
        tokio::spawn(async move { mgr.run(stop).await })
    };
    kcr_envtest::eventually("the webhook check is ready", SLOW, || async {
        let (code, body) = common::http_get(probes, "/readyz/webhook").await;
        if code == 200 {
            Ok(())
        } else {
            Err(format!("{code} {body}"))
        }
    })
    .await;
    let (status, review) = common::post_json(
        hooks.addr(),
        hooks.ca.ca_pem(),
        "/mutate-example-kcr-dev-v1-widget",
        &common::admission_review(
            "CREATE",
            json!({"apiVersion": "example.kcr.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}),
            serde_json::Value::Null,
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(review["response"]["allowed"], true);
    assert!(review["response"]["patch"].is_string());
    assert!(!mgr.is_leader(), "the other holder keeps the lease");
    hooks.stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// One raw handler on one path admits two kinds: the API server sends it ConfigMaps and
/// Secrets (the configuration lists both, on the same path), and it refuses those labelled
/// `frozen`, naming the kind it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_handler_admits_two_kinds_on_one_path() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kcr_webhook::{WebhookRegistration, WebhookType, admission_fn};
    use kube::core::admission::AdmissionResponse;

    let env = TestNamespace::new("wh-raw").await.unwrap();
    let mut hooks = Hooks::bind().await;
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    hooks
        .server
        .admission_handler(
            "/custom/frozen",
            admission_fn(move |ctx, req: kube::core::admission::AdmissionRequest<kube::core::DynamicObject>| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let frozen = req.object.as_ref().is_some_and(|o| {
                        o.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.contains_key("frozen"))
                    });
                    let response = AdmissionResponse::from(&req);
                    if frozen {
                        response.deny(format!(
                            "{} {} is frozen ({})",
                            req.kind.kind,
                            req.name,
                            ctx.path()
                        ))
                    } else {
                        response
                    }
                }
            }),
        )
        .unwrap();
    for (kind, plural) in [("ConfigMap", "configmaps"), ("Secret", "secrets")] {
        hooks.server.add_registration(WebhookRegistration {
            webhook_type: WebhookType::Validating,
            path: "/custom/frozen".into(),
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            operations: vec!["CREATE".into(), "UPDATE".into()],
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 10,
        });
    }
    hooks.run();
    let name = hooks.install_in(&env, "raw").await;
    let vapi: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(env.client());
    let installed = vapi.get(&name).await.unwrap();
    let urls: Vec<String> = installed
        .webhooks
        .unwrap()
        .iter()
        .map(|w| w.client_config.url.clone().unwrap())
        .collect();
    assert_eq!(urls.len(), 2);
    assert!(
        urls.iter().all(|u| u.ends_with("/custom/frozen")),
        "{urls:?}"
    );

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    let labelled = |name: &str, frozen: bool| {
        let mut meta = kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        };
        if frozen {
            meta.labels = Some([("frozen".to_string(), "yes".to_string())].into());
        }
        meta
    };
    // In effect once a frozen ConfigMap is refused (the real API server loads configurations
    // in the background).
    kcr_envtest::eventually("the raw webhook is in effect", SLOW, || {
        let cms = cms.clone();
        let meta = labelled("probe", true);
        async move {
            let pp = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            let cm = ConfigMap {
                metadata: meta,
                ..Default::default()
            };
            match cms.create(&pp, &cm).await {
                Err(kube::Error::Api(s)) if s.message.contains("is frozen") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    let err = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: labelled("cold", true),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    let status = api_status(err);
    assert!(
        status
            .message
            .contains("ConfigMap cold is frozen (/custom/frozen)"),
        "{status:?}"
    );
    let err = secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: labelled("cold", true),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    let status = api_status(err);
    assert!(
        status
            .message
            .contains("Secret cold is frozen (/custom/frozen)"),
        "{status:?}"
    );
    let before = seen.load(Ordering::SeqCst);
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: labelled("warm", false),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: labelled("warm", false),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        seen.load(Ordering::SeqCst),
        before + 2,
        "both kinds reached the handler"
    );
}

/// A typed validator on a custom path: the path is served, is the one in the generated
/// configuration, and the API server calls it there; the conventional path is not served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_webhook_on_a_custom_path() {
    let env = TestNamespace::new("wh-custom-path").await.unwrap();
    install_widget_crd_in(&env).await;
    let mut hooks = Hooks::bind().await;
    let paths = hooks
        .server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .defaulter_path("/hooks/widgets/default")
        .validator(WidgetValidator)
        .validator_path("/hooks/widgets/validate")
        .complete()
        .unwrap();
    assert_eq!(paths, ["/hooks/widgets/default", "/hooks/widgets/validate"]);
    assert_eq!(hooks.server.paths(), paths);
    let (m, v) = hooks.server.webhook_configurations(
        "custom",
        &hooks.target(),
        hooks.ca.ca_pem().as_bytes(),
    );
    let url = |u: Option<String>| u.unwrap();
    assert_eq!(
        url(m.webhooks.unwrap()[0].client_config.url.clone()),
        format!("https://{}/hooks/widgets/default", hooks.addr())
    );
    assert_eq!(
        url(v.webhooks.unwrap()[0].client_config.url.clone()),
        format!("https://{}/hooks/widgets/validate", hooks.addr())
    );
    hooks.run();
    hooks.install_in(&env, "custom").await;
    // The API server's calls reach the custom paths: defaulted, and refused by validation.
    wait_for_defaulting(&env.client(), env.namespace()).await;
    let widgets: Api<v1::Widget> = Api::namespaced(env.client(), env.namespace());
    let err = widgets
        .create(
            &PostParams::default(),
            &widget("big", json!({"replicas": 11})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_status(err).code, 422);
    // Bad paths are typed errors, and nothing is registered then.
    for bad in ["no-slash", "/with?query", "/with space"] {
        let err = hooks
            .server
            .webhook::<v1alpha1::Widget>()
            .validator(WidgetValidator2)
            .validator_path(bad)
            .complete()
            .unwrap_err();
        assert!(
            matches!(err, kcr_webhook::WebhookError::InvalidPath { .. }),
            "{bad}: {err}"
        );
    }
    let err = hooks
        .server
        .webhook::<v1alpha1::Widget>()
        .validator(WidgetValidator2)
        .validator_path("/hooks/widgets/validate")
        .complete()
        .unwrap_err();
    assert!(matches!(
        err,
        kcr_webhook::WebhookError::DuplicatePath { .. }
    ));
    assert_eq!(hooks.server.paths(), paths);
}

/// A validator of v1alpha1 Widgets that allows everything.
struct WidgetValidator2;
impl Validator<v1alpha1::Widget> for WidgetValidator2 {}
