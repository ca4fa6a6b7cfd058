//! Deployment objects generated from code, so that `config/` and the embedded demo cannot drift
//! apart: the operator's RBAC (exactly the verbs it uses) and the webhook configurations.
//!
//! `nodepool-operator manifests --dir <config>` writes the generated files
//! (`crd/nodes.lailin.xyz_nodepools.yaml`, `rbac/role.yaml`, `rbac/leader_election_role.yaml`,
//! `webhook/manifests.yaml`); tests check that the committed files equal the generated ones.
//!
//! ## Why each permission
//! | resource | verbs | used for |
//! |---|---|---|
//! | `nodepools` | get, list, watch | the `For(NodePool)` watch and cache |
//! | `nodepools` | patch | adding and removing the finalizer (JSON patch) |
//! | `nodepools/status` | patch | writing status (merge patch) |
//! | `nodepools/finalizers` | update | setting `blockOwnerDeletion` on the RuntimeClass's owner reference (OwnerReferencesPermissionEnforcement) |
//! | `nodes` | list, watch | the Node watch and cache |
//! | `nodes` | get | re-reading a node after a failed guarded patch |
//! | `nodes` | patch | labels, taints and the applied record (JSON patch) |
//! | `runtimeclasses` | list, watch | the `Owns(RuntimeClass)` watch and cache |
//! | `runtimeclasses` | get, create, update, delete | create, repair in place, re-create when the immutable handler changes |
//! | `events.k8s.io events` | create, patch | kube-runtime's event recorder (patch for repeated events) |
//! | `leases` (namespaced Role) | get, create, update | leader election |
//!
//! `tests/rbac.rs` proves the table on a real API server (`KCR_ENVTEST_BACKEND=real`): the
//! operator's lifecycle (two replicas with leader election, create, spec change, node moves,
//! deletion, events) runs as the ServiceAccount bound only to these roles without a single
//! Forbidden, and with any one verb dropped, a scenario that needs it surfaces the API
//! server's Forbidden naming that verb. The `nodepools/finalizers` row is needed on clusters
//! that run the OwnerReferencesPermissionEnforcement admission plugin (kcr-envtest's real
//! backend does); elsewhere `blockOwnerDeletion` is not checked.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::crd::{GROUP, PLURAL, VERSION};
use crate::webhook::{MUTATE_PATH, VALIDATE_PATH};

/// Name of the operator's ClusterRole.
pub const CLUSTER_ROLE: &str = "nodepool-operator";
/// Name of the leader election Role.
pub const LEADER_ELECTION_ROLE: &str = "nodepool-operator-leader-election";
/// The namespace the operator is deployed to by `config/`.
pub const NAMESPACE: &str = "nodepool-system";
/// Name of the webhook Service in `config/`.
pub const WEBHOOK_SERVICE: &str = "nodepool-operator-webhook-service";
/// Name of the mutating webhook configuration.
pub const MUTATING_CONFIGURATION: &str = "nodepool-operator-mutating-webhook-configuration";
/// Name of the validating webhook configuration.
pub const VALIDATING_CONFIGURATION: &str = "nodepool-operator-validating-webhook-configuration";
/// Name of the mutating webhook.
pub const MUTATING_WEBHOOK: &str = "mnodepool.kb.io";
/// Name of the validating webhook.
pub const VALIDATING_WEBHOOK: &str = "vnodepool.kb.io";

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

/// The cluster-wide permissions of the operator.
pub fn cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(CLUSTER_ROLE.to_owned()),
            ..Default::default()
        },
        rules: Some(vec![
            rule(&[GROUP], &[PLURAL], &["get", "list", "watch", "patch"]),
            rule(&[GROUP], &["nodepools/status"], &["patch"]),
            rule(&[GROUP], &["nodepools/finalizers"], &["update"]),
            rule(&[""], &["nodes"], &["get", "list", "watch", "patch"]),
            rule(
                &["node.k8s.io"],
                &["runtimeclasses"],
                &["get", "list", "watch", "create", "update", "delete"],
            ),
            rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
        ]),
        aggregation_rule: None,
    }
}

