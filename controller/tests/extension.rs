//! The extension points layers build on (`ManagerOptions::extension`, `Builder::with_hook`),
//! on either envtest backend: a hook narrows a watch's scope and sees the cached metadata, a
//! hook refuses a watch, a gate skips requests and abandons reconciles in flight, a hook takes
//! over registration, and the misuses fail with their reasons.

mod common;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::builder::{
    BuilderHook, ControllerRunnable, GatePass, MadeWatch, PlannedWatch, ReconcileGate, WatchRole,
};
use kcr_controller::extension::ManagerExtension;
use kcr_controller::{Action, BoxError, Context, Manager, ManagerError, Reconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::Request;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

async fn manager(ns: &TestNamespace) -> Manager {
    Manager::new(ns.client(), common::manager_options())
        .await
        .unwrap()
}

async fn create_cm(ns: &TestNamespace, name: &str, labels: &[(&str, &str)]) {
    let mut cm = common::configmap(name, "v");
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    Api::<ConfigMap>::namespaced(ns.client(), ns.namespace())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// Records the names it reconciles.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Reconciler<Request> for Seen {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        self.0.lock().push(request.name.clone());
        Ok(Action::done())
    }
}

impl Seen {
    fn names(&self) -> Vec<String> {
        self.0.lock().clone()
    }
}

// ---- manager extensions ----

struct Greeting(String);

struct GreetingExtension {
    fail: bool,
}

impl ManagerExtension for GreetingExtension {
    fn name(&self) -> &str {
        "greeting"
    }
    fn init(&self, client: &kube::Client) -> Result<Arc<dyn Any + Send + Sync>, BoxError> {
        if self.fail {
            return Err("no greeting today".into());
        }
        Ok(Arc::new(Greeting(client.default_namespace().to_string())))
    }
}

#[tokio::test]
async fn extensions_are_initialised_once_and_found_by_type() {
    let ns = TestNamespace::new("ext-init").await.unwrap();
    let options = common::manager_options().extension(GreetingExtension { fail: false });
    assert_eq!(options.extensions.names(), vec!["greeting".to_string()]);
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    let greeting = mgr.extension::<Greeting>().expect("the extension's state");
    assert_eq!(greeting.0, ns.client().default_namespace());
    assert!(
        mgr.extension::<String>().is_none(),
        "no state of another type"
    );

    let err = Manager::new(
        ns.client(),
        common::manager_options().extension(GreetingExtension { fail: true }),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ManagerError::Extension { name, .. } if name == "greeting"),
        "{err:?}"
    );
    assert!(err.to_string().contains("no greeting today"), "{err}");

    let err = Manager::new(
        ns.client(),
        common::manager_options()
            .extension(GreetingExtension { fail: false })
            .extension(GreetingExtension { fail: false }),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("same type"), "{err}");
}

// ---- builder hooks ----

/// Narrows every watch to `pick=yes`, remembers what it was shown.
#[derive(Default)]
struct Narrow {
    planned: Arc<Mutex<Vec<(String, WatchRole, bool)>>>,
    made: Arc<Mutex<Vec<MadeWatch>>>,
    refuse_owned: bool,
}

