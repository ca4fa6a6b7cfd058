//! core/v1 and events.k8s.io/v1 Events are one set of objects served through both APIs with
//! field conversion (regarding ↔ involvedObject, note ↔ message, ...), as on a real API server.
//!
//! Each test works in a namespace of its own ([`NS`]): a real control plane may record Events
//! of its own in `default` (kube-apiserver's cluster-IP repair controller, about the
//! `kubernetes` Service it creates at start), which a list or watch of `default` would see
//! too.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, Namespace};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kcr_envtest::TestApiServer;
use kube::Resource;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::events::{Event as RecorderEvent, EventType, Recorder, Reporter};
use serde_json::json;

/// Safety net only: every awaited event is produced by the server without any timer.
const LIMIT: Duration = Duration::from_secs(20);

/// The namespace the tests write their Events (and ConfigMaps) in.
const NS: &str = "events-test";

/// Creates [`NS`] on `server`; returns its client.
async fn client_with_namespace(server: &TestApiServer) -> kube::Client {
    let client = server.client();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    client
}

fn new_event(name: &str) -> NewEvent {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "eventTime": "2026-01-02T03:04:05.000000Z",
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-0",
        "action": "Reconcile",
        "reason": "Synced",
        "type": "Normal",
        "note": "all good",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "namespace": NS, "uid": "u-1"},
        "related": {"kind": "Node", "name": "n1"},
        "series": {"count": 2, "lastObservedTime": "2026-01-02T03:04:06.000000Z"},
    }))
    .unwrap()
}

