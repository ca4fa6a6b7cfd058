//! Decoding of Kubernetes protobuf request bodies for a few simple built-in kinds, so that
//! kubectl's `create <generator>` commands (which send protobuf) work: `kubectl create
//! namespace`, `create configmap`, `create secret generic`, `create serviceaccount`.
//!
//! The envelope is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message
//! (`typeMeta{apiVersion, kind}`, `raw`, `contentEncoding`, `contentType`); `raw` is the
//! object's own message. Only the fields those commands send are decoded (object metadata
//! name, generateName, namespace, labels, annotations, finalizers; ConfigMap data and
//! binaryData; Secret data, type and stringData; Namespace finalizers). Anything else is
//! answered with 415, as before. Responses are always JSON (clients accept it).

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

/// One decoded protobuf field.
#[derive(Debug, Clone)]
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

/// All fields of a message, in order, as (field number, value).
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

fn string_map(entries: &[&[u8]]) -> Result<Value, String> {
    let mut map = BTreeMap::new();
    for e in entries {
        let (k, v) = entry(e)?;
        map.insert(k, Value::String(text(v)?));
    }
    Ok(json!(map))
}

fn bytes_map(entries: &[&[u8]]) -> Result<Value, String> {
    let mut map = BTreeMap::new();
    for e in entries {
        let (k, v) = entry(e)?;
        map.insert(
            k,
            Value::String(base64::engine::general_purpose::STANDARD.encode(v)),
        );
    }
    Ok(json!(map))
}

fn object_meta(b: &[u8]) -> Result<Value, String> {
    let mut meta = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Vec::new(), Vec::new(), Vec::new());
    for (n, f) in fields(b)? {
        let Field::Bytes(v) = f else { continue };
        match n {
            1..=3 => {
                let s = text(v)?;
                if !s.is_empty() {
                    let key = ["name", "generateName", "namespace"][(n - 1) as usize];
                    meta.insert(key.into(), Value::String(s));
                }
            }
            11 => labels.push(v),
            12 => annotations.push(v),
            14 => finalizers.push(Value::String(text(v)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), string_map(&labels)?);
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), string_map(&annotations)?);
    }
    if !finalizers.is_empty() {
        meta.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(meta))
}

/// Group the length-delimited fields of a message by number.
fn by_number(b: &[u8]) -> Result<BTreeMap<u64, Vec<&[u8]>>, String> {
    let mut out: BTreeMap<u64, Vec<&[u8]>> = BTreeMap::new();
    for (n, f) in fields(b)? {
        if let Field::Bytes(v) = f {
            out.entry(n).or_default().push(v);
        }
    }
    Ok(out)
}

fn varints(b: &[u8]) -> Result<BTreeMap<u64, u64>, String> {
    Ok(fields(b)?
        .into_iter()
        .filter_map(|(n, f)| match f {
            Field::Varint(v) => Some((n, v)),
            Field::Bytes(_) => None,
        })
        .collect())
}

/// Decode a protobuf request body into the JSON object, for the supported kinds.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or("missing k8s protobuf magic")?;
    let unknown = by_number(rest)?;
    let type_meta = by_number(
        unknown
            .get(&1)
            .and_then(|v| v.first())
            .ok_or("no typeMeta")?,
    )?;
    let api_version = text(
        type_meta
            .get(&1)
            .and_then(|v| v.first())
            .copied()
            .unwrap_or_default(),
    )?;
    let kind = text(
        type_meta
            .get(&2)
            .and_then(|v| v.first())
            .copied()
            .unwrap_or_default(),
    )?;
    let raw = unknown
        .get(&2)
        .and_then(|v| v.first())
        .copied()
        .unwrap_or_default();
    let obj = by_number(raw)?;
    let flags = varints(raw)?;
    let meta = match obj.get(&1).and_then(|v| v.first()) {
        Some(m) => object_meta(m)?,
        None => json!({}),
    };
    let mut out = json!({"apiVersion": api_version, "kind": kind, "metadata": meta});
    let list = |n: u64| obj.get(&n).cloned().unwrap_or_default();
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => {
            if let Some(spec) = obj.get(&2).and_then(|v| v.first()) {
                let fins: Vec<Value> = by_number(spec)?
                    .get(&1)
                    .into_iter()
                    .flatten()
                    .map(|f| text(f).map(Value::String))
                    .collect::<Result<_, _>>()?;
                if !fins.is_empty() {
                    out["spec"] = json!({"finalizers": fins});
                }
            }
        }
        ("v1", "ConfigMap") => {
            if !list(2).is_empty() {
                out["data"] = string_map(&list(2))?;
            }
            if !list(3).is_empty() {
                out["binaryData"] = bytes_map(&list(3))?;
            }
            if flags.get(&4) == Some(&1) {
                out["immutable"] = json!(true);
            }
        }
        ("v1", "Secret") => {
            if !list(2).is_empty() {
                out["data"] = bytes_map(&list(2))?;
            }
            let kind = match list(3).first() {
                Some(t) if !t.is_empty() => text(t)?,
                _ => "Opaque".to_string(),
            };
            out["type"] = json!(kind);
            if !list(4).is_empty() {
                out["stringData"] = string_map(&list(4))?;
            }
            if flags.get(&5) == Some(&1) {
                out["immutable"] = json!(true);
            }
        }
        ("v1", "ServiceAccount") => {
            if let Some(v) = flags.get(&4) {
                out["automountServiceAccountToken"] = json!(*v == 1);
            }
        }
        _ => {
            return Err(format!(
                "protobuf bodies of {api_version} {kind} are not supported"
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
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
    fn secret_data_is_base64_and_type_defaults() {
        let mut raw = field(1, &field(1, b"s"));
        let mut kv = field(1, b"k");
        kv.extend(field(2, b"v"));
        raw.extend(field(2, &kv));
        let v = decode(&envelope("v1", "Secret", raw)).unwrap();
        assert_eq!(v["data"]["k"], "dg==");
        assert_eq!(v["type"], "Opaque");
    }

    #[test]
    fn rejects_unknown_kinds_and_garbage() {
        assert!(
            decode(&envelope(
                "apps/v1",
                "Deployment",
                field(1, &field(1, b"d"))
            ))
            .is_err()
        );
        assert!(decode(b"not protobuf").is_err());
        assert!(decode(b"k8s\0\x0a\x7f").is_err());
    }
}
