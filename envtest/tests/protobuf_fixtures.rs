//! The protobuf decoder against real kubectl: every `fixtures/protobuf/<name>.pb` is a body
//! kubectl v1.32 sent for a `kubectl create <generator>` command, and `<name>.json` is what
//! the same command prints with `--dry-run=client -o json` (without `creationTimestamp:
//! null`). Decoding the first must give the second.

use std::path::Path;

use kcr_envtest::protobuf::{decode, encode};
use serde_json::Value;

#[test]
fn kubectl_generator_bodies_decode_to_their_json() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protobuf");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures directory") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "pb") {
            continue;
        }
        let body = std::fs::read(&path).expect("fixture body");
        let want: Value = serde_json::from_slice(
            &std::fs::read(path.with_extension("json")).expect("fixture JSON next to the body"),
        )
        .expect("fixture JSON parses");
        let got =
            decode(&body).unwrap_or_else(|e| panic!("{} does not decode: {e}", path.display()));
        assert_eq!(got, want, "{}", path.display());
        checked.push(path.file_stem().unwrap_or_default().to_owned());
    }
    checked.sort();
    // Every generator kind is covered (a missing fixture would make the loop vacuous).
    assert_eq!(
        checked,
        [
            "configmap",
            "cronjob",
            "deploy_cmd",
            "deploy_full",
            "deploy_simple",
            "deploy_zero",
            "job_cmd",
            "job_simple",
            "ns",
            "sa",
            "secret",
            "secret_docker",
            "svc_clusterip",
            "svc_ext",
            "svc_headless",
            "svc_lb",
            "svc_nodeport",
        ]
    );
}

#[test]
fn a_truncated_body_is_an_error_not_a_partial_object() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protobuf");
    let body = std::fs::read(dir.join("deploy_full.pb")).expect("fixture body");
    for cut in [5, body.len() / 2, body.len() - 1] {
        assert!(
            decode(&body[..cut]).is_err(),
            "a body cut at {cut} of {} bytes decoded",
            body.len()
        );
    }
}

#[test]
fn mangled_bodies_are_errors_or_objects_never_panics() {
    // xorshift64: deterministic, no dependency.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protobuf");
    let mut outcomes = (0, 0);
    for entry in std::fs::read_dir(&dir).expect("fixtures directory") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "pb") {
            continue;
        }
        let body = std::fs::read(&path).expect("fixture body");
        for _ in 0..2_000 {
            let mut mangled = body.clone();
            for _ in 0..1 + next() % 4 {
                let at = 4 + (next() as usize) % (mangled.len() - 4);
                match next() % 3 {
                    0 => mangled[at] = next() as u8,
                    1 => mangled.truncate(at.max(5)),
                    _ => mangled.insert(at, next() as u8),
                }
            }
            match decode(&mangled) {
                Ok(_) => outcomes.0 += 1,
                Err(_) => outcomes.1 += 1,
            }
        }
    }
    // Both outcomes occur: the mutations reach past the envelope into the objects.
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}

/// `value` without its `null`s: Go's JSON writes `null` for a nil slice, map or pointer without
/// `omitempty`, and for a zero `metav1.Time`; the decoder leaves those out, which the server reads
/// the same.
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

/// The decoder against client-go's own encoders: every `fixtures/protobuf-go/<name>.pb` is the
/// body client-go sends with protobuf encoding (apimachinery's protobuf serializer) for an object,
/// and `<name>.json` the body it sends for the same object with JSON encoding (`encoding/json`),
/// both written by `tools/control-plane/v1.37/cmd/protobuf-fixtures`. Decoding the first must give
/// the second (its `null`s aside).
#[test]
fn client_go_protobuf_bodies_decode_to_client_go_json() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protobuf-go");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures directory") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "pb") {
            continue;
        }
        let body = std::fs::read(&path).expect("fixture body");
        let want: Value = serde_json::from_slice(
            &std::fs::read(path.with_extension("json")).expect("fixture JSON next to the body"),
        )
        .expect("fixture JSON parses");
        let got =
            decode(&body).unwrap_or_else(|e| panic!("{} does not decode: {e}", path.display()));
        assert_eq!(got, without_nulls(want), "{}", path.display());
        checked.push(path.file_stem().unwrap_or_default().to_owned());
    }
    checked.sort();
    assert_eq!(
        checked,
        [
            "clusterrole",
            "configmap_binary",
            "controller_revision",
            "csr",
            "delete_options",
            "delete_options_empty",
            "deployment_read",
            "e2e_clusterrole",
            "e2e_csr",
            "e2e_delete",
            "e2e_delete_conflict",
            "e2e_deployment",
            "e2e_deployment_update",
            "e2e_event",
            "e2e_eviction",
            "e2e_lease",
            "e2e_node",
            "e2e_pod",
            "e2e_scale",
            "e2e_secret",
            "e2e_token_request",
            "event_core",
            "event_events",
            "eviction",
            "hpa",
            "lease",
            "network_policy",
            "node",
            "pdb",
            "pod",
            "rolebinding",
            "scale",
            "secret_bytes",
            "service",
            "statefulset",
            "subject_access_review",
            "token_request",
        ]
    );
}

/// The encoder against client-go's: encoding each `fixtures/protobuf-go/<name>.json` gives
/// client-go's protobuf body for the same object, byte for byte.
#[test]
fn encoding_client_go_json_gives_client_go_protobuf_bytes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protobuf-go");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures directory") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "pb") {
            continue;
        }
        let body = std::fs::read(&path).expect("fixture body");
        let json: Value = serde_json::from_slice(
            &std::fs::read(path.with_extension("json")).expect("fixture JSON next to the body"),
        )
        .expect("fixture JSON parses");
        let got = encode(&json).unwrap_or_else(|| panic!("{} does not encode", path.display()));
        if got != body {
            let first = got.iter().zip(&body).position(|(a, b)| a != b);
            panic!(
                "{}: {} bytes, client-go's {}; first difference at {first:?}\n ours: {:?}\ntheirs: {:?}",
                path.display(),
                got.len(),
                body.len(),
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&body)
            );
        }
        // And the decoder reads it back to the same JSON.
        assert_eq!(decode(&got).expect("decodes"), without_nulls(json));
        checked += 1;
    }
    assert!(checked >= 30, "{checked} fixtures");
}
