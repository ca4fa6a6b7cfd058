//! Helpers shared by the unit tests.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcr_core::Event;

use crate::Predicate;

/// A ConfigMap named "cm" in "default" with metadata changed by `f`.
pub(crate) fn obj(f: impl FnOnce(&mut ObjectMeta)) -> ConfigMap {
    let mut meta = ObjectMeta {
        name: Some("cm".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    f(&mut meta);
    ConfigMap {
        metadata: meta,
        ..Default::default()
    }
}

/// Asserts `p` accepts creates (initial or not), deletes (observed or not) and generic events.
pub(crate) fn all_kinds_accept_except_update(p: &impl Predicate<ConfigMap>) {
    let o = Arc::new(obj(|_| {}));
    for e in [
        Event::Create {
            object: o.clone(),
            initial: true,
        },
        Event::Create {
            object: o.clone(),
            initial: false,
        },
        Event::Delete {
            object: o.clone(),
            state_unknown: true,
        },
        Event::Delete {
            object: o.clone(),
            state_unknown: false,
        },
        Event::Generic { object: o.clone() },
    ] {
        assert!(p.evaluate(&e), "{:?} should be accepted", e.kind());
    }
}

/// The table of resync verdicts in the crate docs, pinned: a resync event (an update whose
/// old and new object are the same `Arc`) through each predicate.
#[test]
fn resync_events_follow_the_documented_table() {
    use crate::{
        AnnotationsChanged, FinalizersChanged, Funcs, GenerationChanged, IgnoreStatusOnlyUpdates,
        LabelSelectorPredicate, LabelsChanged, ResourceVersionChanged,
    };
    let object = Arc::new(obj(|m| {
        m.resource_version = Some("7".into());
        m.generation = Some(3);
        m.labels = Some([("app".to_string(), "web".to_string())].into());
        m.annotations = Some([("a".to_string(), "b".to_string())].into());
        m.finalizers = Some(vec!["x.io/f".into()]);
    }));
    let resync = Event::Update {
        old: Arc::clone(&object),
        new: Arc::clone(&object),
    };
    assert!(!ResourceVersionChanged.evaluate(&resync));
    assert!(!GenerationChanged.evaluate(&resync));
    assert!(!LabelsChanged.evaluate(&resync));
    assert!(!AnnotationsChanged.evaluate(&resync));
    assert!(!FinalizersChanged.evaluate(&resync));
    assert!(!Predicate::<ConfigMap>::evaluate(
        &IgnoreStatusOnlyUpdates,
        &resync
    ));
    assert!(
        LabelSelectorPredicate::parse("app=web")
            .unwrap()
            .evaluate(&resync)
    );
    assert!(
        !LabelSelectorPredicate::parse("app=db")
            .unwrap()
            .evaluate(&resync)
    );
    assert!(Funcs::<ConfigMap>::new().evaluate(&resync));
}
