//! The `NodePool` custom resource (`nodes.lailin.xyz/v1`), derived with kube-derive and schemars.
//!
//! A `NodePool` is cluster-scoped (a cluster-scoped RuntimeClass cannot have a namespaced owner).
//! Its spec lists the labels and taints every member node must carry and the handler of the pool's
//! RuntimeClass; its status (written through the status subresource) reports the member count,
//! the summed allocatable resources and a `Ready` condition.
//!
//! [`crd_yaml`] renders the CustomResourceDefinition that `nodepool-operator crd` prints and that
//! `config/crd/nodes.lailin.xyz_nodepools.yaml` holds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the NodePool resource.
pub const GROUP: &str = "nodes.lailin.xyz";
/// API version of the NodePool resource.
pub const VERSION: &str = "v1";
/// Kind of the NodePool resource.
pub const KIND: &str = "NodePool";
/// Plural resource name (`nodepools`).
pub const PLURAL: &str = "nodepools";
/// The handler a pool's RuntimeClass gets when the spec names none.
pub const DEFAULT_HANDLER: &str = "runc";
/// The finalizer that keeps a pool until its nodes are cleaned.
pub const FINALIZER: &str = "node.finalizers.node-pool.lailin.xyz";
/// The label and taint key prefix that pools may use (`node-pool.lailin.xyz` or
/// `node-pool.lailin.xyz/<name>`).
pub const POOL_KEY_DOMAIN: &str = "node-pool.lailin.xyz";
/// Prefix of the label key that makes a node a member of a pool:
/// `node-role.kubernetes.io/<pool>`.
pub const MEMBERSHIP_LABEL_PREFIX: &str = "node-role.kubernetes.io/";
/// `status.status` value written after a successful reconcile (kept from the original's
/// printer column).
pub const STATUS_OK: i32 = 200;
/// The type of the pool's readiness condition.
pub const READY_CONDITION: &str = "Ready";

/// Desired state of a pool of nodes.
// Two printer columns legitimately share `type_ = "integer"`; clippy reads that as a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    group = "nodes.lailin.xyz",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    shortname = "np",
    status = "NodePoolStatus",
    derive = "PartialEq",
    doc = "A pool of nodes: every member node (label key node-role.kubernetes.io/<pool>) carries the pool's labels and taints, and a RuntimeClass node-pool-<pool> schedules pods onto the pool.",
    printcolumn(name = "Status", type_ = "integer", json_path = ".status.status"),
    printcolumn(name = "NodeCount", type_ = "integer", json_path = ".status.nodeCount"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// Labels every member node must carry. Keys are `node-pool.lailin.xyz` or
    /// `node-pool.lailin.xyz/<name>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints every member node must carry (identified by key and effect).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// The handler of the pool's RuntimeClass; defaulted to `runc` by the mutating webhook.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub handler: String,
}

impl NodePoolSpec {
    /// The RuntimeClass handler, with the default applied when the spec leaves it empty.
    pub fn effective_handler(&self) -> &str {
        if self.handler.is_empty() {
            DEFAULT_HANDLER
        } else {
            &self.handler
        }
    }
}

/// Observed state of a pool.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// 200 when the last reconcile succeeded, another HTTP-like code when it failed.
    #[serde(default)]
    pub status: i32,
    /// Number of member nodes.
    #[serde(default)]
    pub node_count: i32,
    /// Per-resource sum of the members' `status.allocatable`.
    #[serde(default)]
    pub allocatable: BTreeMap<String, Quantity>,
    /// Conditions; the operator maintains `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl NodePoolStatus {
    /// The `Ready` condition, if present.
    pub fn ready_condition(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == READY_CONDITION)
    }
}

/// The label key that makes a node a member of `pool`.
pub fn membership_label(pool: &str) -> String {
    format!("{MEMBERSHIP_LABEL_PREFIX}{pool}")
}

