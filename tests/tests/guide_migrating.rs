//! The guide's "Migrating from kube-runtime" page (`docs/guide/src/migrating/kube-runtime.md`):
//! one small controller, a ConfigMap → Secret copier, written twice: on kube-runtime's
//! `Controller` and on kcr. The test runs both against the test binary's kcr-envtest server
//! (`KCR_ENVTEST_BACKEND=real` for kube-apiserver), each in a namespace of its own, drives both
//! through the same changes and checks that they reach the same end state.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::{CancellationToken, ManagerOptions};
use kcr_envtest::TestNamespace;
use kcr_tests::eventually;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// The kube-runtime version, as a kube-rs user writes it today.
mod with_kube_runtime {
    // ANCHOR: kube_runtime
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::{Api, ObjectMeta, Patch, PatchParams};
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::watcher;
    use kube::{Resource, ResourceExt};

    /// What every reconcile is given besides the object.
    struct Ctx {
        client: kube::Client,
    }

    /// Copies a ConfigMap's data into a Secret of the same name that the ConfigMap owns.
    async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
        let namespace = cm.namespace().unwrap_or_default();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(cm.name_any()),
                namespace: Some(namespace.clone()),
                owner_references: cm.controller_owner_ref(&()).map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            data: cm.data.as_ref().map(|data| {
                let bytes = |v: &String| ByteString(v.clone().into_bytes());
                data.iter().map(|(k, v)| (k.clone(), bytes(v))).collect()
            }),
            ..Secret::default()
        };
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
        let params = PatchParams::apply("copier").force();
        secrets
            .patch(&cm.name_any(), &params, &Patch::Apply(&secret))
            .await?;
        Ok(Action::requeue(Duration::from_secs(300)))
    }

    /// A failed reconcile is retried after 5 s.
    fn error_policy(_cm: Arc<ConfigMap>, error: &kube::Error, _ctx: Arc<Ctx>) -> Action {
        tracing::warn!(%error, "copy failed");
        Action::requeue(Duration::from_secs(5))
    }

    /// Runs the copier on `namespace` until `stop` completes.
    pub async fn run(
        client: kube::Client,
        namespace: &str,
        stop: impl Future<Output = ()> + Send + Sync + 'static,
    ) {
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        Controller::new(configmaps, watcher::Config::default())
            .owns(secrets, watcher::Config::default())
            .graceful_shutdown_on(stop)
            .run(reconcile, error_policy, Arc::new(Ctx { client }))
            .for_each(|result| async move {
                match result {
                    Ok((object, _action)) => tracing::info!(%object, "reconciled"),
                    Err(error) => tracing::warn!(%error, "reconcile failed"),
                }
            })
            .await;
    }
    // ANCHOR_END: kube_runtime
}

/// The same controller on kcr.
mod with_kcr {
    // ANCHOR: kcr
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kcr_controller::{Action, CancellationToken, Client, ClientError, Context, ErrorAction};
    use kcr_controller::{FromCacheError, Manager, ManagerOptions, ObjectReconciler, WatchOptions};
    use kube::api::ObjectMeta;
    use kube::{Resource, ResourceExt};

    /// The context is the reconciler itself: its fields are what every reconcile is given.
    struct Copier {
        client: Client,
    }

    impl ObjectReconciler for Copier {
        type Object = ConfigMap;
        type Error = ClientError;

        /// Copies a ConfigMap's data into a Secret of the same name that the ConfigMap owns.
        async fn reconcile(
            &self,
            cm: Arc<ConfigMap>,
            _ctx: &Context,
        ) -> Result<Action, ClientError> {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(cm.name_any()),
                    namespace: cm.namespace(),
                    owner_references: cm.controller_owner_ref(&()).map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                data: cm.data.as_ref().map(|data| {
                    let bytes = |v: &String| ByteString(v.clone().into_bytes());
                    data.iter().map(|(k, v)| (k.clone(), bytes(v))).collect()
                }),
                ..Secret::default()
            };
            // Server-side apply under the manager's field owner ("copier").
            self.client.apply(&secret).force().await?;
            Ok(Action::requeue_after(Duration::from_secs(300)))
        }
    }

    /// A failed reconcile is retried after 5 s. The error is the reconciler's, wrapped by the
    /// object reconciler's cache lookup.
    fn error_policy(error: &FromCacheError<ClientError>, _ctx: &Context) -> ErrorAction {
        tracing::warn!(%error, "copy failed");
        ErrorAction::RequeueAfter(Duration::from_secs(5))
    }

    /// Runs the copier on `namespace` until `stop` is cancelled.
    pub async fn run(
        client: kube::Client,
        namespace: &str,
        options: ManagerOptions,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        let mgr = Manager::new(client, options.field_owner("copier")).await?;
        mgr.controller()
            .for_kind::<ConfigMap>(WatchOptions::new().namespace(namespace))
            .owns::<Secret>(WatchOptions::new().namespace(namespace))
            .error_policy(error_policy)
            .complete_objects(Copier {
                client: mgr.client(),
            })?;
        mgr.run(stop).await?;
        Ok(())
    }
    // ANCHOR_END: kcr
}

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

