//! Conversion of custom resources between the versions of their CRD, as the real API server
//! does it: objects are stored in the storage version and converted to the version of each
//! request. `spec.conversion.strategy: None` (the default) rewrites only `apiVersion`;
//! `strategy: Webhook` POSTs an `apiextensions.k8s.io/v1` `ConversionReview` to
//! `spec.conversion.webhook.clientConfig.url` over HTTPS, trusting only its `caBundle` (the same
//! client as the admission webhooks, [`crate::admission`]), with upstream's fixed 30 second
//! timeout.
//!
//! Each object to convert is sent in its own review, as the real server converts the objects
//! it reads one by one. The response is checked as upstream checks it: the same `uid`,
//! `result.status: Success` (else the webhook's `result.message` is the error), one converted
//! object of the desired `apiVersion`, with the same kind, name, namespace and uid. Of the
//! converted metadata only labels and annotations are kept; the rest is the original's
//! (upstream's `restoreObjectMeta`).
//!
//! A failure is a 500 without a reason whose message is the real server's:
//! `conversion webhook for <group>/<version>, Kind=<Kind> failed: <webhook message or call
//! error>`, or `... returned invalid object: must have the same UID: <a> != <b>` (and the like)
//! when the converted object is wrong. Reads of a stored object wrap it as kube-apiserver 1.37's
//! storage errors do (`crate::api::conversion`).
//!
//! Not supported: `clientConfig.service` (no in-cluster services; such a conversion fails like
//! an unreachable webhook).

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resources::ResourceType;

/// How long the real API server waits for a conversion webhook (not configurable upstream).
const TIMEOUT: Duration = Duration::from_secs(30);

/// A CRD's `spec.conversion` with `strategy: Webhook`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConversion {
    /// `webhook.clientConfig.url`, when given (a `service` is not reachable in process).
    pub url: Option<String>,
    /// `webhook.clientConfig.caBundle` (base64 PEM).
    pub ca_bundle: Option<String>,
}

type Cause = (String, String, String);

/// The webhook conversion of a CRD's `spec`; `Ok(None)` for `strategy: None` or no
/// `conversion`. The causes name what is missing or wrong, as the real server's CRD validation.
pub fn from_crd_spec(spec: &Value) -> Result<Option<WebhookConversion>, Vec<Cause>> {
    let conversion = &spec["conversion"];
    match conversion["strategy"].as_str() {
        None | Some("None") => Ok(None),
        Some("Webhook") => {
            let webhook = &conversion["webhook"];
            let mut causes = Vec::new();
            if !webhook.is_object() {
                causes.push((
                    "spec.conversion.webhook".to_string(),
                    "FieldValueRequired".to_string(),
                    "Required value: required when strategy is set to Webhook".to_string(),
                ));
            } else if !webhook["clientConfig"].is_object() {
                causes.push((
                    "spec.conversion.webhook.clientConfig".to_string(),
                    "FieldValueRequired".to_string(),
                    "Required value: required when strategy is set to Webhook".to_string(),
                ));
            }
            let reviews = crate::json::strings(&webhook["conversionReviewVersions"]);
            if webhook.is_object() && !reviews.iter().any(|v| v == "v1" || v == "v1beta1") {
                causes.push((
                    "spec.conversion.webhook.conversionReviewVersions".to_string(),
                    "FieldValueInvalid".to_string(),
                    format!(
                        "Invalid value: {}: must include at least one of v1, v1beta1",
                        json!(reviews)
                    ),
                ));
            }
            if !causes.is_empty() {
                return Err(causes);
            }
            let config = &webhook["clientConfig"];
            Ok(Some(WebhookConversion {
                url: config["url"].as_str().map(str::to_string),
                ca_bundle: config["caBundle"].as_str().map(str::to_string),
            }))
        }
        Some(other) => Err(vec![(
            "spec.conversion.strategy".to_string(),
            "FieldValueNotSupported".to_string(),
            format!("Unsupported value: \"{other}\": supported values: \"None\", \"Webhook\""),
        )]),
    }
}

