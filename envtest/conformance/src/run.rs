//! Running areas against both backends and comparing the answers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::exchange::{Area, Exchange, Request, Step, What};
use crate::http::{Answer, Conn};
use crate::normalise::{Normaliser, diff, pick, status_parts};

/// All differing paths are collected (up to this many per answer).
const ALL_PATHS: usize = 1000;

/// How many differing paths one difference line shows (`KCR_CONFORMANCE_PATHS`, default 4).
pub fn max_paths() -> usize {
    std::env::var("KCR_CONFORMANCE_PATHS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

/// One backend: its connection and normaliser.
#[derive(Debug)]
pub struct Side {
    /// The connection (and variables).
    pub conn: Conn,
    /// The normaliser.
    pub norm: Normaliser,
}

impl Side {
    /// A side for the server at `base`.
    pub fn new(base: &str) -> Side {
        Side {
            conn: Conn::new(base),
            norm: Normaliser::new(),
        }
    }
}

/// The result of one exchange.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exchange name.
    pub name: String,
    /// The differences found (empty: equal).
    pub diffs: Vec<String>,
}

impl Outcome {
    /// The differing paths (`code`, `/metadata/name`, `events/0/type`, …), sorted, without
    /// values.
    pub fn paths(&self) -> Vec<String> {
        let mut p: Vec<String> = self
            .diffs
            .iter()
            .map(|d| {
                d.split_once(": real=")
                    .map(|(p, _)| p)
                    .or_else(|| d.split_once(": ").map(|(p, _)| p))
                    .unwrap_or(d)
                    .to_string()
            })
            .collect();
        p.sort();
        p.dedup();
        p
    }

    /// A fingerprint of [`Outcome::paths`] (FNV-1a, 8 hex digits): the known-differences list
    /// records it, so a new difference in an exchange already listed is caught too.
    pub fn fingerprint(&self) -> String {
        let mut h: u32 = 0x811c_9dc5;
        for p in self.paths() {
            for b in p.bytes().chain(std::iter::once(b'\n')) {
                h ^= u32::from(b);
                h = h.wrapping_mul(0x0100_0193);
            }
        }
        format!("{h:08x}")
    }
}

/// An entry of the known-differences list.
#[derive(Debug, Clone)]
pub struct Known {
    /// The root causes (short identifiers, `+`-joined, the main one first).
    pub cause: String,
    /// The fingerprint of the differing paths ([`Outcome::fingerprint`]); `*` accepts any.
    pub fingerprint: String,
    /// Why it differs.
    pub reason: String,
}

impl Known {
    /// Whether `o` differs as recorded.
    pub fn matches(&self, o: &Outcome) -> bool {
        self.fingerprint == "*" || self.fingerprint == o.fingerprint()
    }
}

/// Parse a known-differences file: one `name | causes | fingerprint | reason` a line; `#`
/// comments and blank lines are skipped.
pub fn parse_known(text: &str) -> BTreeMap<String, Known> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(4, '|').map(str::trim);
        let name = parts.next().unwrap_or_default().to_string();
        let cause = parts.next().unwrap_or_default().to_string();
        let fingerprint = parts.next().unwrap_or("*").to_string();
        let reason = parts.next().unwrap_or_default().to_string();
        out.insert(
            name,
            Known {
                cause,
                fingerprint,
                reason,
            },
        );
    }
    out
}

/// Run every step of `area` against both sides (in parallel), returning the outcomes of the
/// compared exchanges. The area's namespace is created first.
pub async fn run_area(real: &mut Side, envtest: &mut Side, area: &Area) -> Vec<Outcome> {
    for side in [&mut *real, &mut *envtest] {
        side.conn.vars.insert("ns".into(), area.namespace.clone());
    }
    let ns = Request::new("POST", "/api/v1/namespaces").json(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": area.namespace}}),
    );
    let _ = tokio::join!(real.conn.send(&ns, &[]), envtest.conn.send(&ns, &[]));
    // The real server's serviceaccount controller adds `default` to a new namespace; wait for
    // it so a later list of the namespace does not race it.
    let sa = Request::new("GET", "/api/v1/namespaces/{ns}/serviceaccounts/default");
    let _ = wait_for(&real.conn, &sa, 200, 10).await;

    let mut out = Vec::new();
    for step in &area.steps {
        match step {
            Step::Setup(r) => {
                let _ = tokio::join!(real.conn.send(r, &[]), envtest.conn.send(r, &[]));
            }
            Step::WaitFor {
                request,
                code,
                seconds,
            } => {
                let (a, b) = tokio::join!(
                    wait_for(&real.conn, request, *code, *seconds),
                    wait_for(&envtest.conn, request, *code, *seconds)
                );
                for (ok, side) in [(a, "real"), (b, "envtest")] {
                    if !ok {
                        println!(
                            "NOTE {}: {side} did not answer {code} to {} {} within {seconds} s",
                            area.name, request.method, request.path
                        );
                    }
                }
            }
            Step::Exchange(e) => out.push(run_exchange(real, envtest, e).await),
        }
    }
    out
}

