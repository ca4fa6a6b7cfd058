//! Single kcr crates used without a kcr controller, against kcr-envtest: kcr-queue driven by
//! kube-runtime's plain watcher, and kcr-source's `Kind` filtered by kcr-predicate.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestNamespace;
use kcr_predicate::{LabelsChanged, PredicateStreamExt};
use kcr_queue::WorkQueue;
use kcr_source::{Event, EventKind, Kind, Source};
use kcr_tests::eventually;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);
const OBJECTS: usize = 30;
const WRITES: usize = 4;

fn configmap(name: &str, value: usize) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.data = Some(BTreeMap::from([("v".to_string(), value.to_string())]));
    cm
}

fn value_of(cm: &ConfigMap) -> Option<usize> {
    cm.data.as_ref()?.get("v")?.parse().ok()
}

/// kube-runtime's watcher feeds names into a kcr-queue; two workers read the object and record
/// what they saw. Every object must end up processed after its last write, and no name may be
/// worked on by both workers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcr_queue_behind_a_plain_kube_runtime_watcher() {
    let ns = TestNamespace::new("queue-watcher")
        .await
        .expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    let queue = WorkQueue::<String>::new("standalone");

    let feed = tokio::spawn({
        let queue = queue.clone();
        let stream = watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(cm) = stream.try_next().await.expect("the watch runs") {
                if let Some(name) = cm.metadata.name {
                    queue.add(name);
                }
            }
        }
    });

    let latest: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let busy: Arc<Mutex<Vec<String>>> = Arc::default();
    let overlaps = Arc::new(Mutex::new(0usize));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (queue, api) = (queue.clone(), api.clone());
            let (latest, busy, overlaps) = (latest.clone(), busy.clone(), overlaps.clone());
            tokio::spawn(async move {
                while let Some(item) = queue.get().await {
                    let name = item.clone();
                    {
                        let mut busy = busy.lock();
                        if busy.contains(&name) {
                            *overlaps.lock() += 1;
                        }
                        busy.push(name.clone());
                    }
                    match api.get(&name).await {
                        Ok(cm) => {
                            if let Some(v) = value_of(&cm) {
                                latest.lock().insert(name.clone(), v);
                            }
                            item.done_and_forget();
                        }
                        Err(_) => item.retry_rate_limited(),
                    }
                    busy.lock().retain(|n| *n != name);
                }
            })
        })
        .collect();

    for i in 0..OBJECTS {
        api.create(&PostParams::default(), &configmap(&format!("cm-{i}"), 0))
            .await
            .expect("create");
    }
    for write in 1..WRITES {
        for i in 0..OBJECTS {
            api.patch(
                &format!("cm-{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"v": write.to_string()}})),
            )
            .await
            .expect("update");
        }
    }
    eventually(
        "every object was processed after its last write",
        WAIT,
        || async {
            let latest = latest.lock();
            (0..OBJECTS).all(|i| latest.get(&format!("cm-{i}")) == Some(&(WRITES - 1)))
        },
    )
    .await;
    assert_eq!(*overlaps.lock(), 0, "a name was worked on twice at once");

    queue
        .shutdown_with_drain(Duration::from_secs(5))
        .await
        .expect("drains");
    for worker in workers {
        worker.await.expect("worker");
    }
    feed.abort();
}

/// kcr-source's `Kind` over kube-runtime's watcher, its stream filtered by kcr-predicate, no
/// controller: a data-only update is dropped, a label change passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_filtered_by_a_predicate_without_a_controller() {
    let ns = TestNamespace::new("kind-predicate")
        .await
        .expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    let kind =
        Kind::from_watcher(watcher(api.clone(), watcher::Config::default()).default_backoff())
            .expect("a kind");
    let started = kind.start().expect("started");
    // The writes below must come after the first list: written before it, they would be folded
    // into one listed object (one Create that already has the label) and the update never seen.
    let synced = started.sync.clone();
    let seen: Arc<Mutex<Vec<(EventKind, String)>>> = Arc::default();
    let consumer = tokio::spawn({
        let seen = seen.clone();
        started
            .events
            .filter_events(LabelsChanged)
            .for_each(move |item| {
                let seen = seen.clone();
                async move {
                    if let Ok(event) = item {
                        let event: Event<ConfigMap> = event;
                        // Only this test's object: a real server also publishes
                        // `kube-root-ca.crt` into every namespace.
                        if event.object().metadata.name.as_deref() != Some("app") {
                            return;
                        }
                        let labels = event.object().metadata.labels.clone().unwrap_or_default();
                        let tier = labels.get("tier").cloned().unwrap_or_default();
                        seen.lock().push((event.kind(), tier));
                    }
                }
            })
    });
    tokio::time::timeout(WAIT, synced.wait())
        .await
        .expect("the kind syncs in time")
        .expect("the kind syncs");

    api.create(&PostParams::default(), &configmap("app", 0))
        .await
        .expect("create");
    // Data only: LabelsChanged drops it. The label change after it passes, so once that one
    // is seen, the data-only update is behind us.
    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "1"}})),
    )
    .await
    .expect("data update");
    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})),
    )
    .await
    .expect("label update");
    eventually("the label change arrives", WAIT, || async {
        seen.lock().len() >= 2
    })
    .await;
    assert_eq!(
        *seen.lock(),
        vec![
            (EventKind::Create, String::new()),
            (EventKind::Update, "front".to_string())
        ]
    );
    consumer.abort();
}
