//! The NodePool admission webhooks, on kcr-webhook: [`NodePoolDefaulter`] and
//! [`NodePoolValidator`], served by a [`WebhookServer`] (HTTPS, certificate reload, metrics)
//! that the [`Manager`](kcr_controller::Manager) runs on every replica ([`register`]).
//!
//! - `POST /mutate-nodes-lailin-xyz-v1-nodepool` ([`MUTATE_PATH`]): the defaults of
//!   [`crate::validation::defaults`]; kcr-webhook computes the JSON patch.
//! - `POST /validate-nodes-lailin-xyz-v1-nodepool` ([`VALIDATE_PATH`]): allows, or denies with
//!   every violation of [`crate::validation::validate`]: the message is the API server's usual
//!   `NodePool.nodes.lailin.xyz "x" is invalid: [...]` line, and the status carries code 422,
//!   reason `Invalid` and one cause per violation with its field path (as controller-runtime
//!   does when a validator returns an `Invalid` error).
//!
//! Updates of a pool that is being deleted are always allowed, so that the operator can release
//! its finalizer even from a pool created before the webhook existed; deletes are not sent to
//! the validator. A request body that is not an AdmissionReview gets a 400 from kcr-webhook
//! (never a panic, never a hang).

use kcr_webhook::{
    AdmissionError, AdmissionRequest, Defaulter, Denial, FieldCause, Validator, Warnings,
    WebhookError, WebhookServer,
};

use crate::crd::NodePool;
use crate::validation::{defaults, validate};

/// Path of the mutating (defaulting) webhook (kubebuilder's convention, as
/// [`kcr_webhook::mutate_path`] derives it).
pub const MUTATE_PATH: &str = "/mutate-nodes-lailin-xyz-v1-nodepool";
/// Path of the validating webhook.
pub const VALIDATE_PATH: &str = "/validate-nodes-lailin-xyz-v1-nodepool";
/// Default port of the webhook server.
pub const DEFAULT_PORT: u16 = 9443;

/// Defaults a pool: the pool label when it has no labels, the `runc` handler.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodePoolDefaulter;

impl Defaulter<NodePool> for NodePoolDefaulter {
    async fn default(
        &self,
        _req: &AdmissionRequest<NodePool>,
        pool: &mut NodePool,
    ) -> Result<(), AdmissionError> {
        let mut value = serde_json::to_value(&*pool).map_err(AdmissionError::internal)?;
        let ops = defaults(&value);
        if ops.is_empty() {
            return Ok(());
        }
        json_patch::patch(&mut value, &ops).map_err(AdmissionError::internal)?;
        *pool = serde_json::from_value(value).map_err(AdmissionError::internal)?;
        Ok(())
    }
}

/// Validates a pool on create and update ([`crate::validation::validate`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NodePoolValidator;

fn check(pool: &NodePool) -> Result<Warnings, AdmissionError> {
    let value = serde_json::to_value(pool).map_err(AdmissionError::internal)?;
    let errors = validate(&value);
    if errors.is_empty() {
        return Ok(Warnings::new());
    }
    Err(Denial::invalid(
        errors
            .iter()
            .map(|e| FieldCause::new(e.field.clone(), e.reason(), e.message()))
            .collect(),
    )
    .into())
}

impl Validator<NodePool> for NodePoolValidator {
    async fn validate_create(
        &self,
        _req: &AdmissionRequest<NodePool>,
        pool: &NodePool,
    ) -> Result<Warnings, AdmissionError> {
        check(pool)
    }

    async fn validate_update(
        &self,
        _req: &AdmissionRequest<NodePool>,
        _old: &NodePool,
        pool: &NodePool,
    ) -> Result<Warnings, AdmissionError> {
        if pool.metadata.deletion_timestamp.is_some() {
            return Ok(Warnings::new());
        }
        check(pool)
    }
}

