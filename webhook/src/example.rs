//! A worked example: the `Widget` kind (`example.kcr.dev`, namespaced) in two versions, with a
//! defaulter, a validator and a hub-and-spoke conversion. The crate's tests and the
//! `throughput` example use it.
//!
//! | `v1alpha1` (spoke) | `v1` (hub, stored) |
//! |---|---|
//! | `spec.size` | `spec.replicas` (renamed) |
//! | `spec.colour` | `spec.appearance.colour` (moved into a struct) |
//!
//! ```
//! use kcr_webhook::Conversion;
//! use kcr_webhook::example::{v1, v1alpha1};
//!
//! // Served at /convert, next to the admission webhooks:
//! // server.add_conversion(Conversion::<v1::Widget>::hub().spoke::<v1alpha1::Widget>())?;
//! let conversion = Conversion::<v1::Widget>::hub().spoke::<v1alpha1::Widget>();
//! let old = serde_json::json!({
//!     "apiVersion": "example.kcr.dev/v1alpha1", "kind": "Widget",
//!     "metadata": {"name": "w", "namespace": "default"},
//!     "spec": {"size": 3, "colour": "red"},
//! });
//! let new = conversion.convert(old, "example.kcr.dev/v1").unwrap();
//! assert_eq!(new["spec"], serde_json::json!({"replicas": 3, "appearance": {"colour": "red"}}));
//! ```
//!
//! Wired into the API server: the server serves `/convert` for the kind, and the CRD (both
//! versions, `v1` stored) gets the `spec.conversion` stanza pointing at it; the API server then
//! calls the webhook whenever an object is read or written in a version other than the one it
//! is stored in.
//!
//! ```no_run
//! use kcr_webhook::example::{crd, v1, v1alpha1};
//! use kcr_webhook::{ClientTarget, Conversion, ServerOptions, WebhookServer, crd_conversion};
//!
//! # async fn f(ca_pem: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! let server = WebhookServer::bind(ServerOptions::default().cert_dir("/certs")).await?;
//! server.add_conversion(Conversion::<v1::Widget>::hub().spoke::<v1alpha1::Widget>())?;
//! let mut crd = crd()?;
//! crd.spec.conversion = Some(crd_conversion(
//!     &ClientTarget::Service { namespace: "widgets".into(), name: "widget-webhook".into(), port: Some(443) },
//!     ca_pem,
//! ));
//! // Apply `crd`; a `v1alpha1` Widget is now stored as `v1` and served in either version.
//! # Ok(()) }
//! ```
//!
//! The crate's test `an_object_written_as_v1alpha1_is_read_as_v1_and_back`
//! (`webhook/tests/api_server.rs`) does exactly this against the API server on both
//! kcr-envtest backends (the in-process server and kube-apiserver): a `v1alpha1` object read as
//! `v1` and back, and a list mixing objects written in either version.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::admission::AdmissionRequest;
use kube::core::crd::merge_crds;
use kube::{CustomResourceExt, ResourceExt};

use crate::admission::{AdmissionError, Defaulter, Denial, FieldCause, Validator, Warnings};
use crate::conversion::{ConversionError, Convertible};

/// API group of the example kind.
pub const GROUP: &str = "example.kcr.dev";
/// Colours a widget may have.
pub const COLOURS: &[&str] = &["red", "green", "blue"];
/// The colour the defaulter sets.
pub const DEFAULT_COLOUR: &str = "blue";
/// Most replicas a widget may have.
pub const MAX_REPLICAS: i32 = 10;
/// A widget labelled with this key and `"true"` cannot be deleted.
pub const PROTECTED_LABEL: &str = "example.kcr.dev/protected";

/// The first version: `size` and a flat `colour`.
pub mod v1alpha1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Desired state of a widget (v1alpha1).
    #[derive(
        CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema,
    )]
    #[kube(
        group = "example.kcr.dev",
        version = "v1alpha1",
        kind = "Widget",
        namespaced,
        derive = "PartialEq",
        doc = "A widget, v1alpha1."
    )]
    pub struct WidgetSpec {
        /// How many copies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub size: Option<i32>,
        /// Its colour.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub colour: Option<String>,
    }
}

/// The second version (hub and storage): `replicas`, and the colour under `appearance`.
pub mod v1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    pub use super::{WidgetDefaulter, WidgetValidator};

    /// Desired state of a widget (v1).
    #[derive(
        CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema,
    )]
    #[kube(
        group = "example.kcr.dev",
        version = "v1",
        kind = "Widget",
        namespaced,
        derive = "PartialEq",
        doc = "A widget, v1."
    )]
    pub struct WidgetSpec {
        /// How many copies (was `size`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub replicas: Option<i32>,
        /// How it looks.
        #[serde(default)]
        pub appearance: Appearance,
    }

    /// How a widget looks.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
    pub struct Appearance {
        /// Its colour (was `spec.colour`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub colour: Option<String>,
    }
}

