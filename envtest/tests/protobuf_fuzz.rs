//! The codec against client-go on random objects of every kind of k8s.io/api:
//! `tools/control-plane/v1.37/cmd/protobuf-fuzz` fills objects with apimachinery's API fuzzer and
//! writes each as client-go's protobuf body and as its JSON; decoding the body must give the JSON
//! (its `null`s aside) and encoding the JSON the same bytes. Built with the `go` on PATH against
//! the module cache the control plane build fills; skipped (with a printed reason) when it cannot
//! be built, unless `KCR_REQUIRE_BINARIES=1` (as in CI) makes that a failure.

use std::path::Path;

use kcr_envtest::protobuf::{decode, encode};
use serde_json::Value;

fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// Where two values first differ: `.a.b[2]: <ours> vs <theirs>`.
fn difference(ours: &Value, theirs: &Value, path: &str) -> Option<String> {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let (x, y) = (
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                );
                difference(x, y, &format!("{path}.{k}"))
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| difference(x, y, &format!("{path}[{i}]"))),
        _ if ours == theirs => None,
        _ => {
            let short = |v: &Value| v.to_string().chars().take(150).collect::<String>();
            Some(format!("{path}: {} vs {}", short(ours), short(theirs)))
        }
    }
}

#[test]
fn random_objects_of_every_kind_decode_and_encode_as_client_go_does() {
    let require = std::env::var("KCR_REQUIRE_BINARIES").is_ok_and(|v| v == "1");
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/control-plane/v1.37");
    // KCR_PROTOBUF_FUZZ=<per kind>,<seed> explores other objects.
    let (per_kind, seed) = std::env::var("KCR_PROTOBUF_FUZZ")
        .ok()
        .and_then(|v| {
            v.split_once(',')
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .unwrap_or(("3".into(), "20261203".into()));
    let scratch = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("go")
        .args(["run", "./cmd/protobuf-fuzz"])
        .arg(scratch.path())
        .arg(&per_kind)
        .arg(&seed)
        .current_dir(&module)
        .output();
    let why = match &out {
        Err(e) => Some(format!("no go: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "go run failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Ok(_) => None,
    };
    if let Some(why) = why {
        assert!(!require, "KCR_REQUIRE_BINARIES=1: {why}");
        println!("skipped: {why}");
        return;
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut exact = 0;
    let mut entries: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pb"))
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let body = std::fs::read(&path).unwrap();
        let json: Value =
            serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap()).unwrap();
        checked += 1;
        match decode(&body).map(without_nulls) {
            Ok(got) if got == without_nulls(json.clone()) => {}
            Ok(got) => {
                let want = without_nulls(json.clone());
                let at = difference(&got, &want, "").unwrap_or_default();
                failures.push(format!("{name}: decoded differently at {at}"));
                continue;
            }
            Err(e) => {
                failures.push(format!("{name}: does not decode: {e}"));
                continue;
            }
        }
        match encode(&json) {
            Some(bytes) if bytes == body => exact += 1,
            // Not the same bytes, the same object: a RawExtension's JSON re-serialised (its
            // keys in another order), or an empty `[]byte` that Go writes and JSON omits.
            Some(bytes) if decode(&bytes).ok() == decode(&body).ok() => {}
            Some(bytes) => {
                let at = bytes.iter().zip(&body).position(|(a, b)| a != b);
                failures.push(format!(
                    "{name}: encoded differently ({} bytes, client-go {}; first difference at {at:?})",
                    bytes.len(),
                    body.len()
                ));
            }
            None => failures.push(format!("{name}: does not encode")),
        }
    }
    assert!(checked > 900, "only {checked} objects");
    // All but a few (RawExtensions, empty byte fields: 2-3% of random objects) are byte for byte.
    assert!(
        exact * 100 >= checked * 97,
        "{exact} of {checked} byte for byte"
    );
    println!("{checked} objects of every kind; {exact} encoded byte for byte as client-go");
    assert!(
        failures.is_empty(),
        "{} of {checked}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