#[tokio::test]
async fn events_k8s_io_writes_are_core_events_and_back() {
    let server = TestApiServer::start().await.unwrap();
    let client = client_with_namespace(&server).await;
    let new_api: Api<NewEvent> = Api::namespaced(client.clone(), NS);
    let core_api: Api<CoreEvent> = Api::namespaced(client.clone(), NS);

    // A create through events.k8s.io/v1 must leave the core-only (`deprecated*`) fields unset
    // and fill in the new-style ones: 422 naming each field (core/v1 names).
    let mut legacy = serde_json::to_value(new_event("bad")).unwrap();
    legacy["deprecatedCount"] = json!(7);
    legacy["deprecatedSource"] = json!({"component": "legacy", "host": "h1"});
    legacy["deprecatedFirstTimestamp"] = json!("2026-01-01T00:00:00Z");
    legacy["deprecatedLastTimestamp"] = json!("2026-01-02T00:00:00Z");
    legacy["type"] = json!("Sometimes");
    let err = new_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(legacy).unwrap(),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let mut fields: Vec<String> = status
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        ["count", "firstTimestamp", "lastTimestamp", "source", "type"]
    );
    let mut bare = serde_json::to_value(new_event("bare")).unwrap();
    for field in [
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        bare.as_object_mut().unwrap().remove(field);
    }
    let err = new_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(bare).unwrap(),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!(status.code, 422);
    for field in [
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        assert!(
            status.message.contains(field),
            "{field}: {}",
            status.message
        );
    }

    let created = new_api
        .create(&PostParams::default(), &new_event("e1"))
        .await
        .unwrap();
    assert_eq!(created.note.as_deref(), Some("all good"));
    assert_eq!(
        created.regarding.as_ref().unwrap().name.as_deref(),
        Some("cm")
    );

    // Listed and read through core/v1, with converted fields and the same identity.
    let list = core_api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let core = core_api.get("e1").await.unwrap();
    assert_eq!(
        core.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(core.metadata.uid, created.metadata.uid);
    assert_eq!(core.message.as_deref(), Some("all good"));
    assert_eq!(core.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(core.involved_object.name.as_deref(), Some("cm"));
    assert_eq!(core.involved_object.uid.as_deref(), Some("u-1"));
    assert_eq!(core.reporting_component.as_deref(), Some("example.com/ctl"));
    assert_eq!(core.reporting_instance.as_deref(), Some("ctl-0"));
    assert_eq!(core.series.as_ref().unwrap().count, Some(2));
    assert_eq!(core.related.as_ref().unwrap().name.as_deref(), Some("n1"));
    assert_eq!(core.action.as_deref(), Some("Reconcile"));
    assert_eq!(core.reason.as_deref(), Some("Synced"));
    assert_eq!(core.type_.as_deref(), Some("Normal"));
    assert!(core.event_time.is_some());
    // The raw core/v1 JSON carries no events.k8s.io field names.
    let raw: serde_json::Value = serde_json::to_value(&core).unwrap();
    assert_eq!(raw["apiVersion"], "v1");
    assert!(raw.get("note").is_none() && raw.get("regarding").is_none());

    // Vice versa: a core/v1 write is an events.k8s.io/v1 Event.
    let mut core2 = CoreEvent::default();
    core2.metadata.name = Some("e2".into());
    core2.message = Some("from core".into());
    core2.reason = Some("Old".into());
    core2.count = Some(3);
    core2.source = Some(k8s_openapi::api::core::v1::EventSource {
        component: Some("legacy".into()),
        host: Some("h1".into()),
    });
    core2.first_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    core2.last_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-02T00:00:00Z".parse().unwrap(),
    ));
    core2.reporting_component = Some("kubelet".into());
    core2.involved_object.kind = Some("Pod".into());
    core2.involved_object.name = Some("p".into());
    core2.involved_object.namespace = Some(NS.into());
    core_api
        .create(&PostParams::default(), &core2)
        .await
        .unwrap();
    let seen = new_api.get("e2").await.unwrap();
    assert_eq!(seen.note.as_deref(), Some("from core"));
    assert_eq!(seen.deprecated_count, Some(3));
    let source = seen.deprecated_source.as_ref().unwrap();
    assert_eq!(
        (source.component.as_deref(), source.host.as_deref()),
        (Some("legacy"), Some("h1"))
    );
    assert!(seen.deprecated_first_timestamp.is_some() && seen.deprecated_last_timestamp.is_some());
    assert_eq!(seen.reporting_controller.as_deref(), Some("kubelet"));
    assert_eq!(
        seen.regarding.as_ref().unwrap().kind.as_deref(),
        Some("Pod")
    );
    let names: Vec<String> = new_api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert_eq!(names, ["e1", "e2"]);

    // Field selectors name each API's own fields.
    let by_regarding = new_api
        .list(&ListParams::default().fields("regarding.name=p"))
        .await
        .unwrap();
    assert_eq!(by_regarding.items.len(), 1);
    assert_eq!(by_regarding.items[0].metadata.name.as_deref(), Some("e2"));
    let by_involved = core_api
        .list(&ListParams::default().fields("involvedObject.name=cm"))
        .await
        .unwrap();
    assert_eq!(by_involved.items.len(), 1);
    assert_eq!(by_involved.items[0].metadata.name.as_deref(), Some("e1"));
    let none = core_api
        .list(&ListParams::default().fields("involvedObject.name=nothing"))
        .await
        .unwrap();
    assert!(none.items.is_empty());

    // Through events.k8s.io/v1 an Event's fields are immutable but for its series: 422 naming
    // the core/v1 field.
    let err = new_api
        .patch(
            "e2",
            &PatchParams::default(),
            &Patch::Merge(json!({"note": "patched"})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(status.details.unwrap().causes[0].field, "message");
    // A patch of the series through events.k8s.io/v1 is seen by core/v1; an update through
    // core/v1 with a stale resourceVersion from events.k8s.io conflicts (one object, one
    // resourceVersion).
    let patched = new_api
        .patch(
            "e2",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"series": {"count": 5, "lastObservedTime": "2026-01-03T00:00:00.000000Z"}}),
            ),
        )
        .await
        .unwrap();
    let core_now = core_api.get("e2").await.unwrap();
    assert_eq!(core_now.series.as_ref().unwrap().count, Some(5));
    assert_eq!(
        core_now.metadata.resource_version,
        patched.metadata.resource_version
    );
    let mut stale = core_now.clone();
    stale.metadata.resource_version = created.metadata.resource_version.clone();
    let err = core_api
        .replace("e2", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    // Creating the same name through the other API is AlreadyExists.
    let err = core_api
        .create(&PostParams::default(), &core2)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );

    // A delete through either API removes the one object.
    core_api
        .delete("e1", &DeleteParams::default())
        .await
        .unwrap();
    let err = new_api.get("e1").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
    new_api
        .delete("e2", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        core_api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn core_watch_sees_events_k8s_io_writes_converted() {
    let server = TestApiServer::start().await.unwrap();
    let client = client_with_namespace(&server).await;
    let new_api: Api<NewEvent> = Api::namespaced(client.clone(), NS);
    let core_api: Api<CoreEvent> = Api::namespaced(client.clone(), NS);
    // Unrelated writes to other resources do not show up.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);

    let rv = server.resource_version().await.unwrap().to_string();
    let mut core_watch = core_api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let mut new_watch = new_api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("cm".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    new_api
        .create(&PostParams::default(), &new_event("w1"))
        .await
        .unwrap();
    let mut core_ev = CoreEvent::default();
    core_ev.metadata.name = Some("w2".into());
    core_ev.message = Some("core message".into());
    core_ev.involved_object.namespace = Some(NS.into());
    core_api
        .create(&PostParams::default(), &core_ev)
        .await
        .unwrap();
    new_api
        .delete("w1", &DeleteParams::default())
        .await
        .unwrap();

    let mut core_seen = Vec::new();
    for _ in 0..3 {
        let ev = tokio::time::timeout(LIMIT, core_watch.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        core_seen.push(match ev {
            WatchEvent::Added(e) => format!(
                "ADDED {} {}",
                e.metadata.name.unwrap_or_default(),
                e.message.unwrap_or_default()
            ),
            WatchEvent::Deleted(e) => format!("DELETED {}", e.metadata.name.unwrap_or_default()),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        core_seen,
        ["ADDED w1 all good", "ADDED w2 core message", "DELETED w1"]
    );

    let mut new_seen = Vec::new();
    for _ in 0..3 {
        let ev = tokio::time::timeout(LIMIT, new_watch.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        new_seen.push(match ev {
            WatchEvent::Added(e) => format!(
                "ADDED {} {}",
                e.metadata.name.unwrap_or_default(),
                e.note.unwrap_or_default()
            ),
            WatchEvent::Deleted(e) => format!("DELETED {}", e.metadata.name.unwrap_or_default()),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        new_seen,
        ["ADDED w1 all good", "ADDED w2 core message", "DELETED w1"]
    );
}

#[tokio::test]
async fn recorder_events_appear_in_a_core_list() {
    let server = TestApiServer::start().await.unwrap();
    let client = client_with_namespace(&server).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("target".into());
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();

    let recorder = Recorder::new(client.clone(), Reporter::from("my-operator"));
    let event = RecorderEvent {
        type_: EventType::Warning,
        reason: "Broken".into(),
        note: Some("it broke".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = cm.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    // The second identical event becomes a series (a merge patch through events.k8s.io/v1).
    recorder.publish(&event, &reference).await.unwrap();

    let core_api: Api<CoreEvent> = Api::namespaced(client, NS);
    let list = core_api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1, "{list:?}");
    let e = &list.items[0];
    assert_eq!(e.message.as_deref(), Some("it broke"));
    assert_eq!(e.reason.as_deref(), Some("Broken"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reporting_component.as_deref(), Some("my-operator"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(e.involved_object.name.as_deref(), Some("target"));
    assert_eq!(e.involved_object.uid, cm.metadata.uid);
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));
}

/// An Event's namespace must match its involved object's, as kube-apiserver's
/// `legacyValidateEvent` checks on every write through either API: an old-style Event (no
/// `eventTime`) about a cluster-scoped object lives in `default`, one about a namespaced object
/// in that object's namespace; a new-style Event about a cluster-scoped object only in
/// `default` or `kube-system`.
#[tokio::test]
async fn an_events_namespace_must_match_its_involved_objects() {
    let server = TestApiServer::start().await.unwrap();
    let client = client_with_namespace(&server).await;
    let core = |ns: &str| Api::<CoreEvent>::namespaced(client.clone(), ns);
    let new = |ns: &str| Api::<NewEvent>::namespaced(client.clone(), ns);
    let old_style = |name: &str, involved_ns: Option<&str>| -> CoreEvent {
        let mut e = CoreEvent::default();
        e.metadata.name = Some(name.into());
        e.reason = Some("Old".into());
        e.involved_object.kind = Some("Node".into());
        e.involved_object.name = Some("n1".into());
        e.involved_object.namespace = involved_ns.map(str::to_string);
        e
    };
    let mismatch = |err: kube::Error, involved_ns: &str| {
        let kube::Error::Api(status) = err else {
            panic!("expected an API error, got {err:?}")
        };
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        let causes = status.details.unwrap().causes;
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "involvedObject.namespace");
        assert_eq!(
            causes[0].message,
            format!("Invalid value: \"{involved_ns}\": does not match event.namespace")
        );
    };
    let pp = PostParams::default();

    // Old style: no involved namespace is for default only; otherwise the same namespace.
    core("default")
        .create(&pp, &old_style("cluster-scoped", None))
        .await
        .unwrap();
    mismatch(
        core(NS)
            .create(&pp, &old_style("cluster-scoped", None))
            .await
            .unwrap_err(),
        "",
    );
    mismatch(
        core(NS)
            .create(&pp, &old_style("elsewhere", Some("default")))
            .await
            .unwrap_err(),
        "default",
    );
    let here = core(NS)
        .create(&pp, &old_style("here", Some(NS)))
        .await
        .unwrap();
    // An update is checked too.
    let mut moved = here.clone();
    moved.involved_object.namespace = Some("default".into());
    mismatch(
        core(NS).replace("here", &pp, &moved).await.unwrap_err(),
        "default",
    );

    // New style (eventTime set): no regarding namespace is for default and kube-system only;
    // a namespaced object may be in another namespace.
    let new_style = |name: &str, regarding_ns: Option<&str>| -> NewEvent {
        let mut e = new_event(name);
        e.metadata.namespace = None;
        let regarding = e.regarding.as_mut().unwrap();
        regarding.kind = Some("Node".into());
        regarding.namespace = regarding_ns.map(str::to_string);
        e
    };
    for ns in ["default", "kube-system"] {
        new(ns)
            .create(&pp, &new_style("new-cluster-scoped", None))
            .await
            .unwrap();
    }
    mismatch(
        new(NS)
            .create(&pp, &new_style("new-cluster-scoped", None))
            .await
            .unwrap_err(),
        "",
    );
    new(NS)
        .create(&pp, &new_style("new-elsewhere", Some("default")))
        .await
        .unwrap();
}
