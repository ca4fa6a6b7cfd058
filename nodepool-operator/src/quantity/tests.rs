use super::*;

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn sum(items: &[&str]) -> String {
    let parsed: Vec<Quantity> = items.iter().map(|s| q(s)).collect();
    Quantity::sum(&parsed).unwrap().to_string()
}

#[test]
fn canonical_formatting_table() {
    let cases = [
        ("0", "0"),
        ("0Gi", "0"),
        ("4", "4"),
        ("1.5", "1500m"),
        ("0.5", "500m"),
        ("500m", "500m"),
        ("1000m", "1"),
        ("1000", "1k"),
        ("1000000", "1M"),
        ("110", "110"),
        ("1.5Gi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("1024", "1024"),
        ("1Ki", "1Ki"),
        ("512", "512"),
        ("0.5Ki", "512"),
        ("100Ki", "100Ki"),
        ("8127920Ki", "8127920Ki"),
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("1.5e3", "1500"),
        ("5e-3", "5e-3"),
        ("1E", "1E"),
        ("2k", "2k"),
        ("1u", "1u"),
        ("1n", "1n"),
        ("0.1n", "1n"),
        ("-0.1n", "-1n"),
        ("-1.5", "-1500m"),
        ("+7", "7"),
        (".5", "500m"),
        ("5.", "5"),
        ("12.345m", "12345u"),
    ];
    for (input, want) in cases {
        assert_eq!(q(input).to_string(), want, "input {input}");
    }
}

#[test]
fn sums_with_mixed_units() {
    assert_eq!(sum(&["4", "500m"]), "4500m");
    assert_eq!(sum(&["1Gi", "512Mi"]), "1536Mi");
    assert_eq!(sum(&["500m", "4"]), "4500m");
    assert_eq!(sum(&["512Mi", "1Gi"]), "1536Mi");
    assert_eq!(sum(&["2", "2"]), "4");
    assert_eq!(sum(&["500m", "500m"]), "1");
    assert_eq!(sum(&["110", "110", "110"]), "330");
    assert_eq!(sum(&["1Gi", "1Gi"]), "2Gi");
    // Binary and decimal mixed: the first operand's format wins; not a power of 1024.
    assert_eq!(sum(&["1Gi", "500M"]), "1573741824");
    assert_eq!(sum(&["1k", "1Ki"]), "2024");
    assert_eq!(sum(&["1Ki", "1k"]), "2024");
    assert_eq!(sum(&["100Gi", "0.5Gi"]), "102912Mi");
    assert_eq!(sum(&["1e3", "1"]), "1001");
    assert_eq!(
        sum(&["0", "1Gi"]),
        "1Gi",
        "a zero first operand takes the other's format"
    );
    assert_eq!(sum(&[]), "0");
    assert_eq!(sum(&["1", "-1"]), "0");
    assert_eq!(sum(&["1n", "1"]), "1000000001n");
}

#[test]
fn sum_of_many_nodes_is_exact() {
    let items: Vec<Quantity> = (0..1000).map(|_| q("3900m")).collect();
    assert_eq!(Quantity::sum(&items).unwrap().to_string(), "3900");
    let mem: Vec<Quantity> = (0..1000).map(|_| q("16393220Ki")).collect();
    assert_eq!(Quantity::sum(&mem).unwrap().to_string(), "16393220000Ki");
}

#[test]
fn equality_compares_values() {
    assert_eq!(q("1k"), q("1000"));
    assert_eq!(q("1Ki"), q("1024"));
    assert_eq!(q("1.5"), q("1500m"));
    assert_ne!(q("1"), q("1001m"));
    assert_eq!(q("1Ki").format(), Format::BinarySI);
    assert_eq!(q("1e3").format(), Format::DecimalExponent);
    assert_eq!(q("1m").format(), Format::DecimalSI);
}

#[test]
fn invalid_inputs_are_errors() {
    for bad in [
        "", "-", "abc", "1.2.3", "1Zi", "1KiB", "1 Gi", "Gi", ".", "1e", "1ex", "1k1", "--1",
        "1..0",
    ] {
        assert!(
            matches!(Quantity::parse(bad), Err(QuantityError::Invalid { .. })),
            "{bad:?} should be invalid, got {:?}",
            Quantity::parse(bad)
        );
    }
}

#[test]
fn overflow_is_an_error_not_a_wrong_value() {
    let huge = "9".repeat(60);
    assert!(matches!(
        Quantity::parse(&huge),
        Err(QuantityError::Overflow(_))
    ));
    assert!(matches!(
        Quantity::parse("1e999"),
        Err(QuantityError::Overflow(_))
    ));
    let big = q("100000000000000000000000000000000000000"); // 1e38
    // Normalised mantissas keep round numbers small: 1e38 + 1e38 is exact.
    assert_eq!(
        big.checked_add(&big).unwrap().to_string(),
        "200000000000000000000E"
    );
    let max = q(&i128::MAX.to_string());
    let err = max.checked_add(&q("1")).unwrap_err();
    assert!(matches!(err, QuantityError::Overflow(_)));
    // Aligning scales can overflow too: 1e38 + 1n needs 1e47 nano units.
    assert!(matches!(
        big.checked_add(&q("1n")),
        Err(QuantityError::Overflow(_))
    ));
}

#[test]
fn very_large_values_print_exactly() {
    // Above what `E` can hold with an i128 mantissa the exponent form keeps it exact.
    let v = q("1e100");
    assert_eq!(v.to_string(), "1e100");
    assert_eq!(q("1000E").to_string(), "1000E");
}

#[test]
fn converts_into_k8s_quantity() {
    let k: k8s_openapi::apimachinery::pkg::api::resource::Quantity = (&q("1.5Gi")).into();
    assert_eq!(k.0, "1536Mi");
}
