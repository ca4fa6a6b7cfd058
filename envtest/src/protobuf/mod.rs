//! Decoding of Kubernetes protobuf request bodies for the built-in kinds that kubectl's
//! `create <generator>` commands send as protobuf: `kubectl create namespace`, `configmap`,
//! `secret generic|docker-registry|tls`, `serviceaccount`, `deployment`, `job`, `cronjob` and
//! `service clusterip|nodeport|loadbalancer|externalname`.
//!
//! The envelope is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message
//! (`typeMeta{apiVersion, kind}`, `raw`, `contentEncoding`, `contentType`); `raw` is the
//! object's own message. The object is decoded through a table of its message types (field
//! number, JSON name, type), the subset of `k8s.io/api`'s `generated.proto` that those
//! commands fill in, and becomes the same JSON the command would send with `-o json`
//! (checked against real kubectl bodies in `tests/fixtures/protobuf`). As in the Go types:
//! an empty string, `0` or `false` in a plain field is "unset" and left out, while an
//! optional (pointer) field keeps its zero (`replicas: 0`); an embedded message that is
//! present is an object even when empty (`strategy: {}`).
//!
//! A field outside the tables is ignored when it holds its zero value (Go's encoder writes
//! every non-pointer field) and rejected otherwise: the request gets 415 naming the field,
//! rather than an object stored with data silently missing ([`DecodeError::Unsupported`]). A
//! body that is not a well-formed protobuf message (truncated, bad wire data, no `k8s\0`
//! magic) is a 400 BadRequest, as on the real server ([`DecodeError::Malformed`]). Responses
//! are always JSON (clients accept it).

mod tables;

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};

const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body was not decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not a well-formed Kubernetes protobuf message; the real server answers 400 BadRequest.
    #[error("{0}")]
    Malformed(String),
    /// Well-formed, but a kind or a field this decoder does not handle (the real server would
    /// decode it): 415 UnsupportedMediaType, naming what was not decoded.
    #[error("{0}")]
    Unsupported(String),
}

/// One decoded protobuf field.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut result = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        result |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(result);
        }
    }
    Err("varint too long".into())
}

/// All fields of a message, in order, as (field number, value). Fixed-width fields (no
/// Kubernetes type decoded here has one) are skipped.
fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (number, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((number, Field::Varint(varint(buf, &mut pos)?))),
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).map_err(|e| e.to_string())?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or("truncated field")?;
                out.push((number, Field::Bytes(&buf[pos..end])));
                pos = end;
            }
            1 => pos += 8,
            5 => pos += 4,
            other => return Err(format!("unsupported wire type {other}")),
        }
    }
    if pos > buf.len() {
        return Err("truncated message".into());
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
}

/// How a field's protobuf value becomes JSON.
#[derive(Debug, Clone, Copy)]
enum Ty {
    /// `string`.
    Str,
    /// `int32` / `int64` (a negative number is a sign-extended varint).
    Int,
    /// `bool`.
    Bool,
    /// `map<string, string>`.
    StrMap,
    /// `map<string, bytes>`, values base64 in JSON.
    BytesMap,
    /// `map<string, Quantity>` (a resource list), values as their string form.
    QuantityMap,
    /// `IntOrString` (`type`, `intVal`, `strVal`).
    IntOrString,
    /// An embedded message.
    Msg(&'static Message),
}

/// One field of a message: its number, JSON name and type; `repeated` fields become arrays,
/// `optional` (pointer) fields keep a zero value.
#[derive(Debug)]
struct Spec {
    number: u64,
    name: &'static str,
    ty: Ty,
    repeated: bool,
    optional: bool,
}

/// A message type: its Go name (for errors) and its decoded fields.
#[derive(Debug)]
struct Message {
    name: &'static str,
    fields: &'static [Spec],
}

const fn f(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        number,
        name,
        ty,
        repeated: false,
        optional: false,
    }
}

/// A repeated field.
const fn rep(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        repeated: true,
        ..f(number, name, ty)
    }
}

/// An optional (pointer) field: present means set, even to zero.
const fn opt(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        optional: true,
        ..f(number, name, ty)
    }
}

use Ty::{Bool, BytesMap, Int, IntOrString, Msg, QuantityMap, Str, StrMap};
use tables::KINDS;

/// Whether a protobuf field holds its type's zero value (what Go writes for an unset
/// non-pointer field).
fn is_zero(field: Field<'_>) -> bool {
    match field {
        Field::Varint(v) => v == 0,
        Field::Bytes(b) => b.is_empty(),
    }
}

