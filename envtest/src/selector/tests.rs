//! Unit tests of the label and field selectors.
use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use serde_json::json;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sel(s: &str) -> LabelSelector {
    LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

#[test]
fn empty_selector_matches_everything() {
    assert!(sel("").matches(&labels(&[])));
    assert!(sel("   ").matches(&labels(&[("a", "b")])));
    assert!(sel("").is_empty());
}

#[test]
fn equality_operators() {
    let l = labels(&[("app", "web"), ("tier", "front")]);
    assert!(sel("app=web").matches(&l));
    assert!(sel("app==web").matches(&l));
    assert!(!sel("app=db").matches(&l));
    assert!(sel("app!=db").matches(&l));
    assert!(!sel("app!=web").matches(&l));
    // != matches objects without the label
    assert!(sel("missing!=x").matches(&l));
    assert!(!sel("missing=x").matches(&l));
    assert!(sel("app=web,tier=front").matches(&l));
    assert!(!sel("app=web,tier=back").matches(&l));
}

#[test]
fn set_operators() {
    let l = labels(&[("env", "prod")]);
    assert!(sel("env in (prod,staging)").matches(&l));
    assert!(!sel("env in (dev,staging)").matches(&l));
    assert!(sel("env notin (dev,staging)").matches(&l));
    assert!(!sel("env notin (prod)").matches(&l));
    assert!(sel("other notin (prod)").matches(&l));
    assert!(!sel("other in (prod)").matches(&l));
}

#[test]
fn existence_operators() {
    let l = labels(&[("gpu", "")]);
    assert!(sel("gpu").matches(&l));
    assert!(!sel("!gpu").matches(&l));
    assert!(sel("!cpu").matches(&l));
    assert!(!sel("cpu").matches(&l));
    assert!(sel("gpu=").matches(&l));
    assert!(sel("gpu,!cpu").matches(&l));
}

#[test]
fn numeric_comparisons() {
    let l = labels(&[("size", "5")]);
    assert!(sel("size>3").matches(&l));
    assert!(!sel("size>5").matches(&l));
    assert!(sel("size<6").matches(&l));
    assert!(!sel("nope<6").matches(&l));
    assert!(LabelSelector::parse("size>abc").is_err());
}

#[test]
fn whitespace_is_ignored_around_tokens() {
    let l = labels(&[("app", "web"), ("tier", "b")]);
    let s = sel("  app = web ,  tier  in ( a , b ) ");
    assert_eq!(s.requirements().len(), 2);
    assert!(s.matches(&l));
    assert!(sel("tier in(a,b)").matches(&l));
}

#[test]
fn prefixed_keys() {
    let l = labels(&[("kubernetes.io/hostname", "node-1")]);
    assert!(sel("kubernetes.io/hostname=node-1").matches(&l));
    assert!(sel("kubernetes.io/hostname in (node-1, node-2)").matches(&l));
}

#[test]
fn syntax_errors() {
    for bad in [
        "app web",
        "app in a,b",
        "app in (a,b",
        "app in ()",
        "app notin ()",
        "!",
        "app=(web)",
        "app in (a b)",
    ] {
        let err = LabelSelector::parse(bad).expect_err(bad);
        assert!(
            err.to_string().starts_with("unable to parse requirement"),
            "{bad}: {err}"
        );
    }
}

/// client-go's texts: errors inside a requirement carry the `unable to parse requirement`
/// prefix, errors between requirements do not; the end of the input reads as `''`.
#[test]
fn syntax_errors_between_requirements_are_not_prefixed() {
    for (bad, message) in [
        ("app=web,", "found '', expected: identifier after ','"),
        (
            ",app",
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        (
            "=web",
            "found '=', expected: !, identifier, or 'end of string'",
        ),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        (
            "app in (a,b",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier",
        ),
    ] {
        let err = LabelSelector::parse(bad).expect_err(bad);
        assert_eq!(err.to_string(), message, "{bad}");
    }
}

#[test]
fn invalid_keys_and_values() {
    let err = LabelSelector::parse("-app=web").unwrap_err();
    assert!(matches!(err, SelectorError::InvalidKey { .. }), "{err}");
    let err = LabelSelector::parse("app=-web").unwrap_err();
    assert!(matches!(err, SelectorError::InvalidValue { .. }), "{err}");
    assert!(err.to_string().contains("a valid label must be"), "{err}");
    let long = "a".repeat(64);
    assert!(LabelSelector::parse(&format!("{long}=x")).is_err());
    assert!(LabelSelector::parse(&format!("x={long}")).is_err());
    assert!(LabelSelector::parse("Bad_Prefix/x=y").is_err());
    assert!(LabelSelector::parse("/x=y").is_err());
    assert!(LabelSelector::parse("a.b/c_d.E=F-1").is_ok());
}

#[test]
fn display_round_trips() {
    let s = sel("a=b,c!=d,e in (f,g),h notin (i),j,!k");
    let again = sel(&s.to_string());
    assert_eq!(s, again);
}

#[test]
fn from_metav1_selector() {
    let s = LabelSelector::from_metav1(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "canary", "operator": "DoesNotExist"}
        ]
    }))
    .unwrap();
    assert!(s.matches(&labels(&[("app", "web"), ("env", "prod")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod"), ("canary", "1")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("env", "dev")])));
    assert!(LabelSelector::from_metav1(&json!({})).unwrap().is_empty());
    assert!(LabelSelector::from_metav1(&Value::Null).unwrap().is_empty());
    let err = LabelSelector::from_metav1(&json!({"matchExpressions": [
        {"key": "a", "operator": "Bogus"}]}))
    .unwrap_err();
    assert!(err.to_string().contains("Bogus"), "{err}");
    assert!(
        LabelSelector::from_metav1(&json!({"matchExpressions": [
        {"key": "a", "operator": "In", "values": []}]}))
        .is_err()
    );
}

#[test]
fn matches_object_reads_metadata_labels() {
    let obj = json!({"metadata": {"name": "x", "labels": {"app": "web"}}});
    assert!(sel("app=web").matches_object(&obj));
    assert!(!sel("app=db").matches_object(&obj));
    assert!(sel("!app").matches_object(&json!({"metadata": {"name": "y"}})));
}

#[test]
fn field_selectors() {
    let pod = json!({
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"nodeName": "node-1", "replicas": 3},
        "status": {"phase": "Running"}
    });
    let f = |s: &str| FieldSelector::parse(s).unwrap();
    assert!(f("").matches(&pod));
    assert!(f("metadata.name=p1").matches(&pod));
    assert!(f("metadata.name==p1,metadata.namespace=default").matches(&pod));
    assert!(!f("metadata.name=p2").matches(&pod));
    assert!(f("metadata.name!=p2").matches(&pod));
    assert!(f("spec.nodeName=node-1").matches(&pod));
    assert!(!f("spec.nodeName=").matches(&pod));
    assert!(f("spec.replicas=3").matches(&pod));
    assert!(f("status.phase!=Pending").matches(&pod));
    let unscheduled = json!({"metadata": {"name": "p2"}, "spec": {}});
    assert!(f("spec.nodeName=").matches(&unscheduled));
    assert!(f("spec.nodeName!=node-1").matches(&unscheduled));
}

#[test]
fn resource_aware_field_values() {
    // As the node and pod descriptors declare them (`src/resources/kinds.rs`).
    const NODES: &[SelectableField] = &[SelectableField {
        path: "spec.unschedulable",
        absent: FieldDefault::Value("false"),
    }];
    const PODS: &[SelectableField] = &[
        SelectableField {
            path: "spec.hostNetwork",
            absent: FieldDefault::Value("false"),
        },
        SelectableField {
            path: "status.podIP",
            absent: FieldDefault::Pointer("/status/podIPs/0/ip"),
        },
    ];
    let node = json!({"metadata": {"name": "n"}, "spec": {}});
    let f = |s: &str| FieldSelector::parse(s).unwrap();
    assert!(f("spec.unschedulable=false").matches_fields(NODES, &node));
    assert!(!f("spec.unschedulable=false").matches(&node));
    let cordoned = json!({"spec": {"unschedulable": true}});
    assert!(f("spec.unschedulable=true").matches_fields(NODES, &cordoned));
    let pod = json!({"status": {"podIPs": [{"ip": "10.0.0.5"}]}});
    assert!(f("status.podIP=10.0.0.5").matches_fields(PODS, &pod));
    assert!(f("spec.hostNetwork=false").matches_fields(PODS, &pod));
    assert!(f("metadata.name=n").matches_fields(NODES, &node));
}

#[test]
fn field_selector_escapes_and_errors() {
    let obj = json!({"metadata": {"name": "a,b=c\\d"}});
    let s = FieldSelector::parse(r"metadata.name=a\,b\=c\\d").unwrap();
    assert_eq!(s.requirements()[0].value, "a,b=c\\d");
    assert!(s.matches(&obj));
    assert!(FieldSelector::parse("metadata.name").is_err());
    assert!(FieldSelector::parse(" ").is_err());
    let trailing = FieldSelector::parse("metadata.name=a,").unwrap();
    assert_eq!(trailing.requirements().len(), 1);
    assert!(FieldSelector::parse("=x").is_err());
    assert!(FieldSelector::parse(r"metadata.name=a\x").is_err());
    assert!(FieldSelector::parse("metadata.name=a=b").is_err());
    let err = FieldSelector::parse("metadata.name").unwrap_err();
    assert!(err.to_string().contains("can't understand"), "{err}");
}

#[test]
fn field_selector_supported_check() {
    let s = FieldSelector::parse("metadata.name=x,spec.foo=y").unwrap();
    let err = s
        .check_supported(&["metadata.name", "metadata.namespace"])
        .unwrap_err();
    assert_eq!(err.to_string(), "field label not supported: spec.foo");
    assert!(s.check_supported(&["metadata.name", "spec.foo"]).is_ok());
}

#[test]
fn field_selector_matches_with_lookup() {
    let s = FieldSelector::parse("a=1,b!=2").unwrap();
    assert!(s.matches_with(|f| match f {
        "a" => Some("1".into()),
        _ => None,
    }));
    assert!(s.matches_with(|_| Some("1".into())));
    assert!(!s.matches_with(|_| Some("2".into())));
}
