//! What may legitimately differ between two API servers, replaced by stable tokens.
//!
//! Per backend, one [`Normaliser`] lives for the whole run:
//! - uids become `uid#N` and object resourceVersions `rv#N`, numbered by order of appearance
//!   within one answer; values a script captured (variables `rv*`, `uid*`) become `rv={var}`,
//!   so "the same resourceVersion as before" stays visible where a script asks for it (a
//!   numbering across the whole run would shift for good after one missing answer);
//! - a list's own `metadata.resourceVersion` becomes `<list-rv>` and `continue` tokens
//!   `<continue>`: both read the global counter, which the real backend's controllers also move;
//! - timestamps (RFC 3339, managedFields times included) become `<time>`;
//! - a server-generated name (`metadata.name` that extends `metadata.generateName`) becomes
//!   `<generateName>#N`, wherever it appears, messages included;
//! - a Service's allocated cluster IPs (`clusterIP`, `clusterIPs`) become `<cluster-ip>`;
//! - in Status and cause messages, numbers of three or more digits become `N` (resourceVersions
//!   quoted in messages).

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Value};

/// Whether `ip` is an address allocated from the service range (10.0.0.0/24) other than
/// `10.0.0.1`, the `kubernetes` Service's.
fn allocated_ip(ip: &str) -> bool {
    ip.strip_prefix("10.0.0.")
        .and_then(|last| last.parse::<u8>().ok())
        .is_some_and(|last| last > 1)
}

/// Per-backend normalisation state.
#[derive(Debug)]
pub struct Normaliser {
    rvs: HashMap<String, usize>,
    uids: HashMap<String, usize>,
    names: Vec<(String, String)>,
    known: Vec<(String, String)>,
    uid_re: Regex,
    time_re: Regex,
    num_re: Regex,
}

impl Default for Normaliser {
    fn default() -> Self {
        Normaliser::new()
    }
}

impl Normaliser {
    /// A fresh normaliser.
    pub fn new() -> Normaliser {
        Normaliser {
            rvs: HashMap::new(),
            uids: HashMap::new(),
            names: Vec::new(),
            known: Vec::new(),
            uid_re: Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
                .expect("valid regex"),
            time_re: Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
                .expect("valid regex"),
            num_re: Regex::new(r"\b\d{3,}\b").expect("valid regex"),
        }
    }

    /// Start a new exchange: resourceVersions and uids are numbered afresh, except values
    /// captured in variables named `rv*` or `uid*` (`known`: variable → value), which become
    /// `rv={var}` / `uid={var}`, so identity across exchanges is compared where a script asks.
    pub fn begin(&mut self, known: &HashMap<String, String>) {
        self.rvs.clear();
        self.uids.clear();
        self.known = known
            .iter()
            .filter(|(k, _)| k.starts_with("rv") || k.starts_with("uid"))
            .map(|(k, v)| (v.clone(), k.clone()))
            .collect();
        self.known.sort();
    }

    /// The token for an object resourceVersion.
    pub fn rv(&mut self, rv: &str) -> String {
        if rv.is_empty() {
            return String::new();
        }
        if let Some((_, var)) = self
            .known
            .iter()
            .find(|(v, k)| v == rv && k.starts_with("rv"))
        {
            return format!("rv={{{var}}}");
        }
        let n = self.rvs.len();
        format!("rv#{}", self.rvs.entry(rv.to_string()).or_insert(n))
    }