fn base64(b: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
}

/// A map entry message (`1` key, `2` value).
fn entry(b: &[u8]) -> Result<(String, &[u8]), String> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(k)) => key = text(k)?,
            (2, Field::Bytes(v)) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

/// The string form of a `resource.Quantity` message (field 1).
fn quantity(b: &[u8]) -> Result<Value, String> {
    let mut out = String::new();
    for (n, f) in fields(b)? {
        if let (1, Field::Bytes(s)) = (n, f) {
            out = text(s)?;
        }
    }
    Ok(Value::String(out))
}

fn int_or_string(b: &[u8]) -> Result<Value, String> {
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(t)) => is_string = t == 1,
            (2, Field::Varint(v)) => int = i64::from(v as i32),
            (3, Field::Bytes(s)) => string = text(s)?,
            _ => {}
        }
    }
    Ok(if is_string {
        Value::String(string)
    } else {
        Value::from(int)
    })
}

/// Decode one message into a JSON object through its table. `path` names the message in
/// errors (`Deployment.spec.template`).
fn message(msg: &Message, b: &[u8], path: &str) -> Result<Map<String, Value>, DecodeError> {
    use DecodeError::Malformed;
    let mut out = Map::new();
    for (number, field) in fields(b).map_err(Malformed)? {
        let Some(spec) = msg.fields.iter().find(|s| s.number == number) else {
            if is_zero(field) {
                continue;
            }
            return Err(DecodeError::Unsupported(format!(
                "{path}: field {number} of {} is not supported",
                msg.name
            )));
        };
        let here = || format!("{path}.{}", spec.name);
        let wrong = || format!("{}: unexpected wire type", here());
        let value = match (spec.ty, field) {
            (Str, Field::Bytes(s)) => Value::String(text(s).map_err(Malformed)?),
            // int32 and int64 negatives are sign-extended to 64 bits on the wire.
            (Int, Field::Varint(v)) => Value::from(v as i64),
            (Bool, Field::Varint(v)) => Value::Bool(v != 0),
            (IntOrString, Field::Bytes(s)) => int_or_string(s).map_err(Malformed)?,
            (Msg(sub), Field::Bytes(s)) => Value::Object(message(sub, s, &here())?),
            (StrMap | BytesMap | QuantityMap, Field::Bytes(s)) => {
                let (key, v) = entry(s).map_err(Malformed)?;
                let v = match spec.ty {
                    StrMap => Value::String(text(v).map_err(Malformed)?),
                    BytesMap => base64(v),
                    _ => quantity(v).map_err(Malformed)?,
                };
                let map = out
                    .entry(spec.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, v);
                }
                continue;
            }
            _ => return Err(Malformed(wrong())),
        };
        if spec.repeated {
            let list = out
                .entry(spec.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = list {
                list.push(value);
            }
            continue;
        }
        // A plain scalar at its zero value is unset (Go's omitempty); messages and optional
        // fields are kept as sent.
        let scalar = matches!(spec.ty, Str | Int | Bool);
        if scalar && !spec.optional && is_zero(field) {
            out.remove(spec.name);
            continue;
        }
        out.insert(spec.name.to_string(), value);
    }
    Ok(out)
}

/// Group the length-delimited fields of a message by number (the first of each).
fn first_bytes(b: &[u8]) -> Result<BTreeMap<u64, &[u8]>, String> {
    let mut out = BTreeMap::new();
    for (n, f) in fields(b)? {
        if let Field::Bytes(v) = f {
            out.entry(n).or_insert(v);
        }
    }
    Ok(out)
}

