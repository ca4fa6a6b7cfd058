use super::*;
use crate::test_support::{all_kinds_accept_except_update, obj};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kcr_core::Event;

fn pod(phase: &str, node: &str, rv: &str, manager: &str) -> Pod {
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("p".into()),
            resource_version: Some(rv.into()),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some(manager.into()),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
    }
}

#[test]
fn truth_table() {
    let p = IgnoreStatusOnlyUpdates;
    let cases = [
        // status, resourceVersion and managedFields changes only: rejected
        (
            pod("Pending", "n1", "1", "a"),
            pod("Running", "n1", "2", "b"),
            false,
        ),
        (
            pod("Pending", "n1", "1", "a"),
            pod("Pending", "n1", "1", "a"),
            false,
        ),
        // a spec change: accepted, whatever the status did
        (
            pod("Pending", "n1", "1", "a"),
            pod("Pending", "n2", "2", "a"),
            true,
        ),
        (
            pod("Pending", "n1", "1", "a"),
            pod("Running", "n2", "2", "b"),
            true,
        ),
    ];
    for (old, new, expected) in cases {
        assert_eq!(
            p.evaluate(&Event::update(old.clone(), new.clone())),
            expected
        );
    }
    // a metadata change (labels) is not status-only
    let old = pod("Pending", "n1", "1", "a");
    let mut new = old.clone();
    new.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    assert!(p.evaluate(&Event::update(old, new)));
    all_kinds_accept_except_update(&p);
    // data change of a ConfigMap (no status at all) is accepted
    let a = obj(|_| {});
    let mut b = a.clone();
    b.data = Some([("k".to_string(), "v".to_string())].into());
    assert!(p.evaluate(&Event::update(a.clone(), b)));
    assert!(!p.evaluate(&Event::update(a.clone(), a)));
}