/// Poll `request` every 250 ms until it answers `code`, at most `seconds`.
pub async fn wait_for(conn: &Conn, request: &Request, code: u16, seconds: u64) -> bool {
    let start = Instant::now();
    loop {
        if conn.send(request, &[]).await.code == code {
            return true;
        }
        if start.elapsed() > Duration::from_secs(seconds) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Run one exchange on both sides and compare.
pub async fn run_exchange(real: &mut Side, envtest: &mut Side, e: &Exchange) -> Outcome {
    let (a, b) = tokio::join!(
        real.conn.send(&e.request, &e.during),
        envtest.conn.send(&e.request, &e.during)
    );
    for (side, ans) in [(&mut *real, &a), (&mut *envtest, &b)] {
        for (var, path) in &e.captures {
            if let Some(j) = &ans.json {
                match pick(j, path) {
                    Value::String(s) => {
                        side.conn.vars.insert(var.clone(), s);
                    }
                    Value::Null => {}
                    other => {
                        side.conn.vars.insert(var.clone(), other.to_string());
                    }
                }
            }
        }
    }
    real.norm.begin(&real.conn.vars);
    envtest.norm.begin(&envtest.conn.vars);
    let diffs = compare(&e.what, &a, &b, &mut real.norm, &mut envtest.norm);
    Outcome {
        name: e.name.clone(),
        diffs,
    }
}

/// The first key of a JSON object body as written, and whether the body ends with a newline.
fn shape(raw: &str) -> Value {
    let t = raw.trim_start();
    let first = t
        .strip_prefix('{')
        .map(str::trim_start)
        .and_then(|r| r.strip_prefix('"'))
        .and_then(|r| r.split('"').next())
        .unwrap_or_default();
    json!({"firstKey": first, "trailingNewline": raw.ends_with('\n')})
}

fn is_status(v: &Option<Value>) -> bool {
    v.as_ref()
        .and_then(|j| j.get("kind"))
        .and_then(Value::as_str)
        == Some("Status")
}

/// Normalise watch events: periodic bookmarks dropped, the initial-events-end bookmark kept
/// with its resourceVersion replaced.
fn watch_events(events: &[Value], norm: &mut Normaliser) -> Value {
    let mut out = Vec::new();
    for ev in events {
        let ty = ev.get("type").and_then(Value::as_str).unwrap_or_default();
        if ty == "BOOKMARK" {
            let ann = pick(ev, "object/metadata/annotations");
            if ann.get("k8s.io/initial-events-end").is_none() {
                continue;
            }
            out.push(json!({"type": ty, "object": {
                "kind": pick(ev, "object/kind"),
                "apiVersion": pick(ev, "object/apiVersion"),
                "annotations": ann,
            }}));
            continue;
        }
        out.push(norm.normalise(ev));
    }
    Value::Array(out)
}

/// Compare two answers; returns the differences (one string each).
pub fn compare(
    what: &What,
    a: &Answer,
    b: &Answer,
    na: &mut Normaliser,
    nb: &mut Normaliser,
) -> Vec<String> {
    let mut diffs = Vec::new();
    if a.error.is_some() || b.error.is_some() {
        diffs.push(format!(
            "transport: real={:?} envtest={:?}",
            a.error.as_deref().unwrap_or("ok"),
            b.error.as_deref().unwrap_or("ok")
        ));
        return diffs;
    }
    if a.code != b.code {
        diffs.push(format!("code: real={} envtest={}", a.code, b.code));
    }
    if let What::Watch = what {
        let (x, y) = (watch_events(&a.events, na), watch_events(&b.events, nb));
        if a.code != 200 || b.code != 200 {
            let (x, y) = (norm_json(a, na), norm_json(b, nb));
            diffs.extend(diff(&status_parts(&x), &status_parts(&y), ALL_PATHS));
        } else {
            diffs.extend(
                diff(&x, &y, ALL_PATHS)
                    .into_iter()
                    .map(|d| format!("events{d}")),
            );
        }
        return diffs;
    }
    let (x, y) = (norm_json(a, na), norm_json(b, nb));
    let (x, y) = match what {
        What::Code => return diffs,
        What::Status => {
            if !is_status(&a.json) && !is_status(&b.json) {
                return diffs;
            }
            let mut x = status_parts(&x);
            let mut y = status_parts(&y);
            if let (Some(xo), Some(yo)) = (x.as_object_mut(), y.as_object_mut()) {
                xo.insert("(shape)".into(), status_shape(a));
                yo.insert("(shape)".into(), status_shape(b));
            }
            (x, y)
        }
        What::Body => {
            if a.json.is_none() && b.json.is_none() {
                (Value::String(a.raw.clone()), Value::String(b.raw.clone()))
            } else {
                let mut x = x;
                let mut y = y;
                if let (Some(xo), Some(yo)) = (x.as_object_mut(), y.as_object_mut()) {
                    xo.insert("(shape)".into(), body_shape(a));
                    yo.insert("(shape)".into(), body_shape(b));
                }
                (x, y)
            }
        }
        What::Pick(paths) => {
            let mut xm = serde_json::Map::new();
            let mut ym = serde_json::Map::new();
            for p in paths {
                xm.insert(p.clone(), pick(&x, p));
                ym.insert(p.clone(), pick(&y, p));
            }
            (Value::Object(xm), Value::Object(ym))
        }
        What::Watch => unreachable!("handled above"),
    };
    diffs.extend(diff(&x, &y, ALL_PATHS));
    diffs
}

fn status_shape(a: &Answer) -> Value {
    let mut s = shape(&a.raw);
    if !is_status(&a.json) {
        return s;
    }
    if let Some(o) = s.as_object_mut() {
        o.insert(
            "metadata".into(),
            a.json
                .as_ref()
                .and_then(|j| j.get("metadata"))
                .cloned()
                .unwrap_or(Value::Null),
        );
        o.insert(
            "emptyGroupInDetails".into(),
            Value::Bool(
                a.json
                    .as_ref()
                    .and_then(|j| j.get("details"))
                    .and_then(|d| d.get("group"))
                    == Some(&Value::String(String::new())),
            ),
        );
    }
    s
}

fn body_shape(a: &Answer) -> Value {
    let s = shape(&a.raw);
    json!({"firstKey": s["firstKey"]})
}

fn norm_json(a: &Answer, n: &mut Normaliser) -> Value {
    match &a.json {
        Some(j) => n.normalise(j),
        None => Value::String(a.raw.clone()),
    }
}
