//! What reconcilers do to objects, done once: owner references, create-or-update,
//! server-side apply and finalizers (controller-runtime's `controllerutil` and `finalizer`
//! packages).
//!
//! - [`set_controller_reference`] (and [`set_controller_reference_with`] a choice of
//!   `blockOwnerDeletion`), [`set_owner_reference`], [`has_controller_reference`],
//!   [`has_owner_reference`], [`remove_owner_reference`], [`remove_controller_reference`]:
//!   owner references with controller-runtime's checks ([`OwnerError`]).
//! - [`add_finalizer`], [`remove_finalizer`], [`contains_finalizer`]: a finalizer in the
//!   object's list, in memory.
//! - [`Finalizers`]: several named finalizers of a kind, each with its own cleanup, managed as
//!   one list with guarded patches.
//! - [`create_or_update`], [`create_or_patch`]: make an object look as a mutate function says,
//!   reporting [`OperationResult::Created`], [`OperationResult::Updated`] or
//!   [`OperationResult::Unchanged`].
//! - [`Applier`]: server-side apply as one field manager, with an explicit [`Conflicts`]
//!   choice.
//! - [`conditions`]: status conditions as apimachinery's `meta.SetStatusCondition` keeps them
//!   (the transition time moves only when the status does).
//! - [`finalizer`]: add a finalizer before the first apply, run cleanup on deletion, remove the
//!   finalizer only after the cleanup succeeded; every patch guarded by JSON-patch `test`s.
//!
//! The helpers that write take an [`ObjectApi`]: the manager's [`kcr_client::Client`] (the
//! object's own namespace, the client's field owner) or a kube `Api` (its namespace, the
//! default field owner `kcr-controller`); every write carries the field owner.
//!
//! Errors are [`ObjectError`]s naming the object and the request that failed.

mod apply;
pub mod conditions;
mod create_or_update;
mod error;
mod finalizer;
mod object_api;
mod owner;

pub use apply::{Applier, Conflicts};
pub use create_or_update::{Mutate, OperationResult, create_or_patch, create_or_update};
pub use error::ObjectError;
pub use finalizer::{
    Event as FinalizerEvent, Finalized, FinalizerError, Finalizers, FinalizersError, add_finalizer,
    contains_finalizer, finalizer, remove_finalizer,
};
pub use object_api::{Object, ObjectApi};
pub use owner::{
    OwnerError, controller_of, has_controller_reference, has_owner_reference,
    remove_controller_reference, remove_owner_reference, set_controller_reference,
    set_controller_reference_with, set_owner_reference,
};
