//! Unit tests of the informer: event translation, relists, slow subscribers, indexes, and
//! randomised histories.

use super::*;
use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;

fn cm(name: &str, rv: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("ns".into());
    cm.metadata.resource_version = Some(rv.into());
    cm
}

/// A compact description of an event: (kind, name, old rv, new rv, flag).
type Desc = (&'static str, String, Option<String>, String, bool);

fn desc(event: &Event<ConfigMap>) -> Desc {
    let rv = |o: &ConfigMap| o.metadata.resource_version.clone().unwrap_or_default();
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
    match event {
        Event::Create { object, initial } => ("create", name(object), None, rv(object), *initial),
        Event::Update { old, new } => ("update", name(new), Some(rv(old)), rv(new), false),
        Event::Delete {
            object,
            state_unknown,
        } => ("delete", name(object), None, rv(object), *state_unknown),
        Event::Generic { object } => ("generic", name(object), None, rv(object), false),
    }
}

fn d(kind: &'static str, name: &str, old: Option<&str>, new: &str, flag: bool) -> Desc {
    (kind, name.into(), old.map(String::from), new.into(), flag)
}

/// Everything the stream has ready now, sorted by name within the batch when `sort`.
fn ready(stream: &mut KindStream<ConfigMap>) -> Vec<Desc> {
    let mut out = Vec::new();
    while let Some(Some(item)) = stream.next().now_or_never() {
        out.push(desc(&item.expect("kind streams have no errors")));
    }
    out
}

fn sorted(mut v: Vec<Desc>) -> Vec<Desc> {
    v.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
    v
}

fn list(informer: &Informer<ConfigMap>, signal: &SyncSignal, objects: &[ConfigMap]) {
    informer.process(watcher::Event::Init, signal);
    for o in objects {
        informer.process(watcher::Event::InitApply(o.clone()), signal);
    }
    informer.process(watcher::Event::InitDone, signal);
}

#[test]
fn initial_list_then_watch_events_with_old_objects() {
    let (informer, signal) = Informer::<ConfigMap>::new(16);
    let mut s = informer.subscribe(());
    assert!(ready(&mut s).is_empty());
    list(&informer, &signal, &[cm("a", "1"), cm("b", "2")]);
    assert!(informer.sync_handle().is_synced());
    assert_eq!(
        sorted(ready(&mut s)),
        vec![
            d("create", "a", None, "1", true),
            d("create", "b", None, "2", true)
        ]
    );
    informer.process(watcher::Event::Apply(cm("a", "3")), &signal);
    informer.process(watcher::Event::Apply(cm("c", "4")), &signal);
    informer.process(watcher::Event::Delete(cm("b", "5")), &signal);
    assert_eq!(
        ready(&mut s),
        vec![
            d("update", "a", Some("1"), "3", false),
            d("create", "c", None, "4", false),
            d("delete", "b", None, "5", false),
        ]
    );
    assert_eq!(informer.store().len(), 2);
    // the update's new object is the very Arc held by the store
    informer.process(watcher::Event::Apply(cm("a", "6")), &signal);
    let event = s
        .next()
        .now_or_never()
        .flatten()
        .expect("ready")
        .expect("ok");
    assert!(Arc::ptr_eq(
        event.object(),
        &informer.store().get_like(&cm("a", "6")).expect("cached")
    ));
}

#[test]
fn replayed_versions_are_not_updates_but_versionless_objects_are() {
    let (informer, signal) = Informer::<ConfigMap>::new(16);
    list(&informer, &signal, &[cm("a", "1")]);
    let mut s = informer.subscribe(());
    assert_eq!(ready(&mut s).len(), 1);
    informer.process(watcher::Event::Apply(cm("a", "1")), &signal);
    assert!(ready(&mut s).is_empty());
    let mut no_rv = cm("b", "");
    no_rv.metadata.resource_version = None;
    informer.process(watcher::Event::Apply(no_rv.clone()), &signal);
    informer.process(watcher::Event::Apply(no_rv), &signal);
    assert_eq!(
        ready(&mut s),
        vec![
            d("create", "b", None, "", false),
            d("update", "b", Some(""), "", false)
        ]
    );
}

#[tokio::test]
async fn the_watch_stops_when_the_last_handle_is_dropped() {
    let (tx, rx) =
        futures::channel::mpsc::unbounded::<Result<watcher::Event<ConfigMap>, watcher::Error>>();
    let kind = crate::Kind::from_watcher(rx).expect("inside a runtime");
    let clone = kind.clone();
    let mut stream = kind.subscribe();
    drop(kind);
    drop(clone);
    // the stream keeps the watch alive
    tx.unbounded_send(Ok(watcher::Event::Init)).expect("alive");
    tx.unbounded_send(Ok(watcher::Event::InitApply(cm("a", "1"))))
        .expect("alive");
    tx.unbounded_send(Ok(watcher::Event::InitDone))
        .expect("alive");
    assert!(stream.next().await.is_some());
    assert!(!tx.is_closed());
    drop(stream);
    // the task notices the cancellation and drops the watch stream
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !tx.is_closed() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("watch stopped");
}

#[test]
fn relist_diffs_against_the_store() {
    let (informer, signal) = Informer::<ConfigMap>::new(16);
    list(
        &informer,
        &signal,
        &[cm("a", "1"), cm("b", "2"), cm("same", "3")],
    );
    let mut s = informer.subscribe(());
    assert_eq!(ready(&mut s).len(), 3);
    // after a 410: a changed, b vanished, c appeared, "same" is unchanged
    list(
        &informer,
        &signal,
        &[cm("a", "7"), cm("c", "8"), cm("same", "3")],
    );
    assert_eq!(
        sorted(ready(&mut s)),
        vec![
            d("update", "a", Some("1"), "7", false),
            d("delete", "b", None, "2", true),
            // found by a list: a list create, queued at low priority like the first list's
            d("create", "c", None, "8", true),
        ]
    );
    assert_eq!(informer.counters.relists.load(Ordering::Relaxed), 2);
}

#[test]
fn late_subscriber_starts_from_a_snapshot() {
    let (informer, signal) = Informer::<ConfigMap>::new(16);
    list(&informer, &signal, &[cm("a", "1")]);
    informer.process(watcher::Event::Apply(cm("b", "2")), &signal);
    let mut late = informer.subscribe(());
    informer.process(watcher::Event::Apply(cm("a", "3")), &signal);
    assert_eq!(
        sorted(ready(&mut late)),
        vec![
            d("create", "a", None, "3", true),
            d("create", "b", None, "2", true)
        ]
    );
    informer.process(watcher::Event::Delete(cm("b", "4")), &signal);
    assert_eq!(ready(&mut late), vec![d("delete", "b", None, "4", false)]);
}

#[test]
fn slow_subscriber_is_resynced_without_blocking_the_fast_one() {
    let (informer, signal) = Informer::<ConfigMap>::new(2);
    list(&informer, &signal, &[cm("a", "1"), cm("b", "2")]);
    let mut fast = informer.subscribe(());
    let mut slow = informer.subscribe(());
    assert_eq!(ready(&mut fast).len(), 2);
    assert_eq!(ready(&mut slow).len(), 2);

    // slow stops reading; fast keeps up with every event
    let mut fast_seen = Vec::new();
    for rv in 10..15 {
        informer.process(watcher::Event::Apply(cm("a", &rv.to_string())), &signal);
        fast_seen.extend(ready(&mut fast));
    }
    informer.process(watcher::Event::Apply(cm("c", "20")), &signal);
    informer.process(watcher::Event::Delete(cm("b", "21")), &signal);
    fast_seen.extend(ready(&mut fast));
    assert_eq!(fast_seen.len(), 7, "fast got every event: {fast_seen:?}");
    assert_eq!(informer.counters.lags.load(Ordering::Relaxed), 1);

    // slow gets its two buffered events, then the resync: one update from what it saw last
    // to the current state, the create, and the delete it missed (state unknown)
    let got = ready(&mut slow);
    assert_eq!(
        got[..2],
        [
            d("update", "a", Some("1"), "10", false),
            d("update", "a", Some("10"), "11", false)
        ]
    );
    assert_eq!(
        sorted(got[2..].to_vec()),
        vec![
            d("update", "a", Some("11"), "14", false),
            d("delete", "b", None, "2", true),
            d("create", "c", None, "20", false),
        ]
    );
    // and it is live again
    informer.process(watcher::Event::Apply(cm("c", "22")), &signal);
    assert_eq!(
        ready(&mut slow),
        vec![d("update", "c", Some("20"), "22", false)]
    );
}

#[test]
fn subscriber_lagging_through_the_first_list_gets_initial_creates() {
    let (informer, signal) = Informer::<ConfigMap>::new(1);
    let mut s = informer.subscribe(());
    list(&informer, &signal, &[cm("a", "1"), cm("b", "2")]);
    assert_eq!(
        sorted(ready(&mut s)),
        vec![
            d("create", "a", None, "1", true),
            d("create", "b", None, "2", true)
        ]
    );
}

#[test]
fn a_relists_creates_are_initial_and_watch_creates_are_not() {
    let (informer, signal) = Informer::<ConfigMap>::new(16);
    let mut s = informer.subscribe(());
    list(&informer, &signal, &[cm("a", "1")]);
    assert_eq!(ready(&mut s), vec![d("create", "a", None, "1", true)]);
    informer.process(watcher::Event::Apply(cm("b", "2")), &signal);
    assert_eq!(ready(&mut s), vec![d("create", "b", None, "2", false)]);
    // A relist (after a 410) finds "c", created while the watch was down.
    list(
        &informer,
        &signal,
        &[cm("a", "1"), cm("b", "2"), cm("c", "3")],
    );
    assert_eq!(ready(&mut s), vec![d("create", "c", None, "3", true)]);
}

#[test]
fn subscriber_lagging_through_a_relist_gets_initial_creates() {
    let (informer, signal) = Informer::<ConfigMap>::new(1);
    let mut s = informer.subscribe(());
    list(&informer, &signal, &[cm("a", "1")]);
    assert_eq!(ready(&mut s), vec![d("create", "a", None, "1", true)]);
    // Two creates found by one relist do not fit: the subscriber lags through the relist.
    list(
        &informer,
        &signal,
        &[cm("a", "1"), cm("b", "2"), cm("c", "3")],
    );
    assert_eq!(
        sorted(ready(&mut s)),
        vec![
            d("create", "b", None, "2", true),
            d("create", "c", None, "3", true)
        ]
    );
    // Lagging through watch events alone resyncs their creates as watch creates.
    informer.process(watcher::Event::Apply(cm("d", "4")), &signal);
    informer.process(watcher::Event::Apply(cm("e", "5")), &signal);
    assert_eq!(
        sorted(ready(&mut s)),
        vec![
            d("create", "d", None, "4", false),
            d("create", "e", None, "5", false)
        ]
    );
}

#[test]
fn stop_ends_streams_after_their_buffers_and_drop_unsubscribes() {
    let (informer, signal) = Informer::<ConfigMap>::new(8);
    let mut s = informer.subscribe(());
    let other = informer.subscribe(());
    assert_eq!(informer.subscriber_count(), 2);
    drop(other);
    assert_eq!(informer.subscriber_count(), 1);
    list(&informer, &signal, &[cm("a", "1")]);
    informer.stop();
    assert_eq!(
        s.next().now_or_never(),
        Some(Some(Ok(Event::Create {
            object: Arc::new(cm("a", "1")),
            initial: true
        })))
    );
    assert_eq!(s.next().now_or_never(), Some(None));
}

#[tokio::test]
async fn spawned_informer_follows_a_watcher_stream() {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let informer = Informer::<ConfigMap>::spawn(rx, (), 8, CancellationToken::new(), "test".into())
        .expect("inside a runtime");
    let mut s = informer.subscribe(());
    for e in [
        watcher::Event::Init,
        watcher::Event::InitApply(cm("a", "1")),
        watcher::Event::InitDone,
        watcher::Event::Apply(cm("a", "2")),
    ] {
        tx.unbounded_send(Ok(e)).expect("receiver alive");
    }
    informer.sync_handle().wait().await.expect("synced");
    let first = s.next().await.expect("event").expect("ok");
    assert_eq!(desc(&first), d("create", "a", None, "1", true));
    let second = s.next().await.expect("event").expect("ok");
    assert_eq!(desc(&second), d("update", "a", Some("1"), "2", false));
    drop(tx); // the watch ends: the stream ends
    assert!(s.next().await.is_none());
}

#[test]
fn spawn_outside_a_runtime_is_an_error() {
    let result = Informer::<ConfigMap>::spawn(
        futures::stream::empty(),
        (),
        8,
        CancellationToken::new(),
        "outside".into(),
    );
    assert!(matches!(result, Err(SourceError::NoRuntime { .. })));
}

/// Applies `event` to a subscriber's reconstructed state, checking it is consistent with
/// what the subscriber knew: creates only for unknown objects, updates and deletes only for
/// known ones, and an update's `old` is exactly the version last delivered.
fn apply_checked(view: &mut HashMap<String, String>, event: &Event<ConfigMap>) {
    let rv = |o: &ConfigMap| o.metadata.resource_version.clone().unwrap_or_default();
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
    match event {
        Event::Create { object, .. } => {
            assert!(
                view.insert(name(object), rv(object)).is_none(),
                "create of a known object"
            );
        }
        Event::Update { old, new } => {
            let known = view.insert(name(new), rv(new));
            assert_eq!(
                known,
                Some(rv(old)),
                "update's old is not what was delivered"
            );
            assert_ne!(rv(old), rv(new), "no-op update");
        }
        Event::Delete { object, .. } => {
            assert!(
                view.remove(&name(object)).is_some(),
                "delete of an unknown object"
            );
        }
        Event::Generic { .. } => panic!("kind emits no generic events"),
    }
}

#[test]
fn randomised_watch_histories_keep_every_subscriber_consistent() {
    use rand::{Rng, SeedableRng};
    for seed in 0..40u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let capacity = rng.random_range(1..6);
        let (informer, signal) = Informer::<ConfigMap>::new(capacity);
        // the "server": name -> rv
        let mut server: HashMap<String, u64> = HashMap::new();
        let mut rv = 0u64;
        let mut subs: Vec<(KindStream<ConfigMap>, HashMap<String, String>, f64)> = Vec::new();
        let mut disconnected = false;
        list(&informer, &signal, &[]);
        for step in 0..400 {
            match rng.random_range(0..100) {
                // a new subscriber with its own reading speed
                0..3 if subs.len() < 4 => subs.push((
                    informer.subscribe(()),
                    HashMap::new(),
                    rng.random_range(0.05..1.0),
                )),
                // the watch drops: changes are not delivered until the next relist
                3..5 => disconnected = true,
                // a relist of the current server state (after a 410 or a reconnect)
                5..8 => {
                    disconnected = false;
                    let items: Vec<ConfigMap> =
                        server.iter().map(|(n, v)| cm(n, &v.to_string())).collect();
                    list(&informer, &signal, &items);
                }
                // server changes, delivered by the watch unless it is down
                _ => {
                    let name = format!("o{}", rng.random_range(0..8));
                    rv += 1;
                    let delivered = !disconnected;
                    if server.contains_key(&name) && rng.random_bool(0.3) {
                        server.remove(&name);
                        if delivered {
                            informer.process(
                                watcher::Event::Delete(cm(&name, &rv.to_string())),
                                &signal,
                            );
                        }
                    } else {
                        server.insert(name.clone(), rv);
                        if delivered {
                            informer.process(
                                watcher::Event::Apply(cm(&name, &rv.to_string())),
                                &signal,
                            );
                        }
                    }
                }
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
        // final relist, then every subscriber drains and must equal the store exactly
        let items: Vec<ConfigMap> = server.iter().map(|(n, v)| cm(n, &v.to_string())).collect();
        list(&informer, &signal, &items);
        let expected: HashMap<String, String> = server
            .iter()
            .map(|(n, v)| (n.clone(), v.to_string()))
            .collect();
        for (stream, view, _) in subs.iter_mut() {
            while let Some(Some(item)) = stream.next().now_or_never() {
                apply_checked(view, &item.expect("ok"));
            }
            assert_eq!(*view, expected, "seed {seed}");
        }
    }
}

/// Files a config map under `rv % 3` and, when it has one, under its `tier` value.
fn by_rv_and_tier(cm: &ConfigMap) -> Vec<String> {
    let rv: u64 = cm
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut values = vec![format!("rv{}", rv % 3)];
    values.extend(cm.data.iter().flat_map(|d| d.get("tier").cloned()));
    values
}

fn names(objects: Vec<Arc<ConfigMap>>) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn indexes_file_current_objects_and_follow_changes() {
    let (informer, signal) = Informer::<ConfigMap>::new(16);
    let mut tiered = cm("a", "3");
    tiered.data = Some([("tier".to_string(), "rv0".to_string())].into());
    list(&informer, &signal, &[tiered, cm("b", "4")]);
    informer
        .add_index("idx".into(), Arc::new(by_rv_and_tier))
        .expect("a new index");
    // "a" is filed once under rv0 even though both of its values are "rv0".
    assert_eq!(names(informer.by_index("idx", "rv0").unwrap()), ["a"]);
    assert_eq!(names(informer.by_index("idx", "rv1").unwrap()), ["b"]);
    // An update moves an object between values; a delete removes it.
    informer.process(watcher::Event::Apply(cm("b", "5")), &signal);
    assert!(informer.by_index("idx", "rv1").unwrap().is_empty());
    assert_eq!(names(informer.by_index("idx", "rv2").unwrap()), ["b"]);
    informer.process(watcher::Event::Apply(cm("c", "6")), &signal);
    assert_eq!(names(informer.by_index("idx", "rv0").unwrap()), ["a", "c"]);
    informer.process(watcher::Event::Delete(cm("a", "7")), &signal);
    assert_eq!(names(informer.by_index("idx", "rv0").unwrap()), ["c"]);
    assert!(
        informer
            .by_index("idx", "no-such-value")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn index_names_are_unique_and_unknown_ones_are_errors() {
    let (informer, _signal) = Informer::<ConfigMap>::new(16);
    informer
        .add_index("b".into(), Arc::new(by_rv_and_tier))
        .unwrap();
    informer
        .add_index("a".into(), Arc::new(by_rv_and_tier))
        .unwrap();
    assert_eq!(
        informer.add_index("a".into(), Arc::new(by_rv_and_tier)),
        Err(IndexError::Duplicate { index: "a".into() })
    );
    let err = informer.by_index("c", "x").unwrap_err();
    assert_eq!(
        err,
        IndexError::Unknown {
            index: "c".into(),
            known: vec!["a".into(), "b".into()]
        }
    );
    assert!(err.to_string().contains("Reader::add_index"), "{err}");
}

#[test]
fn randomised_histories_keep_indexes_equal_to_a_store_scan() {
    use rand::{Rng, SeedableRng};
    for seed in 0..40u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let (informer, signal) = Informer::<ConfigMap>::new(4);
        let mut server: HashMap<String, (u64, Option<String>)> = HashMap::new();
        let mut rv = 0u64;
        let mut indexed = false;
        let mut disconnected = false;
        let object = |name: &str, (rv, tier): &(u64, Option<String>)| {
            let mut o = cm(name, &rv.to_string());
            o.data = tier.clone().map(|t| [("tier".to_string(), t)].into());
            o
        };
        list(&informer, &signal, &[]);
        for step in 0..300 {
            match rng.random_range(0..100) {
                // The index is registered part-way, over whatever is cached by then.
                0..4 if !indexed => {
                    informer
                        .add_index("idx".into(), Arc::new(by_rv_and_tier))
                        .unwrap();
                    indexed = true;
                }
                4..6 => disconnected = true,
                6..9 => {
                    disconnected = false;
                    let items: Vec<ConfigMap> = server.iter().map(|(n, v)| object(n, v)).collect();
                    list(&informer, &signal, &items);
                }
                _ => {
                    let name = format!("o{}", rng.random_range(0..8));
                    rv += 1;
                    if server.contains_key(&name) && rng.random_bool(0.3) {
                        server.remove(&name);
                        if !disconnected {
                            let gone = cm(&name, &rv.to_string());
                            informer.process(watcher::Event::Delete(gone), &signal);
                        }
                    } else {
                        let tier = ["rv0", "rv1", "x"][rng.random_range(0..3)];
                        let state = (rv, rng.random_bool(0.5).then(|| tier.to_string()));
                        let o = object(&name, &state);
                        server.insert(name, state);
                        if !disconnected {
                            informer.process(watcher::Event::Apply(o), &signal);
                        }
                    }
                }
            }
            if !indexed {
                continue;
            }
            // Whatever the history, the index answers what a scan of the store answers.
            for value in ["rv0", "rv1", "rv2", "x"] {
                let mut scan: Vec<String> = informer
                    .store()
                    .state()
                    .into_iter()
                    .filter(|o| by_rv_and_tier(o).iter().any(|v| v == value))
                    .map(|o| o.metadata.name.clone().unwrap_or_default())
                    .collect();
                scan.sort();
                assert_eq!(
                    names(informer.by_index("idx", value).unwrap()),
                    scan,
                    "seed {seed} step {step} value {value}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_subscribers_end_with_the_final_state() {
    use rand::{Rng, SeedableRng};
    let (tx, rx) = futures::channel::mpsc::channel(8);
    let kind = crate::Kind::<ConfigMap>::from_watcher_with_buffer(rx, 4).expect("runtime");
    let consumers: Vec<_> = (0..4u64)
        .map(|seed| {
            let mut stream = kind.subscribe();
            tokio::spawn(async move {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
                let mut view = HashMap::new();
                while let Some(item) = stream.next().await {
                    apply_checked(&mut view, &item.expect("ok"));
                    if rng.random_bool(0.2 * seed as f64) {
                        tokio::task::yield_now().await;
                    }
                }
                view
            })
        })
        .collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(99);
    let mut server: HashMap<String, u64> = HashMap::new();
    let mut tx = tx;
    use futures::SinkExt;
    tx.send(Ok(watcher::Event::Init)).await.expect("open");
    tx.send(Ok(watcher::Event::InitDone)).await.expect("open");
    for rv in 1..3000u64 {
        let name = format!("o{}", rng.random_range(0..20));
        let event = if server.contains_key(&name) && rng.random_bool(0.3) {
            server.remove(&name);
            watcher::Event::Delete(cm(&name, &rv.to_string()))
        } else {
            server.insert(name.clone(), rv);
            watcher::Event::Apply(cm(&name, &rv.to_string()))
        };
        tx.send(Ok(event)).await.expect("open");
    }
    drop(tx); // the watch ends; every stream ends after delivering the final state
    let expected: HashMap<String, String> = server
        .iter()
        .map(|(n, v)| (n.clone(), v.to_string()))
        .collect();
    for consumer in consumers {
        assert_eq!(consumer.await.expect("no panic"), expected);
    }
    assert_eq!(kind.stats().watch_events, 3001);
}

#[test]
fn a_resync_resends_every_cached_object_as_an_update_to_itself() {
    let (informer, signal) = Informer::<ConfigMap>::new(16);
    let mut s = informer.subscribe(());
    // Before the first list: nothing to resync.
    assert_eq!(informer.resync(), 0);
    list(&informer, &signal, &[cm("a", "1"), cm("b", "2")]);
    ready(&mut s);
    assert_eq!(informer.resync(), 2);
    let events: Vec<_> = std::iter::from_fn(|| s.next().now_or_never().flatten())
        .map(|e| e.expect("ok"))
        .collect();
    assert_eq!(events.len(), 2);
    for event in &events {
        let Event::Update { old, new } = event else {
            panic!("a resync sends updates: {event:?}");
        };
        assert!(Arc::ptr_eq(old, new), "old and new are the cached object");
    }
    // A late subscriber hears resyncs too; a stopped informer resyncs nothing.
    let mut late = informer.subscribe(());
    ready(&mut late);
    assert_eq!(informer.resync(), 2);
    assert_eq!(ready(&mut late).len(), 2);
    informer.stop();
    assert_eq!(informer.resync(), 0);
}

#[test]
fn a_subscriber_too_slow_for_a_resync_catches_up_without_losing_a_change() {
    let (informer, signal) = Informer::<ConfigMap>::new(2);
    let mut s = informer.subscribe(());
    list(&informer, &signal, &[cm("a", "1")]);
    ready(&mut s);
    informer.process(watcher::Event::Apply(cm("b", "2")), &signal);
    informer.process(watcher::Event::Apply(cm("c", "3")), &signal);
    // The buffer holds b and c; a resync of three objects does not fit: the subscriber lags,
    // and catching up from the store still delivers b and c, and nothing is lost.
    assert_eq!(informer.resync(), 3);
    let names: std::collections::BTreeSet<_> = ready(&mut s).into_iter().map(|d| d.1).collect();
    assert!(names.contains("b") && names.contains("c"), "{names:?}");
}
