//! # kcr-predicate: which events reach the handler
//!
//! A [`Predicate`] looks at an [`Event`](kcr_core::Event) and says yes or no. It has one method
//! per event kind, each accepting by default, and [`Predicate::evaluate`] to dispatch. Any closure
//! `Fn(&Event<K>) -> bool` is a predicate, [`Funcs`] takes one closure per kind, and predicates
//! combine with [`PredicateExt::and`], [`PredicateExt::or`], [`PredicateExt::not`] (or [`All`] /
//! [`Any`] over boxed lists).
//!
//! Built-ins: [`ResourceVersionChanged`], [`GenerationChanged`], [`LabelsChanged`],
//! [`AnnotationsChanged`], [`FinalizersChanged`], [`LabelSelectorPredicate`] (a bad selector is a
//! [`PredicateError`], never a panic) and [`IgnoreStatusOnlyUpdates`] for types without a
//! generation.
//!
//! ## Resync events
//!
//! A cache with a sync period (`kcr_source::Cache::set_sync_period`, controller-runtime's
//! `SyncPeriod`) resends every cached object as an update whose old and new object are the same
//! one. What each predicate does with it:
//!
//! | predicate | a resync event |
//! |---|---|
//! | [`ResourceVersionChanged`], [`GenerationChanged`], [`LabelsChanged`], [`AnnotationsChanged`], [`FinalizersChanged`] | dropped: nothing changed |
//! | [`IgnoreStatusOnlyUpdates`] | dropped: old and new are equal, status or not |
//! | [`LabelSelectorPredicate`] | passes when the object matches the selector |
//! | [`Funcs`] without an update closure, and the default methods | passes |
//!
//! So a controller that wants periodic reconciles from a resync must not filter its watch with
//! a "changed" predicate (controller-runtime's predicates behave the same way);
//! `Action::requeue_after` is the per-object alternative.
//!
//! The crate only needs the `Event` type, so it works on any stream of events, not only inside a
//! kcr controller ([`PredicateStreamExt::filter_events`] filters a source's stream directly):
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kcr_predicate::{GenerationChanged, LabelsChanged, LabelSelectorPredicate, Predicate, PredicateExt};
//! use kcr_core::Event;
//!
//! let mut old = Deployment::default();
//! old.metadata.generation = Some(1);
//! old.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
//! let mut new = old.clone();
//! new.metadata.resource_version = Some("2".into()); // status-only write: generation unchanged
//!
//! let interesting = GenerationChanged
//!     .or(LabelsChanged)
//!     .and(LabelSelectorPredicate::parse("app=web").unwrap());
//! assert!(!interesting.evaluate(&Event::update(old.clone(), new.clone())));
//!
//! new.metadata.generation = Some(2);
//! assert!(interesting.evaluate(&Event::update(old, new.clone())));
//! assert!(interesting.evaluate(&Event::create(new))); // creates pass the "changed" predicates
//! ```
#![forbid(unsafe_code)]

mod changed;
mod combinators;
mod error;
mod predicate;
mod selector;
mod status;
mod stream;
#[cfg(test)]
mod test_support;

pub use changed::{
    AnnotationsChanged, FinalizersChanged, GenerationChanged, LabelsChanged, ResourceVersionChanged,
};
pub use combinators::{All, And, Any, Not, Or, and, not, or};
pub use error::PredicateError;
pub use predicate::{Funcs, Predicate, PredicateExt};
pub use selector::LabelSelectorPredicate;
pub use status::IgnoreStatusOnlyUpdates;
pub use stream::{EventItem, PredicateStreamExt};
