//! Encoding of a JSON object of a built-in kind into the protobuf body kube-apiserver would
//! answer with (`application/vnd.kubernetes.protobuf`): the `k8s\0` magic and a
//! `runtime.Unknown` envelope around the object's message, through the same generated tables.
//!
//! The bytes are those of Go's generated marshallers for the decoded struct: fields in
//! ascending number; a non-pointer scalar or struct written even at its zero value (an absent
//! JSON member is the zero value), a pointer, slice, map or `[]byte` only when set; map entries
//! in key order. JSON members a message has no field for are dropped, as the Go struct drops
//! them.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::{MAGIC, Message, Rule, Shape, Spec, Ty, message_of};

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

fn put_key(out: &mut Vec<u8>, number: u64, wire: u64) {
    put_varint(out, (number << 3) | wire);
}

fn put_bytes(out: &mut Vec<u8>, number: u64, payload: &[u8]) {
    put_key(out, number, 2);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

fn put_int(out: &mut Vec<u8>, number: u64, v: i64) {
    put_key(out, number, 0);
    // A negative int32 or int64 is sign-extended to ten bytes, as Go writes it.
    put_varint(out, v as u64);
}

/// Seconds and nanoseconds of an RFC 3339 time.
fn timestamp(text: &str, path: &str) -> Result<(i64, i64), String> {
    let t: jiff::Timestamp = text
        .parse()
        .map_err(|e| format!("{path}: not an RFC 3339 time: {e}"))?;
    Ok((t.as_second(), i64::from(t.subsec_nanosecond())))
}

/// Go's JSON `int`s may be written as floats by other encoders; integral ones are accepted.
fn integer(v: &Value, path: &str) -> Result<i64, String> {
    v.as_i64()
        .or_else(|| v.as_u64().map(|u| u as i64))
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .ok_or_else(|| format!("{path}: not an integer: {v}"))
}

/// One field occurrence of type `ty` with JSON `value` (`Null`: the zero value).
fn field(out: &mut Vec<u8>, number: u64, ty: Ty, value: &Value, path: &str) -> Result<(), String> {
    match ty {
        Ty::Str => match value {
            Value::String(s) => put_bytes(out, number, s.as_bytes()),
            Value::Null => put_bytes(out, number, b""),
            other => return Err(format!("{path}: not a string: {other}")),
        },
        Ty::Int32 | Ty::Int64 => {
            let v = if value.is_null() {
                0
            } else {
                integer(value, path)?
            };
            put_int(out, number, v);
        }
        Ty::Bool => {
            let v = match value {
                Value::Bool(b) => *b,
                Value::Null => false,
                other => return Err(format!("{path}: not a boolean: {other}")),
            };
            put_int(out, number, i64::from(v));
        }
        Ty::Bytes => {
            let text = value
                .as_str()
                .ok_or_else(|| format!("{path}: not a base64 string: {value}"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| format!("{path}: not base64: {e}"))?;
            put_bytes(out, number, &bytes);
        }
        Ty::Msg(msg) => {
            let mut buf = Vec::new();
            message(&mut buf, msg, value, path)?;
            put_bytes(out, number, &buf);
        }
    }
    Ok(())
}

/// A message's bytes from its JSON (`Null`: the zero value).
fn message(out: &mut Vec<u8>, msg: &Message, value: &Value, path: &str) -> Result<(), String> {
    match msg.shape {
        Shape::Object => match value {
            Value::Object(obj) => object(out, msg, obj, path),
            Value::Null => object(out, msg, &Map::new(), path),
            other => Err(format!("{path}: not an object: {other}")),
        },
        Shape::Items => {
            for item in value.as_array().into_iter().flatten() {
                field(out, 1, Ty::Str, item, path)?;
            }
            Ok(())
        }
        Shape::Quantity => {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Null => "0".into(),
                other => return Err(format!("{path}: not a quantity: {other}")),
            };
            put_bytes(out, 1, text.as_bytes());
            Ok(())
        }
        Shape::IntOrString => {
            let (kind, int, text) = match value {
                Value::String(s) => (1, 0, s.as_str()),
                Value::Null => (0, 0, ""),
                other => (0, integer(other, path)?, ""),
            };
            put_int(out, 1, kind);
            put_int(out, 2, i64::from(int as i32));
            put_bytes(out, 3, text.as_bytes());
            Ok(())
        }
        Shape::Time | Shape::MicroTime => {
            let Some(text) = value.as_str() else {
                // The zero time: Go's Time marshals to nothing.
                return match value {
                    Value::Null => Ok(()),
                    other => Err(format!("{path}: not a time: {other}")),
                };
            };
            let (seconds, nanos) = timestamp(text, path)?;
            put_int(out, 1, seconds);
            put_int(out, 2, nanos);
            Ok(())
        }
        Shape::RawJson | Shape::RawExtension => {
            if !value.is_null() {
                let raw = serde_json::to_vec(value).map_err(|e| format!("{path}: {e}"))?;
                put_bytes(out, 1, &raw);
            }
            Ok(())
        }
    }
}

/// An object message from its JSON members.
fn object(
    out: &mut Vec<u8>,
    msg: &Message,
    obj: &Map<String, Value>,
    path: &str,
) -> Result<(), String> {
    let mut specs: Vec<&Spec> = msg.fields.iter().collect();
    specs.sort_by_key(|s| s.number);
    for spec in specs {
        let here = format!("{path}.{}", spec.name);
        let value = obj.get(spec.name).unwrap_or(&Value::Null);
        match spec.rule {
            Rule::Inline => {
                let Ty::Msg(sub) = spec.ty else {
                    return Err(format!("{here}: an inlined field that is not a message"));
                };
                let mut buf = Vec::new();
                object(&mut buf, sub, obj, path)?;
                put_bytes(out, spec.number, &buf);
            }
            Rule::Repeated => {
                for item in value.as_array().into_iter().flatten() {
                    field(out, spec.number, spec.ty, item, &here)?;
                }
            }
            Rule::Map => {
                let Some(map) = value.as_object() else {
                    continue;
                };
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, key.as_bytes());
                    field(&mut entry, 2, spec.ty, &map[key], &format!("{here}.{key}"))?;
                    put_bytes(out, spec.number, &entry);
                }
            }
            Rule::Opt => {
                if !value.is_null() {
                    field(out, spec.number, spec.ty, value, &here)?;
                }
            }
            // A non-pointer: always written, but a nil `[]byte` is not.
            Rule::Keep | Rule::Omit => {
                if !(value.is_null() && matches!(spec.ty, Ty::Bytes)) {
                    field(out, spec.number, spec.ty, value, &here)?;
                }
            }
        }
    }
    Ok(())
}

