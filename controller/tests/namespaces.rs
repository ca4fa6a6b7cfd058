//! A controller whose primary kind is cached in two of three namespaces (either envtest
//! backend): only those namespaces' objects are reconciled, and a request for the third
//! namespace is a terminal error of the object reconciler, not an object taken for gone.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{configmap, eventually, manager_options};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::{Action, Context, Manager, ManagerError, ObjectReconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::{EnqueueRequestsFromMapFunc, Request};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[derive(Clone, Default)]
struct Log {
    /// `ns/name=value` of each reconciled object, `gone:ns/name` of each gone one.
    entries: Arc<Mutex<Vec<String>>>,
}

impl Log {
    fn count(&self, entry: &str) -> usize {
        self.entries.lock().iter().filter(|e| *e == entry).count()
    }
}

impl ObjectReconciler for Log {
    type Object = ConfigMap;
    type Error = anyhow::Error;

    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: &Context) -> anyhow::Result<Action> {
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("value"))
            .cloned()
            .unwrap_or_default();
        let ns = cm.namespace().unwrap_or_default();
        self.entries
            .lock()
            .push(format!("{ns}/{}={value}", cm.name_any()));
        Ok(Action::done())
    }

    async fn gone(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        self.entries.lock().push(format!("gone:{request}"));
        Ok(Action::done())
    }
}

async fn set_value(api: &Api<ConfigMap>, name: &str, value: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": value}})),
    )
    .await
    .expect("patch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_listed_namespaces_are_reconciled_and_others_are_refused() {
    // team-a, team-b and team-c: three namespaces on the binary's shared server.
    let teams = [
        TestNamespace::new("team-a").await.expect("envtest starts"),
        TestNamespace::new("team-b").await.expect("envtest starts"),
        TestNamespace::new("team-c").await.expect("envtest starts"),
    ];
    let [a, b, c] = [0, 1, 2].map(|i| teams[i].namespace());
    let client = teams[0].client();
    let apis: Vec<Api<ConfigMap>> = [a, b, c]
        .iter()
        .map(|ns| Api::namespaced(client.clone(), ns))
        .collect();
    for api in &apis {
        api.create(&PostParams::default(), &configmap("x", "v1"))
            .await
            .expect("create");
    }

    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .expect("manager");
    let log = Log::default();
    // Secrets in all three namespaces map to the ConfigMap of the same name: the one in team-c
    // asks for an object outside the primary kind's cache.
    let secrets = mgr
        .cache()
        .kind::<Secret>(
            kcr_source::WatchScope::all()
                .namespaces([a, b, c])
                .labels("test=namespaces"),
        )
        .expect("secrets");
    mgr.controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespaces([b, a]))
        .watches(
            secrets,
            EnqueueRequestsFromMapFunc::new(|s: &Secret| {
                Some(Request::namespaced(
                    s.name_any(),
                    s.namespace().unwrap_or_default(),
                ))
            }),
            WatchOptions::new(),
        )
        .named("two-namespaces")
        .complete_objects(log.clone())
        .expect("controller");
    let metrics = mgr.metrics_addr().expect("metrics enabled");
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    eventually("team-a and team-b reconciled", WAIT, || async {
        log.count(&format!("{a}/x=v1")) == 1 && log.count(&format!("{b}/x=v1")) == 1
    })
    .await;
    for api in &apis {
        set_value(api, "x", "v2").await;
    }
    eventually(
        "the updates of team-a and team-b reconciled",
        WAIT,
        || async { log.count(&format!("{a}/x=v2")) == 1 && log.count(&format!("{b}/x=v2")) == 1 },
    )
    .await;

    // A request for team-c (from the Secret watch) cannot be looked up: a terminal error.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "x", "labels": {"test": "namespaces"}}
    }))
    .expect("valid Secret");
    let team_c: Api<Secret> = Api::namespaced(client.clone(), c);
    team_c
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    let series =
        "controller_runtime_terminal_reconcile_errors_total{controller=\"two-namespaces\"}";
    eventually("the team-c request failed terminally", WAIT, || async {
        match common::http_get(metrics, "/metrics").await {
            Some((200, text)) => common::metric_value(&text, series) == 1.0,
            _ => false,
        }
    })
    .await;
    // A marker in team-b, reconciled after everything before it (one worker, FIFO): by then
    // anything team-c could have caused has happened.
    apis[1]
        .create(&PostParams::default(), &configmap("marker", "m"))
        .await
        .expect("create marker");
    eventually("the marker reconciled", WAIT, || async {
        log.count(&format!("{b}/marker=m")) == 1
    })
    .await;
    let entries = log.entries.lock().clone();
    assert!(
        entries.iter().all(|e| !e.contains(c)),
        "team-c reached the reconciler: {entries:?}"
    );
    for entry in [
        format!("{a}/x=v1"),
        format!("{b}/x=v1"),
        format!("{a}/x=v2"),
        format!("{b}/x=v2"),
    ] {
        assert_eq!(log.count(&entry), 1, "{entry} in {entries:?}");
    }

    stop.cancel();
    run.await.expect("manager task").expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_namespace_list_fails_the_build() {
    let ns = TestNamespace::new("ns-bad-list")
        .await
        .expect("envtest starts");
    let mgr = Manager::new(ns.client(), manager_options())
        .await
        .expect("manager");
    let error = mgr
        .controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespaces(["a", "a"]))
        .complete_objects(Log::default())
        .expect_err("duplicate namespace");
    assert!(
        matches!(
            &error,
            ManagerError::Cache {
                source: kcr_source::CacheError::DuplicateNamespace { namespace },
                ..
            } if namespace == "a"
        ),
        "{error}"
    );
    let none: [&str; 0] = [];
    let error = mgr
        .controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespaces(none))
        .named("empty")
        .complete_objects(Log::default())
        .expect_err("empty list");
    assert!(
        matches!(
            &error,
            ManagerError::Cache {
                source: kcr_source::CacheError::NoNamespaces,
                ..
            }
        ),
        "{error}"
    );
}
