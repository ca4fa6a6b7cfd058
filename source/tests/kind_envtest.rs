//! `Kind` and `Cache` against a real (in-process) API server: kcr-envtest.
//!
//! Tests that inject faults, count requests or list cluster-wide start a `TestApiServer` of
//! their own; the others share the binary's server, each in a `TestNamespace`.
//!
//! These tests talk HTTP over loopback, so they run on the real clock; every wait is bounded by
//! a timeout that only fires when the behaviour is wrong.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kcr_envtest::{TestApiServer, TestNamespace};
use kcr_source::{Cache, Event, EventStream, Source, WatchScope, wait_for_sync};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

async fn next<K>(events: &mut EventStream<K>) -> Event<K> {
    tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an event within the timeout")
        .expect("stream still open")
        .expect("kind streams yield no errors")
}

/// The next `n` events, sorted by object name (a relist has no defined order).
async fn next_n(events: &mut EventStream<ConfigMap>, n: usize) -> Vec<Event<ConfigMap>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(next(events).await);
    }
    out.sort_by_key(|e| name(e.object()));
    out
}

/// Asserts nothing more arrives for a short while (used after exact expectations).
async fn quiet<K: std::fmt::Debug>(events: &mut EventStream<K>) {
    if let Ok(Some(extra)) = tokio::time::timeout(Duration::from_millis(300), events.next()).await {
        panic!("unexpected extra event {extra:?}");
    }
}

fn name(o: &ConfigMap) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "data": {"v": value}
    }))
    .expect("valid ConfigMap")
}

fn data(o: &ConfigMap) -> String {
    o.data
        .as_ref()
        .and_then(|d| d.get("v").cloned())
        .unwrap_or_default()
}