    /// A normalised copy of an answer body.
    pub fn normalise(&mut self, v: &Value) -> Value {
        self.collect_names(v);
        let mut out = v.clone();
        if let Some(meta) = out
            .get_mut("metadata")
            .filter(|_| v.get("items").is_some() || v.get("kind").is_some_and(is_list_kind))
            .and_then(Value::as_object_mut)
        {
            if meta.contains_key("resourceVersion") {
                meta.insert("resourceVersion".into(), "<list-rv>".into());
            }
            if meta
                .get("continue")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.is_empty())
            {
                meta.insert("continue".into(), "<continue>".into());
            }
        }
        self.walk(&mut out, false);
        out
    }

    fn collect_names(&mut self, v: &Value) {
        match v {
            Value::Object(m) => {
                if let Some(meta) = m.get("metadata").and_then(Value::as_object)
                    && let (Some(Value::String(g)), Some(Value::String(n))) =
                        (meta.get("generateName"), meta.get("name"))
                    && n.len() > g.len()
                    && n.starts_with(g.as_str())
                    && !self.names.iter().any(|(real, _)| real == n)
                {
                    let token = format!("{g}#{}", self.names.len());
                    self.names.push((n.clone(), token));
                    // Longest first, so a name that extends another is replaced whole.
                    self.names
                        .sort_by_key(|(real, _)| std::cmp::Reverse(real.len()));
                }
                m.values().for_each(|c| self.collect_names(c));
            }
            Value::Array(a) => a.iter().for_each(|c| self.collect_names(c)),
            _ => {}
        }
    }

    fn string(&mut self, s: &str, message: bool) -> String {
        if self.time_re.is_match(s) {
            return "<time>".into();
        }
        let mut out = s.to_string();
        for (real, token) in &self.names {
            if out.contains(real.as_str()) {
                out = out.replace(real.as_str(), token);
            }
        }
        if self.uid_re.is_match(&out) {
            let found: Vec<String> = self
                .uid_re
                .find_iter(&out)
                .map(|m| m.as_str().to_string())
                .collect();
            for uid in found {
                if let Some((_, var)) = self
                    .known
                    .iter()
                    .find(|(v, k)| *v == uid && k.starts_with("uid"))
                {
                    out = out.replace(&uid, &format!("uid={{{var}}}"));
                    continue;
                }
                let n = self.uids.len();
                let id = *self.uids.entry(uid.clone()).or_insert(n);
                out = out.replace(&uid, &format!("uid#{id}"));
            }
        }
        if message {
            out = self.num_re.replace_all(&out, "N").into_owned();
        }
        out
    }

    fn walk(&mut self, v: &mut Value, in_status_body: bool) {
        match v {
            Value::Object(m) => {
                let status_body = m.get("kind").and_then(Value::as_str) == Some("Status");
                // managedFields keys name list items by value (`k:{"uid":"…"}`).
                let renamed: Vec<String> = m
                    .keys()
                    .filter(|k| self.uid_re.is_match(k))
                    .cloned()
                    .collect();
                for k in renamed {
                    if let Some(v) = m.remove(&k) {
                        let nk = self.string(&k, false);
                        m.insert(nk, v);
                    }
                }
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    let Some(child) = m.get_mut(&k) else { continue };
                    match (k.as_str(), &*child) {
                        ("resourceVersion", Value::String(rv)) if !rv.starts_with('<') => {
                            let t = self.rv(&rv.clone());
                            *child = Value::String(t);
                        }
                        // Allocated at random from the service range by both servers.
                        ("clusterIP", Value::String(ip)) if allocated_ip(ip) => {
                            *child = Value::String("<cluster-ip>".into());
                        }
                        ("clusterIPs", Value::Array(ips)) => {
                            let ips = ips
                                .iter()
                                .map(|ip| match ip.as_str() {
                                    Some(s) if allocated_ip(s) => "<cluster-ip>".into(),
                                    _ => ip.clone(),
                                })
                                .collect();
                            *child = Value::Array(ips);
                        }
                        ("message", Value::String(s)) if status_body || in_status_body => {
                            let t = self.string(&s.clone(), true);
                            *child = Value::String(t);
                        }
                        _ => self.walk(child, status_body || in_status_body),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|c| self.walk(c, in_status_body)),
            Value::String(s) => {
                let t = self.string(&s.clone(), false);
                *s = t;
            }
            _ => {}
        }
    }
}

fn is_list_kind(k: &Value) -> bool {
    k.as_str().is_some_and(|k| k.ends_with("List"))
}

/// The value at `path` of `v`: segments separated by `/`; a segment `field[key=value]` picks
/// the element of the array `field` whose `key` is `value`; a numeric segment indexes an
/// array; `*` maps the rest of the path over an array. Missing values are `null`.
pub fn pick(v: &Value, path: &str) -> Value {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    pick_segs(v, &segs)
}

