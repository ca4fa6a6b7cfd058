//! The tracing span of each reconcile: by default with controller-runtime's keys, or made by a
//! [`LogConstructor`] of the controller's own ([`Builder::log_constructor`](crate::Builder::log_constructor),
//! [`Controller::with_log_constructor`](crate::Controller::with_log_constructor)).
//!
//! The default span is named `reconcile` and carries, as `tracing` fields:
//!
//! | field | value |
//! |---|---|
//! | `controller` | the controller's name |
//! | `controllerGroup` | the API group of its primary kind (empty for the core group, and when it has no primary kind) |
//! | `controllerKind` | its primary kind (empty when it has none) |
//! | `namespace`, `name` | the request's, for a `Request`-keyed controller |
//! | `object` | the request as text, for a controller keyed by another type |
//! | `reconcileID` | a fresh UUID per reconcile ([`Context::reconcile_id`](crate::Context::reconcile_id)) |
//!
//! These are the keys of controller-runtime's reconcile logger, so log queries written for Go
//! operators find kcr's reconciles too. Every event a reconciler logs inside its reconcile is
//! inside this span; the controller's own error logs for the reconcile are too.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use kcr_handler::Request;
use uuid::Uuid;

use crate::reason::ReconcileReason;

/// What a [`LogConstructor`] is given to make a reconcile's span.
#[derive(Debug)]
#[non_exhaustive]
pub struct ReconcileInfo<'a, K> {
    /// The controller's name.
    pub controller: &'a str,
    /// The API group of the controller's primary kind (`""` for the core group or none).
    pub group: &'a str,
    /// The controller's primary kind (`""` when it has none).
    pub kind: &'a str,
    /// The request being reconciled.
    pub request: &'a K,
    /// The reconcile's id.
    pub reconcile_id: Uuid,
    /// Why the reconcile runs.
    pub reason: &'a ReconcileReason,
}

/// Makes the span a reconcile runs in; see the [module docs](self).
pub type LogConstructor<K> = Arc<dyn Fn(&ReconcileInfo<'_, K>) -> tracing::Span + Send + Sync>;

/// The default span, with controller-runtime's keys (see the [module docs](self)).
pub fn default_span<K: fmt::Display + 'static>(info: &ReconcileInfo<'_, K>) -> tracing::Span {
    match (info.request as &dyn Any).downcast_ref::<Request>() {
        Some(request) => tracing::info_span!(
            "reconcile",
            controller = %info.controller,
            controllerGroup = %info.group,
            controllerKind = %info.kind,
            namespace = %request.namespace.as_deref().unwrap_or(""),
            name = %request.name,
            reconcileID = %info.reconcile_id,
        ),
        None => tracing::info_span!(
            "reconcile",
            controller = %info.controller,
            controllerGroup = %info.group,
            controllerKind = %info.kind,
            object = %info.request,
            reconcileID = %info.reconcile_id,
        ),
    }
}
