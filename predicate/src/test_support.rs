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
