//! CRD conversion webhooks, hub and spoke (as controller-runtime's `conversion` package).
//!
//! One version of a kind is the *hub* (usually the storage version); every other version, a
//! *spoke*, implements [`Convertible<Hub>`]: to the hub and back. Converting between two spokes
//! goes through the hub, so n versions need n−1 pairs of functions, not n².
//!
//! [`Conversion::hub`]`::<Hub>()`[`.spoke::<S>()`](Conversion::spoke) lists a kind's versions;
//! [`WebhookServer::add_conversion`](crate::WebhookServer::add_conversion) serves it at
//! [`/convert`](crate::CONVERT_PATH), where one ConversionReview handler serves every kind
//! registered. Per object: its `apiVersion` and `kind` pick the conversion; an unknown kind or
//! version fails the whole review with a message naming it and the versions known. Conversion
//! may only change labels and annotations of `metadata` (the API server refuses anything else),
//! so the rest of `metadata` is copied from the object received.
//!
//! A body that is not a ConversionReview (not JSON, wrong kind, no request, uid,
//! `desiredAPIVersion` or `objects`) gets HTTP 400 with a `Status` saying what is wrong.
//!
//! The CRD's `spec.conversion` stanza comes from [`crd_conversion`](crate::crd_conversion).
//! A worked example, a CRD in `v1alpha1` and `v1` with a field renamed and one moved into a
//! nested struct, is in [`crate::example`].

use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use parking_lot::RwLock;
use serde_json::{Value, json};

use crate::admission::WebhookObject;
use crate::endpoint::{Endpoint, Reply};

/// `apiVersion` of the ConversionReviews served.
pub const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";

/// Conversion errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// A conversion function refused the object.
    #[error("{0}")]
    Failed(String),
    /// The object's or the desired version is not registered for the kind.
    #[error("{kind}: unknown version {version} (known: {known})")]
    UnknownVersion {
        /// `Kind.group`.
        kind: String,
        /// The version asked for.
        version: String,
        /// The registered versions, comma-separated.
        known: String,
    },
    /// No conversion is registered for the object's kind.
    #[error("no conversion is registered for {kind} (registered: {known})")]
    UnknownKind {
        /// `Kind.group`.
        kind: String,
        /// The registered kinds, comma-separated.
        known: String,
    },
    /// The desired version is of another group than the object.
    #[error("cannot convert {kind} of {from} to {to}: another API group")]
    OtherGroup {
        /// `Kind.group`.
        kind: String,
        /// The object's apiVersion.
        from: String,
        /// The desired apiVersion.
        to: String,
    },
    /// An object without `apiVersion` or `kind`.
    #[error("object {index} has no apiVersion or kind")]
    Untyped {
        /// Its index in the review.
        index: usize,
    },
    /// The object does not decode as the version's type.
    #[error("cannot decode {kind} {api_version}: {message}")]
    Decode {
        /// `Kind.group`.
        kind: String,
        /// The object's apiVersion.
        api_version: String,
        /// The decoder's message.
        message: String,
    },
    /// The converted object does not serialise.
    #[error("cannot encode {kind} {api_version}: {message}")]
    Encode {
        /// `Kind.group`.
        kind: String,
        /// The desired apiVersion.
        api_version: String,
        /// The encoder's message.
        message: String,
    },
}

impl ConversionError {
    /// A failure of a conversion function.
    pub fn failed(message: impl Into<String>) -> Self {
        ConversionError::Failed(message.into())
    }
}

/// A spoke version of a kind whose hub version is `Hub`.
pub trait Convertible<Hub>: Sized {
    /// Converts this version to the hub.
    fn to_hub(self) -> Result<Hub, ConversionError>;
    /// Converts the hub to this version.
    fn from_hub(hub: Hub) -> Result<Self, ConversionError>;
}

type ToHub<H> = Box<dyn Fn(Value) -> Result<H, ConversionError> + Send + Sync>;
type FromHub<H> = Box<dyn Fn(H) -> Result<Value, ConversionError> + Send + Sync>;

struct Codec<H> {
    api_version: String,
    to_hub: ToHub<H>,
    from_hub: FromHub<H>,
}

/// The versions of one kind: a hub and its spokes. See the [module docs](self).
pub struct Conversion<H> {
    group: String,
    kind: String,
    /// By version.
    versions: BTreeMap<String, Codec<H>>,
    problems: Vec<String>,
    _h: PhantomData<fn() -> H>,
}

