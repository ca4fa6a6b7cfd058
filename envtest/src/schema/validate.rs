//! Value validation of an object against its schema: types, bounds, formats, patterns, list
//! types and combinators, each failure phrased as the API server does.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::{CauseType, FieldError, child, flag};

/// Validates `object` against `schema` (the `openAPIV3Schema` of the served version) and
/// returns every violation (empty: valid).
pub fn validate(schema: &Value, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut v = Validator {
        errors: &mut errors,
    };
    match object {
        Value::Object(map) => {
            // Root: apiVersion/kind/metadata are the server's business.
            let mut rest = map.clone();
            for k in ["apiVersion", "kind", "metadata"] {
                rest.remove(k);
            }
            let mut root_schema = schema.clone();
            if let Some(Value::Array(req)) = root_schema.get_mut("required") {
                req.retain(|r| !matches!(r.as_str(), Some("apiVersion" | "kind" | "metadata")));
            }
            if let Some(Value::Object(props)) = root_schema.get_mut("properties") {
                for k in ["apiVersion", "kind", "metadata"] {
                    props.remove(k);
                }
            }
            v.check(&root_schema, &Value::Object(rest), "");
        }
        other => v.check(schema, other, ""),
    }
    errors
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "<root>" } else { path }
}

/// A value as the API server prints it in messages: strings quoted, others as JSON.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "\"null\"".into(),
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

pub(super) struct Validator<'e> {
    pub(super) errors: &'e mut Vec<FieldError>,
}