/// The namespaced permissions of leader election.
pub fn leader_election_role() -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(LEADER_ELECTION_ROLE.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            ..Default::default()
        },
        rules: Some(vec![rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "create", "update"],
        )]),
    }
}

/// Where the API server reaches the webhook server.
#[derive(Debug, Clone)]
pub enum WebhookTarget {
    /// In a cluster: through a Service; the CA bundle is injected by cert-manager.
    Service {
        /// Service namespace.
        namespace: String,
        /// Service name.
        name: String,
    },
    /// Directly (the embedded API server): `https://host:port`, with the CA that signed the
    /// serving certificate.
    Url {
        /// Base URL, e.g. `https://127.0.0.1:9443`.
        base: String,
        /// PEM of the CA.
        ca_pem: String,
    },
}

impl WebhookTarget {
    fn client_config(&self, path: &str) -> WebhookClientConfig {
        match self {
            WebhookTarget::Service { namespace, name } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_owned()),
                    port: Some(443),
                }),
                ..Default::default()
            },
            WebhookTarget::Url { base, ca_pem } => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
                service: None,
            },
        }
    }

    fn annotations(&self) -> Option<BTreeMap<String, String>> {
        match self {
            WebhookTarget::Service { namespace, .. } => Some(
                [(
                    "cert-manager.io/inject-ca-from".to_owned(),
                    format!("{namespace}/nodepool-operator-serving-cert"),
                )]
                .into_iter()
                .collect(),
            ),
            WebhookTarget::Url { .. } => None,
        }
    }
}

fn rules() -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        api_groups: Some(vec![GROUP.to_owned()]),
        api_versions: Some(vec![VERSION.to_owned()]),
        operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
        resources: Some(vec![PLURAL.to_owned()]),
        scope: Some("Cluster".to_owned()),
    }]
}

/// The mutating and validating webhook configurations for `target`.
pub fn webhook_configurations(
    target: &WebhookTarget,
) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
    let metadata = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        annotations: target.annotations(),
        ..Default::default()
    };
    // One webhook of either kind: `MutatingWebhook` and `ValidatingWebhook` are two types with
    // the same fields, and both webhooks share every setting but their name and path.
    macro_rules! webhook {
        ($kind:ident, $name:expr, $path:expr) => {
            $kind {
                name: $name.to_owned(),
                admission_review_versions: vec!["v1".to_owned()],
                client_config: target.client_config($path),
                failure_policy: Some("Fail".to_owned()),
                side_effects: "None".to_owned(),
                timeout_seconds: Some(10),
                rules: Some(rules()),
                ..Default::default()
            }
        };
    }
    let mutating_webhook = webhook!(MutatingWebhook, MUTATING_WEBHOOK, MUTATE_PATH);
    let validating_webhook = webhook!(ValidatingWebhook, VALIDATING_WEBHOOK, VALIDATE_PATH);
    let mutating = MutatingWebhookConfiguration {
        metadata: metadata(MUTATING_CONFIGURATION),
        webhooks: Some(vec![mutating_webhook]),
    };
    let validating = ValidatingWebhookConfiguration {
        metadata: metadata(VALIDATING_CONFIGURATION),
        webhooks: Some(vec![validating_webhook]),
    };
    (mutating, validating)
}

/// Errors writing manifests.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// YAML rendering failed.
    #[error("rendering YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
    /// Writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// YAML documents joined with `---` lines (kinds differ, so not one `to_string_multiple`).
fn multi_doc(docs: &[String]) -> String {
    docs.join("---\n")
}

/// The generated files, as `(path relative to config/, contents)`.
///
/// k8s-openapi serialises `apiVersion` and `kind` first for its resource types, so each object
/// is written as it is.
pub fn generated_manifests() -> Result<Vec<(&'static str, String)>, serde_saphyr::SerializeError> {
    let (m, v) = webhook_configurations(&WebhookTarget::Service {
        namespace: NAMESPACE.to_owned(),
        name: WEBHOOK_SERVICE.to_owned(),
    });
    Ok(vec![
        (
            "crd/nodes.lailin.xyz_nodepools.yaml",
            crate::crd::crd_yaml()?,
        ),
        ("rbac/role.yaml", serde_saphyr::to_string(&cluster_role())?),
        (
            "rbac/leader_election_role.yaml",
            serde_saphyr::to_string(&leader_election_role())?,
        ),
        (
            "webhook/manifests.yaml",
            multi_doc(&[serde_saphyr::to_string(&m)?, serde_saphyr::to_string(&v)?]),
        ),
    ])
}

