//! The `scale` subresource: an `autoscaling/v1` `Scale` view of an object's replica count, as
//! `kubectl scale`, `Api::get_scale`/`patch_scale`/`replace_scale` and autoscalers use it.
//!
//! Served for apps/v1 Deployments, ReplicaSets and StatefulSets (replicas at `.spec.replicas`
//! and `.status.replicas`, the selector from `.spec.selector`) and for custom resources whose
//! CRD version declares `subresources.scale` (`specReplicasPath`, `statusReplicasPath`,
//! optional `labelSelectorPath`). A read builds the `Scale` from the object; a write (PUT of a
//! `Scale`, or a JSON / merge / strategic merge patch of it) changes only the object's spec
//! replicas and is stored as an update of the object, with its admission, resourceVersion
//! precondition and generation bump. Not served: server-side apply of a `Scale` (400), and
//! field ownership for `/scale` writes is recorded as an `Update` of the object itself.

use serde_json::{Map, Value, json};

use crate::resources::{ResourceType, ScaleSubresource};

/// The paths of the built-in kinds that have a `scale` subresource.
pub(crate) fn builtin() -> ScaleSubresource {
    ScaleSubresource {
        spec_replicas_path: ".spec.replicas".into(),
        status_replicas_path: ".status.replicas".into(),
        label_selector_path: Some(".spec.selector".into()),
    }
}

/// The JSON pointer of a `.a.b` path (the form CRDs use), or `None` for another form.
fn pointer(path: &str) -> Option<String> {
    let rest = path.strip_prefix('.')?;
    if rest.is_empty() || rest.contains(['[', ']']) {
        return None;
    }
    Some(
        rest.split('.')
            .map(|seg| format!("/{}", seg.replace('~', "~0").replace('/', "~1")))
            .collect(),
    )
}

/// A label selector object as the string form `status.selector` carries (`a=b,c in (d,e)`).
pub fn selector_string(selector: &Value) -> String {
    if let Some(s) = selector.as_str() {
        return s.to_string();
    }
    let mut parts: Vec<String> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for req in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = req["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = req["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match req["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({})", values.join(",")),
        });
    }
    parts.join(",")
}

/// The `Scale` view of `obj` (in the route's version) through `scale`'s paths.
pub fn view(t: &ResourceType, scale: &ScaleSubresource, obj: &Value) -> Value {
    let at = |path: &str| pointer(path).and_then(|p| obj.pointer(&p));
    let meta = &obj["metadata"];
    let mut metadata = Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(key).filter(|v| !v.is_null()) {
            metadata.insert(key.into(), v.clone());
        }
    }
    // Built-in kinds default spec.replicas to 1 on the real server.
    let default_replicas = if t.custom.is_none() { 1 } else { 0 };
    let replicas = at(&scale.spec_replicas_path)
        .and_then(Value::as_i64)
        .unwrap_or(default_replicas);
    let mut status = json!({
        "replicas": at(&scale.status_replicas_path).and_then(Value::as_i64).unwrap_or(0)
    });
    if let Some(selector) = scale
        .label_selector_path
        .as_deref()
        .and_then(at)
        .map(selector_string)
        .filter(|s| !s.is_empty())
    {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas},
        "status": status,
    })
}

/// The replica count a written `Scale` asks for: `spec.replicas`, a non-negative integer.
pub fn requested_replicas(scale: &Value) -> Result<i64, String> {
    match &scale["spec"]["replicas"] {
        Value::Null => Ok(0),
        v => match v.as_i64() {
            Some(n) if n >= 0 => Ok(n),
            Some(n) => Err(format!(
                "spec.replicas: Invalid value: {n}: must be greater than or equal to 0"
            )),
            None => Err(format!(
                "spec.replicas: Invalid value: {v}: must be an integer"
            )),
        },
    }
}