impl Convertible<v1::Widget> for v1alpha1::Widget {
    fn to_hub(self) -> Result<v1::Widget, ConversionError> {
        Ok(v1::Widget {
            metadata: self.metadata,
            spec: v1::WidgetSpec {
                replicas: self.spec.size,
                appearance: v1::Appearance {
                    colour: self.spec.colour,
                },
            },
        })
    }

    fn from_hub(hub: v1::Widget) -> Result<Self, ConversionError> {
        Ok(v1alpha1::Widget {
            metadata: hub.metadata,
            spec: v1alpha1::WidgetSpec {
                size: hub.spec.replicas,
                colour: hub.spec.appearance.colour,
            },
        })
    }
}

/// The CRD with both versions served and `v1` stored (no `spec.conversion`: add
/// [`crd_conversion`](crate::crd_conversion)'s for the webhook).
pub fn crd() -> Result<CustomResourceDefinition, kube::core::crd::MergeError> {
    merge_crds(vec![v1alpha1::Widget::crd(), v1::Widget::crd()], "v1")
}

/// Defaults `spec.replicas` to 1 and `spec.appearance.colour` to [`DEFAULT_COLOUR`].
#[derive(Debug, Clone, Copy, Default)]
pub struct WidgetDefaulter;

impl Defaulter<v1::Widget> for WidgetDefaulter {
    async fn default(
        &self,
        _req: &AdmissionRequest<v1::Widget>,
        obj: &mut v1::Widget,
    ) -> Result<(), AdmissionError> {
        obj.spec.replicas.get_or_insert(1);
        obj.spec
            .appearance
            .colour
            .get_or_insert_with(|| DEFAULT_COLOUR.to_string());
        Ok(())
    }
}

/// Replicas within 0..=[`MAX_REPLICAS`] (a warning at 0), a colour of [`COLOURS`] that never
/// changes once set, and no deletion of a widget labelled [`PROTECTED_LABEL`]` = "true"`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WidgetValidator;

fn check(w: &v1::Widget) -> (Vec<FieldCause>, Warnings) {
    let mut causes = Vec::new();
    let mut warnings = Warnings::new();
    match w.spec.replicas {
        Some(r) if !(0..=MAX_REPLICAS).contains(&r) => causes.push(FieldCause::invalid(
            "spec.replicas",
            &r,
            &format!("must be between 0 and {MAX_REPLICAS}"),
        )),
        Some(0) => warnings.push("spec.replicas is 0: the widget does nothing".to_string()),
        _ => {}
    }
    if let Some(c) = &w.spec.appearance.colour
        && !COLOURS.contains(&c.as_str())
    {
        causes.push(FieldCause::not_supported(
            "spec.appearance.colour",
            c,
            COLOURS,
        ));
    }
    (causes, warnings)
}

fn verdict(causes: Vec<FieldCause>, warnings: Warnings) -> Result<Warnings, AdmissionError> {
    if causes.is_empty() {
        Ok(warnings)
    } else {
        Err(Denial::invalid(causes).with_warnings(warnings).into())
    }
}

impl Validator<v1::Widget> for WidgetValidator {
    async fn validate_create(
        &self,
        _req: &AdmissionRequest<v1::Widget>,
        obj: &v1::Widget,
    ) -> Result<Warnings, AdmissionError> {
        let (causes, warnings) = check(obj);
        verdict(causes, warnings)
    }

    async fn validate_update(
        &self,
        _req: &AdmissionRequest<v1::Widget>,
        old: &v1::Widget,
        new: &v1::Widget,
    ) -> Result<Warnings, AdmissionError> {
        let (mut causes, warnings) = check(new);
        if let Some(was) = &old.spec.appearance.colour
            && new.spec.appearance.colour.as_ref() != Some(was)
        {
            causes.push(FieldCause::forbidden(
                "spec.appearance.colour",
                "field is immutable once set",
            ));
        }
        verdict(causes, warnings)
    }

    async fn validate_delete(
        &self,
        _req: &AdmissionRequest<v1::Widget>,
        old: &v1::Widget,
    ) -> Result<Warnings, AdmissionError> {
        if old.labels().get(PROTECTED_LABEL).map(String::as_str) == Some("true") {
            return Err(Denial::forbidden(format!(
                "widget {} is protected: remove the label {PROTECTED_LABEL} first",
                old.name_any()
            ))
            .into());
        }
        Ok(Warnings::new())
    }
}