/// The protobuf body of a JSON object of a built-in kind (its `apiVersion` and `kind` pick the
/// message, as [`super::decode`] does); `None` for a kind without a message table (a custom
/// resource: upstream answers those in JSON), or a value that does not fit its message.
pub fn encode(value: &Value) -> Option<Vec<u8>> {
    let api_version = value.get("apiVersion")?.as_str()?;
    let kind = value.get("kind")?.as_str()?;
    let msg = message_of(api_version, kind)?;
    let obj = value.as_object()?;
    let mut raw = Vec::new();
    if let Err(e) = object(&mut raw, msg, obj, kind) {
        tracing::debug!(%api_version, %kind, error = %e, "not encoded as protobuf");
        return None;
    }
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut body = MAGIC.to_vec();
    put_bytes(&mut body, 1, &type_meta);
    put_bytes(&mut body, 2, &raw);
    put_bytes(&mut body, 3, b"");
    put_bytes(&mut body, 4, b"");
    Some(body)
}

/// Whether objects of `kind` in `api_version` have a message table (so [`encode`] writes them).
pub(crate) fn has_table(api_version: &str, kind: &str) -> bool {
    message_of(api_version, kind).is_some()
}

/// One frame of a protobuf watch stream from a JSON watch event line (`{"type", "object"}`):
/// the 4-byte big-endian length, then the `metav1.WatchEvent` message without an envelope
/// (`type`, `object.raw` = the object's enveloped protobuf), as kube-apiserver's
/// length-delimited raw serializer writes it. `None` for a line that is not such an event.
pub(crate) fn watch_frame(line: &[u8]) -> Option<Vec<u8>> {
    let event: Value = serde_json::from_slice(line).ok()?;
    let kind = event.get("type")?.as_str()?;
    let object = encode(event.get("object")?)?;
    let mut raw = Vec::new();
    put_bytes(&mut raw, 1, &object);
    let mut message = Vec::new();
    put_bytes(&mut message, 1, kind.as_bytes());
    put_bytes(&mut message, 2, &raw);
    let mut frame = u32::try_from(message.len()).ok()?.to_be_bytes().to_vec();
    frame.extend(message);
    Some(frame)
}
