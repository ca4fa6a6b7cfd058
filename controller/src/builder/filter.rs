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

/// `object`, whole, as the [`DynamicObject`] event filters see.
pub(super) fn dynamic_view<K: Resource + Serialize>(
    object: &K,
) -> Result<Arc<DynamicObject>, serde_json::Error>
where
    K::DynamicType: Default,
{
    let dt = K::DynamicType::default();
    let mut data = serde_json::to_value(object)?;
    if let serde_json::Value::Object(fields) = &mut data {
        // Kept in `types` and `metadata` (a typed object may not serialise its type at all).
        for key in ["apiVersion", "kind", "metadata"] {
            fields.remove(key);
        }
    }
    Ok(Arc::new(DynamicObject {
        types: Some(TypeMeta {
            api_version: K::api_version(&dt).into_owned(),
            kind: K::kind(&dt).into_owned(),
        }),
        metadata: object.meta().clone(),
        data,
    }))
}

/// `event` with its objects as [`DynamicObject`]s.
fn dynamic_event<K: Resource + Serialize>(
    event: &Event<K>,
) -> Result<Event<DynamicObject>, serde_json::Error>
where
    K::DynamicType: Default,
{
    Ok(match event {
        Event::Create { object, initial } => Event::Create {
            object: dynamic_view(&**object)?,
            initial: *initial,
        },
        Event::Update { old, new } => Event::Update {
            old: dynamic_view(&**old)?,
            new: dynamic_view(&**new)?,
        },
        Event::Delete {
            object,
            state_unknown,
        } => Event::Delete {
            object: dynamic_view(&**object)?,
            state_unknown: *state_unknown,
        },
        Event::Generic { object } => Event::Generic {
            object: dynamic_view(&**object)?,
        },
    })
}

/// Whether `event` passes every event filter (an event that cannot be shown to them passes).
pub(super) fn passes_filters<K: Resource + Serialize>(
    filters: &[EventFilter],
    event: &Event<K>,
) -> bool
where
    K::DynamicType: Default,
{
    if filters.is_empty() {
        return true;
    }
    match dynamic_event(event) {
        Ok(view) => filters.iter().all(|f| f.evaluate(&view)),
        Err(error) => {
            let dt = K::DynamicType::default();
            tracing::warn!(
                kind = %K::kind(&dt),
                %error,
                "cannot serialise the object for the event filters; letting the event through"
            );
            true
        }
    }
}
