//! Table-driven tests, with the good and bad values of apimachinery's own validation tests.

use super::*;

fn long(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

#[test]
fn qualified_names() {
    let good = [
        "simple".to_string(),
        "now-with-dashes".into(),
        "1-starts-with-num".into(),
        "1234".into(),
        "simple/simple".into(),
        "now-with-dashes/simple".into(),
        "now-with-dashes/now-with-dashes".into(),
        "now.with.dots/now-with-dashes".into(),
        "now-with.dashes-and.dots/now-with-dashes".into(),
        "now-with.dashes-and.dots/now_with_underscores".into(),
        "now_with_underscores".into(),
        "1.2.3.4/now_with.dots".into(),
        "1-2-3-4/now-with_under.scores".into(),
        "node-role.kubernetes.io/worker".into(),
        format!("{}/{}", long('a', 253), long('b', 63)),
    ];
    for value in &good {
        assert!(is_qualified_name(value), "{value:?} should be valid");
        assert_eq!(
            validate_qualified_name(value),
            Vec::<String>::new(),
            "{value:?}"
        );
    }
    let bad = [
        "nospecialchars%^=@".to_string(),
        "cantendwithadash-".into(),
        "-cantstartwithadash-".into(),
        "only/one/slash".into(),
        "Example.com/abc".into(),
        "example_com/abc".into(),
        "example.com/".into(),
        "/simple".into(),
        "a.-b/c".into(),
        "".into(),
        long('a', 64),
        format!("{}/abc", long('a', 254)),
    ];
    for value in &bad {
        assert!(!is_qualified_name(value), "{value:?} should be invalid");
        assert!(!validate_qualified_name(value).is_empty(), "{value:?}");
    }
}

#[test]
fn qualified_name_messages_are_the_api_servers() {
    // An empty name part is reported as empty and as not matching, as upstream does.
    let empty_name = validate_qualified_name("example.com/");
    assert_eq!(empty_name.len(), 2);
    assert_eq!(empty_name[0], "name part must be non-empty");
    assert!(empty_name[1].starts_with("name part must consist of"));
    assert_eq!(
        validate_qualified_name("/simple"),
        ["prefix part must be non-empty"]
    );
    assert_eq!(
        validate_qualified_name("bad-"),
        [
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        ]
    );
    assert_eq!(
        validate_qualified_name("Example.com/abc"),
        [
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ]
    );
    let too_long = validate_qualified_name(&long('a', 64));
    assert_eq!(too_long, ["name part must be no more than 63 characters"]);
    let slashes = validate_qualified_name("a/b/c");
    assert_eq!(slashes.len(), 1);
    assert!(
        slashes[0].starts_with("a qualified name must consist of")
            && slashes[0].ends_with(
                "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ),
        "{slashes:?}"
    );
    // An empty name part is both empty and not matching, as upstream reports it.
    assert_eq!(validate_qualified_name("").len(), 2);
}

#[test]
fn label_values() {
    let good = [
        "".to_string(),
        "simple".into(),
        "now-with-dashes".into(),
        "1-starts-with-num".into(),
        "end-with-num-1".into(),
        "1234".into(),
        "MixedCase_and.dots".into(),
        long('a', 63),
    ];
    for value in &good {
        assert!(is_label_value(value), "{value:?} should be valid");
        assert!(validate_label_value(value).is_empty(), "{value:?}");
    }
    let bad = [
        "nospecialchars%^=@".to_string(),
        "Tama-nui-te-rā.is.Māori.sun".into(),
        "\\backslashes\\are\\bad".into(),
        "-starts-with-dash".into(),
        "ends-with-dash-".into(),
        ".starts.with.dot".into(),
        "ends.with.dot.".into(),
        "with/slash".into(),
        long('a', 64),
    ];
    for value in &bad {
        assert!(!is_label_value(value), "{value:?} should be invalid");
        assert!(!validate_label_value(value).is_empty(), "{value:?}");
    }
    assert_eq!(
        validate_label_value("-x"),
        [
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        ]
    );
    assert_eq!(
        validate_label_value(&long('a', 64)),
        ["must be no more than 63 characters"]
    );
}

#[test]
fn label_names() {
    assert!(is_label_name("worker"));
    assert!(is_label_name(&long('a', 63)));
    assert!(!is_label_name(&long('a', 64)));
    assert!(!is_label_name(""));
    assert!(!is_label_name("a/b"));
}

const DNS_BAD_BOTH: &[&str] = &[
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b",
    "1_", "_1", "1_2", " ", "a ", " a", "a b", "1 ", " 1", "1 2",
];

#[test]
fn dns1123_labels() {
    let good = [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "012",
        "1a",
        "1-a",
        "1--a--b--2",
    ];
    for value in good
        .iter()
        .copied()
        .map(String::from)
        .chain([long('a', 63)])
    {
        assert!(is_dns1123_label(&value), "{value:?} should be valid");
        assert!(validate_dns1123_label(&value).is_empty(), "{value:?}");
    }
    let dots = [".", "a.", ".a", "a.b", "1.", ".1", "1.2"];
    for value in DNS_BAD_BOTH
        .iter()
        .chain(dots.iter())
        .copied()
        .map(String::from)
        .chain([long('a', 64)])
    {
        assert!(!is_dns1123_label(&value), "{value:?} should be invalid");
        assert!(!validate_dns1123_label(&value).is_empty(), "{value:?}");
    }
    assert_eq!(
        validate_dns1123_label("My-Name"),
        [
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ]
    );
    assert_eq!(
        validate_dns1123_label(&long('a', 64)),
        ["must be no more than 63 characters"]
    );
    // A valid subdomain that is no label has dots: upstream says so instead of the pattern.
    assert_eq!(validate_dns1123_label("a.b"), ["must not contain dots"]);
    assert_eq!(validate_dns1123_label("db.v1"), ["must not contain dots"]);
    assert_eq!(
        validate_dns1123_label("A.b"),
        validate_dns1123_label("My-Name"),
        "not a subdomain either: the pattern's message"
    );
    assert_eq!(
        validate_dns1123_label("a..b"),
        validate_dns1123_label("My-Name")
    );
}

#[test]
fn dns1123_subdomains() {
    let good = [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "012",
        "1a",
        "1-a",
        "1--a--b--2",
        "a.a",
        "ab.a",
        "abc.a",
        "a1.a",
        "a-1.a",
        "a--1--2--b.a",
        "a.1",
        "ab.1",
        "0.a",
        "01.a",
        "012.a",
        "1a.a",
        "1-a.a",
        "1--a--b--2",
        "0.1",
        "01.1",
        "012.1",
        "1a.1",
        "1-a.1",
        "a.b.c.d.e",
        "aa.bb.cc.dd.ee",
        "1.2.3.4.5",
        "11.22.33.44.55",
    ];
    for value in good
        .iter()
        .copied()
        .map(String::from)
        .chain([long('a', 253)])
    {
        assert!(is_dns1123_subdomain(&value), "{value:?} should be valid");
        assert!(validate_dns1123_subdomain(&value).is_empty(), "{value:?}");
    }
    let dots = [".", "a.", ".a", "a..b", "1.", ".1", "1..2", "a.-b", "a-.b"];
    for value in DNS_BAD_BOTH
        .iter()
        .chain(dots.iter())
        .copied()
        .map(String::from)
        .chain([long('a', 254)])
    {
        assert!(!is_dns1123_subdomain(&value), "{value:?} should be invalid");
        assert!(!validate_dns1123_subdomain(&value).is_empty(), "{value:?}");
    }
    assert_eq!(
        validate_dns1123_subdomain(&long('a', 254)),
        ["must be no more than 253 characters"]
    );
}

#[test]
fn dns1035_labels() {
    let good = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b"];
    for value in good
        .iter()
        .copied()
        .map(String::from)
        .chain([long('a', 63)])
    {
        assert!(is_dns1035_label(&value), "{value:?} should be valid");
    }
    let bad = [
        "0",
        "01",
        "012",
        "1a",
        "1-a",
        "1--a--b--2",
        "A",
        "a-",
        "-a",
        "a_b",
        "a.b",
        "",
    ];
    for value in bad.iter().copied().map(String::from).chain([long('a', 64)]) {
        assert!(!is_dns1035_label(&value), "{value:?} should be invalid");
        assert!(!validate_dns1035_label(&value).is_empty(), "{value:?}");
    }
}
