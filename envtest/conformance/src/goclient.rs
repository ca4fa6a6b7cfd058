//! The Go client section: `goclient/` (a small Go program on client-go, test tooling) drives
//! client-go's typed clients against one server, first with protobuf bodies and answers (what
//! Go operators send for built-in kinds), then with JSON, and prints one JSON line per
//! exchange (`{"name", "ok", "body"}`: the object, or the API error's Status). [`run`] builds
//! it, runs it against both servers and compares the lines exchange by exchange, after the
//! same normalisation as the scripted areas. Its exchanges count in the fidelity line as
//! `goclient/<mode>/<exchange>`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::normalise::{Normaliser, diff, status_parts};
use crate::run::Outcome;

/// All differing paths are collected (up to this many per answer).
const ALL_PATHS: usize = 1000;

/// The Go program's source directory.
fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("goclient")
}

/// Builds the Go program into `dir` (`go build`; Go's module cache fills from the module proxy
/// on first use), returning the binary's path.
pub fn build(dir: &Path) -> Result<PathBuf, String> {
    let binary = dir.join("conformance-goclient");
    let out = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&binary)
        .arg(".")
        .current_dir(source_dir())
        .output()
        .map_err(|e| format!("cannot run go (is Go installed?): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "go build of {} failed: {}",
            source_dir().display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(binary)
}

/// One exchange's answer as the Go program printed it.
#[derive(Debug, Clone)]
struct Answer {
    ok: bool,
    body: Value,
}

/// Runs `binary` against a server (its kubeconfig written to `dir/<side>.kubeconfig`) and
/// parses its lines, in order.
fn answers(
    binary: &Path,
    kubeconfig_yaml: &str,
    dir: &Path,
    side: &str,
) -> Result<Vec<(String, Answer)>, String> {
    let kubeconfig = dir.join(format!("{side}.kubeconfig"));
    std::fs::write(&kubeconfig, kubeconfig_yaml)
        .map_err(|e| format!("cannot write the {side} kubeconfig: {e}"))?;
    let out = Command::new(binary)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    if !out.status.success() {
        return Err(format!(
            "the Go client failed against {side} ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut lines = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("the Go client printed a line that is not JSON ({e}): {line}"))?;
        let name = v["name"].as_str().unwrap_or_default().to_string();
        lines.push((
            name,
            Answer {
                ok: v["ok"].as_bool().unwrap_or(false),
                body: v["body"].clone(),
            },
        ));
    }
    Ok(lines)
}

/// Compares the two sides' answers to one exchange.
fn compare(
    real: &Answer,
    envtest: &Answer,
    rn: &mut Normaliser,
    en: &mut Normaliser,
) -> Vec<String> {
    if real.ok != envtest.ok {
        let shown = |a: &Answer| {
            if a.ok {
                "ok".to_string()
            } else {
                format!("error {}", status_parts(&a.body))
            }
        };
        return vec![format!(
            "ok: real={} envtest={}",
            shown(real),
            shown(envtest)
        )];
    }
    let none = HashMap::new();
    rn.begin(&none);
    en.begin(&none);
    let (a, b) = if real.ok {
        (rn.normalise(&real.body), en.normalise(&envtest.body))
    } else {
        (
            rn.normalise(&status_parts(&real.body)),
            en.normalise(&status_parts(&envtest.body)),
        )
    };
    diff(&a, &b, ALL_PATHS)
}

/// Builds the Go client into `dir`, runs it against both servers and compares (see the
/// module docs). An exchange one side answered and the other did not print is a difference.
/// Blocking (it runs processes): call it from `spawn_blocking`, with the servers' kubeconfigs
/// ([`TestApiServer::kubeconfig_yaml`](kcr_envtest::TestApiServer::kubeconfig_yaml)).
pub fn run(real: &str, envtest: &str, dir: &Path) -> Result<Vec<Outcome>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let binary = build(dir)?;
    let a = answers(&binary, real, dir, "real")?;
    let b = answers(&binary, envtest, dir, "envtest")?;
    let theirs: BTreeMap<&str, &Answer> = b.iter().map(|(n, x)| (n.as_str(), x)).collect();
    let (mut rn, mut en) = (Normaliser::new(), Normaliser::new());
    let mut out = Vec::new();
    for (name, ra) in &a {
        let diffs = match theirs.get(name.as_str()) {
            Some(ea) => compare(ra, ea, &mut rn, &mut en),
            None => vec![format!("exchange: real=answered envtest=(absent)")],
        };
        out.push(Outcome {
            name: format!("goclient/{name}"),
            diffs,
        });
    }
    let ours: std::collections::BTreeSet<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
    for (name, _) in b.iter().filter(|(n, _)| !ours.contains(n.as_str())) {
        out.push(Outcome {
            name: format!("goclient/{name}"),
            diffs: vec!["exchange: real=(absent) envtest=answered".to_string()],
        });
    }
    Ok(out)
}