impl<H> std::fmt::Debug for Conversion<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversion")
            .field("group", &self.group)
            .field("kind", &self.kind)
            .field("versions", &self.versions.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn decode<T: WebhookObject>(obj: Value) -> Result<T, ConversionError> {
    serde_json::from_value(obj).map_err(|e| ConversionError::Decode {
        kind: qualified::<T>(),
        api_version: T::api_version(&()).into_owned(),
        message: e.to_string(),
    })
}

fn encode<T: WebhookObject>(obj: &T) -> Result<Value, ConversionError> {
    let mut v = serde_json::to_value(obj).map_err(|e| ConversionError::Encode {
        kind: qualified::<T>(),
        api_version: T::api_version(&()).into_owned(),
        message: e.to_string(),
    })?;
    if let Some(map) = v.as_object_mut() {
        map.insert("apiVersion".into(), json!(T::api_version(&())));
        map.insert("kind".into(), json!(T::kind(&())));
    }
    Ok(v)
}

fn qualified<T: WebhookObject>() -> String {
    let group = T::group(&());
    if group.is_empty() {
        T::kind(&()).into_owned()
    } else {
        format!("{}.{group}", T::kind(&()))
    }
}

impl<H: WebhookObject> Conversion<H> {
    /// A kind whose hub version is `H`.
    pub fn hub() -> Self {
        let mut versions = BTreeMap::new();
        versions.insert(
            H::version(&()).into_owned(),
            Codec {
                api_version: H::api_version(&()).into_owned(),
                to_hub: Box::new(decode::<H>),
                from_hub: Box::new(|h: H| encode(&h)),
            },
        );
        Conversion {
            group: H::group(&()).into_owned(),
            kind: H::kind(&()).into_owned(),
            versions,
            problems: Vec::new(),
            _h: PhantomData,
        }
    }

    /// Adds a spoke version `S` (of the same group and kind as the hub).
    pub fn spoke<S: WebhookObject + Convertible<H>>(mut self) -> Self {
        if S::group(&()) != self.group || S::kind(&()) != self.kind {
            self.problems.push(format!(
                "spoke {} is not a version of the hub's kind {}",
                qualified::<S>(),
                qualified::<H>()
            ));
        }
        let version = S::version(&()).into_owned();
        if self.versions.contains_key(&version) {
            self.problems.push(format!(
                "version {version} of {} is registered twice",
                qualified::<H>()
            ));
        }
        self.versions.insert(
            version,
            Codec {
                api_version: S::api_version(&()).into_owned(),
                to_hub: Box::new(|v: Value| decode::<S>(v)?.to_hub()),
                from_hub: Box::new(|h: H| encode(&S::from_hub(h)?)),
            },
        );
        self
    }

    /// The kind qualified by its group (`Widget.example.kcr.dev`).
    pub fn qualified_kind(&self) -> String {
        qualified::<H>()
    }

    /// Mistakes in the registration (spokes of another kind, a version twice).
    pub(crate) fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The versions registered, sorted.
    pub fn versions(&self) -> Vec<String> {
        self.versions.keys().cloned().collect()
    }

    fn codec(&self, version: &str) -> Result<&Codec<H>, ConversionError> {
        self.versions
            .get(version)
            .ok_or_else(|| ConversionError::UnknownVersion {
                kind: qualified::<H>(),
                version: version.to_string(),
                known: self.versions().join(", "),
            })
    }

    /// Converts one object to `desired` (`group/version`).
    pub fn convert(&self, obj: Value, desired: &str) -> Result<Value, ConversionError> {
        let from = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (from_group, from_version) = split_api_version(&from);
        let (to_group, to_version) = split_api_version(desired);
        if from_group != to_group {
            return Err(ConversionError::OtherGroup {
                kind: qualified::<H>(),
                from,
                to: desired.to_string(),
            });
        }
        let source = self.codec(from_version)?;
        let target = self.codec(to_version)?;
        if source.api_version == target.api_version {
            return Ok(obj);
        }
        let metadata = obj.get("metadata").cloned();
        let hub = (source.to_hub)(obj)?;
        let mut out = (target.from_hub)(hub)?;
        // Only labels and annotations may change.
        if let (Some(Value::Object(mut meta)), Some(map)) = (metadata, out.as_object_mut()) {
            for key in ["labels", "annotations"] {
                match map.get("metadata").and_then(|m| m.get(key)) {
                    Some(v) if !v.is_null() => {
                        meta.insert(key.to_string(), v.clone());
                    }
                    _ => {
                        meta.remove(key);
                    }
                }
            }
            map.insert("metadata".into(), Value::Object(meta));
        }
        Ok(out)
    }
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// A type-erased [`Conversion`].
pub(crate) trait DynConversion: Send + Sync + 'static {
    fn convert(&self, obj: Value, desired: &str) -> Result<Value, ConversionError>;
}

impl<H: WebhookObject> DynConversion for Conversion<H> {
    fn convert(&self, obj: Value, desired: &str) -> Result<Value, ConversionError> {
        Conversion::convert(self, obj, desired)
    }
}

/// Every registered kind's conversion, by `group/Kind`; the `/convert` endpoint.
#[derive(Default)]
pub(crate) struct ConversionRegistry {
    kinds: RwLock<HashMap<(String, String), Arc<dyn DynConversion>>>,
}

impl ConversionRegistry {
    /// Adds a kind; false if it was there already.
    pub(crate) fn add(&self, group: String, kind: String, c: Arc<dyn DynConversion>) -> bool {
        let mut kinds = self.kinds.write();
        if kinds.contains_key(&(group.clone(), kind.clone())) {
            return false;
        }
        kinds.insert((group, kind), c);
        true
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.kinds.read().is_empty()
    }

    fn convert_one(
        &self,
        index: usize,
        obj: Value,
        desired: &str,
    ) -> Result<Value, ConversionError> {
        let api_version = obj.get("apiVersion").and_then(Value::as_str);
        let kind = obj.get("kind").and_then(Value::as_str);
        let (Some(api_version), Some(kind)) = (api_version, kind) else {
            return Err(ConversionError::Untyped { index });
        };
        let (group, _) = split_api_version(api_version);
        let key = (group.to_string(), kind.to_string());
        let conversion = self.kinds.read().get(&key).cloned();
        match conversion {
            Some(c) => c.convert(obj, desired),
            None => {
                let mut known: Vec<String> = self
                    .kinds
                    .read()
                    .keys()
                    .map(|(g, k)| format!("{k}.{g}"))
                    .collect();
                known.sort();
                Err(ConversionError::UnknownKind {
                    kind: format!("{kind}.{group}"),
                    known: known.join(", "),
                })
            }
        }
    }

    /// Answers a ConversionReview body.
    pub(crate) fn review(&self, body: &[u8]) -> Reply {
        let bad = |m: String| Reply::bad_request(format!("conversion webhook: {m}"));
        let review: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return bad(format!("the request body is not JSON: {e}")),
        };
        let api_version = review.get("apiVersion").and_then(Value::as_str);
        let kind = review.get("kind").and_then(Value::as_str);
        if kind != Some("ConversionReview") || api_version != Some(CONVERSION_API_VERSION) {
            return bad(format!(
                "expected a ConversionReview of {CONVERSION_API_VERSION}, got kind {} of {}",
                kind.unwrap_or("<none>"),
                api_version.unwrap_or("<none>")
            ));
        }
        let Some(request) = review.get("request").filter(|r| r.is_object()) else {
            return bad("the ConversionReview has no request".into());
        };
        let Some(uid) = request.get("uid").and_then(Value::as_str) else {
            return bad("the ConversionReview's request has no uid".into());
        };
        let Some(desired) = request.get("desiredAPIVersion").and_then(Value::as_str) else {
            return bad("the ConversionReview's request has no desiredAPIVersion".into());
        };
        let Some(objects) = request.get("objects").and_then(Value::as_array) else {
            return bad("the ConversionReview's request has no objects list".into());
        };
        tracing::Span::current().record("uid", uid);
        let converted: Result<Vec<Value>, ConversionError> = objects
            .iter()
            .enumerate()
            .map(|(i, o)| self.convert_one(i, o.clone(), desired))
            .collect();
        let response = match converted {
            Ok(objects) => json!({
                "uid": uid,
                "result": {"status": "Success"},
                "convertedObjects": objects,
            }),
            Err(e) => {
                tracing::warn!(error = %e, desired, "conversion failed");
                json!({
                    "uid": uid,
                    "result": {"status": "Failure", "message": format!("conversion to {desired} failed: {e}")},
                    "convertedObjects": [],
                })
            }
        };
        Reply::json(
            http::StatusCode::OK,
            &json!({
                "apiVersion": CONVERSION_API_VERSION,
                "kind": "ConversionReview",
                "response": response,
            }),
        )
    }
}

/// The `/convert` endpoint over the server's registry.
pub(crate) struct ConvertEndpoint(pub(crate) Arc<ConversionRegistry>);

impl Endpoint for ConvertEndpoint {
    fn serve(
        &self,
        body: Bytes,
        _peer: Option<Arc<kcr_tls::ClientCertificate>>,
    ) -> BoxFuture<'_, Reply> {
        Box::pin(async move { self.0.review(&body) })
    }
}
