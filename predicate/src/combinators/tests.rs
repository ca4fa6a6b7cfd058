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
