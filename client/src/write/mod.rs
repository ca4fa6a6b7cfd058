//! Writes: [`Write`], the request a write call returns. Await it to send it; before that, its
//! options may change for this call only:
//!
//! ```no_run
//! # async fn demo(client: kcr_client::Client, cm: k8s_openapi::api::core::v1::ConfigMap)
//! #     -> Result<(), kcr_client::ClientError> {
//! use kcr_client::FieldValidation;
//!
//! let created = client.create(&cm).await?; // the client's field owner
//! let checked = client
//!     .create(&cm)
//!     .dry_run() // validated and admitted, not stored
//!     .field_validation(FieldValidation::Strict) // unknown fields are an error
//!     .field_owner("setup-job")
//!     .await?;
//! # let _ = (created, checked);
//! # Ok(()) }
//! ```
//!
//! Every write goes to the API server under a field manager: the call's, else the client's
//! (a [`Manager`](https://docs.rs/kcr-controller)'s client uses the manager's field owner).
//! Errors are [`ClientError::Api`] with the verb, kind and object named; its `is_*` helpers
//! classify the API server's answer (not found, conflict, forbidden, invalid).

mod typed;
mod verbs;

use std::future::IntoFuture;
use std::marker::PhantomData;

use futures::FutureExt;
use futures::future::BoxFuture;
use kcr_source::CacheObject;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::params::{Preconditions, PropagationPolicy};
use serde::Serialize;

use crate::client::{FieldValidation, WriteOptions};
use crate::error::{ClientError, Verb};

/// A write, sent when awaited ([`IntoFuture`]); its options apply to this call only.
#[must_use = "a write is sent only when it is awaited"]
pub struct Write<'a, Op> {
    pub(crate) options: WriteOptions,
    pub(crate) op: Op,
    pub(crate) _borrow: PhantomData<&'a ()>,
}

impl<Op> std::fmt::Debug for Write<'_, Op> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Write")
            .field("operation", &std::any::type_name::<Op>())
            .field("options", &self.options)
            .finish()
    }
}

impl<'a, Op> Write<'a, Op> {
    pub(crate) fn new(options: WriteOptions, op: Op) -> Self {
        Write {
            options,
            op,
            _borrow: PhantomData,
        }
    }

    /// The field manager of this write (controller-runtime's `client.FieldOwner`).
    pub fn field_owner(mut self, owner: impl Into<String>) -> Self {
        self.options.field_owner = Some(owner.into());
        self
    }

    /// Sends this write as a dry run (controller-runtime's `client.DryRunAll`).
    pub fn dry_run(mut self) -> Self {
        self.options.dry_run = true;
        self
    }

    /// Sets this write's server-side field validation.
    pub fn field_validation(mut self, validation: FieldValidation) -> Self {
        self.options.field_validation = Some(validation);
        self
    }

    /// The options this write will be sent with.
    pub fn options(&self) -> &WriteOptions {
        &self.options
    }
}

/// A kind of write: what a [`Write`] sends when awaited. Implemented by the client's
/// operations ([`Create`], [`Update`], [`PatchOp`], [`Delete`], [`DeleteAllOf`]); not meant to
/// be implemented elsewhere.
pub trait Operation<'a>: Send + 'a {
    /// What the write returns.
    type Output: Send + 'a;
    /// Sends the write with `options`.
    fn send(self, options: WriteOptions) -> BoxFuture<'a, Result<Self::Output, ClientError>>;
}

impl<'a, Op: Operation<'a>> IntoFuture for Write<'a, Op> {
    type Output = Result<Op::Output, ClientError>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        self.op.send(self.options)
    }
}

/// Where a write goes: the kind, the object's namespace and name, and its `Api`.
pub(crate) struct Addressed<K> {
    pub(crate) kind: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) api: Api<K>,
}

impl<K> Addressed<K> {
    fn error(&self, verb: Verb, source: kube::Error) -> ClientError {
        ClientError::Api {
            verb,
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            source: Box::new(source),
        }
    }

    fn name(&self, verb: Verb) -> Result<&str, ClientError> {
        self.name
            .as_deref()
            .ok_or_else(|| ClientError::MissingName {
                kind: self.kind.clone(),
                verb,
            })
    }
}

fn post_params(options: &WriteOptions) -> PostParams {
    PostParams {
        dry_run: options.dry_run,
        field_manager: options.field_owner.clone(),
    }
}

fn patch_params(options: &WriteOptions) -> PatchParams {
    PatchParams {
        dry_run: options.dry_run,
        force: options.force,
        field_manager: options.field_owner.clone(),
        field_validation: options.field_validation.clone(),
    }
}