/// The copies in a namespace: name → (data as text, the name of the controlling owner).
type Copies = BTreeMap<String, (BTreeMap<String, String>, Option<String>)>;

async fn copies(client: &kube::Client, namespace: &str) -> Copies {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let list = secrets
        .list(&Default::default())
        .await
        .expect("list secrets");
    list.items
        .into_iter()
        .filter(|s| s.meta().owner_references.is_some())
        .map(|s| {
            let data = s
                .data
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8(v.0).expect("utf-8")))
                .collect();
            let owner = s
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.name.clone());
            (s.name_any(), (data, owner))
        })
        .collect()
}

fn expected(entries: &[(&str, &[(&str, &str)])]) -> Copies {
    entries
        .iter()
        .map(|(name, data)| {
            let data = data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (name.to_string(), (data, Some(name.to_string())))
        })
        .collect()
}

/// Applies the same change in both namespaces.
async fn in_both<F, Fut>(namespaces: &[(&kube::Client, &str); 2], change: F)
where
    F: Fn(Api<ConfigMap>, Api<Secret>) -> Fut,
    Fut: Future<Output = ()>,
{
    for (client, ns) in namespaces {
        change(
            Api::namespaced((*client).clone(), ns),
            Api::namespaced((*client).clone(), ns),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kube_runtime_controller_and_its_kcr_port_reach_the_same_end_state() {
    let old = TestNamespace::new("migrate-kube").await.expect("envtest");
    let new = TestNamespace::new("migrate-kcr").await.expect("envtest");
    let (old_client, new_client) = (old.client(), new.client());

    // kube-runtime's controller, stopped through its graceful shutdown trigger.
    let (stop_old, stopped_old) = tokio::sync::oneshot::channel::<()>();
    let kube_runtime = tokio::spawn(with_kube_runtime::run(
        old_client.clone(),
        old.namespace().to_string().leak(),
        async move {
            let _ = stopped_old.await;
        },
    ));

    // kcr's, on a Manager with its metrics and probe servers off (parallel tests share ports).
    let options = ManagerOptions::default()
        .metrics_bind_address("0")
        .expect("an address")
        .health_probe_bind_address("0")
        .expect("an address");
    let stop_new = CancellationToken::new();
    let kcr = tokio::spawn(with_kcr::run(
        new_client.clone(),
        new.namespace().to_string().leak(),
        options,
        stop_new.clone(),
    ));

    let both = [
        (&old_client, old.namespace()),
        (&new_client, new.namespace()),
    ];
    let reach = |what: &'static str, want: Copies| {
        let both = &both;
        async move {
            for (client, ns) in both {
                eventually(&format!("{what} in {ns}"), WAIT, || async {
                    copies(client, ns).await == want
                })
                .await;
            }
        }
    };

    // Two ConfigMaps are copied.
    in_both(&both, |cms, _| async move {
        for cm in [
            configmap("settings", &[("mode", "blue"), ("size", "3")]),
            configmap("flags", &[("beta", "on")]),
        ] {
            cms.create(&PostParams::default(), &cm)
                .await
                .expect("create");
        }
    })
    .await;
    reach(
        "both copies",
        expected(&[
            ("settings", &[("mode", "blue"), ("size", "3")]),
            ("flags", &[("beta", "on")]),
        ]),
    )
    .await;

    // A data change follows: a changed value and a removed key (apply drops what it no longer
    // sets).
    in_both(&both, |cms, _| async move {
        let patch = json!({"data": {"mode": "green", "size": null}});
        cms.patch("settings", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch");
    })
    .await;
    // An owned Secret deleted by someone else comes back (`owns`).
    in_both(&both, |_, secrets| async move {
        secrets
            .delete("flags", &DeleteParams::default())
            .await
            .expect("delete the copy");
    })
    .await;
    let end = expected(&[
        ("settings", &[("mode", "green")]),
        ("flags", &[("beta", "on")]),
    ]);
    reach("the end state", end.clone()).await;
    assert_eq!(
        copies(&old_client, old.namespace()).await,
        copies(&new_client, new.namespace()).await,
        "both controllers reach the same end state"
    );

    stop_old.send(()).expect("kube-runtime's controller runs");
    tokio::time::timeout(WAIT, kube_runtime)
        .await
        .expect("kube-runtime's controller stops")
        .expect("no panic");
    stop_new.cancel();
    tokio::time::timeout(WAIT, kcr)
        .await
        .expect("the kcr manager stops")
        .expect("no panic")
        .expect("a clean shutdown");
}
