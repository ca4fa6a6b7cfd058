//! Builder behaviour without a cluster: stream sources → predicates → event filters → handlers →
//! queue → reconciler; cache-sync timeouts; duplicate names.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{
    Action, Builder, Context, Controller, ControllerError, ControllerOptions, Manager,
    ManagerError, ManagerOptions, Reconciler, SourceWatch, WatchOptions,
};
use kcr_handler::{EnqueueRequestForObject, EnqueueRequestsFromMapFunc, Request};
use kcr_predicate::GenerationChanged;
use kcr_queue::WorkQueue;
use kcr_source::{Event, EventStream, Source, SourceError, Started, StreamSource, SyncHandle};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

fn cm(ns: &str, name: &str, generation: i64, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.namespace = Some(ns.into());
    c.metadata.generation = Some(generation);
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    c
}

#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<String>>>,
}

impl Reconciler<Request> for Recorder {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        self.seen.lock().push(request.to_string());
        Ok(Action::done())
    }
}

#[tokio::test(start_paused = true)]
async fn events_flow_through_predicates_filters_and_handlers() {
    let (tx, rx) = futures::channel::mpsc::unbounded::<Event<ConfigMap>>();
    let recorder = Recorder::default();
    let controller = Builder::new()
        .named("flow")
        .watches(
            StreamSource::new(rx).named("configmaps"),
            EnqueueRequestForObject,
            // per-watch predicate over the full object: only labelled app=web
            WatchOptions::new().predicate(|e: &Event<ConfigMap>| {
                e.object()
                    .metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.get("app").map(String::as_str) == Some("web"))
            }),
        )
        // event filter on metadata: drop updates that do not change the generation
        .with_event_filter(GenerationChanged)
        .build(recorder.clone())
        .unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));

    let web = &[("app", "web")];
    tx.unbounded_send(Event::create(cm("ns", "a", 1, web)))
        .unwrap();
    tx.unbounded_send(Event::create(cm("ns", "other", 1, &[("app", "db")])))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(*recorder.seen.lock(), vec!["ns/a"]);

    // same generation: filtered out by the event filter
    tx.unbounded_send(Event::update(cm("ns", "a", 1, web), cm("ns", "a", 1, web)))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(recorder.seen.lock().len(), 1);
    // new generation: passes
    tx.unbounded_send(Event::update(cm("ns", "a", 1, web), cm("ns", "a", 2, web)))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(*recorder.seen.lock(), vec!["ns/a", "ns/a"]);

    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn several_watches_feed_one_queue() {
    let (tx1, rx1) = futures::channel::mpsc::unbounded::<Event<ConfigMap>>();
    let (tx2, rx2) = futures::channel::mpsc::unbounded::<Event<ConfigMap>>();
    let recorder = Recorder::default();
    let controller = Builder::new()
        .named("fan-in")
        .max_concurrent_reconciles(2)
        .watches(
            StreamSource::new(rx1),
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .watches(
            StreamSource::new(rx2),
            // map every "child" to its parent named by a label
            EnqueueRequestsFromMapFunc::new(|c: &ConfigMap| {
                c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("parent").cloned())
                    .map(|p| Request::namespaced(p, "ns"))
            }),
            WatchOptions::new(),
        )
        .build(recorder.clone())
        .unwrap();
    assert_eq!(controller.options().max_concurrent_reconciles, 2);
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    tx1.unbounded_send(Event::create(cm("ns", "p1", 1, &[])))
        .unwrap();
    tx2.unbounded_send(Event::create(cm("ns", "c1", 1, &[("parent", "p2")])))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut seen = recorder.seen.lock().clone();
    seen.sort();
    assert_eq!(seen, vec!["ns/p1", "ns/p2"]);
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A source that never syncs and reports an error in its stream.
struct NeverSyncs {
    error: Option<SourceError>,
    _signal: Mutex<Option<kcr_source::SyncSignal>>,
    handle: SyncHandle,
}

impl NeverSyncs {
    fn new(error: Option<SourceError>) -> Self {
        let (signal, handle) = SyncHandle::pair();
        NeverSyncs {
            error,
            _signal: Mutex::new(Some(signal)),
            handle,
        }
    }
}

impl Source<ConfigMap> for NeverSyncs {
    fn start(&self) -> Result<Started<ConfigMap>, SourceError> {
        let errors = self.error.clone().into_iter().map(Err);
        let events: EventStream<ConfigMap> = futures::stream::iter(errors)
            .chain(futures::stream::pending())
            .boxed();
        Ok(Started {
            events,
            sync: self.handle.clone(),
        })
    }
    fn name(&self) -> String {
        "kind<ConfigMap>".into()
    }
}

#[tokio::test(start_paused = true)]
async fn cache_sync_timeout_names_the_resource_and_likely_cause() {
    let controller = Builder::new()
        .named("stuck")
        .cache_sync_timeout(Duration::from_secs(30))
        .watches(
            NeverSyncs::new(None),
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .build(Recorder::default())
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let err = controller.run(CancellationToken::new()).await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::from_secs(30));
    let msg = err.to_string();
    assert!(matches!(err, ControllerError::CacheSyncTimeout { .. }));
    for needle in [
        "controller stuck",
        "ConfigMap",
        "kind<ConfigMap>",
        "30s",
        "CustomResourceDefinition is not installed",
        "RBAC forbids",
        "diagnosis: none available",
    ] {
        assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
    }
}

/// The last error in the stream explains a sync timeout: here a lag, which the watch resyncs.
#[tokio::test(start_paused = true)]
async fn cache_sync_timeout_reports_the_streams_last_error() {
    let resyncs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = resyncs.clone();
    let watch = SourceWatch::new(
        NeverSyncs::new(Some(SourceError::Lagged { missed: 3 })),
        EnqueueRequestForObject,
        vec![],
        vec![],
    )
    .with_resync(Arc::new(move |_queue: &WorkQueue<Request>| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    let options = ControllerOptions {
        cache_sync_timeout: Duration::from_secs(30),
        ..ControllerOptions::default()
    };
    let mut controller = Controller::new("stuck", Recorder::default(), options);
    controller.add_watch(Box::new(watch));
    let t0 = tokio::time::Instant::now();
    let err = controller.run(CancellationToken::new()).await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::from_secs(30));
    assert!(matches!(err, ControllerError::CacheSyncTimeout { .. }));
    assert!(err.to_string().contains("missed 3 events"), "{err}");
    assert_eq!(resyncs.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Without a primary kind a lag cannot be resynced: the controller stops at once with a typed
/// error naming the watch and the lag, instead of waiting for a sync or running on.
#[tokio::test(start_paused = true)]
async fn a_lag_without_a_primary_kind_fails_the_controller_even_before_sync() {
    let controller = Builder::new()
        .named("lagging")
        .watches(
            NeverSyncs::new(Some(SourceError::Lagged { missed: 3 })),
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .build(Recorder::default())
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let err = controller.run(CancellationToken::new()).await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert!(
        matches!(err, ControllerError::WatchFailed { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    for needle in ["controller lagging", "kind<ConfigMap>", "missed 3 events"] {
        assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_during_sync_wait_is_clean() {
    let controller = Builder::new()
        .named("stuck-then-stopped")
        .watches(
            NeverSyncs::new(None),
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .build(Recorder::default())
        .unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!task.is_finished());
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn single_use_source_started_twice_is_an_error() {
    let source = Arc::new(StreamSource::new(
        futures::stream::empty::<Event<ConfigMap>>(),
    ));
    let _first = source.start().unwrap();
    let controller = Builder::new()
        .named("twice")
        .watches(source, EnqueueRequestForObject, WatchOptions::new())
        .build(Recorder::default())
        .unwrap();
    let err = controller.run(CancellationToken::new()).await.unwrap_err();
    assert!(matches!(err, ControllerError::WatchStart { .. }), "{err}");
    assert!(err.to_string().contains("already started"), "{err}");
}

#[test]
fn builder_needs_a_name() {
    let err = Builder::new().build(Recorder::default()).unwrap_err();
    assert!(matches!(err, ManagerError::MissingName));
    let err = Builder::new()
        .named("x")
        .complete(Recorder::default())
        .unwrap_err();
    assert!(matches!(err, ManagerError::NoManager));
}

/// A client for a server that does not exist: enough for a manager that never calls it.
fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn offline_options() -> ManagerOptions {
    ManagerOptions::default()
        .metrics_bind_address("0")
        .unwrap()
        .health_probe_bind_address("0")
        .unwrap()
}

#[tokio::test]
async fn duplicate_controller_names_are_rejected() {
    let mgr = Manager::new(offline_client(), offline_options())
        .await
        .unwrap();
    assert!(mgr.metrics_addr().is_none() && mgr.health_probe_addr().is_none());
    mgr.controller()
        .named("same")
        .complete(Recorder::default())
        .unwrap();
    let err = mgr
        .controller()
        .named("same")
        .complete(Recorder::default())
        .unwrap_err();
    assert!(matches!(err, ManagerError::DuplicateController { .. }));
    assert!(err.to_string().contains("\"same\""), "{err}");
    mgr.controller()
        .named("different")
        .complete(Recorder::default())
        .unwrap();
}
