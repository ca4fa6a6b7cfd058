//! The object-reconciler form through the manager's cache (either envtest backend): the
//! reconciler gets the cached object; a deleted object takes the `gone` path; a reconciler of
//! another kind than `for_kind` is refused when the controller is built.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{configmap, eventually, manager_options};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::{Action, Context, Manager, ManagerError, ObjectReconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::Request;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use parking_lot::Mutex;

#[derive(Clone, Default)]
struct Seen {
    /// `name=value` of each reconciled object, `gone:name` for each gone one.
    log: Arc<Mutex<Vec<String>>>,
}

impl ObjectReconciler for Seen {
    type Object = ConfigMap;
    type Error = anyhow::Error;

    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: &Context) -> anyhow::Result<Action> {
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("value"))
            .cloned()
            .unwrap_or_default();
        self.log.lock().push(format!("{}={value}", cm.name_any()));
        Ok(Action::done())
    }

    async fn gone(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        self.log.lock().push(format!("gone:{}", request.name));
        Ok(Action::done())
    }
}

struct SecretsOnly;

impl ObjectReconciler for SecretsOnly {
    type Object = Secret;
    type Error = anyhow::Error;

    async fn reconcile(&self, _s: Arc<Secret>, _ctx: &Context) -> anyhow::Result<Action> {
        Ok(Action::done())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_gets_the_cached_object_and_a_deleted_one_goes_the_gone_path() {
    let ns = TestNamespace::new("object-reconciler").await.unwrap();
    let client = ns.client();
    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .unwrap();
    let seen = Seen::default();
    mgr.controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .named("objects")
        .complete_objects(seen.clone())
        .unwrap();
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    let cms: Api<ConfigMap> = Api::namespaced(client, ns.namespace());
    cms.create(&PostParams::default(), &configmap("first", "v1"))
        .await
        .unwrap();
    eventually(
        "first reconciled with its data",
        Duration::from_secs(20),
        || async { seen.log.lock().contains(&"first=v1".to_string()) },
    )
    .await;
    cms.delete("first", &DeleteParams::default()).await.unwrap();
    eventually(
        "first went the gone path",
        Duration::from_secs(20),
        || async { seen.log.lock().contains(&"gone:first".to_string()) },
    )
    .await;
    // The gone path is taken only for the deleted object, and after its reconcile.
    let log = seen.log.lock().clone();
    let reconciled = log.iter().position(|l| l == "first=v1").unwrap();
    let gone = log.iter().position(|l| l == "gone:first").unwrap();
    assert!(reconciled < gone, "{log:?}");
    assert_eq!(
        log.iter().filter(|l| l.starts_with("gone:")).count(),
        1,
        "{log:?}"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_object_reconciler_of_another_kind_than_for_kind_is_refused() {
    let ns = TestNamespace::new("object-mismatch").await.unwrap();
    let mgr = Manager::new(ns.client(), manager_options()).await.unwrap();
    let err = mgr
        .controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .named("mismatch")
        .complete_objects(SecretsOnly)
        .unwrap_err();
    match err {
        ManagerError::Builder { reason } => {
            assert!(reason.contains("Secret"), "{reason}");
            assert!(reason.contains("for_kind is ConfigMap"), "{reason}");
        }
        other => panic!("expected a builder error, got {other}"),
    }
    let err = mgr
        .controller()
        .named("no-primary")
        .complete_objects(SecretsOnly)
        .unwrap_err();
    assert!(
        matches!(&err, ManagerError::Builder { reason } if reason.contains("needs for_kind::<Secret>()")),
        "{err}"
    );
}