/// Adds `fieldValidation` to a POST or PUT (kube's `PostParams` has no field for it).
fn with_validation(
    mut request: http::Request<Vec<u8>>,
    validation: Option<&FieldValidation>,
) -> Result<http::Request<Vec<u8>>, kube::Error> {
    if let Some(validation) = validation {
        let uri = request.uri().to_string();
        let separator = if uri.ends_with('?') {
            ""
        } else if uri.contains('?') {
            "&"
        } else {
            "?"
        };
        let uri = format!("{uri}{separator}fieldValidation={}", validation.as_str());
        *request.uri_mut() = uri
            .parse()
            .map_err(|e: http::uri::InvalidUri| kube::Error::HttpError(e.into()))?;
    }
    Ok(request)
}

fn serialize<K: Serialize>(kind: &str, verb: Verb, object: &K) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(object).map_err(|source| ClientError::Serialize {
        kind: kind.to_string(),
        verb,
        source,
    })
}

/// Sends a POST or PUT built by `build` from the body and the post parameters.
fn send_body<'a, K, F>(
    at: Result<Addressed<K>, ClientError>,
    verb: Verb,
    body: Result<Vec<u8>, ClientError>,
    options: WriteOptions,
    build: F,
) -> BoxFuture<'a, Result<K, ClientError>>
where
    K: CacheObject,
    F: FnOnce(
            &kube::core::Request,
            &Addressed<K>,
            &PostParams,
            Vec<u8>,
        ) -> Result<http::Request<Vec<u8>>, ClientError>
        + Send
        + 'a,
{
    async move {
        let at = at?;
        let body = body?;
        let request = kube::core::Request::new(at.api.resource_url());
        let built = build(&request, &at, &post_params(&options), body)?;
        let mut built = with_validation(built, options.field_validation.as_ref())
            .map_err(|e| at.error(verb, e))?;
        built.extensions_mut().insert(verb_name(verb));
        at.api
            .clone()
            .into_client()
            .request::<K>(built)
            .await
            .map_err(|e| at.error(verb, e))
    }
    .boxed()
}

fn verb_name(verb: Verb) -> &'static str {
    match verb {
        Verb::Create => "create",
        Verb::Update => "replace",
        _ => "replace_subresource",
    }
}

/// `create`: see [`Client::create`](crate::Client::create).
pub struct Create<'a, K> {
    pub(crate) at: Result<Addressed<K>, ClientError>,
    pub(crate) object: &'a K,
}

impl<'a, K: CacheObject + Serialize> Operation<'a> for Create<'a, K> {
    type Output = K;
    fn send(self, options: WriteOptions) -> BoxFuture<'a, Result<K, ClientError>> {
        let body = match &self.at {
            Ok(at) => serialize(&at.kind, Verb::Create, self.object),
            Err(_) => Ok(Vec::new()),
        };
        send_body(
            self.at,
            Verb::Create,
            body,
            options,
            |request, at, pp, body| {
                request
                    .create(pp, body)
                    .map_err(|e| at.error(Verb::Create, kube::Error::BuildRequest(e)))
            },
        )
    }
}

/// `update`, or `update` of a subresource: see [`Client::update`](crate::Client::update) and
/// [`Client::update_status`](crate::Client::update_status).
pub struct Update<'a, K> {
    pub(crate) at: Result<Addressed<K>, ClientError>,
    pub(crate) object: &'a K,
    pub(crate) subresource: Option<&'a str>,
}

impl<'a, K: CacheObject + Serialize> Operation<'a> for Update<'a, K> {
    type Output = K;
    fn send(self, options: WriteOptions) -> BoxFuture<'a, Result<K, ClientError>> {
        let body = match &self.at {
            Ok(at) => serialize(&at.kind, Verb::Update, self.object),
            Err(_) => Ok(Vec::new()),
        };
        let subresource = self.subresource;
        send_body(
            self.at,
            Verb::Update,
            body,
            options,
            move |request, at, pp, body| {
                let name = at.name(Verb::Update)?;
                match subresource {
                    None => request.replace(name, pp, body),
                    Some(sub) => request.replace_subresource(sub, name, pp, body),
                }
                .map_err(|e| at.error(Verb::Update, kube::Error::BuildRequest(e)))
            },
        )
    }
}

/// `patch` (merge, JSON, strategic merge or apply), of the object or a subresource: see
/// [`Client::patch`](crate::Client::patch).
pub struct PatchOp<'a, K, P: Serialize> {
    pub(crate) at: Result<Addressed<K>, ClientError>,
    pub(crate) patch: PatchBody<'a, P>,
    pub(crate) subresource: Option<&'a str>,
}

