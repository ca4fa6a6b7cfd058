//! Unit tests of the builder's event filters.

use super::filter::{dynamic_view, passes_filters};
use super::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec, PodStatus};
use kcr_predicate::IgnoreStatusOnlyUpdates;
use kcr_source::Event;

fn pod(node: &str, phase: &str) -> Pod {
    Pod {
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn event_filters_see_the_whole_object() {
    let filters: Vec<EventFilter> = vec![Arc::new(IgnoreStatusOnlyUpdates)];
    // A ConfigMap's data edit (no generation, no status) is a real change.
    let mut old = ConfigMap::default();
    old.metadata.name = Some("cm".into());
    old.metadata.resource_version = Some("1".into());
    old.data = Some([("k".to_string(), "1".to_string())].into());
    let mut new = old.clone();
    new.metadata.resource_version = Some("2".into());
    new.data = Some([("k".to_string(), "2".to_string())].into());
    assert!(passes_filters(
        &filters,
        &Event::update(old.clone(), new),
        &()
    ));
    let mut same = old.clone();
    same.metadata.resource_version = Some("3".into());
    assert!(!passes_filters(&filters, &Event::update(old, same), &()));
    // A pod: status-only updates are dropped, spec changes pass.
    let running = pod("n1", "Running");
    assert!(!passes_filters(
        &filters,
        &Event::update(pod("n1", "Pending"), running.clone()),
        &()
    ));
    assert!(passes_filters(
        &filters,
        &Event::update(pod("n2", "Running"), running),
        &()
    ));
    // The view carries the type and the body.
    let view = dynamic_view(&pod("n1", "Pending"), &()).expect("serialises");
    let types = view.types.clone().expect("types");
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("v1", "Pod")
    );
    assert_eq!(view.data["spec"]["nodeName"], "n1");
    assert_eq!(view.data["status"]["phase"], "Pending");
    assert!(
        view.data.get("metadata").is_none(),
        "metadata is kept apart"
    );
}

/// A `DynamicObject` is shown to the filters with the kind of its watch's `ApiResource`, even
/// when the object itself does not name it (list items of built-in kinds).
#[test]
fn dynamic_objects_are_viewed_with_their_watchs_resource() {
    use kube::core::{ApiResource, DynamicObject};
    let resource = ApiResource::erase::<ConfigMap>(&());
    let mut object =
        DynamicObject::new("cm", &resource).data(serde_json::json!({"data": {"k": "v"}}));
    object.types = None;
    let view = dynamic_view(&object, &resource).expect("serialises");
    let types = view.types.clone().expect("types");
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("v1", "ConfigMap")
    );
    assert_eq!(view.data["data"]["k"], "v");
    assert_eq!(view.metadata.name.as_deref(), Some("cm"));
}