/// `obj` with its spec replicas set to `replicas` (intermediate objects created as needed).
pub fn with_replicas(
    scale: &ScaleSubresource,
    mut obj: Value,
    replicas: i64,
) -> Result<Value, String> {
    let path = pointer(&scale.spec_replicas_path)
        .ok_or_else(|| format!("unsupported specReplicasPath {}", scale.spec_replicas_path))?;
    let mut cur = &mut obj;
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (i, seg) in segments.iter().enumerate() {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !cur.is_object() {
            *cur = json!({});
        }
        let map = cur
            .as_object_mut()
            .ok_or("not an object (cannot happen: just made one)")?;
        if i + 1 == segments.len() {
            map.insert(seg, json!(replicas));
            return Ok(obj);
        }
        cur = map.entry(seg).or_insert_with(|| json!({}));
    }
    Err(format!(
        "unsupported specReplicasPath {}",
        scale.spec_replicas_path
    ))
}

/// The scale paths a CRD version declares (`subresources.scale`), if any.
pub(crate) fn from_crd_version(version: &Value) -> Option<ScaleSubresource> {
    let scale = version["subresources"].get("scale")?;
    Some(ScaleSubresource {
        spec_replicas_path: scale["specReplicasPath"].as_str()?.to_string(),
        status_replicas_path: scale["statusReplicasPath"].as_str()?.to_string(),
        label_selector_path: scale["labelSelectorPath"].as_str().map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployments() -> ResourceType {
        crate::resources::builtins()
            .into_iter()
            .find(|t| t.key() == "apps/deployments")
            .unwrap()
    }

    #[test]
    fn a_deployment_as_a_scale() {
        let d = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u",
                                    "resourceVersion": "7", "labels": {"x": "y"}},
                       "spec": {"replicas": 3, "selector": {
                           "matchLabels": {"app": "web"},
                           "matchExpressions": [
                               {"key": "tier", "operator": "In", "values": ["a", "b"]},
                               {"key": "canary", "operator": "DoesNotExist"}]}},
                       "status": {"replicas": 2}});
        let t = deployments();
        let scale = t.scale.clone().unwrap();
        assert_eq!(
            view(&t, &scale, &d),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
                   "spec": {"replicas": 3},
                   "status": {"replicas": 2, "selector": "app=web,tier in (a,b),!canary"}})
        );
        // No spec.replicas: the built-in default, 1; no status: 0 and no selector.
        let bare = json!({"metadata": {"name": "b"}, "spec": {}});
        let v = view(&t, &scale, &bare);
        assert_eq!(
            (&v["spec"], &v["status"]),
            (&json!({"replicas": 1}), &json!({"replicas": 0}))
        );
    }

    #[test]
    fn writes_set_only_the_spec_replicas() {
        let scale = ScaleSubresource {
            spec_replicas_path: ".spec.size".into(),
            status_replicas_path: ".status.size".into(),
            label_selector_path: None,
        };
        let obj = json!({"metadata": {"name": "w"}, "spec": {"colour": "red"}});
        assert_eq!(
            with_replicas(&scale, obj, 4).unwrap(),
            json!({"metadata": {"name": "w"}, "spec": {"colour": "red", "size": 4}})
        );
        assert_eq!(
            with_replicas(&scale, json!({"metadata": {}}), 2).unwrap()["spec"],
            json!({"size": 2})
        );
        let odd = ScaleSubresource {
            spec_replicas_path: ".spec.items[0]".into(),
            ..scale
        };
        assert!(with_replicas(&odd, json!({}), 1).is_err());
    }

    #[test]
    fn requested_replicas_are_checked() {
        assert_eq!(requested_replicas(&json!({"spec": {"replicas": 5}})), Ok(5));
        assert_eq!(requested_replicas(&json!({"spec": {}})), Ok(0));
        assert!(
            requested_replicas(&json!({"spec": {"replicas": -1}}))
                .unwrap_err()
                .contains("greater than or equal to 0")
        );
        assert!(requested_replicas(&json!({"spec": {"replicas": "3"}})).is_err());
    }

    #[test]
    fn crd_scale_paths() {
        let v = json!({"name": "v1", "subresources": {"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}}});
        let s = from_crd_version(&v).unwrap();
        assert_eq!(s.label_selector_path.as_deref(), Some(".status.selector"));
        assert!(from_crd_version(&json!({"name": "v1", "subresources": {"status": {}}})).is_none());
    }
}
