//! Unit tests of the store: metadata rules, the global resourceVersion, the event window and
//! compaction.

use super::*;
use serde_json::json;

use crate::resources::ResourceType;

fn cm(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": {"v": data}})
}

fn setup(window: usize) -> (Store, Arc<ResourceType>) {
    let mut store = Store::new(window);
    let ns = store.registry.get("namespaces").cloned().unwrap();
    store
        .create(&ns, json!({"metadata": {"name": "default"}}))
        .unwrap();
    let t = store.registry.get("configmaps").cloned().unwrap();
    (store, t)
}

#[test]
fn generation_only_for_the_kinds_upstream_keeps_it_for() {
    let (mut s, cms) = setup(100);
    let deployments = s.registry.get("apps/deployments").cloned().unwrap();
    let d = |annotations: Value, replicas: i64| {
        json!({"metadata": {"name": "d", "namespace": "default", "annotations": annotations},
            "spec": {"replicas": replicas}})
    };
    let created = s.create(&deployments, d(json!({}), 1)).unwrap();
    assert_eq!(created.value["metadata"]["generation"], 1);
    let up = |s: &mut Store, obj| s.update(&deployments, "default", "d", obj, None).unwrap();
    assert_eq!(
        up(&mut s, d(json!({}), 2)).value["metadata"]["generation"],
        2
    );
    // Deployments count annotation changes too.
    assert_eq!(
        up(&mut s, d(json!({"a": "b"}), 2)).value["metadata"]["generation"],
        3
    );
    // A client cannot set the generation of a tracked kind, nor change it on any kind.
    let mut sent = d(json!({"a": "b"}), 2);
    sent["metadata"]["generation"] = json!(9);
    assert_eq!(up(&mut s, sent).value["metadata"]["generation"], 3);
    let mut c = cm("g", "1");
    c["metadata"]["generation"] = json!(5);
    assert_eq!(
        s.create(&cms, c).unwrap().value["metadata"]["generation"],
        5
    );
    let mut c = cm("g", "2");
    c["metadata"]["generation"] = json!(7);
    let updated = s.update(&cms, "default", "g", c, None).unwrap();
    assert_eq!(updated.value["metadata"]["generation"], 5);
}

#[test]
fn every_write_bumps_one_global_rv() {
    let (mut s, t) = setup(100);
    let a = s.create(&t, cm("a", "1")).unwrap();
    let b = s
        .update(&t, "default", "a", cm("a", "2"), Some(a.rv))
        .unwrap();
    assert_eq!(b.rv, a.rv + 1);
    // ConfigMaps have no generation on the real server.
    assert_eq!(b.value["metadata"].get("generation"), None);
    assert_eq!(b.value["metadata"]["uid"], a.value["metadata"]["uid"]);
    // Stale expected rv.
    let err = s
        .update(&t, "default", "a", cm("a", "3"), Some(a.rv))
        .unwrap_err();
    assert_eq!(err.code, 409);
    let gone = s
        .delete(&t, "default", "a", &DeleteOpts::default())
        .unwrap();
    assert_eq!(gone.rv, b.rv + 1);
    assert_eq!(s.rv(), gone.rv);
    // Empty metadata collections are not stored.
    let mut with_empty = cm("e", "1");
    with_empty["metadata"]["labels"] = json!({});
    with_empty["metadata"]["finalizers"] = json!([]);
    let e = s.create(&t, with_empty).unwrap();
    assert!(e.value["metadata"].get("labels").is_none());
    assert!(e.value["metadata"].get("finalizers").is_none());
}

#[test]
fn window_overflow_and_overlay() {
    let (mut s, t) = setup(3);
    let first = s.create(&t, cm("a", "1")).unwrap();
    for i in 2..6 {
        s.update(&t, "default", "a", cm("a", &i.to_string()), None)
            .unwrap();
    }
    // Only the last 3 events are kept.
    assert!(s.events_since(first.rv, 10).is_err());
    let recent = s.rv() - 3;
    assert_eq!(s.events_since(recent, 10).unwrap().len(), 3);
    // State at `recent` for the changed key: the value before the 3 newest writes.
    let overlay = s.overlay_at("configmaps", recent).unwrap();
    let at = overlay[&("default".to_string(), "a".to_string())]
        .clone()
        .unwrap();
    assert_eq!(at.value["data"]["v"], "2");
    assert!(s.overlay_at("configmaps", first.rv).is_err());
}

#[test]
fn compaction_expires_resumes_but_not_caught_up_watchers() {
    let (mut s, t) = setup(100);
    s.create(&t, cm("a", "1")).unwrap();
    let now = s.rv();
    s.compact();
    assert!(s.events_since(now, 10).is_err(), "a new resume gets 410");
    assert!(
        s.events_since_live(now, 10).is_ok(),
        "a caught-up watch goes on"
    );
    assert!(
        s.events_since_live(now - 1, 10).is_err(),
        "a lagging watch lost events"
    );
}
