//! Resources that share storage with another resource and are converted per request.
//!
//! On the real API server, core/v1 `events` and `events.k8s.io/v1` `events` are one set of
//! objects: stored once (in the core form), with the same names and resourceVersions, and
//! converted field by field when read or written through `events.k8s.io/v1` (upstream's
//! `pkg/apis/events/v1` conversion). This module does the same: events.k8s.io Events are
//! stored under the core `events` key in their core/v1 form and converted here.
//!
//! | events.k8s.io/v1 | core/v1 |
//! |---|---|
//! | `regarding` | `involvedObject` |
//! | `note` | `message` |
//! | `reportingController` | `reportingComponent` |
//! | `reportingInstance` | `reportingInstance` |
//! | `deprecatedSource` | `source` |
//! | `deprecatedFirstTimestamp` | `firstTimestamp` |
//! | `deprecatedLastTimestamp` | `lastTimestamp` |
//! | `deprecatedCount` | `count` |
//! | `eventTime`, `series`, `action`, `reason`, `type`, `related`, `metadata` | same name |

use serde_json::{Map, Value};

use crate::resources::ResourceType;

/// Group of the events API that shares storage with core/v1 events.
pub const EVENTS_GROUP: &str = "events.k8s.io";

/// `(events.k8s.io/v1 field, core/v1 field)` pairs that are renamed by the conversion.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Whether `t` is the events.k8s.io Event resource (stored as core/v1 events).
pub fn is_events_v1(t: &ResourceType) -> bool {
    t.group == EVENTS_GROUP && t.plural == "events"
}

/// The store key objects of `t` live under: `events` for both Event APIs, otherwise
/// [`ResourceType::key`].
pub fn storage_key(t: &ResourceType) -> String {
    if is_events_v1(t) {
        "events".to_string()
    } else {
        t.key()
    }
}

/// Move the fields named `from` to `to` (the first of each pair to the second), keeping every
/// other field (metadata, `reason`, `type`, unknown fields) as it is.
fn rename(obj: Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) -> Value {
    let Value::Object(mut map) = obj else {
        return obj;
    };
    let mut moved = Map::new();
    for (from, to) in pairs {
        // The target name is not a field of the source version: it is dropped, as decoding
        // into the typed source version would (it could not survive a round trip).
        let target = map.remove(to);
        if let Some(v) = map.remove(from) {
            moved.insert(to.to_string(), v);
        }
        drop(target);
    }
    map.extend(moved);
    Value::Object(map)
}

/// Convert an object received for `t` (in `t`'s storage version) to its stored form.
/// Identity for every resource but events.k8s.io Events.
pub fn to_storage(t: &ResourceType, obj: Value) -> Value {
    if !is_events_v1(t) {
        return obj;
    }
    let mut out = rename(obj, EVENT_RENAMES.iter().copied());
    out["apiVersion"] = Value::String("v1".into());
    out["kind"] = Value::String("Event".into());
    out
}

/// Convert a stored object to the form served for `t` at `version` (only `apiVersion` is
/// rewritten for resources without a field conversion).
pub fn from_storage(t: &ResourceType, version: &str, stored: &Value) -> Value {
    let mut out = if is_events_v1(t) {
        let mut v1 = rename(stored.clone(), EVENT_RENAMES.iter().map(|(a, b)| (*b, *a)));
        // Always encoded in core/v1, `omitempty` in events.k8s.io/v1.
        if let Some(map) = v1.as_object_mut() {
            for field in ["reportingController", "reportingInstance"] {
                if map.get(field).is_some_and(|v| v == "") {
                    map.remove(field);
                }
            }
        }
        v1
    } else {
        stored.clone()
    };
    if out.is_object() {
        out["apiVersion"] = Value::String(t.api_version(version));
        out["kind"] = Value::String(t.kind.clone());
    }
    out
}

/// The core/v1 path of an events.k8s.io/v1 field selector path (`regarding.name` →
/// `involvedObject.name`, `reportingController` → `reportingComponent`, `note` → `message`);
/// other paths are returned unchanged.
pub fn event_field_to_core(path: &str) -> String {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    match EVENT_RENAMES.iter().find(|(v1, _)| *v1 == head) {
        Some((_, core)) => match rest {
            Some(r) => format!("{core}.{r}"),
            None => core.to_string(),
        },
        None => path.to_string(),
    }
}

/// Whether `stored`, an object of `t`, is served at `version` exactly as stored (it is in that
/// version, and `t` has no field conversion).
pub fn is_identity(t: &ResourceType, version: &str, stored: &Value) -> bool {
    !is_events_v1(t) && stored["apiVersion"].as_str() == Some(t.api_version(version).as_str())
}

#[cfg(test)]
mod tests;
pub mod webhook;