/// Decode a protobuf request body into the JSON object, for the supported kinds. The error
/// says what could not be decoded and whether the body is malformed (400) or merely not
/// supported here (415).
pub fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    use DecodeError::Malformed;
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| Malformed("missing k8s protobuf magic".into()))?;
    let unknown = first_bytes(rest).map_err(Malformed)?;
    let type_meta = first_bytes(
        unknown
            .get(&1)
            .ok_or_else(|| Malformed("no typeMeta".into()))?,
    )
    .map_err(Malformed)?;
    let api_version = text(type_meta.get(&1).copied().unwrap_or_default()).map_err(Malformed)?;
    let kind = text(type_meta.get(&2).copied().unwrap_or_default()).map_err(Malformed)?;
    let raw = unknown.get(&2).copied().unwrap_or_default();
    let (_, _, msg) = KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .ok_or_else(|| {
            DecodeError::Unsupported(format!(
                "protobuf bodies of {api_version} {kind} are not supported"
            ))
        })?;
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(kind.clone()));
    out.insert("apiVersion".into(), Value::String(api_version));
    out.extend(message(msg, raw, &kind)?);
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    fn varint_field(n: u64, mut v: u64) -> Vec<u8> {
        let mut out = vec![(n << 3) as u8];
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let mut tm = field(1, api_version.as_bytes());
        tm.extend(field(2, kind.as_bytes()));
        let mut body = MAGIC.to_vec();
        body.extend(field(1, &tm));
        body.extend(field(2, &raw));
        body.extend(field(3, b""));
        body
    }

    #[test]
    fn decodes_a_configmap_like_kubectl_sends_it() {
        let mut meta = field(1, b"x");
        meta.extend(field(2, b""));
        let mut label = field(1, b"app");
        label.extend(field(2, b"web"));
        meta.extend(field(11, &label));
        let mut raw = field(1, &meta);
        let mut a = field(1, b"a");
        a.extend(field(2, b"b"));
        raw.extend(field(2, &a));
        let v = decode(&envelope("v1", "ConfigMap", raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "x", "labels": {"app": "web"}}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn secret_data_is_base64() {
        let mut raw = field(1, &field(1, b"s"));
        let mut kv = field(1, b"k");
        kv.extend(field(2, b"v"));
        raw.extend(field(2, &kv));
        let v = decode(&envelope("v1", "Secret", raw)).unwrap();
        assert_eq!(v["data"]["k"], "dg==");
    }

    #[test]
    fn optional_fields_keep_zero_and_plain_fields_drop_it() {
        // DeploymentSpec: replicas (optional) 0, minReadySeconds (plain) 0, paused false.
        let mut spec = varint_field(1, 0);
        spec.extend(varint_field(5, 0));
        spec.extend(varint_field(7, 0));
        spec.extend(field(4, b""));
        let mut raw = field(1, &field(1, b"d"));
        raw.extend(field(2, &spec));
        let v = decode(&envelope("apps/v1", "Deployment", raw)).unwrap();
        assert_eq!(v["spec"], json!({"replicas": 0, "strategy": {}}));
    }

    #[test]
    fn negative_ints_and_int_or_string() {
        // A negative int32 is a ten-byte sign-extended varint.
        let mut port = varint_field(3, (-1i64) as u64);
        let mut target = varint_field(1, 1);
        target.extend(field(3, b"http"));
        port.extend(field(4, &target));
        let spec = field(1, &port);
        let mut raw = field(1, &field(1, b"s"));
        raw.extend(field(2, &spec));
        let v = decode(&envelope("v1", "Service", raw)).unwrap();
        assert_eq!(
            v["spec"]["ports"],
            json!([{"port": -1, "targetPort": "http"}])
        );
    }

    #[test]
    fn unknown_fields_with_data_are_refused_and_zero_ones_ignored() {
        // ObjectMeta field 8 (creationTimestamp) empty: ignored, as kubectl sends it.
        let mut meta = field(1, b"x");
        meta.extend(field(8, b""));
        let raw = field(1, &meta);
        assert!(decode(&envelope("v1", "ConfigMap", raw)).is_ok());
        // PodSpec field 1 (volumes) with data: not decoded, so refused by name.
        let pod_spec = field(1, &field(1, b"vol"));
        let template = field(2, &pod_spec);
        let job_spec = field(6, &template);
        let mut raw = field(1, &field(1, b"j"));
        raw.extend(field(2, &job_spec));
        let err = decode(&envelope("batch/v1", "Job", raw)).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Unsupported(
                "Job.spec.template.spec: field 1 of PodSpec is not supported".into()
            )
        );
    }

    #[test]
    fn rejects_unknown_kinds_wrong_wire_types_and_garbage() {
        let err = decode(&envelope("v1", "Pod", field(1, &field(1, b"p")))).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Unsupported("protobuf bodies of v1 Pod are not supported".into())
        );
        // ObjectMeta.name sent as a varint.
        let raw = field(1, &varint_field(1, 5));
        let err = decode(&envelope("v1", "ConfigMap", raw)).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Malformed("ConfigMap.metadata.name: unexpected wire type".into())
        );
        assert!(matches!(
            decode(b"not protobuf"),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            decode(b"k8s\0\x0a\x7f"),
            Err(DecodeError::Malformed(_))
        ));
    }
}
