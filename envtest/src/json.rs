//! Small readers of `serde_json` values shared across the server.

use serde_json::{Map, Value};

/// The strings of the JSON array `v`, in order (other items skipped; none when `v` is not an
/// array).
pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The members kube-apiserver writes first in a typed object (its `TypeMeta` and `ObjectMeta`
/// come first in every Go struct); the others follow in key order.
const TYPED_FIRST: [&str; 3] = ["kind", "apiVersion", "metadata"];

/// The member order of a `metav1.Status` (its Go struct order).
const STATUS_ORDER: [&str; 8] = [
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];

/// The member order of `metav1.StatusDetails`.
const DETAILS_ORDER: [&str; 6] = [
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];

/// The member order of a `metav1.StatusCause`.
const CAUSE_ORDER: [&str; 3] = ["reason", "message", "field"];

/// A typed object serialised as kube-apiserver writes it, and where its body starts after the
/// type members.
#[derive(Debug)]
pub(crate) struct TypedJson {
    /// The JSON text (no trailing newline).
    pub(crate) bytes: Vec<u8>,
    /// Offset of the first member after `kind` and `apiVersion` (just after their comma), or
    /// of the closing brace when there is none; `1` when the object does not begin with them.
    pub(crate) after_type: usize,
}

/// Serialise `value` as kube-apiserver writes a built-in (typed) object: `kind`,
/// `apiVersion`, `metadata` first, then the other members in key order (a `Status` in its
/// own Go field order); nested values in key order. Not an object: plain JSON.
pub(crate) fn typed(value: &Value) -> TypedJson {
    let mut out = Vec::with_capacity(256);
    let Value::Object(map) = value else {
        write_plain(&mut out, value);
        return TypedJson {
            bytes: out,
            after_type: 0,
        };
    };
    if map.get("kind").and_then(Value::as_str) == Some("Status") {
        write_ordered(&mut out, map, &STATUS_ORDER, write_status_member);
        return TypedJson {
            bytes: out,
            after_type: 0,
        };
    }
    out.push(b'{');
    let mut first = true;
    let mut after_type = 1;
    for key in TYPED_FIRST {
        if let Some(v) = map.get(key) {
            write_member(&mut out, &mut first, key, v, write_any);
        }
        if key == "apiVersion" && map.contains_key("kind") && map.contains_key("apiVersion") {
            after_type = out.len() + 1;
        }
    }
    for (k, v) in map {
        if !TYPED_FIRST.contains(&k.as_str()) {
            write_member(&mut out, &mut first, k, v, write_any);
        }
    }
    out.push(b'}');
    // Without members after the type ones, the body starts at the closing brace.
    let after_type = after_type.min(out.len() - 1);
    TypedJson {
        bytes: out,
        after_type,
    }
}

/// [`typed`]'s bytes followed by a newline, as kube-apiserver ends every JSON body.
pub(crate) fn typed_body(value: &Value) -> Vec<u8> {
    let mut out = typed(value).bytes;
    out.push(b'\n');
    out
}

/// `value` as serde writes it (object members in key order, as Go writes a map).
fn write_plain(out: &mut Vec<u8>, value: &Value) {
    // invariant: a serde_json::Value always serialises (keys are strings) into a Vec
    let _ = serde_json::to_writer(&mut *out, value);
}

/// A member's value as serde writes it, whatever its key.
fn write_any(out: &mut Vec<u8>, _key: &str, value: &Value) {
    write_plain(out, value);
}

/// One `"key":value` member, preceded by a comma unless it is the first.
fn write_member(
    out: &mut Vec<u8>,
    first: &mut bool,
    key: &str,
    value: &Value,
    write: fn(&mut Vec<u8>, &str, &Value),
) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    write_plain(out, &Value::String(key.to_string()));
    out.push(b':');
    write(out, key, value);
}

/// An object with the members of `order` first (in that order), then the others in key order.
fn write_ordered(
    out: &mut Vec<u8>,
    map: &Map<String, Value>,
    order: &[&str],
    write: fn(&mut Vec<u8>, &str, &Value),
) {
    out.push(b'{');
    let mut first = true;
    for key in order {
        if let Some(v) = map.get(*key) {
            write_member(out, &mut first, key, v, write);
        }
    }
    for (k, v) in map {
        if !order.contains(&k.as_str()) {
            write_member(out, &mut first, k, v, write);
        }
    }
    out.push(b'}');
}

fn write_status_member(out: &mut Vec<u8>, key: &str, value: &Value) {
    match (key, value) {
        ("details", Value::Object(m)) => {
            write_ordered(out, m, &DETAILS_ORDER, write_details_member)
        }
        _ => write_plain(out, value),
    }
}

fn write_details_member(out: &mut Vec<u8>, key: &str, value: &Value) {
    match (key, value) {
        ("causes", Value::Array(causes)) => {
            out.push(b'[');
            for (i, c) in causes.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match c {
                    Value::Object(m) => write_ordered(out, m, &CAUSE_ORDER, write_any),
                    other => write_plain(out, other),
                }
            }
            out.push(b']');
        }
        _ => write_plain(out, value),
    }
}

