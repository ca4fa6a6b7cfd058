//! The exchanges, by area. Each function returns one [`Area`]; [`all`] lists them in the order
//! they run (CRDs are created in `crd_schema`, before the areas that use them).

use serde_json::{Value, json};

use crate::exchange::Area;

mod apply;
mod builtin_validation;
mod crd_schema;
mod crud;
mod deletion;
mod discovery;
mod errors;
mod generation;
mod kinds;
mod pagination;
mod patch;
mod resource_version;
mod selectors;
mod status;
mod watch;

/// Every area, in running order.
pub fn all() -> Vec<Area> {
    vec![
        discovery::area(),
        crud::area(),
        crd_schema::area(),
        status::area(),
        generation::area(),
        resource_version::area(),
        pagination::area(),
        selectors::area(),
        patch::area(),
        apply::area(),
        deletion::area(),
        watch::area(),
        errors::area(),
        kinds::area(),
        builtin_validation::area(),
    ]
}

/// The ConfigMaps of the area's namespace.
pub(crate) const CM: &str = "/api/v1/namespaces/{ns}/configmaps";
/// The namespaced CRD resource with a status subresource.
pub(crate) const WIDGETS: &str = "/apis/conf.kcr.dev/v1/namespaces/{ns}/widgets";
/// The namespaced CRD resource without a status subresource.
pub(crate) const GADGETS: &str = "/apis/conf.kcr.dev/v1/namespaces/{ns}/gadgets";
/// Deployments of the area's namespace.
pub(crate) const DEPLOY: &str = "/apis/apps/v1/namespaces/{ns}/deployments";

/// A ConfigMap named `name` with `data`.
pub(crate) fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// A ConfigMap named `name` with labels.
pub(crate) fn cm_labels(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

/// A Widget (status subresource) named `name`.
pub(crate) fn widget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "conf.kcr.dev/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": {"size": size, "color": "red"}})
}

/// A Gadget (no status subresource) named `name`.
pub(crate) fn gadget(name: &str) -> Value {
    json!({"apiVersion": "conf.kcr.dev/v1", "kind": "Gadget",
           "metadata": {"name": name}, "spec": {"size": 1}})
}

/// A minimal Deployment named `name` (fully specified, so defaulting has little to add).
pub(crate) fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}})
}

/// A Node named `name`.
pub(crate) fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"conf": "yes"}}})
}
