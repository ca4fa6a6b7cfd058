//! No lost requests (issue 13, item 7), against kcr-envtest (either backend):
//!
//! - a `Lagged` signal from a Channel source makes the controller resync every object of its
//!   primary kind, so the requests the missed events stood for are still reconciled;
//! - creates found by a relist after a 410 Expired go into the queue at low priority, like the
//!   first list's, so fresh changes overtake them;
//! - event filters see the whole object, so a filter that reads data (`IgnoreStatusOnlyUpdates`)
//!   does not drop ConfigMap data edits (whose generation an API server never bumps).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{
    Action, Builder, Context, ControllerError, Reconciler, SourceWatch, Watch, WatchOptions,
};
use kcr_envtest::{TestApiServer, TestNamespace};
use kcr_handler::{EnqueueRequestForObject, Request};
use kcr_predicate::IgnoreStatusOnlyUpdates;
use kcr_queue::WorkQueue;
use kcr_source::{Cache, Channel, Event, Overflow};
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use common::{configmap, eventually};

const WAIT: Duration = Duration::from_secs(30);

/// Counts reconciles per request; each reconcile first waits until the gate is open.
#[derive(Clone)]
struct Gated {
    /// The namespace of the requests [`below`](Self::below) looks at.
    namespace: String,
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    gate: watch::Receiver<bool>,
}

impl Gated {
    fn new(namespace: &str) -> (Self, watch::Sender<bool>) {
        let (open, gate) = watch::channel(true);
        let counts = Arc::default();
        let namespace = namespace.to_string();
        (
            Gated {
                namespace,
                counts,
                gate,
            },
            open,
        )
    }

    /// Requests reconciled fewer than `n` times, among `names` (in the namespace).
    fn below(&self, names: &[String], n: usize) -> Vec<String> {
        let counts = self.counts.lock();
        let namespace = &self.namespace;
        names
            .iter()
            .filter(|name| {
                counts
                    .get(&format!("{namespace}/{name}"))
                    .copied()
                    .unwrap_or(0)
                    < n
            })
            .cloned()
            .collect()
    }
}

impl Reconciler<Request> for Gated {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        let mut gate = self.gate.clone();
        gate.wait_for(|open| *open).await?;
        *self.counts.lock().entry(request.to_string()).or_default() += 1;
        Ok(Action::done())
    }
}

fn pending(names: Vec<String>) -> Result<(), String> {
    if names.is_empty() {
        Ok(())
    } else {
        Err(format!("{} not reconciled yet: {names:?}", names.len()))
    }
}

