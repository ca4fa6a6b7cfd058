//! Deletion: finalizers and deletionTimestamp, owner-reference garbage collection (background,
//! foreground, orphan), namespace deletion, deletecollection; and the fault-injection controls.

use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcr_envtest::{TestApiServer, TestNamespace, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn owned(name: &str, owner: &ConfigMap, finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {
        "name": name,
        "finalizers": finalizers,
        "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "name": owner.metadata.name, "uid": owner.metadata.uid,
            "blockOwnerDeletion": true,
        }],
    }}))
    .unwrap()
}

fn plain(name: &str, finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "finalizers": finalizers}})).unwrap()
}

async fn exists(api: &Api<ConfigMap>, name: &str) -> bool {
    api.get_opt(name).await.unwrap().is_some()
}

/// How long the real backend's controllers (garbage collector, namespace controller) may take.
/// In process everything happens inside the request, and the first check passes.
const CONTROLLERS: Duration = Duration::from_secs(60);

/// Wait until `name` is gone (kube-controller-manager's garbage collector deletes
/// asynchronously on the real backend).
async fn gone(api: &Api<ConfigMap>, name: &str) {
    eventually(&format!("{name} is deleted"), CONTROLLERS, || async {
        !exists(api, name).await
    })
    .await;
}

#[tokio::test]
async fn finalizers_hold_deletion() {
    let ns = TestNamespace::new("finalizers").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = api
        .create(
            &PostParams::default(),
            &plain("f", &["example.com/hold", "example.com/two"]),
        )
        .await
        .unwrap();
    let mut events = api
        .watch(
            &kube::api::WatchParams::default(),
            created.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let deleting = api.delete("f", &DeleteParams::default()).await.unwrap();
    let obj = deleting.left().expect("object still there");
    assert!(obj.metadata.deletion_timestamp.is_some());
    // Adding a finalizer while deleting: 422.
    let err = api_err(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/two", "new"]}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    // Removing one finalizer: still there.
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/two"]}})),
    )
    .await
    .unwrap();
    assert!(exists(&api, "f").await);
    // Removing the last one: gone.
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(!exists(&api, "f").await);
    // Watchers saw: deletion started, one finalizer removed, then a single DELETED.
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match ev {
            kube::api::WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            kube::api::WatchEvent::Deleted(o) => {
                // The DELETED event carries the state stored before the update that removed
                // the last finalizer, as the real server's (etcd's) does.
                assert_eq!(
                    o.metadata.finalizers,
                    Some(vec!["example.com/two".to_string()])
                );
                assert!(o.metadata.deletion_timestamp.is_some());
                kinds.push("DELETED")
            }
            kube::api::WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(kinds, ["MODIFIED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn garbage_collection_policies() {
    let ns = TestNamespace::new("gc-policies").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());

    // Background (default): owner gone, dependents (and their dependents) follow.
    let owner = api
        .create(&PostParams::default(), &plain("bg-owner", &[]))
        .await
        .unwrap();
    let child = api
        .create(&PostParams::default(), &owned("bg-child", &owner, &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned("bg-grandchild", &child, &[]))
        .await
        .unwrap();
    api.delete("bg-owner", &DeleteParams::default())
        .await
        .unwrap();
    assert!(!exists(&api, "bg-owner").await);
    for n in ["bg-child", "bg-grandchild"] {
        gone(&api, n).await;
    }

    // Orphan: dependents stay, without the owner reference.
    let owner = api
        .create(&PostParams::default(), &plain("or-owner", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &owned("or-child", &owner, &[]))
        .await
        .unwrap();
    api.delete("or-owner", &DeleteParams::orphan())
        .await
        .unwrap();
    // The garbage collector removes the owner reference, then lets the owner go.
    gone(&api, "or-owner").await;
    let kept = api.get("or-child").await.unwrap();
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );

    // Foreground: owner waits (deletionTimestamp + foregroundDeletion) for a dependent that has
    // a finalizer; goes once the dependent is gone.
    let owner = api
        .create(&PostParams::default(), &plain("fg-owner", &[]))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &owned("fg-child", &owner, &["example.com/hold"]),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &owned("fg-child2", &owner, &[]))
        .await
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    api.delete("fg-owner", &dp).await.unwrap();
    let waiting = api.get("fg-owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    gone(&api, "fg-child2").await;
    eventually("fg-child is being deleted", CONTROLLERS, || async {
        api.get("fg-child")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    api.patch(
        "fg-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(!exists(&api, "fg-child").await);
    // The owner is released once its dependents are gone.
    gone(&api, "fg-owner").await;

    // A dependent with two owners survives while one owner remains.
    let a = api
        .create(&PostParams::default(), &plain("two-a", &[]))
        .await
        .unwrap();
    let b = api
        .create(&PostParams::default(), &plain("two-b", &[]))
        .await
        .unwrap();
    let mut both = owned("two-child", &a, &[]);
    let mut refs = both.metadata.owner_references.clone().unwrap();
    refs.extend(owned("x", &b, &[]).metadata.owner_references.unwrap());
    both.metadata.owner_references = Some(refs);
    api.create(&PostParams::default(), &both).await.unwrap();
    api.delete("two-a", &DeleteParams::default()).await.unwrap();
    // The garbage collector keeps it and removes the dangling reference to two-a.
    eventually("two-child refers to two-b only", CONTROLLERS, || async {
        let child = api.get("two-child").await.unwrap();
        let owners: Vec<String> = child
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.uid)
            .collect();
        owners == [b.metadata.uid.clone().unwrap()]
    })
    .await;
    api.delete("two-b", &DeleteParams::default()).await.unwrap();
    gone(&api, "two-child").await;
}

#[tokio::test]
async fn namespace_deletion_and_deletecollection() {
    let test_ns = TestNamespace::new("ns-deletion").await.unwrap();
    let nss: Api<Namespace> = Api::all(test_ns.client());
    let team = test_ns.unique_name("team");
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": team}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(test_ns.client(), &team);
    api.create(&PostParams::default(), &plain("a", &[]))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &plain("held", &["example.com/hold"]),
    )
    .await
    .unwrap();
    nss.delete(&team, &DeleteParams::default()).await.unwrap();
    let terminating = nss.get(&team).await.unwrap();
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    // The namespace controller (on the real backend) deletes the contents.
    gone(&api, "a").await;
    // No new content in a terminating namespace.
    let err = api_err(
        api.create(&PostParams::default(), &plain("new", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    // The namespace goes when empty.
    eventually(
        &format!("namespace {team} is deleted"),
        CONTROLLERS,
        || async { nss.get_opt(&team).await.unwrap().is_none() },
    )
    .await;

    let def: Api<ConfigMap> = Api::default_namespaced(test_ns.client());
    for (n, l) in [("x1", "x"), ("x2", "x"), ("y1", "y")] {
        let o: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": n, "labels": {"g": l}}})).unwrap();
        def.create(&PostParams::default(), &o).await.unwrap();
    }
    let deleted = def
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("g=x"),
        )
        .await
        .unwrap();
    assert_eq!(deleted.left().unwrap().items.len(), 2);
    let left: Vec<String> = def
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(left, ["y1"]);
}

#[tokio::test]
async fn fault_injection() {
    // Own server: injects faults and reads request counters.
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let faults = server.faults();

    // Fail the next 2 creates with 409; the third succeeds.
    faults.fail_next("create", "configmaps", 2, 409);
    assert_eq!(faults.pending_failures(), 2);
    for _ in 0..2 {
        let err = api_err(
            api.create(&PostParams::default(), &plain("c", &[]))
                .await
                .unwrap_err(),
        );
        assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    }
    api.create(&PostParams::default(), &plain("c", &[]))
        .await
        .unwrap();
    assert_eq!(faults.pending_failures(), 0);
    assert_eq!(faults.request_count("create", "configmaps"), 3);

    // Wildcards and subresources are counted separately.
    faults.fail_next("*", "configmaps", 1, 500);
    assert_eq!(api_err(api.get("c").await.unwrap_err()).code, 500);
    assert!(api.get("c").await.is_ok());

    // A rule for one namespace leaves the others' (and cluster-wide) requests alone.
    let system: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system");
    let everywhere: Api<ConfigMap> = Api::all(server.client());
    faults.fail_next_in("default", "list", "configmaps", 1, 500);
    assert!(system.list(&ListParams::default()).await.is_ok());
    assert!(everywhere.list(&ListParams::default()).await.is_ok());
    let err = api_err(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (500, "InternalError"));
    assert!(api.list(&ListParams::default()).await.is_ok());

    // 429 with Retry-After: kube's client retries by itself after the advertised delay, so
    // the server sees two requests and the caller a success.
    faults.reset_counts();
    faults.throttle_next("get", "configmaps", 1, 1);
    let started = std::time::Instant::now();
    assert!(api.get("c").await.is_ok());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After honoured"
    );
    assert_eq!(faults.request_count("get", "configmaps"), 2);
    // The raw answer carries the header.
    faults.throttle_next("get", "configmaps", 1, 7);
    let resp = reqwest_like_get(&server.url(), "/api/v1/namespaces/default/configmaps/c").await;
    assert!(resp.starts_with("HTTP/1.1 429"), "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("retry-after: 7"),
        "{resp}"
    );
    assert!(resp.contains("\"reason\":\"TooManyRequests\""), "{resp}");

    // Latency (tokio time).
    faults.set_latency(Duration::from_millis(200));
    let started = std::time::Instant::now();
    api.get("c").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    faults.set_latency(Duration::ZERO);

    // Pause: requests wait until resume.
    faults.pause();
    assert!(faults.is_paused());
    let pending = tokio::spawn({
        let api = api.clone();
        async move { api.get("c").await.map(|o| o.metadata.name) }
    });
    // Wait (bounded) until the server holds the request, then check it is not answered.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while faults.held_requests() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "request never reached the server"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!pending.is_finished());
    faults.resume();
    assert_eq!(pending.await.unwrap().unwrap().as_deref(), Some("c"));

    // Counters by (verb, resource).
    let counts = faults.request_counts();
    assert!(
        counts
            .get(&("get".to_string(), "configmaps".to_string()))
            .copied()
            .unwrap_or(0)
            >= 4
    );
    faults.clear();
}

/// A raw HTTP/1.1 GET returning the status line, headers and body as text.
async fn reqwest_like_get(base: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
