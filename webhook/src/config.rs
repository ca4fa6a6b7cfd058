//! Paths by the kubebuilder convention, and the API objects that point the API server at the
//! webhooks: MutatingWebhookConfiguration and ValidatingWebhookConfiguration for the admission
//! webhooks registered, and a CRD's `spec.conversion` stanza.
//!
//! The API server reaches a webhook through a [`ClientTarget`]: a Service in the cluster
//! (`https://<name>.<namespace>.svc:<port><path>`) or a URL (`https://127.0.0.1:9443<path>`
//! for a local run or a test), and checks its certificate against the `caBundle`.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1 as ar;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::endpoint::CONVERT_PATH;

/// `/mutate-<group with dots as dashes>-<version>-<lowercase kind>` (controller-runtime's
/// path; the core group gives `/mutate--v1-pod`).
pub fn mutate_path(group: &str, version: &str, kind: &str) -> String {
    format!(
        "/mutate-{}-{version}-{}",
        group.replace('.', "-"),
        kind.to_lowercase()
    )
}

/// `/validate-<group with dots as dashes>-<version>-<lowercase kind>`.
pub fn validate_path(group: &str, version: &str, kind: &str) -> String {
    format!(
        "/validate-{}-{version}-{}",
        group.replace('.', "-"),
        kind.to_lowercase()
    )
}

/// Mutating or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookType {
    /// A defaulting webhook.
    Mutating,
    /// A validating webhook.
    Validating,
}

/// What the API server does when the webhook cannot be called or does not answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Refuse the request (the default).
    #[default]
    Fail,
    /// Let the request through.
    Ignore,
}

impl FailurePolicy {
    /// `Fail` or `Ignore`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// One admission webhook registered on a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRegistration {
    /// Mutating or validating.
    pub webhook_type: WebhookType,
    /// The path served.
    pub path: String,
    /// API group of the resource (empty for core).
    pub group: String,
    /// Version of the resource.
    pub version: String,
    /// Kind of the resource.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Operations (`CREATE`, `UPDATE`, `DELETE`).
    pub operations: Vec<String>,
    /// Failure policy.
    pub failure_policy: FailurePolicy,
    /// Timeout the API server applies (1 to 30 s).
    pub timeout_seconds: i32,
}

impl WebhookRegistration {
    /// The webhook's name in a configuration: `m<kind>.<group>` or `v<kind>.<group>`, with
    /// `.kcr.dev` appended when the group has no dot (the API server wants a domain of at least
    /// three labels).
    pub fn webhook_name(&self) -> String {
        let prefix = match self.webhook_type {
            WebhookType::Mutating => "m",
            WebhookType::Validating => "v",
        };
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let mut name = format!(
            "{prefix}{}-{}.{group}",
            self.kind.to_lowercase(),
            self.version
        );
        if !group.contains('.') {
            name.push_str(".kcr.dev");
        }
        name
    }
}

/// Where the API server reaches the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientTarget {
    /// A Service in the cluster.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port (the API server's default is 443).
        port: Option<i32>,
    },
    /// A base URL, `https://host:port` (the path is appended).
    Url {
        /// The base URL without a trailing slash.
        base: String,
    },
}

impl ClientTarget {
    /// A URL target on `https://<addr>`.
    pub fn url_for(addr: std::net::SocketAddr) -> Self {
        ClientTarget::Url {
            base: format!("https://{addr}"),
        }
    }
}

/// The `WebhookClientConfig` of the API module `$api` (`ar` and `ext` have the same one) that
/// calls `$path` on the [`ClientTarget`] `$target`, with `$ca_bundle` as its `caBundle`.
macro_rules! client_config {
    ($api:ident, $target:expr, $path:expr, $ca_bundle:expr) => {{
        let ca_bundle = Some(ByteString($ca_bundle.to_vec()));
        match $target {
            ClientTarget::Service {
                namespace,
                name,
                port,
            } => $api::WebhookClientConfig {
                ca_bundle,
                service: Some($api::ServiceReference {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    path: Some($path.to_string()),
                    port: *port,
                }),
                url: None,
            },
            ClientTarget::Url { base } => $api::WebhookClientConfig {
                ca_bundle,
                service: None,
                url: Some(format!("{}{}", base.trim_end_matches('/'), $path)),
            },
        }
    }};
}

/// The `$kind` (`MutatingWebhook` or `ValidatingWebhook`, which have the same fields) of the
/// registration `$r`.
macro_rules! webhook {
    ($kind:ident, $r:expr, $target:expr, $ca_bundle:expr) => {{
        let r: &WebhookRegistration = $r;
        ar::$kind {
            admission_review_versions: vec!["v1".to_string()],
            client_config: client_config!(ar, $target, &r.path, $ca_bundle),
            failure_policy: Some(r.failure_policy.as_str().to_string()),
            name: r.webhook_name(),
            rules: Some(vec![ar::RuleWithOperations {
                api_groups: Some(vec![r.group.clone()]),
                api_versions: Some(vec![r.version.clone()]),
                operations: Some(r.operations.clone()),
                resources: Some(vec![r.plural.clone()]),
                scope: Some("*".to_string()),
            }]),
            side_effects: "None".to_string(),
            timeout_seconds: Some(r.timeout_seconds),
            ..ar::$kind::default()
        }
    }};
}

