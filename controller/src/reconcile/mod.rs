//! What a controller runs for each request: the reconciler traits ([`reconciler`],
//! [`object_reconciler`]), why a reconcile runs ([`reason`]), what happens to a failed one
//! ([`error_policy`]), its tracing span ([`log`]) and the time it reads ([`clock`]).

pub mod clock;
pub mod error_policy;
pub mod log;
pub mod object_reconciler;
pub mod reason;
pub mod reconciler;
