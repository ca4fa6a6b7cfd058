//! Unit tests of partitioned informers (one watch per namespace, one store): per-namespace
//! lists and relists, sync, late subscribers, and randomised histories.

use super::*;
use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;

fn cm(namespace: &str, name: &str, rv: u64) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(namespace.into());
    cm.metadata.resource_version = Some(rv.to_string());
    cm
}

fn key(o: &ConfigMap) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or_default(),
        o.metadata.name.as_deref().unwrap_or_default()
    )
}

fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

/// (kind, namespace/name, old rv, new rv, initial or state_unknown)
type Desc = (&'static str, String, Option<String>, String, bool);

fn desc(event: &Event<ConfigMap>) -> Desc {
    match event {
        Event::Create { object, initial } => ("create", key(object), None, rv(object), *initial),
        Event::Update { old, new } => ("update", key(new), Some(rv(old)), rv(new), false),
        Event::Delete {
            object,
            state_unknown,
        } => ("delete", key(object), None, rv(object), *state_unknown),
        Event::Generic { object } => ("generic", key(object), None, rv(object), false),
    }
}

fn d(kind: &'static str, key: &str, old: Option<u64>, new: u64, flag: bool) -> Desc {
    (
        kind,
        key.into(),
        old.map(|o| o.to_string()),
        new.to_string(),
        flag,
    )
}

/// Everything ready on the stream, sorted by key (a list has no defined order).
fn ready(stream: &mut KindStream<ConfigMap>) -> Vec<Desc> {
    let mut out = Vec::new();
    while let Some(Some(item)) = stream.next().now_or_never() {
        out.push(desc(&item.expect("kind streams have no errors")));
    }
    out.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
    out
}

fn list_in(
    informer: &Informer<ConfigMap>,
    signal: &SyncSignal,
    partition: usize,
    objects: &[ConfigMap],
) {
    informer.process_from(partition, watcher::Event::Init, signal);
    for o in objects {
        informer.process_from(partition, watcher::Event::InitApply(o.clone()), signal);
    }
    informer.process_from(partition, watcher::Event::InitDone, signal);
}

fn stored(informer: &Informer<ConfigMap>) -> Vec<(String, String)> {
    let mut all: Vec<_> = informer
        .store()
        .state()
        .iter()
        .map(|o| (key(o), rv(o)))
        .collect();
    all.sort();
    all
}

fn partitioned(capacity: usize, namespaces: &[&str]) -> (Arc<Informer<ConfigMap>>, SyncSignal) {
    Informer::with_partitions(
        capacity,
        (),
        namespaces.iter().map(|n| n.to_string()).collect(),
    )
}

#[test]
fn synced_only_when_every_namespace_has_listed() {
    let (informer, signal) = partitioned(16, &["a", "b"]);
    let mut s = informer.subscribe(());
    list_in(&informer, &signal, 0, &[cm("a", "x", 1), cm("a", "y", 2)]);
    assert!(!informer.sync_handle().is_synced(), "b has not listed yet");
    assert_eq!(
        ready(&mut s),
        vec![
            d("create", "a/x", None, 1, true),
            d("create", "a/y", None, 2, true)
        ]
    );
    // a's watch goes on while b is still listing.
    informer.process_from(0, watcher::Event::Apply(cm("a", "x", 3)), &signal);
    informer.process_from(1, watcher::Event::Init, &signal);
    informer.process_from(1, watcher::Event::InitApply(cm("b", "x", 4)), &signal);
    assert_eq!(ready(&mut s), vec![d("update", "a/x", Some(1), 3, false)]);
    assert!(!informer.sync_handle().is_synced());
    informer.process_from(1, watcher::Event::InitDone, &signal);
    assert!(informer.sync_handle().is_synced());
    assert_eq!(ready(&mut s), vec![d("create", "b/x", None, 4, true)]);
    assert_eq!(
        stored(&informer),
        [("a/x", "3"), ("a/y", "2"), ("b/x", "4")].map(|(k, v)| (k.to_string(), v.to_string()))
    );
}

#[test]
fn a_relist_of_one_namespace_leaves_the_others_alone() {
    let (informer, signal) = partitioned(16, &["a", "b", "c"]);
    list_in(
        &informer,
        &signal,
        0,
        &[
            cm("a", "same", 1),
            cm("a", "changed", 2),
            cm("a", "gone", 3),
        ],
    );
    list_in(
        &informer,
        &signal,
        1,
        &[cm("b", "same", 4), cm("b", "changed", 5)],
    );
    list_in(&informer, &signal, 2, &[]);
    let mut s = informer.subscribe(());
    assert_eq!(
        ready(&mut s).len(),
        5,
        "a late subscriber starts from the snapshot"
    );
    let b_same = informer.store().get(Some("b"), "same").expect("cached");

    // a's watch relists (after a 410): only a's objects are compared, written and removed.
    list_in(
        &informer,
        &signal,
        0,
        &[cm("a", "same", 1), cm("a", "changed", 6), cm("a", "new", 7)],
    );
    assert_eq!(
        ready(&mut s),
        vec![
            d("update", "a/changed", Some(2), 6, false),
            d("delete", "a/gone", None, 3, true),
            d("create", "a/new", None, 7, true),
        ]
    );
    assert_eq!(
        stored(&informer),
        [
            ("a/changed", "6"),
            ("a/new", "7"),
            ("a/same", "1"),
            ("b/changed", "5"),
            ("b/same", "4"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    // The other namespaces' objects are the very same cached objects.
    let b_same_after = informer
        .store()
        .get(Some("b"), "same")
        .expect("still cached");
    assert!(Arc::ptr_eq(&b_same, &b_same_after));
    // An empty relist of b removes b's objects only.
    list_in(&informer, &signal, 1, &[]);
    assert_eq!(
        ready(&mut s),
        vec![
            d("delete", "b/changed", None, 5, true),
            d("delete", "b/same", None, 4, true),
        ]
    );
    assert_eq!(stored(&informer).len(), 3);
    assert_eq!(informer.counters.relists.load(Ordering::Relaxed), 5);
}

#[test]
fn a_subscriber_between_two_namespaces_lists_gets_everything_once() {
    let (informer, signal) = partitioned(16, &["a", "b"]);
    list_in(&informer, &signal, 0, &[cm("a", "x", 1)]);
    // Subscribes after a's list but before b's: a's objects come from a snapshot, b's list
    // from the buffer; each object exactly once, all as list creates.
    let mut s = informer.subscribe(());
    list_in(&informer, &signal, 1, &[cm("b", "x", 2)]);
    assert_eq!(
        ready(&mut s),
        vec![
            d("create", "a/x", None, 1, true),
            d("create", "b/x", None, 2, true)
        ]
    );
    informer.process_from(1, watcher::Event::Delete(cm("b", "x", 3)), &signal);
    assert_eq!(ready(&mut s), vec![d("delete", "b/x", None, 3, false)]);
}

/// Applies `event` to a subscriber's view, checking it against what it knew (as the
/// single-watch randomised test does).
fn apply_checked(view: &mut HashMap<String, String>, event: &Event<ConfigMap>) {
    match event {
        Event::Create { object, .. } => {
            assert!(
                view.insert(key(object), rv(object)).is_none(),
                "create of a known object"
            );
        }
        Event::Update { old, new } => {
            assert_eq!(
                view.insert(key(new), rv(new)),
                Some(rv(old)),
                "stale or unknown old"
            );
            assert_ne!(rv(old), rv(new), "no-op update");
        }
        Event::Delete { object, .. } => {
            assert!(
                view.remove(&key(object)).is_some(),
                "delete of an unknown object"
            );
        }
        Event::Generic { .. } => panic!("kind emits no generic events"),
    }
}

#[test]
fn randomised_per_namespace_histories_keep_store_and_subscribers_exact() {
    use rand::{Rng, SeedableRng};
    const NAMESPACES: [&str; 3] = ["a", "b", "c"];
    for seed in 0..60u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let capacity = rng.random_range(1..6);
        let (informer, signal) = partitioned(capacity, &NAMESPACES);
        // The server: namespace/name -> rv; each namespace's watch may be down on its own.
        let mut server: HashMap<String, u64> = HashMap::new();
        let mut down = [false; 3];
        let mut next_rv = 0u64;
        let mut subs: Vec<(KindStream<ConfigMap>, HashMap<String, String>, f64)> = Vec::new();
        let objects_in = |server: &HashMap<String, u64>, ns: &str| -> Vec<ConfigMap> {
            server
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("{ns}/")))
                .map(|(k, v)| {
                    let (ns, name) = k.split_once('/').expect("ns/name");
                    cm(ns, name, *v)
                })
                .collect()
        };
        for p in 0..NAMESPACES.len() {
            if rng.random_bool(0.5) {
                subs.push((
                    informer.subscribe(()),
                    HashMap::new(),
                    rng.random_range(0.05..1.0),
                ));
            }
            list_in(&informer, &signal, p, &[]);
        }
        for step in 0..500 {
            let p = rng.random_range(0..NAMESPACES.len());
            let ns = NAMESPACES[p];
            match rng.random_range(0..100) {
                0..3 if subs.len() < 4 => subs.push((
                    informer.subscribe(()),
                    HashMap::new(),
                    rng.random_range(0.05..1.0),
                )),
                3..6 => down[p] = true,
                // one namespace's relist, possibly in the middle of the others' watch events
                6..10 => {
                    down[p] = false;
                    informer.process_from(p, watcher::Event::Init, &signal);
                    for o in objects_in(&server, ns) {
                        informer.process_from(p, watcher::Event::InitApply(o), &signal);
                        // another namespace's watch event lands inside this list
                        if rng.random_bool(0.1) {
                            let q = (p + 1) % NAMESPACES.len();
                            let name = format!("o{}", rng.random_range(0..5));
                            next_rv += 1;
                            server.insert(format!("{}/{name}", NAMESPACES[q]), next_rv);
                            if !down[q] {
                                let o = cm(NAMESPACES[q], &name, next_rv);
                                informer.process_from(q, watcher::Event::Apply(o), &signal);
                            }
                        }
                    }
                    informer.process_from(p, watcher::Event::InitDone, &signal);
                }
                _ => {
                    let name = format!("o{}", rng.random_range(0..5));
                    let k = format!("{ns}/{name}");
                    next_rv += 1;
                    if server.contains_key(&k) && rng.random_bool(0.3) {
                        server.remove(&k);
                        if !down[p] {
                            let o = cm(ns, &name, next_rv);
                            informer.process_from(p, watcher::Event::Delete(o), &signal);
                        }
                    } else {
                        server.insert(k, next_rv);
                        if !down[p] {
                            let o = cm(ns, &name, next_rv);
                            informer.process_from(p, watcher::Event::Apply(o), &signal);
                        }
                    }
                }
            }
            // A namespace whose watch is up is exactly the server's, whatever the others do.
            for (q, ns) in NAMESPACES.iter().enumerate() {
                if down[q] {
                    continue;
                }
                let mut want: Vec<(String, String)> = objects_in(&server, ns)
                    .iter()
                    .map(|o| (key(o), rv(o)))
                    .collect();
                want.sort();
                let have: Vec<(String, String)> = stored(&informer)
                    .into_iter()
                    .filter(|(k, _)| k.starts_with(&format!("{ns}/")))
                    .collect();
                assert_eq!(have, want, "seed {seed} step {step} namespace {ns}");
            }
            for (stream, view, speed) in subs.iter_mut() {
                while rng.random_bool(*speed) {
                    match stream.next().now_or_never() {
                        Some(Some(Ok(event))) => apply_checked(view, &event),
                        Some(other) => panic!("seed {seed} step {step}: {other:?}"),
                        None => break,
                    }
                }
            }
        }
        // Every namespace relists; every subscriber then ends exactly at the server's state.
        for (p, ns) in NAMESPACES.iter().enumerate() {
            list_in(&informer, &signal, p, &objects_in(&server, ns));
        }
        let expected: HashMap<String, String> = server
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        for (stream, view, _) in subs.iter_mut() {
            while let Some(Some(item)) = stream.next().now_or_never() {
                apply_checked(view, &item.expect("ok"));
            }
            assert_eq!(*view, expected, "seed {seed}");
        }
        assert!(informer.sync_handle().is_synced());
    }
}

#[tokio::test]
async fn spawned_partitions_merge_their_watches_and_name_the_failing_namespace() {
    let a = futures::stream::iter(vec![
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(cm("a", "x", 1))),
        Ok(watcher::Event::InitDone),
    ])
    .chain(futures::stream::pending());
    let b = futures::stream::iter(vec![
        Err(watcher::Error::NoResourceVersion),
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Apply(cm("b", "y", 2))),
    ])
    .chain(futures::stream::pending());
    let informer = Informer::spawn_partitioned(
        vec![("a".to_string(), a.boxed()), ("b".to_string(), b.boxed())],
        (),
        16,
        CancellationToken::new(),
        "test".into(),
    )
    .expect("inside a runtime");
    informer
        .sync_handle()
        .wait_timeout(std::time::Duration::from_secs(5))
        .await
        .expect("both namespaces listed");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while informer.store().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "b's watch event never arrived"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(
        stored(&informer),
        [("a/x", "1"), ("b/y", "2")].map(|(k, v)| (k.to_string(), v.to_string()))
    );
    let error = informer.last_error().expect("b's error was kept");
    assert!(error.starts_with("namespace b: "), "{error}");
}
