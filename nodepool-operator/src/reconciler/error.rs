//! Why a reconcile fails ([`ReconcileFailure`], with its Ready reason and code), how an API
//! error reads, and what a refused node patch means ([`classify_refusal`]).

use k8s_openapi::api::core::v1::Node;
use kcr_controller::ReconcileError;

use crate::nodes::{FailingOperation, first_failing_operation};
use crate::runtimeclass::RuntimeClassError;
use crate::status::AllocatableError;

/// Why a reconcile failed. Every variant is retryable.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileFailure {
    /// A node patch failed for a reason other than the patch's content (a 5xx, a 403, a 422
    /// with field causes, a transport error), or re-reading the node after a refusal failed.
    #[error("patching node {node}: {}", describe(.source))]
    NodePatch {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// A node kept changing under the guarded patch: a `test` failed (or 409) on every attempt.
    #[error("node {node} changed during every one of {attempts} guarded patch attempts")]
    NodeConflict {
        /// The node.
        node: String,
        /// Attempts made.
        attempts: usize,
    },
    /// The patch does not fit the node: an operation other than `test` fails on the node as
    /// the API server has it.
    #[error("patching node {node}: the patch does not apply to the node as it is ({operation}); the API server answered {}", describe(.source))]
    NodePatchInvalid {
        /// The node.
        node: String,
        /// The failing operation.
        operation: FailingOperation,
        /// The API server's refusal.
        source: kube::Error,
    },
    /// The API server refused the patch and planning again from the node as it is now gives
    /// the same patch (or the attempts ran out without a failing `test` to explain it).
    #[error("patching node {node}: the API server refused the patch planned from the node as it is now: {}", describe(.source))]
    NodePatchRejected {
        /// The node.
        node: String,
        /// The API server's refusal.
        source: kube::Error,
    },
    /// Adding or removing the finalizer failed.
    #[error("updating the finalizer: {}", describe(.0))]
    Finalizer(#[source] kube::Error),
    /// Creating, repairing or deleting the RuntimeClass failed.
    #[error("RuntimeClass {name}: {}", describe(.source))]
    RuntimeClass {
        /// The RuntimeClass.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The pool cannot own a RuntimeClass (no uid).
    #[error(transparent)]
    Owner(#[from] RuntimeClassError),
    /// A member node reports an allocatable quantity that cannot be summed.
    #[error(transparent)]
    Allocatable(#[from] AllocatableError),
    /// Writing the status failed.
    #[error("writing status: {}", describe(.0))]
    Status(#[source] kube::Error),
    /// Listing the nodes from the API server (for a pool's cleanup) failed.
    #[error("listing nodes: {}", describe(.0))]
    NodeList(#[source] kube::Error),
}

impl ReconcileFailure {
    /// The CamelCase reason used for the Ready condition and the Warning event.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileFailure::NodePatch { .. } => "NodePatchFailed",
            ReconcileFailure::NodeConflict { .. } => "NodeConflict",
            ReconcileFailure::NodePatchInvalid { .. } => "NodePatchInvalid",
            ReconcileFailure::NodePatchRejected { .. } => "NodePatchRejected",
            ReconcileFailure::Finalizer(_) => "FinalizerUpdateFailed",
            ReconcileFailure::RuntimeClass { .. } => "RuntimeClassFailed",
            ReconcileFailure::Owner(_) => "PoolNotPersisted",
            ReconcileFailure::Allocatable(_) => "InvalidAllocatable",
            ReconcileFailure::Status(_) => "StatusUpdateFailed",
            ReconcileFailure::NodeList(_) => "NodeListFailed",
        }
    }

    /// The HTTP-like code for `status.status`: the API server's code when there is one.
    pub fn code(&self) -> i32 {
        let api = |e: &kube::Error| match e {
            kube::Error::Api(s) if s.code >= 400 => i32::from(s.code),
            _ => 500,
        };
        match self {
            ReconcileFailure::NodePatch { source, .. }
            | ReconcileFailure::NodePatchInvalid { source, .. }
            | ReconcileFailure::NodePatchRejected { source, .. }
            | ReconcileFailure::RuntimeClass { source, .. } => api(source),
            ReconcileFailure::Finalizer(e)
            | ReconcileFailure::Status(e)
            | ReconcileFailure::NodeList(e) => api(e),
            ReconcileFailure::NodeConflict { .. } => 409,
            ReconcileFailure::Owner(_) | ReconcileFailure::Allocatable(_) => 422,
        }
    }
}

impl ReconcileError for ReconcileFailure {}
/// An API error as the API server put it: `<code> <reason>: <message>`, then the field causes;
/// other errors as they display.
pub fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let mut out = format!("{} {}: {}", s.code, s.reason, s.message);
            for c in s.details.iter().flat_map(|d| &d.causes) {
                out.push_str("; ");
                if !c.field.is_empty() {
                    out.push_str(&c.field);
                    out.push_str(": ");
                }
                out.push_str(&c.message);
            }
            out
        }
        other => other.to_string(),
    }
}

/// A 409: the object changed since it was read (stale resourceVersion, failed precondition).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The API server's refusal of a JSON patch whose operations do not apply: a 422 none of whose
/// causes names a field. Upstream answers a failed `test`, a missing path and any other
/// operation that does not apply alike ("the server rejected our request due to an error in
/// our request", no causes; a server that says more puts it in a cause without a field), so
/// this alone does not say that the node changed. A 422 with a field cause is the validation
/// of the patched object instead.
pub fn is_json_patch_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s)
        if s.code == 422
            && s.details.as_ref().is_none_or(|d| d.causes.iter().all(|c| c.field.is_empty())))
}

/// What a refused node patch means (see the [reconciler docs](super)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The node changed since it was read: a 409, or a `test` of the patch fails on the node
    /// as it is now. Plan again from the fresh node.
    Conflict(Option<FailingOperation>),
    /// An operation other than `test` fails on the node as it is now: the patch does not fit
    /// the node. Report it; planning again from the same node would give the same patch.
    Inapplicable(FailingOperation),
    /// A JSON-patch refusal, but the patch applies to the node as it is now: it changed back,
    /// or the refusal had another reason. Plan again, and report it if that gives the same
    /// patch.
    Unexplained,
    /// Not a refusal of the patch's content (another code, or a 422 with field causes):
    /// report the API server's answer as it is.
    Other,
}

impl Refusal {
    /// Whether the node should be re-read to classify `e` ([`classify_refusal`]).
    pub fn needs_fresh_node(e: &kube::Error) -> bool {
        is_conflict(e) || is_json_patch_refusal(e)
    }
}

/// Classifies the API server's refusal `e` of `patch`, replaying the patch on `fresh`, the node
/// as the API server has it now (re-read after the refusal).
pub fn classify_refusal(e: &kube::Error, patch: &json_patch::Patch, fresh: &Node) -> Refusal {
    if !Refusal::needs_fresh_node(e) {
        return Refusal::Other;
    }
    // A node that cannot be serialised cannot be replayed on: only a 409 is then a conflict.
    let failing = first_failing_operation(patch, fresh).ok().flatten();
    match failing {
        Some(op) if !op.is_test => Refusal::Inapplicable(op),
        Some(op) => Refusal::Conflict(Some(op)),
        None if is_conflict(e) => Refusal::Conflict(None),
        None => Refusal::Unexplained,
    }
}

pub(super) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
