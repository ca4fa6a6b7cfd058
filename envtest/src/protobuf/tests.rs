//! Unit tests of the decoder on hand-built bodies, one per rule. Whole objects as client-go
//! encodes them are checked in `tests/protobuf_fixtures.rs`.

use super::*;
use serde_json::json;

/// A protobuf message under construction.
#[derive(Default, Clone)]
struct Pb(Vec<u8>);

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

impl Pb {
    fn new() -> Self {
        Pb(Vec::new())
    }
    fn key(mut self, n: u64, wire: u64) -> Self {
        put_varint(&mut self.0, (n << 3) | wire);
        self
    }
    fn bytes(self, n: u64, payload: &[u8]) -> Self {
        let mut me = self.key(n, 2);
        put_varint(&mut me.0, payload.len() as u64);
        me.0.extend_from_slice(payload);
        me
    }
    fn s(self, n: u64, text: &str) -> Self {
        self.bytes(n, text.as_bytes())
    }
    fn m(self, n: u64, msg: Pb) -> Self {
        self.bytes(n, &msg.0)
    }
    fn v(self, n: u64, value: u64) -> Self {
        let mut me = self.key(n, 0);
        put_varint(&mut me.0, value);
        me
    }
    fn i(self, n: u64, value: i64) -> Self {
        self.v(n, value as u64)
    }
    /// A map entry `key` → string `value`.
    fn kv(self, n: u64, key: &str, value: &str) -> Self {
        self.m(n, Pb::new().s(1, key).s(2, value))
    }
}

fn envelope(api_version: &str, kind: &str, raw: Pb) -> Vec<u8> {
    let mut body = MAGIC.to_vec();
    body.extend(
        Pb::new()
            .m(1, Pb::new().s(1, api_version).s(2, kind))
            .m(2, raw)
            .s(3, "")
            .s(4, "")
            .0,
    );
    body
}

fn meta(name: &str) -> Pb {
    Pb::new().s(1, name)
}

#[test]
fn a_configmap_with_labels_and_data() {
    let raw = Pb::new()
        .m(1, meta("x").s(2, "").kv(11, "app", "web"))
        .kv(2, "a", "b")
        .kv(2, "empty", "");
    assert_eq!(
        decode(&envelope("v1", "ConfigMap", raw)).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "x", "labels": {"app": "web"}},
               "data": {"a": "b", "empty": ""}})
    );
}

#[test]
fn secret_bytes_are_base64_and_a_map_entry_without_value_is_empty() {
    let raw = Pb::new()
        .m(1, meta("s"))
        .m(2, Pb::new().s(1, "k").bytes(2, &[0, 0xff, b'v']))
        .m(2, Pb::new().s(1, "none"))
        .v(5, 0);
    let v = decode(&envelope("v1", "Secret", raw)).unwrap();
    assert_eq!(v["data"], json!({"k": "AP92", "none": ""}));
    // immutable is a *bool: present false is kept.
    assert_eq!(v["immutable"], json!(false));
}

#[test]
fn pointers_keep_zero_omitempty_drops_it_and_plain_fields_keep_it() {
    // DeploymentSpec: replicas (*int32) 0, minReadySeconds (int32, omitempty) 0, paused
    // (bool, omitempty) false, an empty strategy (a struct: always an object).
    let spec = Pb::new().v(1, 0).v(5, 0).v(7, 0).m(4, Pb::new());
    // DeploymentStatus: replicas (int32, omitempty) 0; ScaleStatus.replicas has no omitempty.
    let raw = Pb::new().m(1, meta("d")).m(2, spec).m(3, Pb::new().v(2, 0));
    let v = decode(&envelope("apps/v1", "Deployment", raw)).unwrap();
    assert_eq!(v["spec"], json!({"replicas": 0, "strategy": {}}));
    assert_eq!(v["status"], json!({}));
    let raw = Pb::new()
        .m(1, meta("d"))
        .m(2, Pb::new())
        .m(3, Pb::new().v(1, 0));
    let v = decode(&envelope("autoscaling/v1", "Scale", raw)).unwrap();
    assert_eq!(v["status"], json!({"replicas": 0}));
}