/// Writes [`generated_manifests`] under `dir`.
pub fn write_manifests(dir: &std::path::Path) -> Result<(), ManifestError> {
    for (rel, body) in generated_manifests()? {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ManifestError::Io {
                path: parent.to_owned(),
                source,
            })?;
        }
        std::fs::write(&path, body).map_err(|source| ManifestError::Io { path, source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_manifests_equal_the_generated_ones() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for (rel, want) in generated_manifests().unwrap() {
            let got = std::fs::read_to_string(dir.join(rel)).unwrap_or_default();
            assert!(
                got == want,
                "config/{rel} is stale: run `cargo run -p nodepool-operator -- manifests --dir nodepool-operator/config`"
            );
        }
    }

    #[test]
    fn rbac_has_exactly_the_used_verbs() {
        let role = cluster_role();
        let rules: Vec<(String, String, Vec<String>)> = role
            .rules
            .unwrap()
            .into_iter()
            .flat_map(|r| {
                let g = r.api_groups.unwrap()[0].clone();
                r.resources
                    .unwrap()
                    .into_iter()
                    .map(move |res| (g.clone(), res, r.verbs.clone()))
            })
            .collect();
        let find = |res: &str| {
            rules
                .iter()
                .find(|(_, r, _)| r == res)
                .map(|(_, _, v)| v.join(","))
                .unwrap()
        };
        assert_eq!(find("nodepools"), "get,list,watch,patch");
        assert_eq!(find("nodepools/status"), "patch");
        assert_eq!(find("nodepools/finalizers"), "update");
        assert_eq!(find("nodes"), "get,list,watch,patch");
        assert_eq!(
            find("runtimeclasses"),
            "get,list,watch,create,update,delete"
        );
        assert_eq!(find("events"), "create,patch");
        assert!(!rules.iter().any(|(_, _, v)| v.iter().any(|v| v == "*")));
        let le = leader_election_role().rules.unwrap();
        assert_eq!(le[0].resources.as_ref().unwrap()[0], "leases");
        assert_eq!(le[0].verbs, vec!["get", "create", "update"]);
    }

    #[test]
    fn webhook_configurations_for_url_and_service() {
        let (m, v) = webhook_configurations(&WebhookTarget::Url {
            base: "https://127.0.0.1:9443/".into(),
            ca_pem: "PEM".into(),
        });
        let mw = &m.webhooks.as_ref().unwrap()[0];
        assert_eq!(
            mw.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/mutate-nodes-lailin-xyz-v1-nodepool")
        );
        assert_eq!(mw.client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
        let vw = &v.webhooks.as_ref().unwrap()[0];
        assert_eq!(
            vw.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-nodes-lailin-xyz-v1-nodepool")
        );
        let r = &vw.rules.as_ref().unwrap()[0];
        assert_eq!(
            r.operations.as_ref().unwrap(),
            &vec!["CREATE".to_owned(), "UPDATE".to_owned()]
        );
        assert_eq!(r.resources.as_ref().unwrap(), &vec!["nodepools".to_owned()]);
        assert_eq!(vw.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(vw.side_effects, "None");

        let (m, _) = webhook_configurations(&WebhookTarget::Service {
            namespace: "ns".into(),
            name: "svc".into(),
        });
        let svc = m.webhooks.as_ref().unwrap()[0]
            .client_config
            .service
            .clone()
            .unwrap();
        assert_eq!(svc.namespace, "ns");
        assert_eq!(svc.path.as_deref(), Some(MUTATE_PATH));
        assert!(
            m.metadata
                .annotations
                .unwrap()
                .contains_key("cert-manager.io/inject-ca-from")
        );
    }
}