async fn set_value(api: &Api<ConfigMap>, name: &str, value: &str) -> ConfigMap {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": value}})),
    )
    .await
    .expect("patch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_sees_create_update_with_old_and_delete() {
    let ns = TestNamespace::new("kind-crud")
        .await
        .expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    let before = api
        .create(&PostParams::default(), &cm("pre", "0"))
        .await
        .expect("create");

    let cache = Cache::new(ns.client());
    let kind = cache
        .kind::<ConfigMap>(WatchScope::all().namespace(ns.namespace()))
        .expect("kind");
    let mut started = kind.start().expect("start");
    wait_for_sync([&started.sync], WAIT).await.expect("synced");
    match next(&mut started.events).await {
        Event::Create { object, initial } => {
            assert!(initial, "pre-existing object comes from the initial list");
            assert_eq!(rv(&object), rv(&before));
        }
        other => panic!("expected initial create, got {other:?}"),
    }

    let created = api
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("create");
    match next(&mut started.events).await {
        Event::Create { object, initial } => {
            assert!(!initial);
            assert_eq!((name(&object), rv(&object)), ("a".into(), rv(&created)));
        }
        other => panic!("expected create, got {other:?}"),
    }

    let updated = set_value(&api, "a", "2").await;
    match next(&mut started.events).await {
        Event::Update { old, new } => {
            assert_eq!((rv(&old), data(&old)), (rv(&created), "1".into()));
            assert_eq!((rv(&new), data(&new)), (rv(&updated), "2".into()));
        }
        other => panic!("expected update, got {other:?}"),
    }

    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    match next(&mut started.events).await {
        Event::Delete {
            object,
            state_unknown,
        } => {
            assert!(!state_unknown, "an observed delete");
            assert_eq!(name(&object), "a");
        }
        other => panic!("expected delete, got {other:?}"),
    }
    quiet(&mut started.events).await;

    // a second namespace is not watched
    let other = TestNamespace::new("kind-crud-other")
        .await
        .expect("a second namespace");
    let other_ns: Api<ConfigMap> = Api::namespaced(ns.client(), other.namespace());
    other_ns
        .create(&PostParams::default(), &cm("elsewhere", "x"))
        .await
        .expect("create");
    quiet(&mut started.events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_after_410_yields_updates_and_unknown_deletes() {
    // A server of its own: it injects faults, counts requests and compacts the history.
    let server = TestApiServer::start().await.expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for n in ["changed", "vanished", "same"] {
        api.create(&PostParams::default(), &cm(n, "1"))
            .await
            .expect("create");
    }
    let cache = Cache::new(server.client());
    let kind = cache
        .kind::<ConfigMap>(WatchScope::all().namespace("default"))
        .expect("kind");
    let mut started = kind.start().expect("start");
    let initial = next_n(&mut started.events, 3).await;
    assert!(
        initial
            .iter()
            .all(|e| matches!(e, Event::Create { initial: true, .. }))
    );
    let changed_before = initial[0].object().clone();
    assert_eq!(name(&changed_before), "changed");

    // Cut the watch off: close it and make every re-watch fail until the history is compacted.
    let faults = server.faults();
    let watches = faults.request_count("watch", "configmaps");
    faults.fail_next("watch", "configmaps", 1_000_000, 503);
    faults.close_watches();
    // The old watch is gone once the watcher has tried (and failed) to re-watch.
    let deadline = tokio::time::Instant::now() + WAIT;
    while faults.request_count("watch", "configmaps") == watches {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watcher never re-watched"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    set_value(&api, "changed", "2").await;
    api.delete("vanished", &DeleteParams::default())
        .await
        .expect("delete");
    api.create(&PostParams::default(), &cm("appeared", "1"))
        .await
        .expect("create");
    faults.compact_history();
    faults.clear();

    let relisted = next_n(&mut started.events, 3).await;
    match &relisted[0] {
        Event::Create { object, initial } => {
            assert_eq!(name(object), "appeared");
            assert!(initial, "found by a list (a relist), not by a watch event");
        }
        other => panic!("expected create of 'appeared', got {other:?}"),
    }
    match &relisted[1] {
        Event::Update { old, new } => {
            assert_eq!(name(new), "changed");
            assert_eq!(rv(old), rv(&changed_before), "old comes from the cache");
            assert_eq!((data(old), data(new)), ("1".into(), "2".into()));
        }
        other => panic!("expected update of 'changed', got {other:?}"),
    }
    match &relisted[2] {
        Event::Delete {
            object,
            state_unknown,
        } => {
            assert_eq!(name(object), "vanished");
            assert!(state_unknown, "the delete was not observed");
        }
        other => panic!("expected unknown delete of 'vanished', got {other:?}"),
    }
    quiet(&mut started.events).await;
    assert!(kind.stats().relists >= 2, "{:?}", kind.stats());

    // and the watch is live again
    set_value(&api, "same", "3").await;
    assert!(matches!(
        next(&mut started.events).await,
        Event::Update { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_share_one_watch_and_one_store() {
    // A server of its own: it counts requests and watches every Node (a pristine cluster).
    let server = TestApiServer::start().await.expect("envtest starts");
    server.add_nodes(2).await.expect("nodes");
    let faults = server.faults();
    faults.reset_counts();

    let cache = Cache::new(server.client());
    let controller_a = cache.kind::<Node>(WatchScope::all()).expect("kind");
    let controller_b = cache.kind::<Node>(WatchScope::all()).expect("kind");
    let reader = cache.reader::<Node>(WatchScope::all()).expect("reader");
    let mut a = controller_a.start().expect("start");
    let mut b = controller_b.start().expect("start");
    wait_for_sync([&a.sync, &b.sync], WAIT).await.expect("sync");
    cache.wait_for_sync(WAIT).await.expect("whole cache synced");
    assert_eq!(cache.sync_handles().len(), 1);
    for events in [&mut a.events, &mut b.events] {
        for _ in 0..2 {
            assert!(matches!(
                next(events).await,
                Event::Create { initial: true, .. }
            ));
        }
    }
    assert_eq!(cache.informer_count(), 1);
    assert_eq!(controller_a.subscribers(), 2);

    server.add_nodes(1).await.expect("node");
    for events in [&mut a.events, &mut b.events] {
        match next(events).await {
            Event::Create { object, initial } => {
                assert!(!initial);
                assert_eq!(object.metadata.name.as_deref(), Some("envtest-node-2"));
            }
            other => panic!("expected create, got {other:?}"),
        }
    }
    // One shared informer: one LIST (paged lists, the default) and one watch.
    assert_eq!(
        faults.request_count("list", "nodes"),
        1,
        "{:?}",
        faults.request_counts()
    );
    assert_eq!(
        faults.request_count("watch", "nodes"),
        1,
        "{:?}",
        faults.request_counts()
    );

    // readers answer from the shared store, without requests
    let before = faults.request_count("*", "*");
    assert_eq!(reader.len(), 3);
    assert!(reader.get("envtest-node-1", None).expect("read").is_some());
    assert!(reader.get("missing", None).expect("read").is_none());
    assert_eq!(
        reader
            .list_labels("kubernetes.io/hostname=envtest-node-0")
            .expect("valid selector")
            .len(),
        1
    );
    assert!(reader.list_labels("kubernetes.io/hostname in (").is_err());
    assert_eq!(faults.request_count("*", "*"), before);

    // different options are a different watch
    let _selected = cache
        .kind::<Node>(WatchScope::all().labels("kubernetes.io/hostname=envtest-node-0"))
        .expect("kind");
    assert_eq!(cache.informer_count(), 2);
    let deadline = tokio::time::Instant::now() + WAIT;
    while faults.request_count("watch", "nodes") < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "second watch never opened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_are_validated_and_metadata_only_watches_work() {
    // A server of its own: it injects faults and lists ConfigMaps of every namespace.
    let server = TestApiServer::start().await.expect("envtest starts");
    let cache = Cache::new(server.client());

    // a failing list (paged, the default, or streaming): never synced, and the error is kept
    // for diagnostics; 403 is not a refusal of streaming lists, so it does not fall back
    server.faults().fail_next("list", "secrets", 1_000_000, 403);
    server
        .faults()
        .fail_next("watch", "secrets", 1_000_000, 403);
    let secrets = cache
        .kind::<k8s_openapi::api::core::v1::Secret>(WatchScope::all())
        .expect("kind");
    let sync = secrets.start().expect("start").sync;
    assert_eq!(
        sync.wait_timeout(Duration::from_millis(500)).await,
        Err(kcr_source::SyncError::Timeout {
            timeout: Duration::from_millis(500)
        })
    );
    let error = secrets.last_error().expect("an error was recorded");
    assert!(
        error.contains("403") || error.to_lowercase().contains("forbidden"),
        "{error}"
    );
    server.faults().clear();
    drop(secrets);
    drop(sync);

    assert!(matches!(
        cache.kind::<ConfigMap>(WatchScope::all().labels("app in (")),
        Err(kcr_source::CacheError::Selector(_))
    ));
    assert!(matches!(
        cache.kind::<Node>(WatchScope::all().namespace("default")),
        Err(kcr_source::CacheError::NamespaceOnClusterScoped { .. })
    ));
    assert_eq!(cache.informer_count(), 1);

    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &cm("meta", "big"))
        .await
        .expect("create");
    let kind = cache
        .metadata_kind::<ConfigMap>(WatchScope::all().labels("app=demo"))
        .expect("metadata kind");
    let mut started = kind.start().expect("start");
    match next(&mut started.events).await {
        Event::Create { object, initial } => {
            assert!(initial);
            assert_eq!(object.metadata.name.as_deref(), Some("meta"));
            // The server sent metadata only (PartialObjectMetadata), not whole ConfigMaps.
            assert_eq!(
                object.types.as_ref().map(|t| t.kind.as_str()),
                Some("PartialObjectMetadata")
            );
        }
        other => panic!("expected create, got {other:?}"),
    }
    let reader = cache
        .metadata_reader::<ConfigMap>(WatchScope::all().labels("app=demo"))
        .expect("reader");
    assert_eq!(reader.list_in("default").expect("all namespaces").len(), 1);
    assert!(
        reader
            .list_in("kube-system")
            .expect("all namespaces")
            .is_empty()
    );
    assert_eq!(cache.informer_count(), 2);

    // a field selector is passed to the server
    api.create(&PostParams::default(), &cm("other", "x"))
        .await
        .expect("create");
    let by_name = cache
        .reader::<ConfigMap>(WatchScope::all().fields("metadata.name=other"))
        .expect("reader");
    by_name.wait_for_sync(WAIT).await.expect("synced");
    let names: Vec<_> = by_name.list().iter().map(|o| name(o)).collect();
    assert_eq!(names, ["other"]);

    cache.stop();
    // the stream ends (after whatever it had buffered, here the create of "other")
    let rest: Vec<_> = tokio::time::timeout(WAIT, started.events.collect::<Vec<_>>())
        .await
        .expect("ends after stop");
    assert!(rest.len() <= 1, "{rest:?}");
    assert!(matches!(
        cache.kind::<ConfigMap>(WatchScope::all()),
        Err(kcr_source::CacheError::Stopped)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_subscriber_is_resynced_and_does_not_block_the_fast_one() {
    let ns = TestNamespace::new("kind-slow")
        .await
        .expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    api.create(&PostParams::default(), &cm("hot", "0"))
        .await
        .expect("create");
    api.create(&PostParams::default(), &cm("doomed", "0"))
        .await
        .expect("create");
    let cache = Cache::with_subscriber_buffer(ns.client(), 2);
    let kind = cache
        .kind::<ConfigMap>(WatchScope::all().namespace(ns.namespace()))
        .expect("kind");
    let mut fast = kind.start().expect("start");
    let mut slow = kind.start().expect("start");
    let first_slow = next_n(&mut slow.events, 2).await;
    next_n(&mut fast.events, 2).await;
    let hot_seen_by_slow = first_slow[1].object().clone();
    assert_eq!(name(&hot_seen_by_slow), "hot");

    // ten updates and a delete while `slow` does not read; `fast` sees every one of them
    let mut last = None;
    for i in 1..=10 {
        last = Some(set_value(&api, "hot", &i.to_string()).await);
        match next(&mut fast.events).await {
            Event::Update { new, .. } => assert_eq!(data(&new), i.to_string()),
            other => panic!("expected update, got {other:?}"),
        }
    }
    api.delete("doomed", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(matches!(
        next(&mut fast.events).await,
        Event::Delete {
            state_unknown: false,
            ..
        }
    ));
    assert_eq!(kind.stats().lags, 1);

    // `slow` gets its two buffered updates, then one collapsed update to the current state and
    // the delete it missed
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next(&mut slow.events).await);
    }
    let updates: Vec<(String, String)> = got
        .iter()
        .filter_map(|e| match e {
            Event::Update { old, new } => Some((data(old), data(new))),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        [("0", "1"), ("1", "2"), ("2", "10")].map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert!(got.iter().any(|e| matches!(
        e,
        Event::Delete { object, state_unknown: true } if name(object) == "doomed"
    )));
    let last = last.expect("updated");
    assert!(got.iter().any(|e| rv(e.object()) == rv(&last)));
    quiet(&mut slow.events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reader_indexes_follow_the_watch_and_are_shared() {
    let ns = TestNamespace::new("kind-index").await.expect("envtest");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    api.create(&PostParams::default(), &configmap_owned("early", "x"))
        .await
        .expect("create early");
    let cache = Cache::new(ns.client());
    let options = WatchScope::all().namespace(ns.namespace());
    let reader = cache.reader::<ConfigMap>(options.clone()).expect("reader");
    reader.wait_for_sync(WAIT).await.expect("synced");
    reader
        .add_index("owner", |cm: &ConfigMap| {
            cm.data
                .iter()
                .flat_map(|d| d.get("owner").cloned())
                .collect()
        })
        .expect("a new index");
    let owned_by = |reader: &kcr_source::Reader<ConfigMap>, owner: &str| -> Vec<String> {
        reader
            .by_index("owner", owner)
            .expect("the index exists")
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect()
    };
    // Filed at registration: the object cached before the index existed.
    assert_eq!(owned_by(&reader, "x"), ["early"]);

    api.create(&PostParams::default(), &configmap_owned("late", "y"))
        .await
        .expect("create late");
    api.patch(
        "early",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"owner": "y"}})),
    )
    .await
    .expect("move early to y");
    kcr_envtest::eventually("both filed under y", WAIT, || async {
        owned_by(&reader, "y") == ["early", "late"] && owned_by(&reader, "x").is_empty()
    })
    .await;

    // Another reader of the same type and options shares the informer and its indexes.
    let other = cache.reader::<ConfigMap>(options).expect("reader");
    assert_eq!(owned_by(&other, "y"), ["early", "late"]);
    assert_eq!(
        other.add_index("owner", |_: &ConfigMap| Vec::new()),
        Err(kcr_source::IndexError::Duplicate {
            index: "owner".into()
        })
    );
    api.delete("late", &DeleteParams::default())
        .await
        .expect("delete late");
    kcr_envtest::eventually("late unfiled", WAIT, || async {
        owned_by(&other, "y") == ["early"]
    })
    .await;
}

fn configmap_owned(name: &str, owner: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some([("owner".to_string(), owner.to_string())].into());
    cm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_drops_managed_fields_by_default_and_runs_a_transform_per_type() {
    let ns = TestNamespace::new("kind-transform")
        .await
        .expect("envtest starts");
    let client = ns.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns.namespace());
    let stored = api
        .create(&PostParams::default(), &cm("t", "1"))
        .await
        .expect("create");
    assert!(
        stored.metadata.managed_fields.is_some(),
        "the API server records managed fields"
    );

    // Default: managedFields are gone from the cache, the rest is intact.
    let cache = Cache::new(client.clone());
    let reader = cache
        .reader::<ConfigMap>(WatchScope::all().namespace(ns.namespace()))
        .expect("reader");
    let kind = cache
        .kind::<ConfigMap>(WatchScope::all().namespace(ns.namespace()))
        .expect("kind");
    let mut started = kind.start().expect("start");
    wait_for_sync([&started.sync], WAIT).await.expect("synced");
    let cached = reader
        .get("t", Some(ns.namespace()))
        .expect("a watched namespace")
        .expect("cached");
    assert_eq!(cached.metadata.managed_fields, None);
    assert_eq!((data(&cached), rv(&cached)), ("1".into(), rv(&stored)));
    // Events carry transformed objects too, old and new.
    let _initial = next(&mut started.events).await;
    set_value(&api, "t", "2").await;
    match next(&mut started.events).await {
        Event::Update { old, new } => {
            assert_eq!(old.metadata.managed_fields, None);
            assert_eq!(new.metadata.managed_fields, None);
            assert_eq!(data(&new), "2");
        }
        other => panic!("expected update, got {other:?}"),
    }
    // Too late for ConfigMaps in this cache: its watch has started.
    let err = cache.keep_whole::<ConfigMap>().unwrap_err();
    assert!(
        err.to_string().contains("set after its watch started"),
        "{err}"
    );

    // Another cache: a custom transform for ConfigMaps, and whole Secrets.
    let custom = Cache::new(client.clone());
    custom
        .set_transform::<ConfigMap>(|cm| {
            cm.data = None;
            cm.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("transformed".into(), "yes".into());
        })
        .expect("before any watch");
    custom.keep_whole::<Secret>().expect("before any watch");
    let secrets: Api<Secret> = Api::namespaced(client, ns.namespace());
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "whole"}})).unwrap(),
        )
        .await
        .expect("create secret");
    let cms = custom
        .reader::<ConfigMap>(WatchScope::all().namespace(ns.namespace()))
        .expect("reader");
    let secret_reader = custom
        .reader::<Secret>(WatchScope::all().namespace(ns.namespace()))
        .expect("reader");
    let _cm_kind = custom
        .kind::<ConfigMap>(WatchScope::all().namespace(ns.namespace()))
        .expect("kind")
        .start()
        .expect("start");
    let _secret_kind = custom
        .kind::<Secret>(WatchScope::all().namespace(ns.namespace()))
        .expect("kind")
        .start()
        .expect("start");
    custom.wait_for_sync(WAIT).await.expect("synced");
    let t = cms
        .get("t", Some(ns.namespace()))
        .expect("a watched namespace")
        .expect("cached");
    assert_eq!(t.data, None);
    assert_eq!(t.metadata.labels.as_ref().unwrap()["transformed"], "yes");
    // A custom transform replaces the default: managedFields stay unless it drops them.
    assert!(t.metadata.managed_fields.is_some());
    let secret = secret_reader
        .get("whole", Some(ns.namespace()))
        .expect("a watched namespace")
        .expect("cached secret");
    assert!(secret.metadata.managed_fields.is_some(), "{secret:?}");
}

/// A reader and a started `Kind` source of ConfigMaps of `scope` (one informer), synced.
async fn synced_reader_and_source(
    cache: &Cache,
    scope: WatchScope,
) -> (
    kcr_source::Reader<ConfigMap>,
    kcr_source::Started<ConfigMap>,
) {
    let reader = cache.reader::<ConfigMap>(scope.clone()).expect("reader");
    let started = cache
        .kind::<ConfigMap>(scope)
        .expect("kind")
        .start()
        .expect("start");
    wait_for_sync([&started.sync], WAIT).await.expect("synced");
    (reader, started)
}

/// The next `n` events are the creates of an initial list; then a change of `changed` (whose
/// value is "1") to "2" arrives as an update with the old and the new object.
async fn initial_creates_then_an_update(
    events: &mut EventStream<ConfigMap>,
    api: &Api<ConfigMap>,
    n: usize,
    changed: &str,
) {
    let initial = next_n(events, n).await;
    assert!(
        initial
            .iter()
            .all(|e| matches!(e, Event::Create { initial: true, .. })),
        "{initial:?}"
    );
    set_value(api, changed, "2").await;
    match next(events).await {
        Event::Update { old, new } => {
            assert_eq!(
                (name(&new), data(&old), data(&new)),
                (changed.to_string(), "1".into(), "2".into())
            );
        }
        other => panic!("expected update, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_fills_the_cache_and_then_watches() {
    let ns = TestNamespace::new("kind-stream")
        .await
        .expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("s{i}"), "1"))
            .await
            .expect("create");
    }
    let cache = Cache::new(ns.client());
    let scope = WatchScope::all()
        .namespace(ns.namespace())
        .labels("app=demo")
        .streaming_list();
    let (reader, mut started) = synced_reader_and_source(&cache, scope).await;
    assert_eq!(reader.len(), 5);
    // Then live events, as with a list.
    initial_creates_then_an_update(&mut started.events, &api, 5, "s3").await;
    quiet(&mut started.events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_from_the_watch_cache_is_one_unpaged_request_and_then_watches() {
    // A server of its own: the test counts its LIST requests. 600 objects: more than one page
    // (kube-rs asks for 500 per page), so a paged list takes two requests.
    let server = TestApiServer::start().await.expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    futures::stream::iter(0..600)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &cm(&format!("c{i}"), "1"))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>, _>>()
        .expect("create");
    let faults = server.faults();
    let lists = || faults.request_count("list", "configmaps");

    // Paged: two requests.
    let before = lists();
    let paged = Cache::new(server.client());
    let reader = paged
        .reader::<ConfigMap>(WatchScope::all().namespace("default").paged_list())
        .expect("reader");
    reader.sync().wait_timeout(WAIT).await.expect("synced");
    assert_eq!(reader.len(), 600);
    assert_eq!(lists() - before, 2, "{:?}", faults.request_counts());
    paged.stop();

    // From the watch cache: one request, every object, then live events.
    let before = lists();
    let cache = Cache::new(server.client());
    let scope = WatchScope::all().namespace("default").list_from_cache();
    let (reader, mut started) = synced_reader_and_source(&cache, scope).await;
    assert_eq!(reader.len(), 600);
    assert_eq!(lists() - before, 1, "{:?}", faults.request_counts());
    initial_creates_then_an_update(&mut started.events, &api, 600, "c7").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_streaming_list_falls_back_to_paged_lists() {
    // A server of its own: it refuses the first watch as a server without WatchList refuses
    // `sendInitialEvents` (422), and counts requests.
    let server = TestApiServer::start().await.expect("envtest starts");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("f{i}"), "1"))
            .await
            .expect("create");
    }
    let faults = server.faults();
    let lists = faults.request_count("list", "configmaps");
    faults.fail_next("watch", "configmaps", 1, 422);
    let cache = Cache::new(server.client());
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    cache.on_watch_error({
        let seen = seen.clone();
        move |e| seen.lock().push(e.error.to_string())
    });
    let scope = WatchScope::all().namespace("default").streaming_list();
    let (reader, mut started) = synced_reader_and_source(&cache, scope).await;
    assert_eq!(reader.len(), 3);
    // The refusal reached the hook once; the cache then listed (one paged LIST).
    assert_eq!(seen.lock().len(), 1, "{:?}", seen.lock());
    assert!(seen.lock()[0].contains("422"), "{:?}", seen.lock());
    assert_eq!(
        faults.request_count("list", "configmaps") - lists,
        1,
        "{:?}",
        faults.request_counts()
    );
    // And then watches.
    initial_creates_then_an_update(&mut started.events, &api, 3, "f1").await;
}
