//! Several namespaces per type (one watch per namespace, one store) against kcr-envtest, on
//! either backend (`KCR_ENVTEST_BACKEND=real` runs them against kube-apiserver).
//!
//! The test that injects faults and counts requests starts a `TestApiServer` of its own; the
//! others share the binary's server, in `TestNamespace`s of their own.
//!
//! Real clock: every wait is bounded by a deadline that only expires when the behaviour is
//! wrong.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kcr_envtest::{TestApiServer, TestNamespace};
use kcr_source::{Cache, CacheError, Event, EventStream, ReadError, Source, WatchScope};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);
const NAMESPACES: [&str; 3] = ["team-a", "team-b", "team-c"];

async fn next(events: &mut EventStream<ConfigMap>) -> Event<ConfigMap> {
    tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an event within the timeout")
        .expect("stream still open")
        .expect("kind streams yield no errors")
}

/// Asserts nothing more arrives for a short while (used after exact expectations).
async fn quiet(events: &mut EventStream<ConfigMap>) {
    if let Ok(Some(extra)) = tokio::time::timeout(Duration::from_millis(500), events.next()).await {
        panic!("unexpected extra event {extra:?}");
    }
}

fn key(o: &ConfigMap) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or_default(),
        o.metadata.name.as_deref().unwrap_or_default()
    )
}

/// (kind, namespace/name, flag: `initial` of a create, `state_unknown` of a delete)
fn desc(event: &Event<ConfigMap>) -> (&'static str, String, bool) {
    match event {
        Event::Create { object, initial } => ("create", key(object), *initial),
        Event::Update { new, .. } => ("update", key(new), false),
        Event::Delete {
            object,
            state_unknown,
        } => ("delete", key(object), *state_unknown),
        Event::Generic { object } => ("generic", key(object), false),
    }
}

/// The next `n` events, described and sorted.
async fn next_n(
    events: &mut EventStream<ConfigMap>,
    n: usize,
) -> Vec<(&'static str, String, bool)> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(desc(&next(events).await));
    }
    out.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
    out
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"test": "namespaces"}},
        "data": {"v": value}
    }))
    .expect("valid ConfigMap")
}

fn scope(namespaces: &[&str]) -> WatchScope {
    WatchScope::all()
        .namespaces(namespaces.iter().copied())
        .labels("test=namespaces")
}

/// Creates the three namespaces and returns a ConfigMap API per namespace.
async fn setup(server: &TestApiServer) -> Vec<Api<ConfigMap>> {
    let namespaces: Api<Namespace> = Api::all(server.client());
    let mut apis = Vec::new();
    for ns in NAMESPACES {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("valid Namespace");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create namespace");
        apis.push(Api::namespaced(server.client(), ns));
    }
    apis
}

async fn create(api: &Api<ConfigMap>, name: &str) {
    api.create(&PostParams::default(), &cm(name, "1"))
        .await
        .expect("create");
}

async fn set_value(api: &Api<ConfigMap>, name: &str, value: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": value}})),
    )
    .await
    .expect("patch");
}

fn cached_keys(reader: &kcr_source::Reader<ConfigMap>) -> BTreeSet<String> {
    reader.list().iter().map(|o| key(o)).collect()
}