#[test]
fn negative_numbers_int_or_string_and_quantities() {
    // ServicePort: port -1 (a ten-byte varint), targetPort by name; another by number.
    let named = Pb::new().i(3, -1).m(4, Pb::new().v(1, 1).s(3, "http"));
    let numbered = Pb::new().v(3, 80).m(4, Pb::new().v(1, 0).v(2, 8080));
    let raw = Pb::new()
        .m(1, meta("s"))
        .m(2, Pb::new().m(1, named).m(1, numbered));
    let v = decode(&envelope("v1", "Service", raw)).unwrap();
    assert_eq!(
        v["spec"]["ports"],
        json!([{"port": -1, "targetPort": "http"}, {"port": 80, "targetPort": 8080}])
    );
    // An int32 keeps its low 32 bits, as Go's unmarshaller does.
    let raw = Pb::new()
        .m(1, meta("s"))
        .m(2, Pb::new().m(1, Pb::new().v(3, (1 << 32) + 7)));
    let v = decode(&envelope("v1", "Service", raw)).unwrap();
    assert_eq!(v["spec"]["ports"][0]["port"], json!(7));
    // IntOrString of a type other than 0 and 1 has no JSON form.
    let raw = Pb::new()
        .m(1, meta("p"))
        .m(2, Pb::new().m(1, Pb::new().v(1, 2)).m(2, Pb::new()));
    assert!(matches!(
        decode(&envelope("policy/v1", "PodDisruptionBudget", raw)),
        Err(DecodeError::Malformed(_))
    ));
    // ResourceRequirements: limits and requests are maps of quantities.
    let resources = Pb::new()
        .m(1, Pb::new().s(1, "cpu").m(2, Pb::new().s(1, "500m")))
        .m(2, Pb::new().s(1, "memory").m(2, Pb::new().s(1, "1Gi")));
    let container = Pb::new().s(1, "c").m(8, resources);
    let raw = Pb::new().m(1, meta("p")).m(2, Pb::new().m(2, container));
    let v = decode(&envelope("v1", "Pod", raw)).unwrap();
    assert_eq!(
        v["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m"}, "requests": {"memory": "1Gi"}})
    );
}

#[test]
fn times_are_rfc3339_and_a_zero_time_is_left_out() {
    // ObjectMeta.creationTimestamp (Time, seconds; nanoseconds dropped) and an empty
    // deletionTimestamp (the zero time).
    let created = Pb::new().v(1, 1_764_490_542).v(2, 999);
    let raw = Pb::new().m(1, meta("x").m(8, created).m(9, Pb::new()));
    let v = decode(&envelope("v1", "ConfigMap", raw)).unwrap();
    assert_eq!(
        v["metadata"],
        json!({"name": "x", "creationTimestamp": "2025-11-30T08:15:42Z"})
    );
    // Lease: MicroTime keeps microseconds (truncated), before 1970 too.
    let spec = Pb::new()
        .s(1, "me")
        .m(3, Pb::new().v(1, 1_764_670_272).v(2, 345_678_999))
        .m(4, Pb::new().i(1, -1).v(2, 500_000_000))
        .v(5, 0);
    let raw = Pb::new().m(1, meta("l")).m(2, spec);
    let v = decode(&envelope("coordination.k8s.io/v1", "Lease", raw)).unwrap();
    assert_eq!(
        v["spec"],
        json!({"holderIdentity": "me", "acquireTime": "2025-12-02T10:11:12.345678Z",
               "renewTime": "1969-12-31T23:59:59.500000Z", "leaseTransitions": 0})
    );
    // Go's zero time written as seconds is still the zero time.
    let raw = Pb::new().m(1, meta("x").m(8, Pb::new().i(1, -62_135_596_800)));
    let v = decode(&envelope("v1", "ConfigMap", raw)).unwrap();
    assert_eq!(v["metadata"], json!({"name": "x"}));
    assert_eq!(
        rfc3339(951_782_400, None).as_deref(),
        Some("2000-02-29T00:00:00Z")
    );
    assert_eq!(
        rfc3339(-62_135_596_800 + 86_400, Some(0)).as_deref(),
        Some("0001-01-02T00:00:00.000000Z")
    );
}

