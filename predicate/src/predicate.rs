//! The [`Predicate`] trait, closures as predicates, and [`PredicateExt`] for combining them.

use std::sync::Arc;

use kcr_core::{Event, PerKind};

/// Decides whether an [`Event`] should reach the event handler.
///
/// Implement the per-kind methods you care about; the others accept by default. Consumers call
/// [`Predicate::evaluate`], which dispatches on the event kind. (If you override `evaluate`, keep
/// it consistent with the per-kind methods: the combinators call `evaluate`.)
///
/// Any `Fn(&Event<K>) -> bool + Send + Sync + 'static` closure is a predicate.
pub trait Predicate<K>: Send + Sync + 'static {
    /// A create event. Default: accept.
    fn create(&self, object: &Arc<K>, initial: bool) -> bool {
        let _ = (object, initial);
        true
    }

    /// An update event. Default: accept.
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        let _ = (old, new);
        true
    }

    /// A delete event. Default: accept.
    fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
        let _ = (object, state_unknown);
        true
    }

    /// A generic event. Default: accept.
    fn generic(&self, object: &Arc<K>) -> bool {
        let _ = object;
        true
    }

    /// Whether `event` passes.
    fn evaluate(&self, event: &Event<K>) -> bool {
        match event {
            Event::Create { object, initial } => self.create(object, *initial),
            Event::Update { old, new } => self.update(old, new),
            Event::Delete {
                object,
                state_unknown,
            } => self.delete(object, *state_unknown),
            Event::Generic { object } => self.generic(object),
        }
    }
}

impl<K, F> Predicate<K> for F
where
    F: Fn(&Event<K>) -> bool + Send + Sync + 'static,
{
    fn create(&self, object: &Arc<K>, initial: bool) -> bool {
        self(&Event::Create {
            object: Arc::clone(object),
            initial,
        })
    }
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        self(&Event::Update {
            old: Arc::clone(old),
            new: Arc::clone(new),
        })
    }
    fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
        self(&Event::Delete {
            object: Arc::clone(object),
            state_unknown,
        })
    }
    fn generic(&self, object: &Arc<K>) -> bool {
        self(&Event::Generic {
            object: Arc::clone(object),
        })
    }
    fn evaluate(&self, event: &Event<K>) -> bool {
        self(event)
    }
}

/// `Box<dyn Predicate<K>>` and `Arc<dyn Predicate<K>>` are predicates: they ask the one inside.
macro_rules! forward_predicate {
    ($($pointer:ident),*) => {$(
        impl<K: 'static> Predicate<K> for $pointer<dyn Predicate<K>> {
            fn create(&self, object: &Arc<K>, initial: bool) -> bool {
                (**self).create(object, initial)
            }
            fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
                (**self).update(old, new)
            }
            fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
                (**self).delete(object, state_unknown)
            }
            fn generic(&self, object: &Arc<K>) -> bool {
                (**self).generic(object)
            }
            fn evaluate(&self, event: &Event<K>) -> bool {
                (**self).evaluate(event)
            }
        }
    )*};
}

forward_predicate!(Box, Arc);

/// Combinator methods for predicates.
///
/// The trait does not name the object type, so `GenerationChanged.or(LabelsChanged)` needs no
/// type annotation: the combined value is a `Predicate<K>` for every `K` both sides support. (It
/// is implemented for every `Send + Sync + 'static` type; the result is only a predicate when
/// both parts are.)
pub trait PredicateExt: Sized + Send + Sync + 'static {
    /// Both must accept (`other` is not evaluated when `self` rejects).
    fn and<P>(self, other: P) -> crate::And<Self, P> {
        crate::And(self, other)
    }
    /// Either must accept (`other` is not evaluated when `self` accepts).
    fn or<P>(self, other: P) -> crate::Or<Self, P> {
        crate::Or(self, other)
    }
    /// Accepts what `self` rejects and the other way round.
    fn not(self) -> crate::Not<Self> {
        crate::Not(self)
    }
    /// Type-erases the predicate.
    fn boxed<K>(self) -> Box<dyn Predicate<K>>
    where
        Self: Predicate<K>,
    {
        Box::new(self)
    }
}

impl<P: Send + Sync + 'static> PredicateExt for P {}

/// Builds a predicate from one closure per event kind; kinds without a closure accept.
///
/// ```
/// use kcr_predicate::{Funcs, Predicate};
/// use kcr_core::Event;
/// let only_real_deletes = Funcs::<String>::new().delete(|_obj, state_unknown| !state_unknown);
/// assert!(!only_real_deletes.evaluate(&Event::Delete { object: "x".to_string().into(), state_unknown: true }));
/// assert!(only_real_deletes.evaluate(&Event::create("x".to_string())));
/// ```
pub struct Funcs<K> {
    fns: PerKind<ObjectFlagFn<K>, OldNewFn<K>, ObjectFlagFn<K>, ObjectFn<K>>,
}

