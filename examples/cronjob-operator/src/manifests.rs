//! The names the deployment in `config/` uses, and the files of `config/` that are generated
//! from the code, as kubebuilder's `make manifests` generates them with controller-gen:
//!
//! - `config/crd/bases/batch.example.kcr.dev_cronjobs.yaml`: [`crd_yaml`], the
//!   CustomResourceDefinition `kube::CustomResource` derives from [`CronJob`];
//! - `config/webhook/manifests.yaml`: [`webhook_manifests_yaml`], the
//!   MutatingWebhookConfiguration and ValidatingWebhookConfiguration of the webhooks that
//!   [`webhook::register`](crate::webhook::register) registers, pointing at the webhook
//!   Service, with cert-manager's CA injection annotation instead of a `caBundle`.
//!
//! The test `tests/config.rs` fails when a file differs from what the code generates; run it
//! with `CRONJOB_UPDATE_CONFIG=1` to rewrite them.

use std::net::SocketAddr;

use k8s_openapi::api::admissionregistration::v1 as ar;
use kcr_webhook::{ClientTarget, ServerOptions, WebhookError, WebhookServer};
use kube::CustomResourceExt;

use crate::api::CronJob;

/// The namespace the operator is deployed in (kubebuilder's `<project>-system`).
pub const NAMESPACE: &str = "cronjob-operator-system";
/// The Lease the replicas elect a leader on, in the operator's namespace (`$POD_NAMESPACE`).
pub const LEADER_ELECTION_ID: &str = "cronjob-operator";
/// The operator's ServiceAccount.
pub const SERVICE_ACCOUNT: &str = "cronjob-operator-controller-manager";
/// The Service in front of the webhook server.
pub const WEBHOOK_SERVICE: &str = "cronjob-operator-webhook-service";
/// The cert-manager Certificate of the webhook server, whose CA cert-manager injects into the
/// webhook configurations.
pub const SERVING_CERTIFICATE: &str = "cronjob-operator-serving-cert";
/// The MutatingWebhookConfiguration.
pub const MUTATING_CONFIGURATION: &str = "cronjob-operator-mutating-webhook-configuration";
/// The ValidatingWebhookConfiguration.
pub const VALIDATING_CONFIGURATION: &str = "cronjob-operator-validating-webhook-configuration";
/// cert-manager's annotation: inject the CA of the Certificate `<namespace>/<name>`.
pub const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";
/// The first line of every generated file.
pub const GENERATED_HEADER: &str = "# Generated from the Rust code by cronjob_operator::manifests; do not edit.\n\
     # CRONJOB_UPDATE_CONFIG=1 cargo test --test config rewrites it.\n";

/// The CustomResourceDefinition of [`CronJob`], as YAML (what `cronjob-operator crd` prints).
pub fn crd_yaml() -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(&CronJob::crd())
}

/// The webhook configurations of the CronJob webhooks, named and annotated for `config/`:
/// called through the Service [`WEBHOOK_SERVICE`] on port 443, with the CA injected by
/// cert-manager from [`SERVING_CERTIFICATE`].
///
/// The webhooks are registered on a server bound to a free loopback port (never served): the
/// configurations list exactly what [`webhook::register`](crate::webhook::register) registers.
pub async fn webhook_configurations() -> Result<
    (
        ar::MutatingWebhookConfiguration,
        ar::ValidatingWebhookConfiguration,
    ),
    WebhookError,
> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = WebhookServer::bind(ServerOptions::default().bind_address(loopback)).await?;
    crate::webhook::register(&server)?;
    let target = ClientTarget::Service {
        namespace: NAMESPACE.into(),
        name: WEBHOOK_SERVICE.into(),
        port: Some(443),
    };
    let (mut mutating, mut validating) = server.webhook_configurations("", &target, b"");
    let annotations = [(
        INJECT_CA_FROM.to_string(),
        format!("{NAMESPACE}/{SERVING_CERTIFICATE}"),
    )];
    mutating.metadata.name = Some(MUTATING_CONFIGURATION.into());
    mutating.metadata.annotations = Some(annotations.clone().into());
    validating.metadata.name = Some(VALIDATING_CONFIGURATION.into());
    validating.metadata.annotations = Some(annotations.into());
    for w in mutating.webhooks.iter_mut().flatten() {
        w.client_config.ca_bundle = None;
    }
    for w in validating.webhooks.iter_mut().flatten() {
        w.client_config.ca_bundle = None;
    }
    Ok((mutating, validating))
}

/// [`webhook_configurations`] as the two documents of `config/webhook/manifests.yaml`.
pub async fn webhook_manifests_yaml() -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let (mutating, validating) = webhook_configurations().await?;
    Ok(format!(
        "{}---\n{}",
        serde_saphyr::to_string(&mutating)?,
        serde_saphyr::to_string(&validating)?
    ))
}