/// The webhook conversion of `t`, when its CRD has one.
pub fn webhook_of(t: &ResourceType) -> Option<&WebhookConversion> {
    t.custom.as_ref().and_then(|c| c.conversion.as_ref())
}

/// Whether `obj` must go through `t`'s conversion webhook to be served at `version`.
pub fn needs_webhook(t: &ResourceType, obj: &Value, version: &str) -> bool {
    webhook_of(t).is_some() && obj["apiVersion"].as_str() != Some(&t.api_version(version))
}

/// `group/version, Kind=Kind`, as Go prints a GroupVersionKind.
fn gvk(obj: &Value) -> String {
    format!(
        "{}, Kind={}",
        obj["apiVersion"].as_str().unwrap_or_default(),
        obj["kind"].as_str().unwrap_or_default()
    )
}

/// Converts `objects` (each in any version of `t`) to `version`. Objects already in it are
/// returned as they are; with `strategy: None` the others get the new `apiVersion`; with
/// `strategy: Webhook` each is sent in its own `ConversionReview`, in order, as the real
/// server converts the objects it reads one by one.
pub async fn convert(
    t: &ResourceType,
    mut objects: Vec<Value>,
    version: &str,
) -> Result<Vec<Value>, ApiError> {
    let desired = t.api_version(version);
    let hook = webhook_of(t);
    for obj in objects.iter_mut() {
        if obj["apiVersion"].as_str() == Some(desired.as_str()) {
            continue;
        }
        match hook {
            None => {
                if let Some(o) = obj.as_object_mut() {
                    o.insert("apiVersion".into(), json!(desired));
                }
            }
            Some(hook) => {
                let what = gvk(obj);
                let fail = |e: String| {
                    ApiError::new(500, "", format!("conversion webhook for {what} {e}"))
                };
                let mut converted = call(hook, std::slice::from_ref(obj), &desired)
                    .await
                    .map_err(fail)?;
                let new = converted
                    .pop()
                    .ok_or_else(|| fail("returned invalid response: no object".to_string()))?;
                *obj = checked(obj, new, &desired).map_err(fail)?;
            }
        }
    }
    Ok(objects)
}

/// A converted object checked against its original as upstream checks it, with the original
/// metadata but for the converted labels and annotations.
fn checked(original: &Value, mut new: Value, desired: &str) -> Result<Value, String> {
    let invalid = |detail: String| format!("returned invalid object: {detail}");
    let got = new["apiVersion"].as_str().unwrap_or_default();
    if got != desired {
        return Err(invalid(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        )));
    }
    let text = |v: &Value, field: &str| v[field].as_str().unwrap_or_default().to_string();
    let same = |field: &str, label: &str, a: &Value, b: &Value| {
        let (a, b) = (text(a, field), text(b, field));
        if a == b {
            Ok(())
        } else {
            Err(invalid(format!("must have the same {label}: {a} != {b}")))
        }
    };
    same("kind", "kind", original, &new)?;
    let (om, nm) = (&original["metadata"], &new["metadata"]);
    same("name", "name", om, nm)?;
    same("namespace", "namespace", om, nm)?;
    same("uid", "UID", om, nm)?;
    let Some(converted_meta) = new["metadata"].as_object().cloned() else {
        return Err(format!(
            "returned invalid metadata: invalid metadata of type {} in converted object",
            json_type(&new["metadata"])
        ));
    };
    new["metadata"] = restore_metadata(om, &converted_meta);
    Ok(new)
}

