//! Watch semantics: resume from a resourceVersion, initial ADDED events, bookmarks,
//! sendInitialEvents, timeouts, selector transitions, 410 Expired, fault-driven closes.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestApiServer;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

/// Safety net only: every awaited event is produced by the server without any timer.
const LIMIT: Duration = Duration::from_secs(20);

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn describe(ev: &WatchEvent<ConfigMap>) -> String {
    match ev {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.as_deref().unwrap_or_default()),
        WatchEvent::Modified(o) => format!(
            "MODIFIED {}",
            o.metadata.name.as_deref().unwrap_or_default()
        ),
        WatchEvent::Deleted(o) => {
            format!("DELETED {}", o.metadata.name.as_deref().unwrap_or_default())
        }
        WatchEvent::Bookmark(b) => format!(
            "BOOKMARK{}",
            if b.metadata
                .annotations
                .contains_key("k8s.io/initial-events-end")
            {
                " end"
            } else {
                ""
            }
        ),
        WatchEvent::Error(s) => format!("ERROR {}", s.code),
    }
}

async fn next_n<S>(stream: &mut S, n: usize) -> Vec<String>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let mut out = Vec::new();
    while out.len() < n {
        let ev = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("event in time")
            .expect("stream open")
            .expect("event ok");
        out.push(describe(&ev));
    }
    out
}

#[tokio::test]
async fn resume_from_resource_version_and_from_now() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let a = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv_a = a.metadata.resource_version.clone().unwrap();
    api.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();

    // From rv_a: every later event, in order.
    let mut s = api
        .watch(&WatchParams::default(), &rv_a)
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        next_n(&mut s, 3).await,
        ["ADDED b", "MODIFIED a", "DELETED b"]
    );

    // From "0": ADDED for the current state, the bookmark that ends it (kube's watches allow
    // bookmarks, and kube-apiserver 1.37 sends it without sendInitialEvents too), then live
    // events.
    let mut s0 = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(next_n(&mut s0, 2).await, ["ADDED a", "BOOKMARK end"]);
    api.create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    assert_eq!(next_n(&mut s0, 1).await, ["ADDED c"]);
    assert_eq!(next_n(&mut s, 1).await, ["ADDED c"]);

    // Other namespaces' objects are not delivered to a namespaced watch.
    let sys: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system");
    sys.create(&PostParams::default(), &cm("other", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("d", json!({})))
        .await
        .unwrap();
    assert_eq!(next_n(&mut s, 1).await, ["ADDED d"]);
    // The cluster-wide watch sees both.
    let all: Api<ConfigMap> = Api::all(server.client());
    let mut sa = all
        .watch(&WatchParams::default(), &rv_a)
        .await
        .unwrap()
        .boxed();
    let evs = next_n(&mut sa, 6).await;
    assert_eq!(evs[4..], ["ADDED other", "ADDED d"]);
}

#[tokio::test]
async fn send_initial_events_ends_with_annotated_bookmark() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut written = String::new();
    for n in ["x", "y"] {
        let created = api
            .create(&PostParams::default(), &cm(n, json!({})))
            .await
            .unwrap();
        written = created.metadata.resource_version.unwrap();
    }
    // The initial events are the state at a resourceVersion not older than the one asked for:
    // with y's, both objects. ("0" would allow any state, and kube-apiserver serves it from its
    // watch cache, which may not have seen y yet: y then comes after the bookmark.)
    let wp = WatchParams::default().initial_events();
    let mut s = api.watch(&wp, &written).await.unwrap().boxed();
    assert_eq!(
        next_n(&mut s, 3).await,
        ["ADDED x", "ADDED y", "BOOKMARK end"]
    );
    api.create(&PostParams::default(), &cm("z", json!({})))
        .await
        .unwrap();
    assert_eq!(next_n(&mut s, 1).await, ["ADDED z"]);
}

