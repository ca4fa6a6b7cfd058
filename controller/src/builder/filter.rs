//! Event filters: predicates over any watched object, shown to them whole as a
//! [`DynamicObject`] (see the [module docs](crate::builder#event-filters-see-the-whole-object)).

use std::sync::Arc;

use kcr_predicate::Predicate;
use kcr_source::Event;
use kube::Resource;
use kube::core::{DynamicObject, TypeMeta};
use serde::Serialize;

/// An event filter: a predicate over any watched object, whole, as a [`DynamicObject`] (see the
/// [module docs](crate::builder#event-filters-see-the-whole-object)).
pub type EventFilter = Arc<dyn Predicate<DynamicObject>>;

/// `object` (of the run-time type `dt`), whole, as the [`DynamicObject`] event filters see.
pub(super) fn dynamic_view<K: Resource + Serialize>(
    object: &K,
    dt: &K::DynamicType,
) -> Result<Arc<DynamicObject>, serde_json::Error> {
    let mut data = serde_json::to_value(object)?;
    if let serde_json::Value::Object(fields) = &mut data {
        // Kept in `types` and `metadata` (a typed object may not serialise its type at all).
        for key in ["apiVersion", "kind", "metadata"] {
            fields.remove(key);
        }
    }
    Ok(Arc::new(DynamicObject {
        types: Some(TypeMeta {
            api_version: K::api_version(dt).into_owned(),
            kind: K::kind(dt).into_owned(),
        }),
        metadata: object.meta().clone(),
        data,
    }))
}

/// `event` with its objects as [`DynamicObject`]s.
fn dynamic_event<K: Resource + Serialize>(
    event: &Event<K>,
    dt: &K::DynamicType,
) -> Result<Event<DynamicObject>, serde_json::Error> {
    Ok(match event {
        Event::Create { object, initial } => Event::Create {
            object: dynamic_view(&**object, dt)?,
            initial: *initial,
        },
        Event::Update { old, new } => Event::Update {
            old: dynamic_view(&**old, dt)?,
            new: dynamic_view(&**new, dt)?,
        },
        Event::Delete {
            object,
            state_unknown,
        } => Event::Delete {
            object: dynamic_view(&**object, dt)?,
            state_unknown: *state_unknown,
        },
        Event::Generic { object } => Event::Generic {
            object: dynamic_view(&**object, dt)?,
        },
    })
}

/// Whether `event` (objects of the run-time type `dt`) passes every event filter (an event
/// that cannot be shown to them passes).
pub(super) fn passes_filters<K: Resource + Serialize>(
    filters: &[EventFilter],
    event: &Event<K>,
    dt: &K::DynamicType,
) -> bool {
    if filters.is_empty() {
        return true;
    }
    match dynamic_event(event, dt) {
        Ok(view) => filters.iter().all(|f| f.evaluate(&view)),
        Err(error) => {
            tracing::warn!(
                kind = %K::kind(dt),
                %error,
                "cannot serialise the object for the event filters; letting the event through"
            );
            true
        }
    }
}
