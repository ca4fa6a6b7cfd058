//! Upstream's validation of a Service's spec that clients hit most (`ValidateService`): a
//! supported type; ports, unless the Service is headless or an ExternalName; each port named
//! (a DNS-1123 label, once; required when there are several), numbered, and with a target port
//! that is a port number or name. Causes as `(field, reason, message)`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::validate_pod::port_number_message;

type Cause = (String, String, String);

/// The Service types, sorted as upstream lists them.
const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

fn invalid(field: String, shown: &str, message: &str) -> Cause {
    (
        field,
        "FieldValueInvalid".into(),
        format!("Invalid value: {shown}: {message}"),
    )
}

/// The causes of a Service `obj` (defaults applied).
pub(crate) fn causes(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    let headless = spec["clusterIP"].as_str() == Some("None");
    let ports = spec["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ports.is_empty() && !headless && kind != "ExternalName" {
        causes.push((
            "spec.ports".into(),
            "FieldValueRequired".into(),
            "Required value".into(),
        ));
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = format!("spec.ports[{i}]");
        let name = port["name"].as_str().unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            causes.push((
                format!("{at}.name"),
                "FieldValueRequired".into(),
                "Required value".into(),
            ));
        } else if !name.is_empty() {
            for message in kcr_names::validate_dns1123_label(name) {
                causes.push(invalid(
                    format!("{at}.name"),
                    &format!("{name:?}"),
                    &message,
                ));
            }
            if !names.insert(name) {
                causes.push((
                    format!("{at}.name"),
                    "FieldValueDuplicate".into(),
                    format!("Duplicate value: {name:?}"),
                ));
            }
        }
        let number = port["port"].as_i64().unwrap_or(0);
        if let Some(message) = port_number_message(number) {
            causes.push(invalid(format!("{at}.port"), &number.to_string(), &message));
        }
        if let Some(target) = port["targetPort"].as_i64()
            && let Some(message) = port_number_message(target)
        {
            causes.push(invalid(
                format!("{at}.targetPort"),
                &target.to_string(),
                &message,
            ));
        }
    }
    if !TYPES.contains(&kind) {
        let supported: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
        causes.push((
            "spec.type".into(),
            "FieldValueNotSupported".into(),
            format!(
                "Unsupported value: {kind:?}: supported values: {}",
                supported.join(", ")
            ),
        ));
    }
    causes
}
