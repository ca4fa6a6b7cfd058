use super::*;
use kube_core::SelectorExt;
use std::collections::BTreeMap;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn parses_every_operator() {
    let s = parse_label_selector(
        " a = 1 , b==2, c!=3, d in (x, y), e notin (z), f, !g, example.com/h=, i in ()",
    );
    // `in ()` has one empty value: matches only an empty label
    let s = s.expect("valid selector");
    let expected: Selector = [
        Expression::Equal("a".into(), "1".into()),
        Expression::Equal("b".into(), "2".into()),
        Expression::NotEqual("c".into(), "3".into()),
        Expression::In("d".into(), ["x".into(), "y".into()].into()),
        Expression::NotIn("e".into(), ["z".into()].into()),
        Expression::Exists("f".into()),
        Expression::DoesNotExist("g".into()),
        Expression::Equal("example.com/h".into(), "".into()),
        Expression::In("i".into(), ["".into()].into()),
    ]
    .into_iter()
    .collect();
    assert_eq!(s, expected);
}

#[test]
fn empty_selects_all() {
    let s = parse_label_selector("   ").expect("empty is valid");
    assert!(s.selects_all());
    assert!(s.matches(&labels(&[])));
}

#[test]
fn matching_follows_kubernetes_semantics() {
    let s = parse_label_selector("app=web,tier notin (db),!legacy").expect("valid");
    assert!(s.matches(&labels(&[("app", "web")])));
    assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("legacy", "")])));
    assert!(!s.matches(&labels(&[("app", "api")])));
}

#[test]
fn rejects_bad_selectors_with_typed_errors() {
    for bad in [
        "app in (web",
        "app in web",
        "app=web,",
        ",",
        "app ~ web",
        "a b",
        "app!web",
    ] {
        assert!(
            matches!(parse_label_selector(bad), Err(SelectorError::Syntax { .. })),
            "{bad:?} should be a syntax error, got {:?}",
            parse_label_selector(bad)
        );
    }
    assert!(matches!(
        parse_label_selector("-app=web"),
        Err(SelectorError::InvalidKey { .. })
    ));
    assert!(matches!(
        parse_label_selector("Example.com/app=web"),
        Err(SelectorError::InvalidKey { .. })
    ));
    assert!(matches!(
        parse_label_selector(&format!("{}=x", "k".repeat(64))),
        Err(SelectorError::InvalidKey { .. })
    ));
    assert!(matches!(
        parse_label_selector("app=web-"),
        Err(SelectorError::InvalidValue { .. })
    ));
    assert!(matches!(
        parse_label_selector("app=a/b"),
        Err(SelectorError::InvalidValue { .. })
    ));
    assert_eq!(
        parse_label_selector("replicas>3"),
        Err(SelectorError::UnsupportedOperator {
            selector: "replicas>3".into(),
            operator: ">".into()
        })
    );
    let message = parse_label_selector("app in (web").unwrap_err().to_string();
    assert!(message.contains("app in (web"), "{message}");
}

#[test]
fn bad_keys_and_values_carry_the_api_servers_messages() {
    match parse_label_selector(&format!("{}=x", "k".repeat(64))) {
        Err(SelectorError::InvalidKey { reason, .. }) => {
            assert_eq!(
                reason,
                kcr_names::validate_qualified_name(&"k".repeat(64)).join("; ")
            );
            assert!(reason.contains("63 characters"), "{reason}");
        }
        other => panic!("expected an invalid key, got {other:?}"),
    }
    match parse_label_selector("app=web-") {
        Err(SelectorError::InvalidValue { reason, .. }) => {
            assert_eq!(reason, kcr_names::validate_label_value("web-").join("; "));
        }
        other => panic!("expected an invalid value, got {other:?}"),
    }
}