fn keys(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|k| k.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_namespaces_are_cached_read_and_watched() {
    let teams = [
        TestNamespace::new("team-a").await.expect("envtest starts"),
        TestNamespace::new("team-b").await.expect("envtest starts"),
        TestNamespace::new("team-c").await.expect("envtest starts"),
    ];
    let [a, b, c] = [0, 1, 2].map(|i| teams[i].namespace());
    let apis: Vec<Api<ConfigMap>> = teams
        .iter()
        .map(|t| Api::default_namespaced(t.client()))
        .collect();
    for api in &apis {
        create(api, "x").await;
    }
    create(&apis[0], "y").await;

    let cache = Cache::new(teams[0].client());
    // The order of the list does not matter: both are one informer.
    let kind = cache.kind::<ConfigMap>(scope(&[b, a])).expect("kind");
    let reader = cache.reader::<ConfigMap>(scope(&[a, b])).expect("reader");
    assert_eq!(cache.informer_count(), 1);
    let mut started = kind.start().expect("start");
    reader
        .wait_for_sync(WAIT)
        .await
        .expect("every namespace synced");
    assert_eq!(
        next_n(&mut started.events, 3).await,
        [
            ("create", format!("{a}/x"), true),
            ("create", format!("{a}/y"), true),
            ("create", format!("{b}/x"), true),
        ]
    );
    quiet(&mut started.events).await;

    // Reads see both namespaces; a read of the third is an error, not "not found".
    assert_eq!(
        cached_keys(&reader),
        keys(&[
            format!("{a}/x").as_str(),
            format!("{a}/y").as_str(),
            format!("{b}/x").as_str()
        ])
    );
    assert_eq!(
        reader.namespaces(),
        Some(&[a.to_string(), b.to_string()][..])
    );
    assert!(reader.get("x", Some(b)).expect("watched").is_some());
    assert!(reader.get("y", Some(b)).expect("watched").is_none());
    assert_eq!(reader.list_in(a).expect("watched").len(), 2);
    let error = reader.get("x", Some(c)).expect_err("team-c is not watched");
    assert_eq!(
        error,
        ReadError::UnknownNamespace {
            kind: "ConfigMap".into(),
            namespace: c.into(),
            name: Some("x".into()),
            watched: vec![a.into(), b.into()],
        }
    );
    assert!(
        error.to_string().contains(&format!("unable to get {c}/x")),
        "{error}"
    );
    assert!(matches!(
        reader.list_in(c),
        Err(ReadError::UnknownNamespace { name: None, .. })
    ));

    // Live changes: each watched namespace's event arrives once; team-c's never.
    for api in &apis {
        create(api, "z").await;
    }
    set_value(&apis[1], "x", "2").await;
    apis[0]
        .delete("y", &DeleteParams::default())
        .await
        .expect("delete");
    set_value(&apis[2], "x", "2").await;
    assert_eq!(
        next_n(&mut started.events, 4).await,
        [
            ("delete", format!("{a}/y"), false),
            ("create", format!("{a}/z"), false),
            ("update", format!("{b}/x"), false),
            ("create", format!("{b}/z"), false),
        ]
    );
    quiet(&mut started.events).await;
    assert_eq!(
        cached_keys(&reader),
        keys(&[
            format!("{a}/x").as_str(),
            format!("{a}/z").as_str(),
            format!("{b}/x").as_str(),
            format!("{b}/z").as_str()
        ])
    );
    // A second subscriber starts from the store: the same four objects, once each.
    let mut late = kind.start().expect("start");
    assert_eq!(
        next_n(&mut late.events, 4).await,
        [
            ("create", format!("{a}/x"), true),
            ("create", format!("{a}/z"), true),
            ("create", format!("{b}/x"), true),
            ("create", format!("{b}/z"), true),
        ]
    );
    quiet(&mut late.events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_lists_are_checked_before_any_watch_starts() {
    let ns = TestNamespace::new("ns-lists")
        .await
        .expect("envtest starts");
    let cache = Cache::new(ns.client());
    let none: [&str; 0] = [];
    assert_eq!(
        cache
            .kind::<ConfigMap>(WatchScope::all().namespaces(none))
            .map(|_| ())
            .expect_err("empty"),
        CacheError::NoNamespaces
    );
    assert_eq!(
        cache
            .reader::<ConfigMap>(WatchScope::all().namespaces(["a", "b", "a"]))
            .map(|_| ())
            .expect_err("duplicate"),
        CacheError::DuplicateNamespace {
            namespace: "a".into()
        }
    );
    assert!(matches!(
        cache.kind::<ConfigMap>(WatchScope::all().namespaces(["a", "Not_A_Namespace"])),
        Err(CacheError::InvalidNamespace { namespace, .. }) if namespace == "Not_A_Namespace"
    ));
    let error = cache
        .kind::<Node>(WatchScope::all().namespaces(["a", "b"]))
        .map(|_| ())
        .expect_err("cluster-scoped");
    assert!(
        matches!(&error, CacheError::NamespaceOnClusterScoped { kind, .. } if kind == "Node"),
        "{error}"
    );
    assert_eq!(cache.informer_count(), 0, "no watch started");
    assert!(
        CacheError::NoNamespaces
            .to_string()
            .contains("WatchScope::all"),
        "the error says how to watch every namespace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_of_one_namespace_keeps_the_other_namespaces_objects() {
    // A server of its own: it injects faults, counts requests and compacts the history.
    let server = TestApiServer::start().await.expect("envtest starts");
    let apis = setup(&server).await;
    for api in &apis[..2] {
        for name in ["keep", "change", "drop"] {
            create(api, name).await;
        }
    }
    let cache = Cache::new(server.client());
    // Paged lists: the test counts the LIST requests of the relist.
    let scope = scope(&["team-a", "team-b"]).paged_list();
    let kind = cache.kind::<ConfigMap>(scope.clone()).expect("kind");
    let reader = cache.reader::<ConfigMap>(scope).expect("reader");
    let mut started = kind.start().expect("start");
    assert!(
        next_n(&mut started.events, 6)
            .await
            .iter()
            .all(|(what, _, initial)| *what == "create" && *initial)
    );

    // Cut both watches while team-b's are refused: team-a's is open again at once, team-b's
    // stays down while both namespaces change. The refusal is a 500, which kube's client
    // does not retry (it retries a 503 by itself after 5 ms), so team-b's watcher sees it
    // and retries with its backoff (800 ms or more).
    let faults = server.faults();
    // Both namespaces' watches must be open (asked for) before they are cut: a watch asked for
    // after the cut would stay open.
    let deadline = tokio::time::Instant::now() + WAIT;
    while faults.request_count("watch", "configmaps") < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watches never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let watches = faults.request_count("watch", "configmaps");
    const REFUSALS: usize = 1_000_000;
    faults.fail_next_in("team-b", "watch", "configmaps", REFUSALS, 500);
    faults.close_watches();
    // Both old watches have ended once each watcher asked again: team-b's was refused (a
    // failure used), team-a's (every other new request) is open. (A refusal is counted and
    // used at once: two equal readings of the refusals around the count make them agree.)
    let refused = || (REFUSALS - faults.pending_failures()) as u64;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let before = refused();
        let asked = faults.request_count("watch", "configmaps") - watches;
        let reopened = asked.checked_sub(before);
        if before == refused() && before >= 1 && reopened >= Some(1) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watches never came back: {before} refused, {asked} asked"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for api in &apis[..2] {
        set_value(api, "change", "2").await;
        create(api, "new").await;
        api.delete("drop", &DeleteParams::default())
            .await
            .expect("delete");
    }
    // The namespace outside the scope changes too, unseen.
    create(&apis[2], "new").await;
    // The open watch delivers its namespace's changes live; the refused one nothing.
    assert_eq!(
        next_n(&mut started.events, 3).await,
        [
            ("update", "team-a/change".into(), false),
            ("delete", "team-a/drop".into(), false),
            ("create", "team-a/new".into(), false),
        ]
    );
    quiet(&mut started.events).await;

    // The refused watch resumes from a compacted resourceVersion: 410, a relist of its
    // namespace alone (the open watch has read everything, so it goes on).
    let lists = faults.request_count("list", "configmaps");
    faults.compact_history();
    faults.clear();
    assert_eq!(
        next_n(&mut started.events, 3).await,
        [
            // found by the relist: a list create, an unknown-state delete
            ("update", "team-b/change".into(), false),
            ("delete", "team-b/drop".into(), true),
            ("create", "team-b/new".into(), true),
        ]
    );
    quiet(&mut started.events).await;
    assert_eq!(
        faults.request_count("list", "configmaps"),
        lists + 1,
        "one namespace listed again, not both"
    );
    // Nothing of the other namespace was dropped, and nothing of team-c came in.
    assert_eq!(
        cached_keys(&reader),
        keys(&[
            "team-a/change",
            "team-a/keep",
            "team-a/new",
            "team-b/change",
            "team-b/keep",
            "team-b/new"
        ])
    );
    // Both watches are live again.
    set_value(&apis[0], "keep", "2").await;
    set_value(&apis[1], "keep", "2").await;
    assert_eq!(
        next_n(&mut started.events, 2).await,
        [
            ("update", "team-a/keep".into(), false),
            ("update", "team-b/keep".into(), false),
        ]
    );
}