fn pick_segs(v: &Value, segs: &[&str]) -> Value {
    let Some((first, rest)) = segs.split_first() else {
        return v.clone();
    };
    if first.is_empty() {
        return pick_segs(v, rest);
    }
    if *first == "*" {
        return match v {
            Value::Array(a) => Value::Array(a.iter().map(|c| pick_segs(c, rest)).collect()),
            _ => Value::Null,
        };
    }
    let next = if let Some((field, filter)) = first.split_once('[') {
        let filter = filter.trim_end_matches(']');
        let (key, want) = filter.split_once('=').unwrap_or((filter, ""));
        let arr = if field.is_empty() {
            Some(v)
        } else {
            v.get(field)
        };
        arr.and_then(Value::as_array).and_then(|a| {
            a.iter()
                .find(
                    |e: &&Value| match key.split('.').try_fold(*e, |o: &Value, k| o.get(k)) {
                        Some(Value::String(s)) => s == want,
                        Some(other) => serde_json::to_string(other).is_ok_and(|t| t == want),
                        None => false,
                    },
                )
                .cloned()
        })
    } else if let (Ok(i), Value::Array(a)) = (first.parse::<usize>(), v) {
        a.get(i).cloned()
    } else {
        v.get(*first).cloned()
    };
    match next {
        Some(n) => pick_segs(&n, rest),
        None => Value::Null,
    }
}

/// Where `a` and `b` differ: up to `max` JSON paths with both values (shortened to 100
/// characters unless `KCR_CONFORMANCE_FULL_VALUES` is set).
pub fn diff(a: &Value, b: &Value, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    diff_at(a, b, String::new(), &mut out, max);
    out
}

fn short(v: Option<&Value>) -> String {
    let s = match v {
        None => "(absent)".to_string(),
        Some(v) => v.to_string(),
    };
    if s.chars().count() > 100 && std::env::var_os("KCR_CONFORMANCE_FULL_VALUES").is_none() {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s
    }
}

fn diff_at(a: &Value, b: &Value, path: String, out: &mut Vec<String>, max: usize) {
    if out.len() >= max || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(l), Some(r)) => diff_at(l, r, p, out, max),
                    (l, r) => {
                        if out.len() < max {
                            out.push(format!("{p}: real={} envtest={}", short(l), short(r)));
                        }
                    }
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                diff_at(l, r, format!("{path}/{i}"), out, max);
            }
        }
        _ => out.push(format!(
            "{}: real={} envtest={}",
            if path.is_empty() { "/" } else { &path },
            short(Some(a)),
            short(Some(b))
        )),
    }
}

/// The parts of a `Status` body compared: reason, details, causes and message. Causes are
/// sorted (by field, then message): the real server's order of causes from one schema varies
/// from run to run (Go map iteration).
pub fn status_parts(v: &Value) -> Value {
    let mut m = Map::new();
    for k in ["kind", "status", "reason", "details", "message", "code"] {
        if let Some(x) = v.get(k) {
            m.insert(k.into(), x.clone());
        }
    }
    let mut several = false;
    if let Some(Value::Array(causes)) = m.get_mut("details").and_then(|d| d.get_mut("causes")) {
        causes.sort_by_key(|c| (pick(c, "field").to_string(), pick(c, "message").to_string()));
        several = causes.len() > 1;
    }
    // The message lists several causes in the same varying order: compared through the causes.
    if several
        && let Some(Value::String(msg)) = m.get_mut("message")
        && let Some(i) = msg.find("is invalid: [")
    {
        msg.truncate(i + "is invalid: ".len());
        msg.push_str("[<causes>]");
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn allocated_cluster_ips_are_normalised_and_fixed_ones_kept() {
        let mut n = Normaliser::new();
        let svc = json!({"kind": "Service", "spec": {"clusterIP": "10.0.0.77",
            "clusterIPs": ["10.0.0.77"]}});
        let out = n.normalise(&svc);
        assert_eq!(out["spec"]["clusterIP"], "<cluster-ip>");
        assert_eq!(out["spec"]["clusterIPs"], json!(["<cluster-ip>"]));
        for kept in ["10.0.0.1", "None", "192.168.0.7"] {
            let svc = json!({"spec": {"clusterIP": kept, "clusterIPs": [kept]}});
            let out = n.normalise(&svc);
            assert_eq!(out["spec"]["clusterIP"], kept);
            assert_eq!(out["spec"]["clusterIPs"], json!([kept]));
        }
    }
}