/// Registers the defaulting and validating webhooks of NodePools on `server`; returns their
/// paths ([`MUTATE_PATH`], [`VALIDATE_PATH`]).
pub fn register(server: &WebhookServer) -> Result<Vec<String>, WebhookError> {
    server
        .webhook::<NodePool>()
        .defaulter(NodePoolDefaulter)
        .validator(NodePoolValidator)
        .complete()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn request(op: &str, object: &Value) -> AdmissionRequest<NodePool> {
        serde_json::from_value(json!({
            "uid": "u-1",
            "kind": {"group": "nodes.lailin.xyz", "version": "v1", "kind": "NodePool"},
            "resource": {"group": "nodes.lailin.xyz", "version": "v1", "resource": "nodepools"},
            "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
            "operation": op,
            "userInfo": {"username": "tester"},
            "object": object,
            "oldObject": null,
            "dryRun": false
        }))
        .unwrap()
    }

    fn pool(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})
    }

    fn typed(v: &Value) -> NodePool {
        serde_json::from_value(v.clone()).unwrap()
    }

    #[test]
    fn the_paths_follow_the_kubebuilder_convention() {
        assert_eq!(
            kcr_webhook::mutate_path("nodes.lailin.xyz", "v1", "NodePool"),
            MUTATE_PATH
        );
        assert_eq!(
            kcr_webhook::validate_path("nodes.lailin.xyz", "v1", "NodePool"),
            VALIDATE_PATH
        );
    }

    #[tokio::test]
    async fn defaulting_sets_the_pool_label_and_the_handler() {
        let obj = pool("w", json!({}));
        let mut p = typed(&obj);
        NodePoolDefaulter
            .default(&request("CREATE", &obj), &mut p)
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&p.metadata.labels).unwrap(),
            json!({"node-pool.lailin.xyz": "w"})
        );
        assert_eq!(p.spec.handler, "runc");
        // Nothing to default: unchanged.
        let mut full = pool("w", json!({"handler": "kata"}));
        full["metadata"]["labels"] = json!({"a": "b"});
        let before = typed(&full);
        let mut after = before.clone();
        NodePoolDefaulter
            .default(&request("UPDATE", &full), &mut after)
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&after).unwrap(),
            serde_json::to_value(&before).unwrap()
        );
    }

    #[tokio::test]
    async fn validation_allows_valid_and_denies_with_every_cause() {
        let ok = pool(
            "w",
            json!({"labels": {"node-pool.lailin.xyz/w": "1"}, "handler": "runc"}),
        );
        assert!(
            NodePoolValidator
                .validate_create(&request("CREATE", &ok), &typed(&ok))
                .await
                .is_ok()
        );
        let bad = pool(
            "w",
            json!({"labels": {"xxx": "1"}, "taints": [{"key": "", "effect": "NoSchedule"}], "handler": "runc"}),
        );
        let err = NodePoolValidator
            .validate_update(&request("UPDATE", &bad), &typed(&ok), &typed(&bad))
            .await
            .unwrap_err();
        let AdmissionError::Denied(denial) = err else {
            panic!("expected a denial, got {err}");
        };
        assert_eq!(denial.code, 422);
        assert_eq!(denial.reason, "Invalid");
        let causes: Vec<&str> = denial.causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(causes, vec!["spec.labels[xxx]", "spec.taints[0].key"]);
        assert!(
            denial.causes[1].message.starts_with("Required value"),
            "{:?}",
            denial.causes[1]
        );
    }

    #[tokio::test]
    async fn pools_being_deleted_are_allowed() {
        let invalid = pool("w", json!({"labels": {"xxx": "1"}, "handler": "runc"}));
        let mut deleting = invalid.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(
            NodePoolValidator
                .validate_update(
                    &request("UPDATE", &deleting),
                    &typed(&invalid),
                    &typed(&deleting)
                )
                .await
                .is_ok()
        );
        // Deletes are allowed whatever the pool holds (the validator's default).
        assert!(
            NodePoolValidator
                .validate_delete(&request("DELETE", &invalid), &typed(&invalid))
                .await
                .is_ok()
        );
    }
}