#[test]
fn managed_fields_raw_json_and_raw_extensions() {
    let entry = Pb::new()
        .s(1, "kubectl")
        .s(2, "Apply")
        .s(6, "FieldsV1")
        .m(7, Pb::new().bytes(1, br#"{"f:data":{}}"#));
    let raw = Pb::new().m(1, meta("x").m(17, entry));
    let v = decode(&envelope("v1", "ConfigMap", raw)).unwrap();
    assert_eq!(
        v["metadata"]["managedFields"],
        json!([{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {}}}])
    );
    // ControllerRevision.data: JSON, or an object in its own k8s protobuf envelope.
    let raw = Pb::new()
        .m(1, meta("r"))
        .m(2, Pb::new().bytes(1, br#"{"a":[1]}"#))
        .v(3, 2);
    let v = decode(&envelope("apps/v1", "ControllerRevision", raw)).unwrap();
    assert_eq!(v["data"], json!({"a": [1]}));
    let inner = envelope("v1", "ConfigMap", Pb::new().m(1, meta("inner")));
    let raw = Pb::new().m(1, meta("r")).m(2, Pb::new().bytes(1, &inner));
    let v = decode(&envelope("apps/v1", "ControllerRevision", raw)).unwrap();
    assert_eq!(
        v["data"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inner"}})
    );
    let raw = Pb::new()
        .m(1, meta("r"))
        .m(2, Pb::new().bytes(1, b"{not json"));
    assert!(matches!(
        decode(&envelope("apps/v1", "ControllerRevision", raw)),
        Err(DecodeError::Malformed(_))
    ));
    // Nesting envelopes without end is refused, not a stack overflow.
    let mut body = envelope("v1", "ConfigMap", Pb::new().m(1, meta("x")));
    for _ in 0..64 {
        body = envelope(
            "apps/v1",
            "ControllerRevision",
            Pb::new().m(2, Pb::new().bytes(1, &body)),
        );
    }
    assert!(matches!(decode(&body), Err(DecodeError::Malformed(_))));
}

#[test]
fn embedded_structs_go_inlines_are_merged_into_their_parent() {
    // Volume{name, volumeSource{configMap{name, defaultMode}}}; Probe{handler{httpGet}, period}.
    let source = Pb::new().m(19, Pb::new().m(1, Pb::new().s(1, "cm")).v(3, 0o644));
    let volume = Pb::new().s(1, "v").m(2, source);
    let probe = Pb::new()
        .m(
            1,
            Pb::new().m(2, Pb::new().s(1, "/h").m(2, Pb::new().v(2, 80))),
        )
        .v(4, 10);
    let container = Pb::new().s(1, "c").m(10, probe);
    let raw = Pb::new()
        .m(1, meta("p"))
        .m(2, Pb::new().m(1, volume).m(2, container));
    let v = decode(&envelope("v1", "Pod", raw)).unwrap();
    assert_eq!(
        v["spec"]["volumes"],
        json!([{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}])
    );
    assert_eq!(
        v["spec"]["containers"][0]["livenessProbe"],
        json!({"httpGet": {"path": "/h", "port": 80}, "periodSeconds": 10})
    );
}

#[test]
fn slice_types_are_arrays_and_packed_numbers_decode() {
    // CSR spec.extra: map<string, ExtraValue{items}>; usages repeated.
    let spec = Pb::new()
        .bytes(1, b"CSR")
        .m(
            6,
            Pb::new().s(1, "scopes").m(2, Pb::new().s(1, "a").s(1, "b")),
        )
        .s(5, "client auth")
        .s(7, "kubernetes.io/kube-apiserver-client");
    let raw = Pb::new().m(1, meta("c")).m(2, spec);
    let v = decode(&envelope(
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        raw,
    ))
    .unwrap();
    assert_eq!(
        v["spec"],
        json!({"request": "Q1NS", "extra": {"scopes": ["a", "b"]},
               "usages": ["client auth"], "signerName": "kubernetes.io/kube-apiserver-client"})
    );
    // PodSecurityContext.supplementalGroups (repeated int64), packed and not.
    let mut packed = Vec::new();
    for g in [1000u64, 2000] {
        put_varint(&mut packed, g);
    }
    let security = Pb::new().bytes(4, &packed).v(4, 3000);
    let raw = Pb::new().m(1, meta("p")).m(2, Pb::new().m(14, security));
    let v = decode(&envelope("v1", "Pod", raw)).unwrap();
    assert_eq!(
        v["spec"]["securityContext"]["supplementalGroups"],
        json!([1000, 2000, 3000])
    );
}

#[test]
fn delete_options_decode_under_any_group_version() {
    // Preconditions{uid, resourceVersion}, propagationPolicy, gracePeriodSeconds 0, dryRun.
    let raw = Pb::new()
        .v(1, 0)
        .m(2, Pb::new().s(1, "u-1").s(2, "7"))
        .s(4, "Foreground")
        .s(5, "All");
    for api_version in ["apps/v1", "v1", "meta.k8s.io/v1", "batch/v1"] {
        let v = decode(&envelope(api_version, "DeleteOptions", raw.clone())).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": api_version, "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                   "preconditions": {"uid": "u-1", "resourceVersion": "7"},
                   "propagationPolicy": "Foreground", "dryRun": ["All"]})
        );
    }
}

#[test]
fn unknown_fields_are_skipped_as_kube_apiserver_skips_them() {
    // Field 99 of ObjectMeta with data, a fixed64, a fixed32 and a group: all skipped, as the
    // generated Go unmarshallers' `skipGenerated` skips them; the known fields around them stay.
    let mut m = meta("x").s(99, "future").key(98, 1);
    m.0.extend([0u8; 8]);
    let mut m = m.key(97, 5);
    m.0.extend([0u8; 4]);
    let m = m.key(96, 3).s(1, "inside-group").key(96, 4).s(3, "ns");
    let raw = Pb::new().m(1, m).kv(2, "a", "b").s(100, "top-level too");
    assert_eq!(
        decode(&envelope("v1", "ConfigMap", raw)).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "x", "namespace": "ns"}, "data": {"a": "b"}})
    );
    // A group closed without opening, or never closed, is malformed, as in Go.
    let raw = Pb::new().m(1, meta("x").key(96, 4));
    assert!(matches!(
        decode(&envelope("v1", "ConfigMap", raw)),
        Err(DecodeError::Malformed(_))
    ));
    let raw = Pb::new().m(1, meta("x").key(96, 3));
    assert!(matches!(
        decode(&envelope("v1", "ConfigMap", raw)),
        Err(DecodeError::Malformed(_))
    ));
}

