//! A controller's error policy: what happens to a request whose reconcile returned a
//! (non-terminal) error, kube-runtime's `error_policy` in kcr's terms.
//!
//! | [`ErrorAction`] | queue operation | failure history |
//! |---|---|---|
//! | [`RateLimited`](ErrorAction::RateLimited) (the default, without a policy) | `add_rate_limited`: the delay grows per the rate limiter | kept (it is what grows the delay) |
//! | [`RequeueAfter(d)`](ErrorAction::RequeueAfter) | `add_after(d)` | left as it is: [`Context::retries`](crate::Context::retries) counts rate-limited retries only |
//! | [`GiveUp`](ErrorAction::GiveUp) | `forget`: not retried until an event enqueues it again | cleared |
//!
//! [Terminal errors](crate::ReconcileError::is_terminal) are never retried and never reach the
//! policy. Every error, whatever the policy says, counts in
//! `controller_runtime_reconcile_errors_total`; a [`GiveUp`](ErrorAction::GiveUp) is not a terminal
//! error and does not count in `controller_runtime_terminal_reconcile_errors_total`. Panics and
//! timeouts are not errors of the reconciler's type: they are always retried with backoff.
//!
//! ```
//! use std::time::Duration;
//! use kcr_controller::{Action, Context, ErrorAction, Reconciler};
//!
//! #[derive(Debug, thiserror::Error)]
//! enum Error {
//!     #[error("waiting for the bucket to exist")]
//!     NotYet,
//!     #[error(transparent)]
//!     Api(#[from] kube::Error),
//! }
//! impl kcr_controller::ReconcileError for Error {}
//!
//! // Poll every 10 s while a dependency is missing, back off on everything else, and stop
//! // retrying after 20 failures.
//! fn policy(error: &Error, ctx: &Context) -> ErrorAction {
//!     match error {
//!         _ if ctx.retries() >= 20 => ErrorAction::GiveUp,
//!         Error::NotYet => ErrorAction::RequeueAfter(Duration::from_secs(10)),
//!         Error::Api(_) => ErrorAction::RateLimited,
//!     }
//! }
//! # let _ = kcr_controller::Builder::new().error_policy(policy);
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::reconciler::Context;

/// What to do with a request whose reconcile failed; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorAction {
    /// Retry with the queue's rate limiter (per-item exponential backoff).
    #[default]
    RateLimited,
    /// Retry after this delay.
    RequeueAfter(Duration),
    /// Do not retry: forget the request until an event enqueues it again.
    GiveUp,
}

/// A controller's error policy: maps a non-terminal error of its reconciler, with the
/// reconcile's context, to an [`ErrorAction`].
pub type ErrorPolicy<E> = Arc<dyn Fn(&E, &Context) -> ErrorAction + Send + Sync>;
