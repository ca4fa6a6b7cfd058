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
mod tests {
    use super::*;
    use crate::PredicateExt;

    /// A constant predicate.
    #[derive(Clone, Copy)]
    struct Const(bool);
    impl Predicate<u8> for Const {
        fn create(&self, _: &Arc<u8>, _: bool) -> bool {
            self.0
        }
        fn update(&self, _: &Arc<u8>, _: &Arc<u8>) -> bool {
            self.0
        }
        fn delete(&self, _: &Arc<u8>, _: bool) -> bool {
            self.0
        }
        fn generic(&self, _: &Arc<u8>) -> bool {
            self.0
        }
    }

    fn events() -> Vec<Event<u8>> {
        vec![
            Event::create(1),
            Event::Create {
                object: Arc::new(1),
                initial: true,
            },
            Event::update(1, 2),
            Event::delete(1),
            Event::Delete {
                object: Arc::new(1),
                state_unknown: true,
            },
            Event::generic(1),
        ]
    }

    /// Checks `evaluate` and the per-kind method agree with `expected` for every event kind.
    fn check(p: &impl Predicate<u8>, expected: bool, label: &str) {
        for e in events() {
            assert_eq!(p.evaluate(&e), expected, "{label} evaluate {:?}", e.kind());
            let direct = match &e {
                Event::Create { object, initial } => p.create(object, *initial),
                Event::Update { old, new } => p.update(old, new),
                Event::Delete {
                    object,
                    state_unknown,
                } => p.delete(object, *state_unknown),
                Event::Generic { object } => p.generic(object),
            };
            assert_eq!(direct, expected, "{label} per-kind {:?}", e.kind());
        }
    }

    #[test]
    fn truth_tables() {
        for a in [false, true] {
            check(&Const(a).not(), !a, &format!("not {a}"));
            check(&not(Const(a)), !a, &format!("not() {a}"));
            for b in [false, true] {
                check(&Const(a).and(Const(b)), a && b, &format!("{a} and {b}"));
                check(&and(Const(a), Const(b)), a && b, &format!("and({a},{b})"));
                check(&Const(a).or(Const(b)), a || b, &format!("{a} or {b}"));
                check(&or(Const(a), Const(b)), a || b, &format!("or({a},{b})"));
                check(
                    &All(vec![Const(a).boxed(), Const(b).boxed()]),
                    a && b,
                    &format!("all[{a},{b}]"),
                );
                check(
                    &Any(vec![Const(a).boxed(), Const(b).boxed()]),
                    a || b,
                    &format!("any[{a},{b}]"),
                );
            }
        }
        check(&All::<u8>(vec![]), true, "empty all");
        check(&Any::<u8>(vec![]), false, "empty any");
    }

    #[test]
    fn short_circuits() {
        let panicking = |_: &Event<u8>| -> bool { panic!("must not be evaluated") };
        assert!(!Const(false).and(panicking).evaluate(&Event::create(1)));
        assert!(Const(true).or(panicking).evaluate(&Event::create(1)));
    }

    #[test]
    fn combinators_compose_with_closures() {
        let even = |e: &Event<u8>| e.object().is_multiple_of(2);
        let big = |e: &Event<u8>| **e.object() > 10;
        let p = even.and(big.not());
        for (n, expected) in [(2u8, true), (3, false), (12, false), (13, false)] {
            assert_eq!(p.evaluate(&Event::generic(n)), expected, "{n}");
            assert_eq!(p.generic(&Arc::new(n)), expected, "{n} per-kind");
        }
    }
}
