//! The fidelity table of kcr-envtest's crate docs is checked against the suite: its "Measured
//! differences" section lists every root cause of `known_differences.txt` (the exchanges the
//! suite expects to differ), with the number of exchanges it appears in, and nothing else. A
//! difference fixed, or a new one listed, without the docs following fails here; regenerate the
//! section with `python3 envtest/conformance/tools/classify.py <verbose run> --doc-table`.

use std::collections::BTreeMap;

const KNOWN: &str = include_str!("../known_differences.txt");
const CRATE_DOCS: &str = include_str!("../../src/lib.rs");
const SECTION: &str = "//! ## Measured differences";

/// Root cause → number of listed exchanges it appears in.
fn known_causes() -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in KNOWN
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let causes = line.split(" | ").nth(1).unwrap_or_default();
        for cause in causes.split('+').filter(|c| !c.is_empty()) {
            *counts.entry(cause.trim().to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// The rows of the docs' section: `| `CAUSE` | count | ... |`.
fn documented_causes() -> Result<BTreeMap<String, usize>, String> {
    let start = CRATE_DOCS
        .find(SECTION)
        .ok_or_else(|| format!("envtest/src/lib.rs has no `{SECTION}` section"))?;
    let mut rows = BTreeMap::new();
    for line in CRATE_DOCS[start + SECTION.len()..].lines().skip(1) {
        let Some(row) = line.strip_prefix("//!") else {
            break;
        };
        if row.trim_start().starts_with("## ") {
            break;
        }
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(cause), Some(count)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let Some(cause) = cause.strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        let count = count
            .parse()
            .map_err(|_| format!("row of {cause}: {count:?} is not a count"))?;
        if rows.insert(cause.to_string(), count).is_some() {
            return Err(format!("{cause} is listed twice"));
        }
    }
    Ok(rows)
}

#[test]
fn the_crate_docs_list_every_known_difference_and_only_those() {
    let known = known_causes();
    assert!(!known.is_empty(), "known_differences.txt lists nothing");
    let documented = documented_causes().unwrap_or_else(|e| panic!("{e}"));
    let mut problems = Vec::new();
    for (cause, n) in &known {
        match documented.get(cause) {
            None => problems.push(format!("{cause} ({n} exchanges) is not in the docs")),
            Some(d) if d != n => problems.push(format!(
                "{cause}: the docs say {d} exchanges, the suite lists {n}"
            )),
            Some(_) => {}
        }
    }
    for cause in documented.keys().filter(|c| !known.contains_key(*c)) {
        problems.push(format!(
            "{cause} is in the docs but the suite expects no such difference (fixed?)"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_parsers_see_what_they_should() {
    let known = known_causes();
    // Every listed exchange has at least one cause.
    let exchanges = KNOWN
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    assert!(known.values().sum::<usize>() >= exchanges);
    assert!(
        known.keys().all(|c| c
            .chars()
            .all(|ch| ch.is_ascii_uppercase() || ch == '-' || ch.is_ascii_digit() || ch == '.')),
        "{known:?}"
    );
}