/// The original metadata with the converted labels and annotations.
fn restore_metadata(original: &Value, converted: &Map<String, Value>) -> Value {
    let mut meta = original.as_object().cloned().unwrap_or_default();
    for field in ["labels", "annotations"] {
        match converted.get(field) {
            Some(v) if !v.is_null() => {
                meta.insert(field.into(), v.clone());
            }
            _ => {
                meta.remove(field);
            }
        }
    }
    Value::Object(meta)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Sends one review and returns the converted objects; the error is the text after
/// `conversion webhook for <gvk> ` in upstream's messages.
async fn call(
    hook: &WebhookConversion,
    objects: &[Value],
    desired: &str,
) -> Result<Vec<Value>, String> {
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    });
    let url = hook
        .url
        .as_deref()
        .ok_or("failed: only clientConfig.url is supported (no in-cluster services)")?;
    let body = serde_json::to_vec(&review).map_err(|e| format!("failed: {e}"))?;
    let response = match tokio::time::timeout(
        TIMEOUT,
        crate::admission::client::post(url, hook.ca_bundle.as_deref(), body),
    )
    .await
    {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(format!("failed: Post {url:?}: {e}")),
        Err(_) => {
            return Err(format!(
                "failed: Post {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            ));
        }
    };
    converted_objects(&response, &uid, objects.len())
}

/// The converted objects of a `ConversionReview` response, checked as upstream's
/// `getConvertedObjectsFromResponse`; the error is the rest of the message after the kind.
fn converted_objects(review: &Value, uid: &str, sent: usize) -> Result<Vec<Value>, String> {
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| "returned invalid response: no response provided".to_string())?;
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(format!(
            "returned invalid response: expected response.uid=\"{uid}\", got \"{got}\""
        ));
    }
    let result = &response["result"];
    let status = result["status"].as_str().unwrap_or_default();
    if status != "Success" {
        return Err(match result["message"].as_str() {
            Some(m) if !m.is_empty() => format!("failed: {m}"),
            _ => format!("failed: response.result.status was '{status}', not 'Success'"),
        });
    }
    let objects = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if objects.len() != sent {
        return Err(format!(
            "returned {} objects, expected {sent}",
            objects.len()
        ));
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stanza_is_parsed_and_checked() {
        assert_eq!(from_crd_spec(&json!({})), Ok(None));
        assert_eq!(
            from_crd_spec(&json!({"conversion": {"strategy": "None"}})),
            Ok(None)
        );
        assert_eq!(
            from_crd_spec(&json!({"conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://127.0.0.1:1/convert", "caBundle": "Zm9v"}}}})),
            Ok(Some(WebhookConversion {
                url: Some("https://127.0.0.1:1/convert".into()),
                ca_bundle: Some("Zm9v".into()),
            }))
        );
        let missing = from_crd_spec(&json!({"conversion": {"strategy": "Webhook"}})).unwrap_err();
        assert_eq!(missing[0].0, "spec.conversion.webhook");
        let no_v1 = from_crd_spec(&json!({"conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v2"], "clientConfig": {"url": "https://x"}}}}))
        .unwrap_err();
        assert_eq!(
            no_v1[0].0,
            "spec.conversion.webhook.conversionReviewVersions"
        );
        let other = from_crd_spec(&json!({"conversion": {"strategy": "Magic"}})).unwrap_err();
        assert_eq!(other[0].1, "FieldValueNotSupported");
    }

    #[test]
    fn responses_are_checked_as_upstream() {
        let ok = json!({"response": {"uid": "u", "result": {"status": "Success"},
            "convertedObjects": [{"a": 1}]}});
        assert_eq!(
            converted_objects(&ok, "u", 1).unwrap(),
            vec![json!({"a": 1})]
        );
        assert_eq!(
            converted_objects(&ok, "other", 1).unwrap_err(),
            "returned invalid response: expected response.uid=\"other\", got \"u\""
        );
        assert_eq!(
            converted_objects(&ok, "u", 2).unwrap_err(),
            "returned 1 objects, expected 2"
        );
        let failed =
            json!({"response": {"uid": "u", "result": {"status": "Failure", "message": "no v3"}}});
        assert_eq!(
            converted_objects(&failed, "u", 1).unwrap_err(),
            "failed: no v3"
        );
        let bare = json!({"response": {"uid": "u", "result": {"status": "Failure"}}});
        assert_eq!(
            converted_objects(&bare, "u", 1).unwrap_err(),
            "failed: response.result.status was 'Failure', not 'Success'"
        );
        assert_eq!(
            converted_objects(&json!({}), "u", 1).unwrap_err(),
            "returned invalid response: no response provided"
        );
    }

    #[test]
    fn converted_objects_keep_kind_name_namespace_and_uid() {
        let original = json!({"apiVersion": "g/v1", "kind": "W",
            "metadata": {"name": "a", "namespace": "n", "uid": "1", "labels": {"x": "1"}}});
        let mut good = original.clone();
        good["apiVersion"] = json!("g/v2");
        good["metadata"]["labels"] = json!({"y": "2"});
        good["metadata"]["resourceVersion"] = json!("99");
        let out = checked(&original, good, "g/v2").unwrap();
        assert_eq!(
            out["metadata"],
            json!({"name": "a", "namespace": "n", "uid": "1", "labels": {"y": "2"}})
        );
        let mut uid = original.clone();
        uid["apiVersion"] = json!("g/v2");
        uid["metadata"]["uid"] = json!("2");
        assert_eq!(
            checked(&original, uid, "g/v2").unwrap_err(),
            "returned invalid object: must have the same UID: 1 != 2"
        );
        assert_eq!(
            checked(&original, original.clone(), "g/v2").unwrap_err(),
            "returned invalid object: invalid groupVersion (expected g/v2, received g/v1)"
        );
        let mut kind = original.clone();
        kind["apiVersion"] = json!("g/v2");
        kind["kind"] = json!("X");
        assert_eq!(
            checked(&original, kind, "g/v2").unwrap_err(),
            "returned invalid object: must have the same kind: W != X"
        );
    }

    #[test]
    fn only_labels_and_annotations_of_the_converted_metadata_are_kept() {
        let original = json!({"name": "a", "uid": "1", "labels": {"x": "1"}});
        let converted = json!({"name": "b", "uid": "2", "annotations": {"y": "2"}});
        assert_eq!(
            restore_metadata(&original, converted.as_object().unwrap()),
            json!({"name": "a", "uid": "1", "annotations": {"y": "2"}})
        );
    }

    #[tokio::test]
    async fn strategy_none_rewrites_the_api_version_and_an_unreachable_webhook_is_a_500() {
        let crd = |conversion: Value| {
            crate::resources::from_crd(&json!({
                "metadata": {"name": "ws.example.dev"},
                "spec": {"group": "example.dev", "scope": "Namespaced",
                    "names": {"plural": "ws", "kind": "W"},
                    "versions": [{"name": "v1", "served": true, "storage": true},
                                 {"name": "v2", "served": true, "storage": false}],
                    "conversion": conversion}
            }))
            .unwrap()
        };
        let obj = json!({"apiVersion": "example.dev/v1", "kind": "W", "metadata": {"name": "a"}, "spec": {"n": 1}});
        let none = crd(json!({"strategy": "None"}));
        assert!(!needs_webhook(&none, &obj, "v2"));
        let out = convert(&none, vec![obj.clone()], "v2").await.unwrap();
        assert_eq!(out[0]["apiVersion"], "example.dev/v2");
        assert_eq!(out[0]["spec"], obj["spec"]);
        let hook = crd(
            json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/convert", "caBundle": "Zm9v"}}}),
        );
        assert!(needs_webhook(&hook, &obj, "v2"));
        assert!(!needs_webhook(&hook, &obj, "v1"));
        // Already in the desired version: no call.
        assert_eq!(
            convert(&hook, vec![obj.clone()], "v1").await.unwrap(),
            vec![obj.clone()]
        );
        let err = convert(&hook, vec![obj], "v2").await.unwrap_err();
        assert_eq!(err.code, 500);
        assert!(
            err.message
                .starts_with("conversion webhook for example.dev/v1, Kind=W failed: Post \"https://127.0.0.1:1/convert\": "),
            "{}",
            err.message
        );
    }
}
