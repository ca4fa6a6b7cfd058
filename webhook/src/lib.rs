//! `kcr-webhook`: admission and conversion webhooks for kcr operators, as controller-runtime's
//! `webhook` package gives Go operators.
//!
//! ```no_run
//! use kcr_webhook::{
//!     AdmissionError, AdmissionRequest, ClientTarget, Defaulter, Denial, FieldCause,
//!     ManagerWebhookExt, ServerOptions, Validator, WebhookServer, Warnings,
//! };
//! use kube::CustomResource;
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! /// A cache (the CRD).
//! #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #[kube(group = "example.com", version = "v1", kind = "Cache", namespaced)]
//! pub struct CacheSpec {
//!     size_mb: Option<u32>,
//! }
//!
//! struct Defaults;
//! impl Defaulter<Cache> for Defaults {
//!     async fn default(&self, _: &AdmissionRequest<Cache>, c: &mut Cache) -> Result<(), AdmissionError> {
//!         c.spec.size_mb.get_or_insert(64); // the API server receives a JSON patch
//!         Ok(())
//!     }
//! }
//!
//! struct Rules;
//! impl Validator<Cache> for Rules {
//!     async fn validate_create(&self, _: &AdmissionRequest<Cache>, c: &Cache) -> Result<Warnings, AdmissionError> {
//!         match c.spec.size_mb {
//!             Some(mb) if mb > 4096 => Err(Denial::invalid(vec![FieldCause::invalid(
//!                 "spec.size_mb", &mb, "must be at most 4096",
//!             )])
//!             .into()),
//!             Some(mb) if mb < 16 => Ok(vec![format!("{mb} MiB is a tiny cache")]),
//!             _ => Ok(vec![]),
//!         }
//!     }
//!     // validate_update and validate_delete allow by default.
//! }
//!
//! # async fn run(mgr: kcr_controller::Manager, ca_pem: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! let server = WebhookServer::bind(ServerOptions::default().cert_dir("/tmp/k8s-webhook-server/serving-certs")).await?;
//! mgr.add_webhook_server(&server)?; // every replica serves; /readyz waits for a valid certificate
//! mgr.webhook::<Cache>(&server).defaulter(Defaults).validator(Rules).complete()?;
//! // -> /mutate-example-com-v1-cache and /validate-example-com-v1-cache
//! let (mutating, validating) = server.webhook_configurations(
//!     "cache-webhooks",
//!     &ClientTarget::Service { namespace: "cache-system".into(), name: "cache-webhook".into(), port: Some(443) },
//!     ca_pem,
//! );
//! # let _ = (mutating, validating);
//! mgr.run_until_signal().await?;
//! # Ok(()) }
//! ```
//!
//! # What is here
//! - [`WebhookServer`] ([`server`]): one HTTPS server (rustls) for every webhook, by path;
//!   certificates reloaded when their files change, the Secret volume's `..data` swap included
//!   ([`tls::CertWatcher`]); request size limit and timeouts; controller-runtime's webhook
//!   metrics and a tracing span per request.
//! - [`Defaulter`] and [`Validator`] ([`admission`]): typed, async; the defaulter mutates a copy
//!   and the JSON patch is computed; the validator allows with warnings, refuses with field
//!   causes ([`Denial`]) or fails with an internal error (status 500).
//! - Paths by the kubebuilder convention: [`mutate_path`], [`validate_path`]; or your own
//!   ([`WebhookBuilder::defaulter_path`], [`WebhookBuilder::validator_path`]), which go into the
//!   generated configurations.
//! - Raw admission handlers ([`raw`]): an [`AdmissionHandler`] (or a closure through
//!   [`admission_fn`]) answers any `AdmissionReview`, of any kind, with kube's
//!   `AdmissionResponse`, on any path ([`WebhookServer::admission_handler`]); its context
//!   ([`AdmissionContext`]) carries the caller's client certificate under mutual TLS.
//! - TLS options ([`ServerOptions::tls`], kcr-tls's [`TlsOptions`]): HTTP/1.1 only by default
//!   (kubebuilder's scaffold turns HTTP/2 off since CVE-2023-44487 and CVE-2023-39325; see
//!   [`TlsOptions::enable_http2`]), a minimum TLS version, cipher suites, and mutual TLS with a
//!   client-CA bundle re-read when it changes ([`TlsOptions::client_ca_file`]).
//! - A panic in any handler is answered with HTTP 500 and counted in
//!   `controller_runtime_webhook_panics_total`; the connection and the server keep serving.
//! - Conversion ([`conversion`]): hub and spoke [`Convertible`], one `/convert` endpoint for
//!   every kind, and [`crd_conversion`] for the CRD's `spec.conversion`; worked example in
//!   [`example`].
//! - The [`Manager`](kcr_controller::Manager) integration ([`ManagerWebhookExt`]) and the
//!   webhook configurations ([`webhook_configurations`], [`ClientTarget`]).
//!
//! # Throughput
//! `cargo run --release -p kcr-webhook --example webhook_throughput [-- <seconds> <connections>]`
//! drives the example Widget's validating and mutating webhooks over HTTPS (keep-alive
//! HTTP/1.1, clients in the same process). On the 2-core development machine, shared with
//! other builds (load average about 10): about 8,800 requests/s on one connection (p50 33 µs,
//! p99 0.35 ms) and 9,400-12,500 requests/s on eight (p50 about 0.3 ms, p99 9-11 ms).
//!
//! Malformed requests never panic: a body that is not an AdmissionReview or ConversionReview
//! gets HTTP 400 with a `Status` saying what is wrong.

pub mod admission;
mod builder;
pub mod config;
pub mod conversion;
mod endpoint;
pub mod example;
pub mod raw;
pub mod server;
pub mod tls;

pub use admission::{
    AdmissionError, Defaulter, Denial, FieldCause, Validator, Warnings, WebhookObject,
};
pub use builder::{ManagerWebhookExt, WebhookBuilder};
pub use config::{
    ClientTarget, FailurePolicy, WebhookRegistration, WebhookType, crd_conversion, mutate_path,
    validate_path, webhook_configurations,
};
pub use conversion::{Conversion, ConversionError, Convertible};
pub use kube::core::admission::{AdmissionRequest, Operation};
pub use raw::{AdmissionContext, AdmissionHandler, admission_fn};
pub use server::{CONVERT_PATH, ServerOptions, WebhookError, WebhookServer};
pub use tls::{
    CertWatcher, CertificateAuthority, ClientCertificate, ServingCert, TlsError, TlsOptions,
    TlsVersion,
};