/// The MutatingWebhookConfiguration and ValidatingWebhookConfiguration named `name` for
/// `registrations` (either may list no webhooks). `ca_bundle` is the PEM of the CA that signed
/// the serving certificate. Every webhook has `sideEffects: None` and
/// `admissionReviewVersions: [v1]`.
pub fn webhook_configurations(
    name: &str,
    registrations: &[WebhookRegistration],
    target: &ClientTarget,
    ca_bundle: &[u8],
) -> (
    ar::MutatingWebhookConfiguration,
    ar::ValidatingWebhookConfiguration,
) {
    let meta = ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    };
    let mutating = registrations
        .iter()
        .filter(|r| r.webhook_type == WebhookType::Mutating)
        .map(|r| webhook!(MutatingWebhook, r, target, ca_bundle))
        .collect::<Vec<_>>();
    let validating = registrations
        .iter()
        .filter(|r| r.webhook_type == WebhookType::Validating)
        .map(|r| webhook!(ValidatingWebhook, r, target, ca_bundle))
        .collect::<Vec<_>>();
    (
        ar::MutatingWebhookConfiguration {
            metadata: meta.clone(),
            webhooks: Some(mutating),
        },
        ar::ValidatingWebhookConfiguration {
            metadata: meta,
            webhooks: Some(validating),
        },
    )
}

/// A CRD's `spec.conversion`: strategy `Webhook` calling [`CONVERT_PATH`] on `target`, with
/// `caBundle` and `conversionReviewVersions: [v1]`.
pub fn crd_conversion(target: &ClientTarget, ca_bundle: &[u8]) -> ext::CustomResourceConversion {
    let client_config = client_config!(ext, target, CONVERT_PATH, ca_bundle);
    ext::CustomResourceConversion {
        strategy: "Webhook".to_string(),
        webhook: Some(ext::WebhookConversion {
            client_config: Some(client_config),
            conversion_review_versions: vec!["v1".to_string()],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_follow_kubebuilder() {
        assert_eq!(
            mutate_path("batch.tutorial.kubebuilder.io", "v1", "CronJob"),
            "/mutate-batch-tutorial-kubebuilder-io-v1-cronjob"
        );
        assert_eq!(validate_path("", "v1", "Pod"), "/validate--v1-pod");
    }

    fn reg(t: WebhookType, group: &str) -> WebhookRegistration {
        WebhookRegistration {
            webhook_type: t,
            path: mutate_path(group, "v1", "Widget"),
            group: group.into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            operations: vec!["CREATE".into(), "UPDATE".into()],
            failure_policy: FailurePolicy::Ignore,
            timeout_seconds: 5,
        }
    }

    #[test]
    fn configurations_by_service_and_url() {
        let regs = [
            reg(WebhookType::Mutating, "example.kcr.dev"),
            reg(WebhookType::Validating, "apps"),
        ];
        let svc = ClientTarget::Service {
            namespace: "ns".into(),
            name: "hooks".into(),
            port: Some(9443),
        };
        let (m, v) = webhook_configurations("cfg", &regs, &svc, b"PEM");
        let m = serde_json::to_value(&m).unwrap();
        assert_eq!(m["metadata"]["name"], "cfg");
        let w = &m["webhooks"][0];
        assert_eq!(w["name"], "mwidget-v1.example.kcr.dev");
        assert_eq!(
            w["clientConfig"]["service"],
            json!({"name": "hooks", "namespace": "ns", "path": "/mutate-example-kcr-dev-v1-widget", "port": 9443})
        );
        assert_eq!(w["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(w["failurePolicy"], "Ignore");
        assert_eq!(w["sideEffects"], "None");
        assert_eq!(w["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(
            w["rules"][0],
            json!({"apiGroups": ["example.kcr.dev"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"], "scope": "*"})
        );
        let v = serde_json::to_value(&v).unwrap();
        assert_eq!(v["webhooks"].as_array().unwrap().len(), 1);
        assert_eq!(v["webhooks"][0]["name"], "vwidget-v1.apps.kcr.dev");

        let url = ClientTarget::url_for("127.0.0.1:9443".parse().unwrap());
        let (m, _) = webhook_configurations("cfg", &regs, &url, b"PEM");
        assert_eq!(
            m.webhooks.unwrap()[0].client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/mutate-example-kcr-dev-v1-widget")
        );
    }

    #[test]
    fn conversion_stanza() {
        let c = crd_conversion(
            &ClientTarget::Url {
                base: "https://127.0.0.1:1/".into(),
            },
            b"CA",
        );
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"strategy": "Webhook", "webhook": {"clientConfig": {"caBundle": "Q0E=", "url": "https://127.0.0.1:1/convert"}, "conversionReviewVersions": ["v1"]}})
        );
    }
}