impl Validator<'_> {
    fn push(&mut self, path: &str, reason: CauseType, message: String) {
        self.errors.push(FieldError {
            path: display_path(path).to_string(),
            reason,
            message,
        });
    }

    fn invalid(&mut self, path: &str, value: &Value, detail: String) {
        self.push(
            path,
            CauseType::FieldValueInvalid,
            format!("Invalid value: {}: {detail}", show(value)),
        );
    }

    /// A value of the wrong JSON type: as upstream, the value shown is the name of its type.
    fn type_invalid(&mut self, path: &str, value: &Value, expected: &str) {
        self.wrong_type(path, show_type(value), value, expected);
    }

    /// A string that does not have the schema's `format`: the value itself is shown.
    fn format_invalid(&mut self, path: &str, value: &Value, format: &str) {
        self.wrong_type(path, show(value), value, format);
    }

    fn wrong_type(&mut self, path: &str, shown: String, value: &Value, expected: &str) {
        self.push(
            path,
            CauseType::FieldValueTypeInvalid,
            format!(
                "Invalid value: {shown}: {} in body must be of type {expected}: {}",
                display_path(path),
                show_type(value)
            ),
        );
    }

    pub(super) fn check(&mut self, schema: &Value, value: &Value, path: &str) {
        let Value::Object(s) = schema else {
            return;
        };
        let int_or_string = flag(s, "x-kubernetes-int-or-string");
        let ty = s.get("type").and_then(Value::as_str);
        if value.is_null() {
            let nullable = flag(s, "nullable");
            if !nullable && (ty.is_some() || int_or_string) {
                self.type_invalid(path, value, ty.unwrap_or("integer-or-string"));
            }
            return;
        }
        if int_or_string {
            if !is_integer(value) && !value.is_string() {
                self.type_invalid(path, value, "integer-or-string");
                return;
            }
        } else if let Some(ty) = ty {
            let ok = match ty {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => is_integer(value),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                _ => true,
            };
            if !ok {
                self.type_invalid(path, value, ty);
                return;
            }
        }
        if let Some(Value::Array(allowed)) = s.get("enum")
            && !allowed.contains(value)
        {
            let list: Vec<String> = allowed.iter().map(show).collect();
            self.push(
                path,
                CauseType::FieldValueNotSupported,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    show(value),
                    list.join(", ")
                ),
            );
        }
        match value {
            Value::Number(_) => self.check_number(s, value, path),
            Value::String(text) => self.check_string(s, value, text, path),
            Value::Array(items) => self.check_array(s, value, items, path),
            Value::Object(map) => self.check_object(s, value, map, path),
            _ => {}
        }
        self.check_combinators(s, value, path);
    }

    fn check_number(&mut self, s: &Map<String, Value>, value: &Value, path: &str) {
        let Some(x) = value.as_f64() else {
            return;
        };
        let p = display_path(path);
        let exclusive_max = flag(s, "exclusiveMaximum");
        let exclusive_min = flag(s, "exclusiveMinimum");
        if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
            if exclusive_max && x >= max {
                self.invalid(
                    path,
                    value,
                    format!("{p} in body should be less than {}", num(max)),
                );
            } else if x > max {
                self.invalid(
                    path,
                    value,
                    format!("{p} in body should be less than or equal to {}", num(max)),
                );
            }
        }
        if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
            if exclusive_min && x <= min {
                self.invalid(
                    path,
                    value,
                    format!("{p} in body should be greater than {}", num(min)),
                );
            } else if x < min {
                self.invalid(
                    path,
                    value,
                    format!(
                        "{p} in body should be greater than or equal to {}",
                        num(min)
                    ),
                );
            }
        }
        if let Some(m) = s.get("multipleOf").and_then(Value::as_f64)
            && m > 0.0
            && ((x / m).round() - x / m).abs() > 1e-9
        {
            self.invalid(
                path,
                value,
                format!("{p} in body should be a multiple of {}", num(m)),
            );
        }
        if let Some(fmt) = s.get("format").and_then(Value::as_str) {
            let ok = match fmt {
                "int32" => is_integer(value) && (i32::MIN as f64..=i32::MAX as f64).contains(&x),
                "int64" => is_integer(value),
                _ => true,
            };
            if !ok {
                self.format_invalid(path, value, fmt);
            }
        }
    }

    fn check_string(&mut self, s: &Map<String, Value>, value: &Value, text: &str, path: &str) {
        let p = display_path(path);
        let len = text.chars().count() as u64;
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            self.push(
                path,
                CauseType::FieldValueTooLong,
                format!("Too long: may not be longer than {max}"),
            );
        }
        if let Some(min) = s.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            self.invalid(
                path,
                value,
                format!("{p} in body should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = s.get("pattern").and_then(Value::as_str) {
            match compiled(pattern) {
                Ok(re) => {
                    if !re.is_match(text) {
                        self.invalid(path, value, format!("{p} in body should match '{pattern}'"));
                    }
                }
                Err(e) => self.invalid(
                    path,
                    value,
                    format!("{p}: the schema pattern '{pattern}' cannot be compiled: {e}"),
                ),
            }
        }
        if let Some(fmt) = s.get("format").and_then(Value::as_str)
            && !string_format_ok(fmt, text)
        {
            self.format_invalid(path, value, fmt);
        }
    }

    /// `minItems`/`maxItems` or `minProperties`/`maxProperties` (`keys`) for `n` elements
    /// (`noun` in the message; the real server says "items" for too many of both).
    fn check_count(
        &mut self,
        s: &Map<String, Value>,
        keys: [&str; 2],
        noun: &str,
        value: &Value,
        n: usize,
        path: &str,
    ) {
        let n = n as u64;
        if let Some(max) = s.get(keys[1]).and_then(Value::as_u64)
            && n > max
        {
            self.push(
                path,
                CauseType::FieldValueTooMany,
                format!("Too many: {n}: must have at most {max} items"),
            );
        }
        if let Some(min) = s.get(keys[0]).and_then(Value::as_u64)
            && n < min
        {
            let p = display_path(path);
            self.invalid(
                path,
                value,
                format!("{p} in body should have at least {min} {noun}"),
            );
        }
    }

    fn check_array(&mut self, s: &Map<String, Value>, value: &Value, items: &[Value], path: &str) {
        self.check_count(
            s,
            ["minItems", "maxItems"],
            "items",
            value,
            items.len(),
            path,
        );
        if let Some(item_schema) = s.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.check(item_schema, item, &format!("{path}[{i}]"));
            }
        }
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        self.push(
                            &format!("{path}[{i}]"),
                            CauseType::FieldValueDuplicate,
                            format!("Duplicate value: {}", show(item)),
                        );
                    }
                }
            }
            Some("map") => {
                let keys: Vec<&str> = s
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let key_of = |item: &Value| -> Vec<Value> {
                    keys.iter()
                        .map(|k| item.get(*k).cloned().unwrap_or(Value::Null))
                        .collect()
                };
                for (i, item) in items.iter().enumerate() {
                    let k = key_of(item);
                    if items[..i].iter().any(|prev| key_of(prev) == k) {
                        let shown: Map<String, Value> = keys
                            .iter()
                            .zip(k)
                            .map(|(name, v)| (name.to_string(), v))
                            .collect();
                        self.push(
                            &format!("{path}[{i}]"),
                            CauseType::FieldValueDuplicate,
                            format!("Duplicate value: {}", Value::Object(shown)),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    fn check_object(
        &mut self,
        s: &Map<String, Value>,
        value: &Value,
        map: &Map<String, Value>,
        path: &str,
    ) {
        if let Some(Value::Array(required)) = s.get("required") {
            for r in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(r) {
                    self.push(
                        &child(path, r),
                        CauseType::FieldValueRequired,
                        "Required value".into(),
                    );
                }
            }
        }
        self.check_count(
            s,
            ["minProperties", "maxProperties"],
            "properties",
            value,
            map.len(),
            path,
        );
        let props = s.get("properties").and_then(Value::as_object);
        for (k, v) in map {
            if let Some(sub) = props.and_then(|p| p.get(k)) {
                self.check(sub, v, &child(path, k));
                continue;
            }
            match s.get("additionalProperties") {
                Some(sub @ Value::Object(_)) => {
                    self.check(sub, v, &format!("{path}[{k}]"));
                }
                Some(Value::Bool(false)) => {
                    self.push(
                        &child(path, k),
                        CauseType::FieldValueInvalid,
                        format!("Invalid value: {}: field not declared in schema", show(v)),
                    );
                }
                _ => {}
            }
        }
    }

    fn check_combinators(&mut self, s: &Map<String, Value>, value: &Value, path: &str) {
        let passes = |schema: &Value| {
            let mut errs = Vec::new();
            Validator { errors: &mut errs }.check(schema, value, path);
            errs.is_empty()
        };
        if let Some(Value::Array(all)) = s.get("allOf") {
            for sub in all {
                self.check(sub, value, path);
            }
        }
        if let Some(Value::Array(any)) = s.get("anyOf")
            && !any.iter().any(passes)
        {
            self.invalid(
                path,
                value,
                format!(
                    "{} in body must validate at least one schema (anyOf)",
                    display_path(path)
                ),
            );
        }
        if let Some(Value::Array(one)) = s.get("oneOf")
            && one.iter().filter(|sub| passes(sub)).count() != 1
        {
            self.invalid(
                path,
                value,
                format!(
                    "{} in body must validate one and only one schema (oneOf)",
                    display_path(path)
                ),
            );
        }
        if let Some(not) = s.get("not")
            && passes(not)
        {
            self.invalid(
                path,
                value,
                format!(
                    "{} in body must not validate the schema (not)",
                    display_path(path)
                ),
            );
        }
    }
}

/// Compiled schema patterns, shared by every validation (CRD patterns are few).
fn compiled(pattern: &str) -> Result<regex::Regex, regex::Error> {
    static CACHE: OnceLock<Mutex<HashMap<String, regex::Regex>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(re) = cache.lock().get(pattern) {
        return Ok(re.clone());
    }
    let re = regex::Regex::new(pattern)?;
    let mut map = cache.lock();
    if map.len() > 1024 {
        map.clear();
    }
    map.insert(pattern.to_string(), re.clone());
    Ok(re)
}

fn show_type(v: &Value) -> String {
    format!("{:?}", type_name(v))
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn string_format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" => s.parse::<jiff::Timestamp>().is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok() && s.len() == 10,
        "byte" => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
        }
        "uuid" => uuid::Uuid::try_parse(s).is_ok(),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            match (ip.parse::<std::net::IpAddr>(), bits.parse::<u8>()) {
                (Ok(std::net::IpAddr::V4(_)), Ok(b)) => b <= 32,
                (Ok(std::net::IpAddr::V6(_)), Ok(b)) => b <= 128,
                _ => false,
            }
        }),
        "hostname" => {
            !s.is_empty()
                && s.len() <= 253
                && s.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
        }
        _ => true,
    }
}
