//! `and`, `or`, `not`, and the n-ary [`All`] / [`Any`].
//!
//! Evaluation short-circuits left to right, so put cheap predicates first.

use std::sync::Arc;

use kcr_core::Event;

use crate::Predicate;

/// Accepts when both predicates accept. Built by [`PredicateExt::and`](crate::PredicateExt::and)
/// or [`and`].
#[derive(Debug, Clone, Copy)]
pub struct And<A, B>(pub A, pub B);

/// Accepts when either predicate accepts. Built by [`PredicateExt::or`](crate::PredicateExt::or)
/// or [`or`].
#[derive(Debug, Clone, Copy)]
pub struct Or<A, B>(pub A, pub B);

/// Accepts what the inner predicate rejects. Built by
/// [`PredicateExt::not`](crate::PredicateExt::not) or [`not`].
#[derive(Debug, Clone, Copy)]
pub struct Not<P>(pub P);

/// Both `a` and `b` must accept.
pub fn and<K, A: Predicate<K>, B: Predicate<K>>(a: A, b: B) -> And<A, B> {
    And(a, b)
}

/// `a` or `b` must accept.
pub fn or<K, A: Predicate<K>, B: Predicate<K>>(a: A, b: B) -> Or<A, B> {
    Or(a, b)
}

/// Negates `p`.
pub fn not<K, P: Predicate<K>>(p: P) -> Not<P> {
    Not(p)
}

impl<K, A: Predicate<K>, B: Predicate<K>> Predicate<K> for And<A, B> {
    fn create(&self, object: &Arc<K>, initial: bool) -> bool {
        self.0.create(object, initial) && self.1.create(object, initial)
    }
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        self.0.update(old, new) && self.1.update(old, new)
    }
    fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
        self.0.delete(object, state_unknown) && self.1.delete(object, state_unknown)
    }
    fn generic(&self, object: &Arc<K>) -> bool {
        self.0.generic(object) && self.1.generic(object)
    }
    fn evaluate(&self, event: &Event<K>) -> bool {
        self.0.evaluate(event) && self.1.evaluate(event)
    }
}

impl<K, A: Predicate<K>, B: Predicate<K>> Predicate<K> for Or<A, B> {
    fn create(&self, object: &Arc<K>, initial: bool) -> bool {
        self.0.create(object, initial) || self.1.create(object, initial)
    }
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        self.0.update(old, new) || self.1.update(old, new)
    }
    fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
        self.0.delete(object, state_unknown) || self.1.delete(object, state_unknown)
    }
    fn generic(&self, object: &Arc<K>) -> bool {
        self.0.generic(object) || self.1.generic(object)
    }
    fn evaluate(&self, event: &Event<K>) -> bool {
        self.0.evaluate(event) || self.1.evaluate(event)
    }
}

impl<K, P: Predicate<K>> Predicate<K> for Not<P> {
    fn create(&self, object: &Arc<K>, initial: bool) -> bool {
        !self.0.create(object, initial)
    }
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        !self.0.update(old, new)
    }
    fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
        !self.0.delete(object, state_unknown)
    }
    fn generic(&self, object: &Arc<K>) -> bool {
        !self.0.generic(object)
    }
    fn evaluate(&self, event: &Event<K>) -> bool {
        !self.0.evaluate(event)
    }
}

/// Accepts when every predicate accepts; an empty `All` accepts everything (like a controller's
/// list of predicates).
pub struct All<K>(pub Vec<Box<dyn Predicate<K>>>);

/// Accepts when at least one predicate accepts; an empty `Any` rejects everything.
pub struct Any<K>(pub Vec<Box<dyn Predicate<K>>>);

impl<K> std::fmt::Debug for All<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "All({} predicates)", self.0.len())
    }
}

impl<K> std::fmt::Debug for Any<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Any({} predicates)", self.0.len())
    }
}

/// [`All`] and [`Any`]: every method asks the list, with `Iterator::all` or `Iterator::any`.
macro_rules! list_predicate {
    ($($list:ident => $fold:ident),*) => {$(
        impl<K: 'static> Predicate<K> for $list<K> {
            fn create(&self, object: &Arc<K>, initial: bool) -> bool {
                self.0.iter().$fold(|p| p.create(object, initial))
            }
            fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
                self.0.iter().$fold(|p| p.update(old, new))
            }
            fn delete(&self, object: &Arc<K>, state_unknown: bool) -> bool {
                self.0.iter().$fold(|p| p.delete(object, state_unknown))
            }
            fn generic(&self, object: &Arc<K>) -> bool {
                self.0.iter().$fold(|p| p.generic(object))
            }
            fn evaluate(&self, event: &Event<K>) -> bool {
                self.0.iter().$fold(|p| p.evaluate(event))
            }
        }
    )*};
}

list_predicate!(All => all, Any => any);

#[cfg(test)]
mod tests;