/// A deliberately slow controller: its reconciler blocks on a gate while a burst of channel
/// events arrives, and its Channel (capacity 1, `Overflow::Lag`) overflows. Every object the
/// burst was about must still be reconciled after the burst (here: a second time, the first
/// being the start-up list of the primary kind).
///
/// The runtime has one thread and the burst is sent without yielding, so the controller's pump
/// cannot drain the channel during the burst: all but the first event are missed, by
/// construction.
#[tokio::test(flavor = "current_thread")]
async fn a_lagged_channel_still_gets_every_request_reconciled() {
    let ns = TestNamespace::new("lagged").await.expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    let names: Vec<String> = (0..24).map(|i| format!("cm-{i:02}")).collect();
    let mut objects = Vec::new();
    for name in &names {
        let created = api
            .create(&PostParams::default(), &configmap(name, "1"))
            .await
            .expect("create");
        objects.push(Arc::new(created));
    }

    let channel = Channel::<ConfigMap>::with_overflow(1, Overflow::Lag);
    let (reconciler, open) = Gated::new(ns.namespace());
    let controller = Builder::new()
        .cache(Cache::new(ns.client()))
        .named("slow")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .watches(
            channel.clone(),
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .build(reconciler.clone())
        .expect("builds");
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(controller.run(shutdown.clone()));

    // The start-up list reconciles every object once.
    eventually("every object reconciled once", WAIT, || async {
        pending(reconciler.below(&names, 1))
    })
    .await;
    assert_eq!(channel.subscribers(), 1, "the controller subscribed");

    // The controller stalls; a burst of events overflows its channel.
    open.send_replace(false);
    for object in &objects {
        channel
            .try_send(Event::generic(Arc::clone(object)))
            .expect("lag mode never refuses");
    }
    open.send_replace(true);

    eventually(
        "every object of the burst reconciled again",
        WAIT,
        || async { pending(reconciler.below(&names, 2)) },
    )
    .await;
    shutdown.cancel();
    running
        .await
        .expect("no panic")
        .expect("the controller stops cleanly");
}

/// Without a primary kind there is nothing to resync: a lag stops the controller with a typed
/// error instead of letting it run on with requests lost.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_lag_without_a_primary_kind_stops_the_controller() {
    let channel = Channel::<ConfigMap>::with_overflow(1, Overflow::Lag);
    let (reconciler, _open) = Gated::new("default");
    let controller = Builder::new()
        .named("no-primary")
        .watches(
            channel.clone(),
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .build(reconciler.clone())
        .expect("builds");
    let running = tokio::spawn(controller.run(CancellationToken::new()));
    eventually("the controller subscribes", WAIT, || async {
        channel.subscribers() == 1
    })
    .await;
    for name in ["a", "b", "c"] {
        let mut object = configmap(name, "1");
        object.metadata.namespace = Some("default".into());
        channel
            .try_send(Event::generic(object))
            .expect("lag mode never refuses");
    }
    let error = tokio::time::timeout(WAIT, running)
        .await
        .expect("the controller stops")
        .expect("no panic")
        .expect_err("a lag it cannot resync is an error");
    assert!(
        matches!(&error, ControllerError::WatchFailed { controller, .. } if controller == "no-primary"),
        "{error:?}"
    );
    assert!(error.to_string().contains("missed 2 events"), "{error}");
}

/// A relist after a 410 finds an object created while the watch was down: its request goes in at
/// low priority, so a fresh change enqueued after it is still handed out first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_found_by_a_relist_queue_at_low_priority() {
    // A server of its own: it injects faults, counts requests and compacts the history.
    let server = TestApiServer::start().await.expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &configmap("before", "1"))
        .await
        .expect("create");
    let cache = Cache::new(server.client());
    let kind = cache
        .kind::<ConfigMap>(kcr_source::WatchScope::all().namespace("default"))
        .expect("kind");
    let queue = WorkQueue::<Request>::new("relist");
    let stop = CancellationToken::new();
    let watch = SourceWatch::new(kind.clone(), EnqueueRequestForObject, vec![], vec![]);
    let started = Box::new(watch)
        .start(queue.clone(), stop.clone())
        .await
        .expect("starts");
    let pump = tokio::spawn(started.pump);
    started.synced.await.expect("syncs");
    let first = tokio::time::timeout(WAIT, queue.get())
        .await
        .expect("the first list's create")
        .expect("queue open");
    assert_eq!(*first, Request::namespaced("before", "default"));
    first.done();

    // Cut the watch off: close it and make every re-watch fail until the history is compacted.
    let faults = server.faults();
    let watches = faults.request_count("watch", "configmaps");
    faults.fail_next("watch", "configmaps", 1_000_000, 503);
    faults.close_watches();
    eventually("the watcher re-watches", WAIT, || async {
        faults.request_count("watch", "configmaps") > watches
    })
    .await;
    api.create(&PostParams::default(), &configmap("appeared", "1"))
        .await
        .expect("create");
    faults.compact_history();
    faults.clear();
    eventually("the relist's create is queued", WAIT, || async {
        queue.len() == 1
    })
    .await;
    assert!(kind.stats().relists >= 2, "{:?}", kind.stats());

    queue.add(Request::namespaced("fresh", "default"));
    let mut order = Vec::new();
    for _ in 0..2 {
        let item = queue.get().await.expect("queue open");
        order.push(item.name.clone());
        item.done();
    }
    assert_eq!(
        order,
        ["fresh", "appeared"],
        "a fresh change overtakes the relist's create"
    );
    stop.cancel();
    pump.await
        .expect("no panic")
        .expect("the pump ends cleanly");
}

/// `IgnoreStatusOnlyUpdates` as an event filter on a ConfigMap controller: a data edit is not a
/// status-only update and must be reconciled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_filter_that_reads_data_sees_configmap_data_edits() {
    let ns = TestNamespace::new("data-edits")
        .await
        .expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    api.create(&PostParams::default(), &configmap("edited", "1"))
        .await
        .expect("create");
    let (reconciler, _open) = Gated::new(ns.namespace());
    let controller = Builder::new()
        .cache(Cache::new(ns.client()))
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .with_event_filter(IgnoreStatusOnlyUpdates)
        .build(reconciler.clone())
        .expect("builds");
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(controller.run(shutdown.clone()));
    let names = ["edited".to_string()];
    eventually("the create is reconciled", WAIT, || async {
        pending(reconciler.below(&names, 1))
    })
    .await;

    let edited = api
        .patch(
            "edited",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": "2"}})),
        )
        .await
        .expect("patch");
    assert_eq!(edited.metadata.generation, None, "no generation to go by");
    eventually("the data edit is reconciled", WAIT, || async {
        pending(reconciler.below(&names, 2))
    })
    .await;
    shutdown.cancel();
    running
        .await
        .expect("no panic")
        .expect("the controller stops cleanly");
}
