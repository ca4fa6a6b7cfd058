//! The Grafana dashboard `config/grafana/kcr-dashboard.json` queries only metrics kcr exports:
//! every metric name in every panel target's `expr` (and in the template variables' queries)
//! is a row of the metrics table of `kcr_controller::metrics` (histograms through their
//! `_bucket`, `_sum` and `_count` series).

use std::collections::BTreeSet;
use std::path::PathBuf;

use kcr_controller::metrics::{DocumentedMetric, documented};
use serde_json::Value;

fn dashboard() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/grafana/kcr-dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// PromQL words that look like names but are not metrics.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
    // Aggregation operators, which take `by (...)` before their parenthesis.
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// Keywords followed by a parenthesised list of label names (not an expression).
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names (series selectors) of a PromQL expression: identifiers that are not
/// function calls, keywords, label names (inside `{}` or `by (...)`), strings, durations
/// (`[5m]`), numbers or Grafana variables (`$controller`, `$__rate_interval`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let skip_to = |from: usize, close: char| {
        let mut j = from;
        while j < chars.len() && chars[j] != close {
            if chars[j] == '"' || chars[j] == '\'' {
                let quote = chars[j];
                j += 1;
                while j < chars.len() && chars[j] != quote {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
            }
            j += 1;
        }
        j + 1
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != c {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                i = j + 1;
            }
            '{' => i = skip_to(i + 1, '}'),
            '[' => i = skip_to(i + 1, ']'),
            '$' => {
                i += 1;
                while i < chars.len() && (is_part(chars[i]) || chars[i] == '{' || chars[i] == '}') {
                    i += 1;
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                // A number, with its exponent or a duration unit (`1e3`, `5m`).
                while i < chars.len() && (is_part(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if is_start(c) => {
                let start = i;
                while i < chars.len() && is_part(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let call = next < chars.len() && chars[next] == '(';
                if call && LABEL_LISTS.contains(&word.as_str()) {
                    i = skip_to(next + 1, ')');
                } else if !call && !KEYWORDS.contains(&word.to_lowercase().as_str()) {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// The documented metric a series name belongs to: itself, or a histogram through its
/// `_bucket`, `_sum` or `_count` series.
fn documented_family<'a>(
    series: &str,
    table: &'a [DocumentedMetric],
) -> Option<&'a DocumentedMetric> {
    table.iter().find(|m| m.name == series).or_else(|| {
        ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| series.strip_suffix(suffix))
            .find_map(|base| {
                table
                    .iter()
                    .find(|m| m.name == base && m.kind == "histogram")
            })
    })
}

/// The series names of `exprs` that are no documented metric.
fn undocumented(exprs: &[String], table: &[DocumentedMetric]) -> Vec<String> {
    exprs
        .iter()
        .flat_map(|e| metric_names(e).into_iter().map(move |n| (n, e)))
        .filter(|(n, _)| documented_family(n, table).is_none())
        .map(|(n, e)| format!("{n} (in `{e}`)"))
        .collect()
}

/// Every panel, rows' nested panels included.
fn panels(v: &Value, out: &mut Vec<Value>) {
    for p in v["panels"].as_array().into_iter().flatten() {
        out.push(p.clone());
        panels(p, out);
    }
}

/// Every target's `expr`, and the metric of each `label_values(metric, label)` variable query.
fn queries(dashboard: &Value) -> Vec<String> {
    let mut all = Vec::new();
    panels(dashboard, &mut all);
    let mut exprs: Vec<String> = all
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("a target without expr: {t}"))
                .to_owned()
        })
        .collect();
    for var in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = var["query"]["query"]
            .as_str()
            .or(var["query"].as_str())
            .unwrap_or("");
        if let Some(args) = query
            .strip_prefix("label_values(")
            .and_then(|a| a.strip_suffix(')'))
        {
            let metric = args.rsplit_once(',').map_or(args, |(m, _)| m);
            exprs.push(metric.trim().to_owned());
        }
    }
    exprs
}

#[test]
fn every_metric_the_dashboard_queries_is_documented() {
    let table = documented();
    let dashboard = dashboard();
    let exprs = queries(&dashboard);
    assert!(exprs.len() >= 30, "{exprs:#?}");
    let missing = undocumented(&exprs, &table);
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics that are not in kcr_controller::metrics' table:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_dashboard_covers_every_group_of_metrics() {
    let table = documented();
    let used: BTreeSet<String> = queries(&dashboard())
        .iter()
        .flat_map(|e| metric_names(e))
        .filter_map(|n| documented_family(&n, &table).map(|m| m.name.clone()))
        .collect();
    // Every documented metric has a panel.
    let unused: Vec<&str> = table
        .iter()
        .map(|m| m.name.as_str())
        .filter(|n| !used.contains(*n))
        .collect();
    assert!(unused.is_empty(), "documented but on no panel: {unused:?}");
}

#[test]
fn the_dashboard_has_a_datasource_and_a_controller_variable() {
    let d = dashboard();
    let vars = d["templating"]["list"].as_array().unwrap();
    let var = |name: &str| vars.iter().find(|v| v["name"] == name);
    assert_eq!(var("datasource").unwrap()["type"], "datasource");
    assert_eq!(var("datasource").unwrap()["query"], "prometheus");
    let controller = var("controller").expect("a controller variable");
    assert_eq!(controller["type"], "query");
    let mut all = Vec::new();
    panels(&d, &mut all);
    let ids: BTreeSet<i64> = all.iter().filter_map(|p| p["id"].as_i64()).collect();
    assert_eq!(ids.len(), all.len(), "panel ids are unique");
    for p in all.iter().filter(|p| p["type"] != "row") {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
    }
    // Every controller-scoped query filters on the variable.
    for e in queries(&d)
        .iter()
        .filter(|e| e.contains("controller_runtime_reconcile") || e.contains("workqueue_"))
        // (not the variable's own `label_values` metric)
        .filter(|e| e.contains('('))
    {
        assert!(e.contains("controller=~\"$controller\""), "{e}");
    }
}

#[test]
fn extraction_finds_names_inside_functions_and_aggregations() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{controller=~"$controller", result!="a b"}[$__rate_interval])))"#,
    );
    assert_eq!(
        names,
        BTreeSet::from(["controller_runtime_reconcile_time_seconds_bucket".to_owned()])
    );
    let names = metric_names(
        "sum without (instance) (rate(a_total[5m] offset 1h)) / on (job) group_left (x) b_count > bool 1e3 and time() - c",
    );
    assert_eq!(
        names,
        BTreeSet::from(["a_total".to_owned(), "b_count".to_owned(), "c".to_owned()])
    );
}

#[test]
fn a_made_up_metric_is_reported() {
    let table = documented();
    let exprs = vec![
        r#"sum by (controller) (rate(controller_runtime_reconcile_total{controller=~"$controller"}[$__rate_interval]))"#.to_owned(),
        "histogram_quantile(0.9, sum by (le) (rate(workqueue_queue_duration_seconds_bucket[5m])))".to_owned(),
        "sum(rate(kcr_made_up_requests_total[5m])) / sum(rate(rest_client_requests_total[5m]))".to_owned(),
        // `_bucket` of a counter is no series of it.
        "rate(controller_runtime_reconcile_total_bucket[5m])".to_owned(),
    ];
    let missing = undocumented(&exprs, &table);
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert!(
        missing[0].starts_with("kcr_made_up_requests_total "),
        "{missing:?}"
    );
    assert!(
        missing[1].starts_with("controller_runtime_reconcile_total_bucket "),
        "{missing:?}"
    );
}