/// A patch given by reference or built by the client (an apply of a whole object).
pub(crate) enum PatchBody<'a, P: Serialize> {
    Borrowed(&'a Patch<P>),
    Owned(Patch<P>),
}

impl<'a, K, P: Serialize> Write<'a, PatchOp<'a, K, P>> {
    /// Server-side apply: take the fields other managers own instead of failing with a
    /// conflict (`force=true`). Ignored by the API server for other patch types.
    pub fn force(mut self) -> Self {
        self.options.force = true;
        self
    }
}

impl<'a, K, P> Operation<'a> for PatchOp<'a, K, P>
where
    K: CacheObject,
    P: Serialize + std::fmt::Debug + Send + Sync + 'a,
{
    type Output = K;
    fn send(self, options: WriteOptions) -> BoxFuture<'a, Result<K, ClientError>> {
        async move {
            let at = self.at?;
            let name = at.name(Verb::Patch)?.to_string();
            let patch = match &self.patch {
                PatchBody::Borrowed(patch) => *patch,
                PatchBody::Owned(patch) => patch,
            };
            let mut params = patch_params(&options);
            if matches!(patch, Patch::Apply(_)) && params.field_manager.is_none() {
                params.field_manager = Some(crate::client::DEFAULT_FIELD_OWNER.to_string());
            }
            match self.subresource {
                None => at.api.patch(&name, &params, patch).await,
                Some(sub) => at.api.patch_subresource(sub, &name, &params, patch).await,
            }
            .map_err(|e| at.error(Verb::Patch, e))
        }
        .boxed()
    }
}

/// `delete`: see [`Client::delete`](crate::Client::delete). Its [`Write`] takes the delete
/// options (propagation, grace period, preconditions).
pub struct Delete<K> {
    pub(crate) at: Result<Addressed<K>, ClientError>,
    pub(crate) params: DeleteParams,
}

impl<'a, K> Write<'a, Delete<K>> {
    /// How dependents are deleted (controller-runtime's `PropagationPolicy`).
    pub fn propagation(mut self, policy: PropagationPolicy) -> Self {
        self.op.params.propagation_policy = Some(policy);
        self
    }

    /// The grace period, in seconds (`0`: at once).
    pub fn grace_period(mut self, seconds: u32) -> Self {
        self.op.params.grace_period_seconds = Some(seconds);
        self
    }

    /// Delete only if the object still has this UID (not a new object of the same name).
    pub fn precondition_uid(mut self, uid: impl Into<String>) -> Self {
        self.op
            .params
            .preconditions
            .get_or_insert_with(Preconditions::default)
            .uid = Some(uid.into());
        self
    }

    /// Delete only if the object is still at this `resourceVersion`.
    pub fn precondition_resource_version(mut self, version: impl Into<String>) -> Self {
        self.op
            .params
            .preconditions
            .get_or_insert_with(Preconditions::default)
            .resource_version = Some(version.into());
        self
    }
}

impl<'a, K: CacheObject> Operation<'a> for Delete<K> {
    type Output = ();
    fn send(self, options: WriteOptions) -> BoxFuture<'a, Result<(), ClientError>> {
        async move {
            let at = self.at?;
            let name = at.name(Verb::Delete)?.to_string();
            let params = DeleteParams {
                dry_run: options.dry_run,
                ..self.params
            };
            at.api
                .delete(&name, &params)
                .await
                .map(drop)
                .map_err(|e| at.error(Verb::Delete, e))
        }
        .boxed()
    }
}

/// `deletecollection`: see [`Client::delete_all_of`](crate::Client::delete_all_of).
pub struct DeleteAllOf<K> {
    pub(crate) at: Result<Addressed<K>, ClientError>,
    pub(crate) list: ListParams,
    pub(crate) params: DeleteParams,
}

impl<'a, K> Write<'a, DeleteAllOf<K>> {
    /// How dependents are deleted.
    pub fn propagation(mut self, policy: PropagationPolicy) -> Self {
        self.op.params.propagation_policy = Some(policy);
        self
    }
}

impl<'a, K: CacheObject> Operation<'a> for DeleteAllOf<K> {
    type Output = ();
    fn send(self, options: WriteOptions) -> BoxFuture<'a, Result<(), ClientError>> {
        async move {
            let at = self.at?;
            let params = DeleteParams {
                dry_run: options.dry_run,
                ..self.params
            };
            at.api
                .delete_collection(&params, &self.list)
                .await
                .map(drop)
                .map_err(|e| at.error(Verb::DeleteCollection, e))
        }
        .boxed()
    }
}