/// Pinned to the in-process backend: the bookmark interval is an in-process option
/// (kube-apiserver's is fixed, about a minute); `timeout_seconds_ends_the_watch` covers the rest
/// on both backends.
#[tokio::test]
async fn bookmarks_at_the_configured_interval() {
    let server = TestApiServer::builder()
        .backend(kcr_envtest::Backend::InProcess)
        .bookmark_interval(Duration::from_millis(20))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut s = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(LIMIT, s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match first {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn timeout_seconds_ends_the_watch() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    // timeoutSeconds ends the stream (server side).
    let mut t = api
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    loop {
        let ev = tokio::time::timeout(LIMIT, t.next())
            .await
            .expect("watch ended by the server");
        match ev {
            None => break,
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            Some(other) => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn selector_transitions() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let rv = api
        .create(&PostParams::default(), &cm("s", json!({"app": "x"})))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut s = api
        .watch(&WatchParams::default().labels("app=x"), &rv)
        .await
        .unwrap()
        .boxed();
    let relabel = |v: &'static str| {
        let api = api.clone();
        async move {
            api.patch(
                "s",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": v}}})),
            )
            .await
            .unwrap();
        }
    };
    relabel("y").await; // leaves the selection
    relabel("z").await; // still out: nothing
    relabel("x").await; // enters again
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    assert_eq!(
        next_n(&mut s, 3).await,
        ["DELETED s", "ADDED s", "MODIFIED s"]
    );
    // List with the same selector agrees.
    assert_eq!(
        api.list(&ListParams::default().labels("app=x"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

/// Pinned to the in-process backend: the history window is an in-process option (kube-apiserver
/// sizes its watch cache itself); `compaction_gives_410` covers forced compaction on both
/// backends.
#[tokio::test]
async fn expired_history_gives_410() {
    let server = TestApiServer::builder()
        .backend(kcr_envtest::Backend::InProcess)
        .history_window(5)
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = api
        .create(&PostParams::default(), &cm("h0", json!({})))
        .await
        .unwrap();
    for i in 1..10 {
        api.create(&PostParams::default(), &cm(&format!("h{i}"), json!({})))
            .await
            .unwrap();
    }
    let rv = first.metadata.resource_version.unwrap();
    let mut s = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert_eq!(next_n(&mut s, 1).await, ["ERROR 410"]);
}

#[tokio::test]
async fn compaction_gives_410() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("h{i}"), json!({})))
            .await
            .unwrap();
    }
    // Forced compaction: a resume from the current RV gets 410...
    let current = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut live = api
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    server.faults().compact_history();
    let mut resumed = api
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    assert_eq!(next_n(&mut resumed, 1).await, ["ERROR 410"]);
    // ...while a watch that had read everything keeps running.
    api.create(&PostParams::default(), &cm("after", json!({})))
        .await
        .unwrap();
    assert_eq!(next_n(&mut live, 1).await, ["ADDED after"]);

    // Continue tokens older than the window are 410 as well.
    let page = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = page.metadata.continue_.clone().unwrap();
    server.faults().compact_history();
    let err = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn close_watches_ends_streams() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut s = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    // Nothing to list: the watch starts with the bookmark ending the (empty) initial state.
    assert_eq!(next_n(&mut s, 1).await, ["BOOKMARK end"]);
    server.faults().close_watches();
    let end = tokio::time::timeout(LIMIT, s.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none());
    assert_eq!(server.faults().request_count("watch", "configmaps"), 1);
}

#[tokio::test]
async fn pagination_is_consistent_under_writes() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("p{i:02}"), json!({})))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(7)).await.unwrap();
    let snapshot_rv = first.metadata.resource_version.clone().unwrap();
    let mut names: Vec<String> = first
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    let mut token = first.metadata.continue_.clone();
    // Writes between pages: delete a later object, create a new one, modify one.
    api.delete("p15", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("p99", json!({})))
        .await
        .unwrap();
    api.patch(
        "p10",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "b"}})),
    )
    .await
    .unwrap();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&ListParams::default().limit(7).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(snapshot_rv.as_str())
        );
        for o in &page.items {
            if o.metadata.name.as_deref() == Some("p10") {
                assert!(o.data.is_none(), "served at the snapshot");
            }
        }
        names.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
        token = page.metadata.continue_.clone();
    }
    let expected: Vec<String> = (0..20).map(|i| format!("p{i:02}")).collect();
    assert_eq!(names, expected, "no skips, no repeats, snapshot semantics");
    // Exact RV list reproduces the old state too.
    let exact = api
        .list(
            &ListParams::default()
                .at(&snapshot_rv)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(exact.items.len(), 20);
    let now = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(now.items.len(), 20);
    assert!(
        now.items
            .iter()
            .any(|o| o.metadata.name.as_deref() == Some("p99"))
    );
}

#[tokio::test]
async fn metadata_only_list_and_watch() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let obj: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "m", "labels": {"a": "b"}}, "data": {"big": "x"}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.labels.as_ref().unwrap()["a"], "b");
    let mut s = api
        .watch_metadata(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(LIMIT, s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Added(m) => {
            assert_eq!(m.metadata.name.as_deref(), Some("m"));
            assert_eq!(m.types.unwrap().kind, "PartialObjectMetadata");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn kube_runtime_event_recorder() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::Resource;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let obj = api
        .create(&PostParams::default(), &cm("target", json!({})))
        .await
        .unwrap();
    let recorder = Recorder::new(
        server.client(),
        Reporter {
            controller: "test".into(),
            instance: None,
        },
    );
    let ev = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("all good".into()),
        action: "Sync".into(),
        secondary: None,
    };
    recorder.publish(&ev, &obj.object_ref(&())).await.unwrap();
    recorder.publish(&ev, &obj.object_ref(&())).await.unwrap();
    // The events about this ConfigMap: the control plane may record its own in `default`.
    let events: Api<K8sEvent> = Api::namespaced(server.client(), "default");
    let about = format!("regarding.uid={}", obj.metadata.uid.as_deref().unwrap());
    let list = events
        .list(&ListParams::default().fields(&about))
        .await
        .unwrap();
    assert_eq!(
        list.items.len(),
        1,
        "the repeat is recorded as a series on the same event"
    );
    assert_eq!(list.items[0].reason.as_deref(), Some("Synced"));
}

#[tokio::test]
async fn drop_stops_the_server_and_its_watches() {
    let server = TestApiServer::start().await.unwrap();
    let addr = server.addr();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut s = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(next_n(&mut s, 1).await, ["BOOKMARK end"]);
    drop(server);
    // The open watch ends (cleanly or with a transport error), no event arrives.
    match tokio::time::timeout(LIMIT, s.next())
        .await
        .expect("watch ends")
    {
        None | Some(Err(_)) => {}
        Some(Ok(ev)) => panic!("unexpected {ev:?}"),
    }
    // Nothing listens any more.
    let deadline = std::time::Instant::now() + LIMIT;
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "listener still open");
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn works_under_a_paused_test_clock() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut s = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("p", json!({})))
        .await
        .unwrap();
    // Idle periods auto-advance the paused clock: bookmarks may arrive, the event must too.
    loop {
        match s.next().await.expect("open").expect("ok") {
            WatchEvent::Added(o) => {
                assert_eq!(o.metadata.name.as_deref(), Some("p"));
                break;
            }
            WatchEvent::Bookmark(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
    // Injected latency follows the paused clock.
    server.faults().set_latency(Duration::from_secs(3600));
    let started = tokio::time::Instant::now();
    api.get("p").await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(3600));
}