impl BuilderHook<Request> for Narrow {
    fn name(&self) -> &str {
        "narrow"
    }
    fn plan_watch(&mut self, watch: &mut PlannedWatch<'_>) -> Result<(), String> {
        self.planned
            .lock()
            .push((watch.kind.to_string(), watch.role, watch.dynamic));
        if self.refuse_owned && watch.role == WatchRole::Owned {
            return Err(format!("narrow refuses the owned kind {}", watch.kind));
        }
        watch.scope.label_selector = Some("pick=yes".into());
        Ok(())
    }
    fn watch_made(&mut self, watch: MadeWatch) -> Result<(), String> {
        self.made.lock().push(watch);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_narrows_the_scope_and_reads_the_cached_metadata() {
    let ns = TestNamespace::new("ext-narrow").await.unwrap();
    let mgr = manager(&ns).await;
    let hook = Narrow::default();
    let (planned, made) = (hook.planned.clone(), hook.made.clone());
    let seen = Seen::default();
    mgr.controller()
        .named("narrowed")
        .with_hook(hook)
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .owns::<Secret>(WatchOptions::new().namespace(ns.namespace()))
        .complete(seen.clone())
        .unwrap();
    assert_eq!(
        *planned.lock(),
        vec![
            ("ConfigMap".to_string(), WatchRole::Primary, false),
            ("Secret".to_string(), WatchRole::Owned, false)
        ]
    );
    let made: Vec<MadeWatch> = made.lock().clone();
    assert_eq!(made.len(), 2);
    assert_eq!(made[0].resource.plural, "configmaps");
    assert_eq!(made[1].resource.kind, "Secret");
    assert_eq!(made[0].scope.label_selector.as_deref(), Some("pick=yes"));
    assert_eq!(
        made[0].base.label_selector, None,
        "the user's scope is kept"
    );
    assert!(!made[0].cluster_scoped);

    let (_mgr, stop, run) = common::spawn_manager(mgr);
    create_cm(&ns, "left-out", &[]).await;
    create_cm(&ns, "picked", &[("pick", "yes")]).await;
    let meta = made[0].meta.clone();
    common::eventually("picked is reconciled", WAIT, || {
        let seen = seen.clone();
        async move { seen.names().contains(&"picked".to_string()) }
    })
    .await;
    // The cache behind the watch holds only the narrowed scope: `left-out` was created first
    // and is not in it, and was never reconciled.
    let picked = meta.get("picked", Some(ns.namespace())).expect("cached");
    assert_eq!(picked.name.as_deref(), Some("picked"));
    assert!(meta.get("left-out", Some(ns.namespace())).is_none());
    assert_eq!(seen.names(), vec!["picked".to_string()]);
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_hook_refusing_a_watch_fails_the_builder_with_its_reason() {
    let ns = TestNamespace::new("ext-refuse").await.unwrap();
    let mgr = manager(&ns).await;
    let err = mgr
        .controller()
        .named("refused")
        .with_hook(Narrow {
            refuse_owned: true,
            ..Narrow::default()
        })
        .for_kind::<ConfigMap>(WatchOptions::new())
        .owns::<Secret>(WatchOptions::new())
        .complete(Seen::default())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("narrow refuses the owned kind Secret"),
        "{err}"
    );
    // A hook added after a watch would miss it.
    let err = mgr
        .controller()
        .named("late")
        .for_kind::<ConfigMap>(WatchOptions::new())
        .with_hook(Narrow::default())
        .complete(Seen::default())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("add the builder hook narrow before for_kind"),
        "{err}"
    );
}

// ---- gates ----

/// Refuses names starting with `skip`; counts passes alive; abandons on its token.
struct SkipGate {
    asked: Mutex<Vec<String>>,
    passes: Arc<AtomicUsize>,
    abandon: CancellationToken,
}

struct CountedPass(Arc<AtomicUsize>);

impl Drop for CountedPass {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ReconcileGate<Request> for SkipGate {
    fn enter(&self, key: &Request) -> Option<GatePass> {
        self.asked.lock().push(key.name.clone());
        if key.name.starts_with("skip") {
            return None;
        }
        self.passes.fetch_add(1, Ordering::SeqCst);
        Some(GatePass::new(CountedPass(self.passes.clone())))
    }
    fn abandon(&self) -> Option<CancellationToken> {
        Some(self.abandon.clone())
    }
}

struct Gating {
    gate: Arc<SkipGate>,
}

impl BuilderHook<Request> for Gating {
    fn name(&self) -> &str {
        "gating"
    }
    fn gate(&mut self) -> Result<Option<Arc<dyn ReconcileGate<Request>>>, String> {
        Ok(Some(self.gate.clone()))
    }
}

/// Records names; blocks forever on `block`, flagging when that reconcile is dropped.
#[derive(Clone, Default)]
struct Blocking {
    seen: Seen,
    entered: Arc<Notify>,
    dropped: Arc<AtomicBool>,
}

struct FlagOnDrop(Arc<AtomicBool>);

impl Drop for FlagOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Reconciler<Request> for Blocking {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        self.seen.0.lock().push(request.name.clone());
        if request.name == "block" {
            let _flag = FlagOnDrop(self.dropped.clone());
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(Action::done())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_skips_requests_and_abandons_reconciles_in_flight() {
    let ns = TestNamespace::new("ext-gate").await.unwrap();
    let mgr = manager(&ns).await;
    let gate = Arc::new(SkipGate {
        asked: Mutex::new(Vec::new()),
        passes: Arc::new(AtomicUsize::new(0)),
        abandon: CancellationToken::new(),
    });
    let reconciler = Blocking::default();
    // A gated controller cannot be built alone: only complete() puts the gate in front.
    let err = mgr
        .controller()
        .named("gated-alone")
        .with_hook(Gating { gate: gate.clone() })
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .build(reconciler.clone())
        .unwrap_err();
    assert!(err.to_string().contains("not built alone"), "{err}");
    mgr.controller()
        .named("gated")
        .with_hook(Gating { gate: gate.clone() })
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .max_concurrent_reconciles(2)
        .complete(reconciler.clone())
        .unwrap();
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    create_cm(&ns, "skip-a", &[]).await;
    create_cm(&ns, "keep-b", &[]).await;
    common::eventually("the gate was asked for both", WAIT, || {
        let gate = gate.clone();
        let seen = reconciler.seen.clone();
        async move {
            let asked = gate.asked.lock().clone();
            asked.contains(&"skip-a".to_string()) && seen.names().contains(&"keep-b".to_string())
        }
    })
    .await;
    assert_eq!(reconciler.seen.names(), vec!["keep-b".to_string()]);

    // A reconcile in flight holds its pass until the gate abandons it.
    let entered = reconciler.entered.notified();
    create_cm(&ns, "block", &[]).await;
    tokio::time::timeout(WAIT, entered)
        .await
        .expect("the blocking reconcile started");
    assert_eq!(gate.passes.load(Ordering::SeqCst), 1, "one pass held");
    assert!(!reconciler.dropped.load(Ordering::SeqCst));
    gate.abandon.cancel();
    common::eventually("the reconcile was dropped with its pass", WAIT, || {
        let (dropped, passes) = (reconciler.dropped.clone(), gate.passes.clone());
        async move { dropped.load(Ordering::SeqCst) && passes.load(Ordering::SeqCst) == 0 }
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

// ---- registration ----

/// Registers the controller itself: reserves its name and runs it as a leaderless runnable.
struct Registrar {
    registered: Arc<AtomicBool>,
}

impl BuilderHook<Request> for Registrar {
    fn name(&self) -> &str {
        "registrar"
    }
    fn takes_registration(&self) -> bool {
        true
    }
    fn register(
        self: Box<Self>,
        manager: &Manager,
        controller: ControllerRunnable,
    ) -> Result<(), ManagerError> {
        manager.reserve_name(controller.name())?;
        let name = format!("registrar/{}", controller.name());
        manager.add_runnable(name, false, move |token| async move {
            controller
                .run(token)
                .await
                .map_err(|e| Box::new(e) as BoxError)
        })?;
        self.registered.store(true, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_registers_runs_the_controller_under_its_name() {
    let ns = TestNamespace::new("ext-register").await.unwrap();
    let mgr = manager(&ns).await;
    let registered = Arc::new(AtomicBool::new(false));
    let seen = Seen::default();
    mgr.controller()
        .named("registered")
        .with_hook(Registrar {
            registered: registered.clone(),
        })
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .complete(seen.clone())
        .unwrap();
    assert!(registered.load(Ordering::SeqCst));
    // The name is taken.
    let err = mgr
        .controller()
        .named("registered")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .complete(Seen::default())
        .unwrap_err();
    assert!(
        matches!(err, ManagerError::DuplicateController { .. }),
        "{err:?}"
    );
    // Two registering hooks on one builder are refused.
    let err = mgr
        .controller()
        .named("twice")
        .with_hook(Registrar {
            registered: Arc::new(AtomicBool::new(false)),
        })
        .with_hook(Registrar {
            registered: Arc::new(AtomicBool::new(false)),
        })
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .complete(Seen::default())
        .unwrap_err();
    assert!(err.to_string().contains("at most one may"), "{err}");

    let (_mgr, stop, run) = common::spawn_manager(mgr);
    create_cm(&ns, "one", &[]).await;
    common::eventually("the registered controller reconciles", WAIT, || {
        let seen = seen.clone();
        async move { seen.names().contains(&"one".to_string()) }
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}
