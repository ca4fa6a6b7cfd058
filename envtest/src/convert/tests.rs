use super::*;
use serde_json::json;

fn events_v1() -> ResourceType {
    crate::resources::builtins()
        .into_iter()
        .find(|t| t.group == EVENTS_GROUP)
        .unwrap()
}

#[test]
fn events_round_trip_between_the_two_apis() {
    let t = events_v1();
    let v1 = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e", "namespace": "default", "labels": {"a": "b"}},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
        "reportingController": "ctl", "reportingInstance": "ctl-1",
        "action": "Reconcile", "reason": "Created", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "related": {"kind": "Node", "name": "n"},
        "note": "hello",
        "deprecatedSource": {"component": "old", "host": "h"},
        "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
        "deprecatedLastTimestamp": "2026-01-01T00:00:02Z",
        "deprecatedCount": 3,
        "unknownField": 1,
    });
    let core = to_storage(&t, v1.clone());
    assert_eq!(
        core,
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default", "labels": {"a": "b"}},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
            "reportingComponent": "ctl", "reportingInstance": "ctl-1",
            "action": "Reconcile", "reason": "Created", "type": "Normal",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "related": {"kind": "Node", "name": "n"},
            "message": "hello",
            "source": {"component": "old", "host": "h"},
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:02Z",
            "count": 3,
            "unknownField": 1,
        })
    );
    assert_eq!(from_storage(&t, "v1", &core), v1);
    // A core field name sent to events.k8s.io is not a field there: dropped.
    let odd = to_storage(&t, json!({"metadata": {}, "message": "x", "note": "y"}));
    assert_eq!(odd["message"], "y");
    let odd = to_storage(&t, json!({"metadata": {}, "message": "x"}));
    assert!(odd.get("message").is_none());
}

#[test]
fn other_resources_only_get_their_api_version() {
    let cms = crate::resources::builtins()
        .into_iter()
        .find(|t| t.plural == "configmaps")
        .unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {}});
    assert_eq!(to_storage(&cms, cm.clone()), cm);
    assert_eq!(from_storage(&cms, "v1", &cm), cm);
    assert!(is_identity(&cms, "v1", &cm));
    // An object stored in another version (before the storage version changed) is not.
    let mut old = cm.clone();
    old["apiVersion"] = json!("v0");
    assert!(!is_identity(&cms, "v1", &old));
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event"});
    assert!(!is_identity(&events_v1(), "v1", &event));
    assert_eq!(storage_key(&events_v1()), "events");
    assert_eq!(storage_key(&cms), "configmaps");
    assert_eq!(event_field_to_core("regarding.name"), "involvedObject.name");
    assert_eq!(
        event_field_to_core("reportingController"),
        "reportingComponent"
    );
    assert_eq!(event_field_to_core("reason"), "reason");
}