#[test]
fn unknown_kinds_wrong_wire_types_and_garbage_are_refused() {
    let err = decode(&envelope("example.com/v1", "Widget", meta("w"))).unwrap_err();
    assert_eq!(
        err,
        DecodeError::Unsupported(
            "protobuf bodies of example.com/v1 Widget are not supported".into()
        )
    );
    // ObjectMeta.name sent as a varint: Go's unmarshaller fails on the wire type.
    let raw = Pb::new().m(1, Pb::new().v(1, 5));
    assert_eq!(
        decode(&envelope("v1", "ConfigMap", raw)).unwrap_err(),
        DecodeError::Malformed(
            "ConfigMap.metadata.name: unexpected wire type for field 1 of ObjectMeta".into()
        )
    );
    // A length past the end.
    let raw = Pb::new().m(1, Pb::new().key(1, 2).v(0, 0));
    assert!(matches!(
        decode(&envelope("v1", "ConfigMap", raw)),
        Err(DecodeError::Malformed(_))
    ));
    assert!(matches!(
        decode(b"not protobuf"),
        Err(DecodeError::Malformed(_))
    ));
    assert!(matches!(
        decode(b"k8s\0\x0a\x7f"),
        Err(DecodeError::Malformed(_))
    ));
    assert!(matches!(
        decode(b"k8s\0\x12\x00"),
        Err(DecodeError::Malformed(_))
    ));
}

#[test]
fn every_kind_kcr_envtest_serves_has_a_table() {
    let mut missing = Vec::new();
    let mut seen = 0;
    for t in crate::resources::builtins() {
        // CustomResourceDefinitions and APIServices come from other Go modules
        // (apiextensions-apiserver, kube-aggregator), outside the tables.
        if t.group == "apiextensions.k8s.io" || t.group == "apiregistration.k8s.io" {
            continue;
        }
        for version in &t.versions {
            let api_version = t.api_version(version);
            let mut kinds = vec![t.kind.clone()];
            if t.allows("list") {
                kinds.push(t.list_kind());
            }
            if t.scale.is_some() {
                kinds.push("Scale".into());
            }
            for kind in kinds {
                seen += 1;
                let scale = kind == "Scale";
                let found = if scale {
                    message_of("autoscaling/v1", "Scale")
                } else {
                    message_of(&api_version, &kind)
                };
                if found.is_none() {
                    missing.push(format!("{api_version} {kind}"));
                }
            }
        }
        for sub in t.subresources {
            let api_version = match (sub.group, sub.version) {
                ("", "") => t.api_version(t.storage_version()),
                ("", v) => v.to_string(),
                (g, v) => format!("{g}/{v}"),
            };
            if !sub.kind.is_empty() && sub.verbs.contains(&"create") {
                seen += 1;
                if message_of(&api_version, sub.kind).is_none() {
                    missing.push(format!(
                        "{api_version} {} ({}/{})",
                        sub.kind, t.plural, sub.name
                    ));
                }
            }
        }
    }
    assert!(seen > 60, "only {seen} kinds seen");
    assert!(missing.is_empty(), "no protobuf table for {missing:?}");
}

#[test]
fn encode_drops_unknown_members_and_refuses_what_does_not_fit() {
    let pb = encode(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "x"}, "bogus": 1, "data": {"a": "b"}}))
    .unwrap();
    assert_eq!(
        decode(&pb).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
               "data": {"a": "b"}})
    );
    // A kind without a table, a number where a string goes, a time that is not one.
    assert!(encode(&json!({"apiVersion": "example.com/v1", "kind": "Widget"})).is_none());
    assert!(encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 1}})).is_none());
    assert!(
        encode(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"creationTimestamp": "yesterday"}}))
        .is_none()
    );
    assert!(encode(&json!({"kind": "ConfigMap"})).is_none());
}