/// The pools a node belongs to, from its labels: every `node-role.kubernetes.io/<pool>` key with a
/// non-empty `<pool>` part.
pub fn pools_of_labels(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels
        .keys()
        .filter_map(|k| k.strip_prefix(MEMBERSHIP_LABEL_PREFIX))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The name of the RuntimeClass that belongs to `pool`.
pub fn runtime_class_name(pool: &str) -> String {
    format!("node-pool-{pool}")
}

/// The CustomResourceDefinition of `NodePool`, as YAML (what `nodepool-operator crd` prints).
pub fn crd_yaml() -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(&NodePool::crd())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    fn crd() -> CustomResourceDefinition {
        NodePool::crd()
    }

    #[test]
    fn crd_names_scope_and_subresource() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("nodepools.nodes.lailin.xyz")
        );
        assert_eq!(crd.spec.group, GROUP);
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, KIND);
        assert_eq!(crd.spec.names.plural, PLURAL);
        assert_eq!(crd.spec.names.singular.as_deref(), Some("nodepool"));
        assert_eq!(crd.spec.names.short_names, Some(vec!["np".to_owned()]));
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, VERSION);
        assert!(v.served && v.storage);
        let sub = v.subresources.as_ref().expect("subresources");
        assert!(sub.status.is_some());
        assert!(sub.scale.is_none());
    }

    #[test]
    fn crd_printer_columns() {
        let crd = crd();
        let cols = crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .expect("columns");
        let got: Vec<(&str, &str, &str)> = cols
            .iter()
            .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("Status", "integer", ".status.status"),
                ("NodeCount", "integer", ".status.nodeCount"),
                (
                    "Ready",
                    "string",
                    ".status.conditions[?(@.type==\"Ready\")].status"
                ),
                ("Age", "date", ".metadata.creationTimestamp"),
            ]
        );
    }

    #[test]
    fn crd_schema_has_spec_fields_and_taint_shape() {
        let crd = crd();
        let schema = serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema"),
        )
        .unwrap();
        let spec = &schema["properties"]["spec"]["properties"];
        assert_eq!(spec["labels"]["type"], "object");
        assert_eq!(spec["labels"]["additionalProperties"]["type"], "string");
        assert_eq!(spec["handler"]["type"], "string");
        assert_eq!(spec["taints"]["type"], "array");
        let taint = &spec["taints"]["items"];
        assert_eq!(taint["properties"]["key"]["type"], "string");
        assert_eq!(taint["properties"]["effect"]["type"], "string");
        let status = &schema["properties"]["status"]["properties"];
        assert_eq!(status["status"]["type"], "integer");
        assert_eq!(status["nodeCount"]["type"], "integer");
        assert_eq!(status["allocatable"]["type"], "object");
        assert_eq!(status["conditions"]["type"], "array");
        // A structural schema: no $ref left anywhere.
        assert!(!schema.to_string().contains("$ref"));
    }

    #[test]
    fn sample_from_the_spec_deserializes() {
        let yaml = r#"
apiVersion: nodes.lailin.xyz/v1
kind: NodePool
metadata: {name: worker}
spec:
  labels: {"node-pool.lailin.xyz/worker": "10"}
  taints: [{key: node-pool.lailin.xyz, value: worker, effect: NoSchedule}]
  handler: runc
"#;
        let pool: NodePool = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(pool.metadata.name.as_deref(), Some("worker"));
        assert_eq!(pool.spec.labels["node-pool.lailin.xyz/worker"], "10");
        assert_eq!(pool.spec.taints[0].key, "node-pool.lailin.xyz");
        assert_eq!(pool.spec.taints[0].value.as_deref(), Some("worker"));
        assert_eq!(pool.spec.taints[0].effect, "NoSchedule");
        assert_eq!(pool.spec.effective_handler(), "runc");
        assert!(pool.status.is_none());
    }

    #[test]
    fn status_serializes_zero_count_and_empty_allocatable() {
        // A pool whose nodes all left must overwrite a stale count with 0.
        let status = NodePoolStatus {
            status: 200,
            ..Default::default()
        };
        let v = serde_json::to_value(&status).unwrap();
        assert_eq!(v["nodeCount"], 0);
        assert_eq!(v["allocatable"], serde_json::json!({}));
        assert!(v.get("observedGeneration").is_none());
    }

    #[test]
    fn effective_handler_defaults_to_runc() {
        let mut spec = NodePoolSpec::default();
        assert_eq!(spec.effective_handler(), "runc");
        spec.handler = "kata".into();
        assert_eq!(spec.effective_handler(), "kata");
    }

    #[test]
    fn membership_helpers() {
        assert_eq!(membership_label("gpu"), "node-role.kubernetes.io/gpu");
        assert_eq!(runtime_class_name("gpu"), "node-pool-gpu");
        let labels: BTreeMap<String, String> = [
            ("node-role.kubernetes.io/a", ""),
            ("node-role.kubernetes.io/b", "x"),
            ("node-role.kubernetes.io/", ""),
            ("kubernetes.io/hostname", "n1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(pools_of_labels(&labels), vec!["a", "b"]);
    }

    #[test]
    fn committed_crd_file_equals_the_generated_one() {
        let committed = include_str!("../config/crd/nodes.lailin.xyz_nodepools.yaml");
        assert!(
            committed == crd_yaml().unwrap(),
            "config/crd is stale: regenerate it with `cargo run -p nodepool-operator -- crd > \
             nodepool-operator/config/crd/nodes.lailin.xyz_nodepools.yaml`"
        );
    }

    #[test]
    fn crd_yaml_round_trips() {
        let yaml = crd_yaml().unwrap();
        let back: CustomResourceDefinition = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, crd());
    }
}