type ObjectFlagFn<K> = dyn Fn(&Arc<K>, bool) -> bool + Send + Sync;
type OldNewFn<K> = dyn Fn(&Arc<K>, &Arc<K>) -> bool + Send + Sync;
type ObjectFn<K> = dyn Fn(&Arc<K>) -> bool + Send + Sync;

kcr_core::per_kind_wrapper_impls!(Funcs);

impl<K> Funcs<K> {
    /// All kinds accept.
    pub fn new() -> Self {
        Self::default()
    }
    /// Closure for creates: `(object, initial)`.
    pub fn create(mut self, f: impl Fn(&Arc<K>, bool) -> bool + Send + Sync + 'static) -> Self {
        self.fns.create = Some(Box::new(f));
        self
    }
    /// Closure for updates: `(old, new)`.
    pub fn update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) -> bool + Send + Sync + 'static) -> Self {
        self.fns.update = Some(Box::new(f));
        self
    }
    /// Closure for deletes: `(object, state_unknown)`.
    pub fn delete(mut self, f: impl Fn(&Arc<K>, bool) -> bool + Send + Sync + 'static) -> Self {
        self.fns.delete = Some(Box::new(f));
        self
    }
    /// Closure for generic events.
    pub fn generic(mut self, f: impl Fn(&Arc<K>) -> bool + Send + Sync + 'static) -> Self {
        self.fns.generic = Some(Box::new(f));
        self
    }
}

impl<K: 'static> Predicate<K> for Funcs<K> {
    fn create(&self, object: &Arc<K>, initial: bool) -> bool {
        self.fns.create.as_ref().is_none_or(|f| f(object, initial))
    }
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        self.fns.update.as_ref().is_none_or(|f| f(old, new))
    }
    fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
        self.fns
            .delete
            .as_ref()
            .is_none_or(|f| f(object, state_unknown))
    }
    fn generic(&self, object: &Arc<K>) -> bool {
        self.fns.generic.as_ref().is_none_or(|f| f(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct AcceptAll;
    impl Predicate<u8> for AcceptAll {}

    fn every_kind(n: u8) -> Vec<Event<u8>> {
        vec![
            Event::create(n),
            Event::Create {
                object: Arc::new(n),
                initial: true,
            },
            Event::update(n, n),
            Event::delete(n),
            Event::Delete {
                object: Arc::new(n),
                state_unknown: true,
            },
            Event::generic(n),
        ]
    }

    #[test]
    fn default_methods_accept_everything() {
        for e in every_kind(1) {
            assert!(AcceptAll.evaluate(&e));
            assert!(AcceptAll.boxed().evaluate(&e));
        }
    }

    #[test]
    fn closures_see_the_same_event_through_every_entry_point() {
        let only_initial_creates = |e: &Event<u8>| matches!(e, Event::Create { initial: true, .. });
        let arc: Arc<dyn Predicate<u8>> = Arc::new(only_initial_creates);
        for e in every_kind(1) {
            let expected = matches!(e, Event::Create { initial: true, .. });
            assert_eq!(only_initial_creates.evaluate(&e), expected);
            assert_eq!(arc.evaluate(&e), expected);
        }
        let o = Arc::new(1u8);
        assert!(Predicate::create(&only_initial_creates, &o, true));
        assert!(!Predicate::create(&only_initial_creates, &o, false));
        assert!(!arc.update(&o, &o));
        assert!(!arc.delete(&o, true));
        assert!(!arc.generic(&o));
    }

    #[test]
    fn funcs_truth_table() {
        let p = Funcs::<u8>::new()
            .create(|_, initial| !initial)
            .update(|old, new| old != new)
            .delete(|_, state_unknown| !state_unknown)
            .generic(|o| **o > 5);
        let cases = [
            (Event::create(1), true),
            (
                Event::Create {
                    object: Arc::new(1),
                    initial: true,
                },
                false,
            ),
            (Event::update(1, 2), true),
            (Event::update(1, 1), false),
            (Event::delete(1), true),
            (
                Event::Delete {
                    object: Arc::new(1),
                    state_unknown: true,
                },
                false,
            ),
            (Event::generic(6), true),
            (Event::generic(5), false),
        ];
        for (e, expected) in cases {
            assert_eq!(p.evaluate(&e), expected, "{e:?}");
        }
        let empty = Funcs::<u8>::default();
        assert!(format!("{empty:?}").contains("create: false"));
        for e in every_kind(0) {
            assert!(empty.evaluate(&e));
        }
    }
}
