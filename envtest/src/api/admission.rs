//! Wiring of the [`crate::admission`] module into the REST handlers: finds the webhook
//! configurations stored in the server and, for each write, runs the matching mutating
//! webhooks, then the object's own validation (metadata and CRD schema), then the matching
//! validating webhooks, in the real API server's order.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Shared;
use super::decode::decode_builtin;
use super::route::Route;
use super::validate::validate;
use crate::admission::{
    AdmissionError, Attributes, Operation, UserInfo, run_mutating, run_validating,
};
use crate::error::ApiError;

const MUTATING: &str = "admissionregistration.k8s.io/mutatingwebhookconfigurations";
const VALIDATING: &str = "admissionregistration.k8s.io/validatingwebhookconfigurations";

fn configurations(shared: &Shared, resource: &str) -> Vec<Value> {
    shared
        .store
        .lock()
        .range(resource, None, None)
        .map(|(_, o)| o.value.clone())
        .collect()
}

fn to_api_error(e: AdmissionError) -> ApiError {
    let code = e.status_code();
    let mut err = ApiError::new(code, &e.status_reason(), e.to_string());
    if err.reason.is_empty() {
        err.reason = ApiError::from_code(code, "").reason;
    }
    if let AdmissionError::Denied {
        details: Some(details),
        ..
    } = e
    {
        err.details = Some(details);
    }
    err
}

/// Admission of one request. `operation` is `CREATE`, `UPDATE` or `DELETE`; `object` is the
/// new object (for DELETE: the current one, which is neither mutated nor validated).
/// Returns the object to store.
pub(crate) async fn admit(
    shared: &Arc<Shared>,
    route: &Route,
    operation: &str,
    old: Option<&Value>,
    object: Value,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let op = match operation {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        _ => Operation::Delete,
    };
    let (mutating, validating) = {
        let store = shared.store.lock();
        (store.count(MUTATING) > 0, store.count(VALIDATING) > 0)
    };
    let mut object = object;
    if op != Operation::Delete {
        crate::defaults::apply(&route.t, old, &mut object);
        if op == Operation::Create && route.subresource.is_none() {
            crate::defaults::admit_create(&route.t, &mut object);
        }
        if let (Operation::Update, None, Some(old)) = (op, &route.subresource, old) {
            crate::defaults::admit_update(&route.t, old, &mut object);
        }
        decode_builtin(route, &mut object)?;
    }
    if !mutating && !validating {
        if op != Operation::Delete {
            validate(route, operation, old, &mut object)?;
        }
        return Ok(object);
    }
    let t = &route.t;
    let namespace = t
        .namespaced
        .then(|| route.namespace.clone().unwrap_or_default());
    let namespace_labels = namespace.as_ref().and_then(|ns| {
        shared
            .store
            .lock()
            .get("namespaces", "", ns)
            .map(|n| crate::selector::labels_of(&n.value))
    });
    let attrs = Attributes {
        group: t.group.clone(),
        version: route.version.clone(),
        resource: t.plural.clone(),
        subresource: route.subresource.clone().unwrap_or_default(),
        kind: t.kind.clone(),
        operation: op,
        namespace,
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        user: UserInfo {
            username: "system:admin".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        },
        dry_run,
        namespace_labels,
    };
    let mut out_version = object.clone();
    // Webhooks see the object in the version of the request.
    out_version["apiVersion"] = json!(t.api_version(&route.version));
    let old_versioned = old.map(|o| {
        let mut o = o.clone();
        o["apiVersion"] = json!(t.api_version(&route.version));
        o
    });
    if op == Operation::Delete {
        if validating {
            run_validating(
                &configurations(shared, VALIDATING),
                &attrs,
                None,
                old_versioned.as_ref(),
            )
            .await
            .map_err(to_api_error)?;
        }
        return Ok(object);
    }
    let mut object = if mutating {
        let admitted = run_mutating(
            &configurations(shared, MUTATING),
            &attrs,
            Some(out_version),
            old_versioned.as_ref(),
        )
        .await
        .map_err(to_api_error)?;
        for w in admitted.warnings {
            route.warn(w);
        }
        admitted.object.unwrap_or(object)
    } else {
        object
    };
    object["apiVersion"] = json!(t.api_version(&route.version));
    validate(route, operation, old, &mut object)?;
    if validating {
        let admitted = run_validating(
            &configurations(shared, VALIDATING),
            &attrs,
            Some(&object),
            old_versioned.as_ref(),
        )
        .await
        .map_err(to_api_error)?;
        for w in admitted.warnings {
            route.warn(w);
        }
    }
    Ok(object)
}
