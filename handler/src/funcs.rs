//! [`Funcs`]: one closure per event kind.

use std::sync::Arc;

use kcr_core::{Event, PerKind};
use kcr_queue::WorkQueue;

use crate::{EventHandler, Request};

type ObjectFlagFn<K, Q> = dyn Fn(&Arc<K>, bool, &WorkQueue<Q>) + Send + Sync;
type OldNewFn<K, Q> = dyn Fn(&Arc<K>, &Arc<K>, &WorkQueue<Q>) + Send + Sync;
type ObjectFn<K, Q> = dyn Fn(&Arc<K>, &WorkQueue<Q>) + Send + Sync;
/// The closures of a [`Funcs`], one per event kind.
type Closures<K, Q> =
    PerKind<ObjectFlagFn<K, Q>, OldNewFn<K, Q>, ObjectFlagFn<K, Q>, ObjectFn<K, Q>>;

/// A handler made of one closure per event kind; kinds without a closure enqueue nothing.
///
/// The closures get the queue and choose priorities themselves (see
/// [`priority_of`](crate::priority_of)).
/// The queue's key is [`Request`] unless given: `Funcs<K, MyKey>`.
pub struct Funcs<K, Q = Request> {
    fns: Closures<K, Q>,
}

kcr_core::per_kind_wrapper_impls!(Funcs, Q);

impl<K, Q> Funcs<K, Q> {
    /// A handler that does nothing until closures are set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Closure for creates: `(object, initial, queue)`.
    pub fn create(
        mut self,
        f: impl Fn(&Arc<K>, bool, &WorkQueue<Q>) + Send + Sync + 'static,
    ) -> Self {
        self.fns.create = Some(Box::new(f));
        self
    }
    /// Closure for updates: `(old, new, queue)`.
    pub fn update(
        mut self,
        f: impl Fn(&Arc<K>, &Arc<K>, &WorkQueue<Q>) + Send + Sync + 'static,
    ) -> Self {
        self.fns.update = Some(Box::new(f));
        self
    }
    /// Closure for deletes: `(object, state_unknown, queue)`.
    pub fn delete(
        mut self,
        f: impl Fn(&Arc<K>, bool, &WorkQueue<Q>) + Send + Sync + 'static,
    ) -> Self {
        self.fns.delete = Some(Box::new(f));
        self
    }
    /// Closure for generic events: `(object, queue)`.
    pub fn generic(mut self, f: impl Fn(&Arc<K>, &WorkQueue<Q>) + Send + Sync + 'static) -> Self {
        self.fns.generic = Some(Box::new(f));
        self
    }
}

impl<K: 'static, Q: 'static> EventHandler<K, Q> for Funcs<K, Q> {
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Q>) {
        match event {
            Event::Create { object, initial } => {
                if let Some(f) = &self.fns.create {
                    f(object, *initial, queue)
                }
            }
            Event::Update { old, new } => {
                if let Some(f) = &self.fns.update {
                    f(old, new, queue)
                }
            }
            Event::Delete {
                object,
                state_unknown,
            } => {
                if let Some(f) = &self.fns.delete {
                    f(object, *state_unknown, queue)
                }
            }
            Event::Generic { object } => {
                if let Some(f) = &self.fns.generic {
                    f(object, queue)
                }
            }
        }
    }
}
