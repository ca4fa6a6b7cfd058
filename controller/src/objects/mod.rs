//! What reconcilers do to objects, done once: owner references, create-or-update,
//! server-side apply and finalizers (controller-runtime's `controllerutil` and `finalizer`
//! packages).
//!
//! - [`set_controller_reference`], [`set_owner_reference`], [`has_controller_reference`]:
//!   owner references with controller-runtime's checks ([`OwnerError`]).
//! - [`create_or_update`], [`create_or_patch`]: make an object look as a mutate function says,
//!   reporting [`OperationResult::Created`], [`OperationResult::Updated`] or
//!   [`OperationResult::Unchanged`].
//! - [`Applier`]: server-side apply as one field manager, with an explicit [`Conflicts`]
//!   choice.
//! - [`finalizer`]: add a finalizer before the first apply, run cleanup on deletion, remove the
//!   finalizer only after the cleanup succeeded; every patch guarded by JSON-patch `test`s.
//!
//! Errors are [`ObjectError`]s naming the object and the request that failed.

mod apply;
mod create_or_update;
mod error;
mod finalizer;
mod owner;

pub use apply::{Applier, Conflicts};
pub use create_or_update::{Mutate, Object, OperationResult, create_or_patch, create_or_update};
pub use error::ObjectError;
pub use finalizer::{Event as FinalizerEvent, FinalizerError, finalizer};
pub use owner::{
    OwnerError, controller_of, has_controller_reference, set_controller_reference,
    set_owner_reference,
};