/// A JSON syntax error in the words of Go's `encoding/json` (which the real server's messages
/// quote): `invalid character 'x' looking for beginning of value`, `unexpected end of JSON
/// input`, ... `body` is the text that failed to parse.
pub(crate) fn go_syntax_error(body: &[u8], err: &serde_json::Error) -> String {
    if err.is_eof() {
        return "unexpected end of JSON input".into();
    }
    // serde points at the offending byte (line and column from 1).
    let at = body
        .split(|b| *b == b'\n')
        .nth(err.line().saturating_sub(1))
        .and_then(|line| line.get(err.column().saturating_sub(1)))
        .copied();
    let Some(b) = at else {
        return err.to_string();
    };
    let message = err.to_string();
    let context = if message.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if message.starts_with("expected `:`") {
        "after object key"
    } else if message.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if message.starts_with("expected `,` or `]`") {
        "after array element"
    } else if message.starts_with("trailing characters") {
        "after top-level value"
    } else if message.starts_with("trailing comma") && b == b'}' {
        "looking for beginning of object key string"
    } else {
        "looking for beginning of value"
    };
    format!("invalid character {} {context}", go_quote_byte(b))
}

/// A byte as Go's `encoding/json` quotes it in a syntax error (`quoteChar`): the byte read as
/// a rune and quoted as `strconv.Quote` does (`'x'`, `'\x01'`, `'\u0081'`, `'\n'`).
fn go_quote_byte(b: u8) -> String {
    let inner = match b {
        b'\'' => "\\'".to_string(),
        b'"' => "\"".to_string(),
        b'\\' => "\\\\".to_string(),
        0x07 => "\\a".to_string(),
        0x08 => "\\b".to_string(),
        0x0c => "\\f".to_string(),
        b'\n' => "\\n".to_string(),
        b'\r' => "\\r".to_string(),
        b'\t' => "\\t".to_string(),
        0x0b => "\\v".to_string(),
        0x20..=0x7e => char::from(b).to_string(),
        0x00..=0x7f => format!("\\x{b:02x}"),
        // Latin-1: the C1 controls, the no-break space and the soft hyphen are not printable.
        0x80..=0xa0 | 0xad => format!("\\u{b:04x}"),
        _ => char::from(b).to_string(),
    };
    format!("'{inner}'")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(v: &Value) -> (String, String) {
        let t = typed(v);
        let all = String::from_utf8(t.bytes.clone()).unwrap();
        let rest = String::from_utf8(t.bytes[t.after_type..].to_vec()).unwrap();
        (all, rest)
    }

    #[test]
    fn typed_objects_start_with_kind_api_version_and_metadata() {
        let v = json!({"data": {"b": "2", "a": "1"}, "metadata": {"name": "x"}, "apiVersion": "v1", "kind": "ConfigMap"});
        let (all, rest) = text(&v);
        assert_eq!(
            all,
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"},"data":{"a":"1","b":"2"}}"#
        );
        assert_eq!(rest, r#""metadata":{"name":"x"},"data":{"a":"1","b":"2"}}"#);
        assert_eq!(serde_json::from_str::<Value>(&all).unwrap(), v);
    }

    #[test]
    fn the_body_after_the_type_members_is_found_in_every_shape() {
        // Only the type members: the body is the closing brace.
        let (_, rest) = text(&json!({"kind": "K", "apiVersion": "v1"}));
        assert_eq!(rest, "}");
        // No kind: nothing to skip.
        let (all, rest) = text(&json!({"apiVersion": "v1", "spec": {}}));
        assert_eq!(all, r#"{"apiVersion":"v1","spec":{}}"#);
        assert_eq!(rest, r#""apiVersion":"v1","spec":{}}"#);
        // Not an object: plain JSON.
        assert_eq!(text(&json!([1, 2])).0, "[1,2]");
        assert_eq!(text(&json!({})).0, "{}");
    }

    #[test]
    fn syntax_errors_are_worded_as_go_does() {
        let go = |body: &str| {
            let err = serde_json::from_str::<Value>(body).unwrap_err();
            go_syntax_error(body.as_bytes(), &err)
        };
        assert_eq!(
            go("{not json"),
            "invalid character 'n' looking for beginning of object key string"
        );
        assert_eq!(go("{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(
            go("{\"a\": 1 \"b\"}"),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(go("[1 2]"), "invalid character '2' after array element");
        assert_eq!(go("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(
            go("[1,]"),
            "invalid character ']' looking for beginning of value"
        );
        assert_eq!(
            go("{\"a\":1,}"),
            "invalid character '}' looking for beginning of object key string"
        );
        assert_eq!(go("{\"a\":"), "unexpected end of JSON input");
        assert_eq!(
            go("@"),
            "invalid character '@' looking for beginning of value"
        );
        assert_eq!(
            go("\u{1}"),
            r"invalid character '\x01' looking for beginning of value"
        );
        assert_eq!(
            go("'"),
            r"invalid character '\'' looking for beginning of value"
        );
        let err = serde_json::from_slice::<Value>(&[0x81, 0x2a]).unwrap_err();
        assert_eq!(
            go_syntax_error(&[0x81, 0x2a], &err),
            r"invalid character '\u0081' looking for beginning of value"
        );
    }

    #[test]
    fn a_status_is_written_in_its_go_field_order() {
        let status = json!({
            "code": 422, "details": {"causes": [{"field": "f", "message": "m", "reason": "r"}],
            "kind": "configmaps", "name": "x"}, "reason": "Invalid", "message": "bad",
            "status": "Failure", "metadata": {}, "apiVersion": "v1", "kind": "Status"
        });
        assert_eq!(
            String::from_utf8(typed_body(&status)).unwrap(),
            concat!(
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
                r#""message":"bad","reason":"Invalid","details":{"name":"x","kind":"configmaps","#,
                r#""causes":[{"reason":"r","message":"m","field":"f"}]},"code":422}"#,
                "\n"
            )
        );
    }
}
