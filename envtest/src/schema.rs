//! Validation, pruning and defaulting of custom objects against a CRD's `openAPIV3Schema`.
//!
//! The server runs, for every write of a custom object: [`prune`] (drop fields the structural
//! schema does not declare), [`apply_defaults`] (fill `default` values), then [`validate`] and
//! answers `422 Invalid` with one cause per [`FieldError`] (see [`invalid_message`] for the
//! Status message).
//!
//! ```
//! use kcr_envtest::schema::{self, CauseType};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
//!     "required": ["size"], "properties": {
//!         "size": {"type": "integer", "maximum": 10},
//!         "mode": {"type": "string", "enum": ["a", "b"], "default": "a"}}}}});
//! let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
//!     "metadata": {"name": "w"}, "spec": {"size": 11, "junk": true}});
//! assert_eq!(schema::prune(&schema, &mut obj), vec!["spec.junk"]);
//! schema::apply_defaults(&schema, &mut obj);
//! assert_eq!(obj["spec"]["mode"], "a");
//! let errors = schema::validate(&schema, &obj);
//! assert_eq!(errors[0].path, "spec.size");
//! assert_eq!(errors[0].reason, CauseType::FieldValueInvalid);
//! ```
//!
//! # Supported schema keywords
//!
//! | keyword | behaviour |
//! |---|---|
//! | `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`) | `FieldValueTypeInvalid`; `number` accepts integers; an integral float is an integer |
//! | `nullable` | `null` is accepted only with `nullable: true` (or no `type`) |
//! | `required` | `FieldValueRequired` per missing property |
//! | `properties`, `additionalProperties` (bool or schema), `items` | recursive |
//! | `enum` | `FieldValueNotSupported` listing the supported values |
//! | `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf` | `FieldValueInvalid` |
//! | `minLength`, `maxLength` (in characters) | `FieldValueInvalid` / `FieldValueTooLong` |
//! | `pattern` (Rust `regex` syntax, close to ECMA 262 for usual CRD patterns) | `FieldValueInvalid` |
//! | `minItems`, `maxItems` | `FieldValueInvalid` / `FieldValueTooMany` |
//! | `minProperties`, `maxProperties` | `FieldValueInvalid` / `FieldValueTooMany` |
//! | `format`: `date-time`, `date`, `int32`, `int64`, `byte`, `uuid`, `ipv4`, `ipv6`, `cidr`, `hostname` | `FieldValueTypeInvalid`; other formats are accepted unchecked |
//! | `allOf`, `anyOf`, `oneOf`, `not` | `FieldValueInvalid` |
//! | `x-kubernetes-int-or-string` | integer or string |
//! | `x-kubernetes-preserve-unknown-fields` | anything below is kept by [`prune`] |
//! | `x-kubernetes-embedded-resource` | `apiVersion`, `kind`, `metadata` kept by [`prune`] |
//! | `x-kubernetes-list-type: set / map` (+ `x-kubernetes-list-map-keys`) | `FieldValueDuplicate` for repeated items/keys |
//! | `default` | [`apply_defaults`]; a `null` in a non-nullable defaulted field is replaced |
//!
//! Not supported: `x-kubernetes-validations` (CEL), ratcheting, `$ref`. At the root,
//! `apiVersion`, `kind` and `metadata` are never pruned nor validated here (the server validates
//! object metadata itself).

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use parking_lot::Mutex;

use serde_json::{Map, Value};

/// The metav1 `StatusCause` type of a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CauseType {
    /// `FieldValueRequired`.
    FieldValueRequired,
    /// `FieldValueInvalid`.
    FieldValueInvalid,
    /// `FieldValueTypeInvalid`.
    FieldValueTypeInvalid,
    /// `FieldValueNotSupported`.
    FieldValueNotSupported,
    /// `FieldValueTooLong`.
    FieldValueTooLong,
    /// `FieldValueTooMany`.
    FieldValueTooMany,
    /// `FieldValueDuplicate`.
    FieldValueDuplicate,
    /// `FieldValueForbidden`.
    FieldValueForbidden,
}

impl CauseType {
    /// The wire name (`StatusCause.reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FieldValueRequired => "FieldValueRequired",
            Self::FieldValueInvalid => "FieldValueInvalid",
            Self::FieldValueTypeInvalid => "FieldValueTypeInvalid",
            Self::FieldValueNotSupported => "FieldValueNotSupported",
            Self::FieldValueTooLong => "FieldValueTooLong",
            Self::FieldValueTooMany => "FieldValueTooMany",
            Self::FieldValueDuplicate => "FieldValueDuplicate",
            Self::FieldValueForbidden => "FieldValueForbidden",
        }
    }
}

impl fmt::Display for CauseType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validation failure, phrased as the API server does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Kubernetes-style field path, e.g. `spec.taints[0].effect`, `spec.labels[app]`.
    pub path: String,
    /// The StatusCause type.
    pub reason: CauseType,
    /// The message without the path, e.g. `Required value` or
    /// `Invalid value: 11: spec.replicas in body should be less than or equal to 10`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The Status message of a 422 for `errors` on object `name` of `kind_group` (e.g.
/// `Widget.example.com`): `Widget.example.com "w" is invalid: <error>` or `[<e1>, <e2>]`.
pub fn invalid_message(kind_group: &str, name: &str, errors: &[FieldError]) -> String {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    if list.len() == 1 {
        format!("{kind_group} {name:?} is invalid: {}", list[0])
    } else {
        format!("{kind_group} {name:?} is invalid: [{}]", list.join(", "))
    }
}

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

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
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

struct Validator<'e> {
    errors: &'e mut Vec<FieldError>,
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

    fn type_invalid(&mut self, path: &str, value: &Value, expected: &str) {
        self.push(
            path,
            CauseType::FieldValueTypeInvalid,
            format!(
                "Invalid value: {}: {} in body must be of type {expected}: {}",
                show(value),
                display_path(path),
                show_type(value)
            ),
        );
    }

    fn check(&mut self, schema: &Value, value: &Value, path: &str) {
        let Value::Object(s) = schema else {
            return;
        };
        let int_or_string = s
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let ty = s.get("type").and_then(Value::as_str);
        if value.is_null() {
            let nullable = s.get("nullable").and_then(Value::as_bool).unwrap_or(false);
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
        let exclusive_max = s
            .get("exclusiveMaximum")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let exclusive_min = s
            .get("exclusiveMinimum")
            .and_then(Value::as_bool)
            .unwrap_or(false);
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
                self.type_invalid(path, value, fmt);
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
            self.type_invalid(path, value, fmt);
        }
    }

    fn check_array(&mut self, s: &Map<String, Value>, value: &Value, items: &[Value], path: &str) {
        let p = display_path(path);
        let n = items.len() as u64;
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
            && n > max
        {
            self.push(
                path,
                CauseType::FieldValueTooMany,
                format!("Too many: {n}: must have at most {max} items"),
            );
        }
        if let Some(min) = s.get("minItems").and_then(Value::as_u64)
            && n < min
        {
            self.invalid(
                path,
                value,
                format!("{p} in body should have at least {min} items"),
            );
        }
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
        let p = display_path(path);
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
        let n = map.len() as u64;
        if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
            && n > max
        {
            self.push(
                path,
                CauseType::FieldValueTooMany,
                format!("Too many: {n}: must have at most {max} items"),
            );
        }
        if let Some(min) = s.get("minProperties").and_then(Value::as_u64)
            && n < min
        {
            self.invalid(
                path,
                value,
                format!("{p} in body should have at least {min} properties"),
            );
        }
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

/// Checks that a CRD's `openAPIV3Schema` is structural, as the API server does when a
/// CustomResourceDefinition is created or updated (422 on violations). `prefix` is the path of
/// the schema in the CRD, e.g. `spec.versions[0].schema.openAPIV3Schema`.
///
/// Checked: the root is `type: object`; every node that declares `properties`, `items` or
/// `additionalProperties` (and every property, item and additional-properties schema) has a
/// `type` unless it is `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`;
/// `x-kubernetes-int-or-string` nodes have no `type`; `type: array` has `items`; `properties`
/// and `additionalProperties` are not both set; `x-kubernetes-list-type: map` has object items
/// and non-empty `x-kubernetes-list-map-keys` naming declared properties; `allOf`/`anyOf`/
/// `oneOf`/`not` branches set no `type`, `default`, `nullable` or `additionalProperties`; every
/// `default` validates against its own schema.
pub fn check_structural(schema: &Value, prefix: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let root_type = schema.get("type").and_then(Value::as_str);
    if root_type != Some("object") {
        let shown = root_type
            .map(|t| format!("{t:?}"))
            .unwrap_or_else(|| "\"\"".into());
        errors.push(FieldError {
            path: format!("{prefix}.type"),
            reason: CauseType::FieldValueInvalid,
            message: format!("Invalid value: {shown}: must be object at the root"),
        });
    }
    structural_node(schema, prefix, false, &mut errors);
    errors
}

fn structural_node(schema: &Value, path: &str, needs_type: bool, errors: &mut Vec<FieldError>) {
    let Value::Object(s) = schema else {
        errors.push(FieldError {
            path: path.to_string(),
            reason: CauseType::FieldValueInvalid,
            message: "Invalid value: must be a schema object".into(),
        });
        return;
    };
    let flag = |k: &str| s.get(k).and_then(Value::as_bool).unwrap_or(false);
    let ty = s
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty());
    let int_or_string = flag("x-kubernetes-int-or-string");
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let mut push = |field: &str, reason: CauseType, message: &str| {
        errors.push(FieldError {
            path: if field.is_empty() {
                path.to_string()
            } else {
                format!("{path}.{field}")
            },
            reason,
            message: message.to_string(),
        });
    };
    let specifies_structure = s.contains_key("properties")
        || s.contains_key("items")
        || s.contains_key("additionalProperties");
    if ty.is_none() && !int_or_string && !preserve && (needs_type || specifies_structure) {
        push(
            "type",
            CauseType::FieldValueRequired,
            "Required value: must not be empty for specified object fields",
        );
    }
    if int_or_string && ty.is_some() {
        push(
            "type",
            CauseType::FieldValueForbidden,
            "Forbidden: must be empty to be structural when x-kubernetes-int-or-string is true",
        );
    }
    if ty == Some("array") && !s.contains_key("items") {
        push(
            "items",
            CauseType::FieldValueRequired,
            "Required value: must be specified",
        );
    }
    if s.contains_key("properties") && s.get("additionalProperties").is_some_and(|a| a.is_object())
    {
        push(
            "additionalProperties",
            CauseType::FieldValueForbidden,
            "Forbidden: additionalProperties and properties are mutual exclusive",
        );
    }
    if s.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let keys: Vec<&str> = s
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let items = s.get("items");
        if items.and_then(|i| i.get("type")).and_then(Value::as_str) != Some("object") {
            push(
                "items.type",
                CauseType::FieldValueInvalid,
                "Invalid value: must be object if parent array's x-kubernetes-list-type is map",
            );
        }
        if keys.is_empty() {
            push(
                "x-kubernetes-list-map-keys",
                CauseType::FieldValueRequired,
                "Required value: must not be empty if x-kubernetes-list-type is map",
            );
        }
        let props = items
            .and_then(|i| i.get("properties"))
            .and_then(Value::as_object);
        for k in keys {
            if props.is_none_or(|p| !p.contains_key(k)) {
                push(
                    "x-kubernetes-list-map-keys",
                    CauseType::FieldValueInvalid,
                    &format!("Invalid value: {k:?}: entries must all be names of item properties"),
                );
            }
        }
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(combinator) {
            for (i, b) in branches.iter().enumerate() {
                branch_restrictions(b, &format!("{path}.{combinator}[{i}]"), errors);
            }
        }
    }
    if let Some(not) = s.get("not") {
        branch_restrictions(not, &format!("{path}.not"), errors);
    }
    if let Some(default) = s.get("default") {
        let mut pruned = default.clone();
        prune_rec(schema, &mut pruned, "", false, &mut Vec::new());
        let mut problems = Vec::new();
        Validator {
            errors: &mut problems,
        }
        .check(schema, &pruned, "");
        for p in problems {
            errors.push(FieldError {
                path: format!("{path}.default"),
                reason: p.reason,
                message: format!("{} (in the default value)", p.message),
            });
        }
    }
    if let Some(Value::Object(props)) = s.get("properties") {
        for (name, sub) in props {
            structural_node(sub, &format!("{path}.properties[{name}]"), true, errors);
        }
    }
    if let Some(items) = s.get("items") {
        structural_node(items, &format!("{path}.items"), true, errors);
    }
    if let Some(add @ Value::Object(_)) = s.get("additionalProperties") {
        structural_node(add, &format!("{path}.additionalProperties"), true, errors);
    }
}

/// In value-validation branches (`allOf`, ...) structure and defaults may not be specified.
fn branch_restrictions(branch: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Value::Object(b) = branch else {
        return;
    };
    for key in ["type", "default", "nullable", "additionalProperties"] {
        if b.contains_key(key) {
            errors.push(FieldError {
                path: format!("{path}.{key}"),
                reason: CauseType::FieldValueForbidden,
                message: "Forbidden: must be undefined to be structural".into(),
            });
        }
    }
    if let Some(Value::Object(props)) = b.get("properties") {
        for (name, sub) in props {
            branch_restrictions(sub, &format!("{path}.properties[{name}]"), errors);
        }
    }
    if let Some(items) = b.get("items") {
        branch_restrictions(items, &format!("{path}.items"), errors);
    }
}

/// Removes every field `schema` does not declare (structural pruning), in place, and returns
/// the pruned paths. Kept: declared `properties`, anything under
/// `x-kubernetes-preserve-unknown-fields: true`, map entries under `additionalProperties`
/// (pruned recursively by its schema), `apiVersion`/`kind`/`metadata` at the root and under
/// `x-kubernetes-embedded-resource`.
pub fn prune(schema: &Value, object: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    prune_rec(schema, object, "", true, &mut pruned);
    pruned
}

fn prune_rec(schema: &Value, value: &mut Value, path: &str, root: bool, pruned: &mut Vec<String>) {
    let Value::Object(s) = schema else {
        return;
    };
    let preserve = s
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let embedded = root
        || s.get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    match value {
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            let mut remove = Vec::new();
            for (k, v) in map.iter_mut() {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(sub) = props.and_then(|p| p.get(k)) {
                    prune_rec(sub, v, &child(path, k), false, pruned);
                } else if let Some(sub) = additional {
                    prune_rec(sub, v, &format!("{path}[{k}]"), false, pruned);
                } else if s.get("additionalProperties") == Some(&Value::Bool(true)) || preserve {
                    continue;
                } else {
                    remove.push(k.clone());
                }
            }
            for k in remove {
                map.remove(&k);
                pruned.push(child(path, &k));
            }
        }
        Value::Array(items) => {
            if let Some(sub) = s.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_rec(sub, item, &format!("{path}[{i}]"), false, pruned);
                }
            }
        }
        _ => {}
    }
    // allOf/anyOf/oneOf branches may not declare properties in a structural schema.
}

/// Fills `default` values of missing properties (and replaces `null` in non-nullable
/// properties that have a default), recursively, in place.
pub fn apply_defaults(schema: &Value, object: &mut Value) {
    let Value::Object(s) = schema else {
        return;
    };
    match object {
        Value::Object(map) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    let Some(default) = sub.get("default") else {
                        continue;
                    };
                    let nullable = sub
                        .get("nullable")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    match map.get(k) {
                        None => {
                            map.insert(k.clone(), default.clone());
                        }
                        Some(Value::Null) if !nullable => {
                            map.insert(k.clone(), default.clone());
                        }
                        _ => {}
                    }
                }
                for (k, v) in map.iter_mut() {
                    if let Some(sub) = props.get(k) {
                        apply_defaults(sub, v);
                    }
                }
            } else if let Some(sub) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for v in map.values_mut() {
                    apply_defaults(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = s.get("items") {
                for item in items {
                    apply_defaults(sub, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "required": ["replicas", "color"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "format": "int32"},
                        "color": {"type": "string", "enum": ["red", "green"]},
                        "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
                        "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1},
                        "port": {"x-kubernetes-int-or-string": true},
                        "when": {"type": "string", "format": "date-time"},
                        "note": {"type": "string", "nullable": true},
                        "enabled": {"type": "boolean", "default": true},
                        "mode": {"type": "string", "default": "fast"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "taints": {
                            "type": "array", "maxItems": 2, "minItems": 1,
                            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"],
                            "items": {"type": "object", "required": ["key", "effect"], "properties": {
                                "key": {"type": "string"},
                                "effect": {"type": "string", "enum": ["NoSchedule", "NoExecute"]},
                                "weight": {"type": "integer", "default": 1}
                            }}
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        })
    }

    fn obj(spec: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
    }

    fn errors(spec: Value) -> Vec<String> {
        validate(&schema(), &obj(spec))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn valid_object_has_no_errors() {
        let e = errors(
            json!({"replicas": 3, "color": "red", "name": "abc", "ratio": 0.5,
            "port": "http", "when": "2024-01-01T00:00:00Z", "note": null,
            "labels": {"a": "xyz"}, "extra": {"anything": [1, {"x": 2}]},
            "taints": [{"key": "a", "effect": "NoSchedule"}], "tags": ["x", "y"]}),
        );
        assert!(e.is_empty(), "{e:?}");
        let e = errors(json!({"replicas": 3.0, "color": "green", "port": 8080}));
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn required_fields() {
        let errs = validate(
            &schema(),
            &json!({"apiVersion": "v", "kind": "Widget", "metadata": {}}),
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "spec");
        assert_eq!(errs[0].reason, CauseType::FieldValueRequired);
        assert_eq!(errs[0].to_string(), "spec: Required value");
        assert_eq!(
            errors(json!({"color": "red"})),
            vec!["spec.replicas: Required value"]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "taints": [{"key": "a"}]})),
            vec!["spec.taints[0].effect: Required value"]
        );
    }

    #[test]
    fn types() {
        let errs = validate(
            &schema(),
            &obj(json!({"replicas": "three", "color": "red"})),
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].reason, CauseType::FieldValueTypeInvalid);
        assert_eq!(
            errs[0].to_string(),
            "spec.replicas: Invalid value: \"three\": spec.replicas in body must be of type integer: \"string\""
        );
        assert_eq!(
            errors(json!({"replicas": 1.5, "color": "red"})),
            vec![
                "spec.replicas: Invalid value: 1.5: spec.replicas in body must be of type integer: \"number\""
            ]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "port": true})).len(),
            1
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "enabled": "yes"})).len(),
            1
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": null})),
            vec![
                "spec.color: Invalid value: \"null\": spec.color in body must be of type string: \"null\""
            ]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "taints": {"key": "a"}})),
            vec![
                "spec.taints: Invalid value: \"object\": spec.taints in body must be of type array: \"object\""
            ]
        );
    }

    #[test]
    fn enums_and_bounds() {
        let errs = validate(&schema(), &obj(json!({"replicas": 11, "color": "purple"})));
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "spec.color: Unsupported value: \"purple\": supported values: \"red\", \"green\"",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
            ]
        );
        assert_eq!(errs[0].reason, CauseType::FieldValueNotSupported);
        assert_eq!(errs[1].reason, CauseType::FieldValueInvalid);
        assert_eq!(
            errors(json!({"replicas": -1, "color": "red"})),
            vec![
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
            ]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "ratio": 1})),
            vec!["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]
        );
        assert_eq!(
            errors(json!({"replicas": 3000000000u64, "color": "red"})).len(),
            2 // maximum and int32 format
        );
    }

    #[test]
    fn strings() {
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "name": "abcdef"})),
            vec!["spec.name: Too long: may not be longer than 5"]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "name": ""})),
            vec![
                "spec.name: Invalid value: \"\": spec.name in body should be at least 1 chars long",
                "spec.name: Invalid value: \"\": spec.name in body should match '^[a-z]+$'"
            ]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "when": "yesterday"})),
            vec![
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"string\""
            ]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "labels": {"a": "toolong"}})),
            vec!["spec.labels[a]: Too long: may not be longer than 3"]
        );
    }

    #[test]
    fn arrays_and_duplicates() {
        let e = errors(json!({"replicas": 1, "color": "red", "taints": [
            {"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "Bad"}]}));
        assert_eq!(
            e,
            vec![
                "spec.taints: Too many: 3: must have at most 2 items",
                "spec.taints[2].effect: Unsupported value: \"Bad\": supported values: \"NoSchedule\", \"NoExecute\"",
                "spec.taints[1]: Duplicate value: {\"key\":\"a\"}",
            ]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "taints": []})),
            vec![
                "spec.taints: Invalid value: \"array\": spec.taints in body should have at least 1 items"
            ]
        );
        assert_eq!(
            errors(json!({"replicas": 1, "color": "red", "tags": ["a", "a"]})),
            vec!["spec.tags[1]: Duplicate value: \"a\""]
        );
    }

    #[test]
    fn combinators_and_formats() {
        let s = json!({"type": "object", "properties": {
            "a": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "b": {"anyOf": [{"type": "string", "format": "ipv4"}, {"type": "string", "format": "cidr"}]},
            "c": {"not": {"type": "string", "enum": ["x"]}},
            "d": {"type": "string", "format": "uuid"},
            "e": {"type": "string", "format": "byte"},
            "f": {"type": "number", "multipleOf": 0.5}
        }});
        assert!(
            validate(
                &s,
                &json!({"a": 1, "b": "10.0.0.0/8", "c": "y",
            "d": "67e55044-10b1-426f-9247-bb680e5fe0c8", "e": "aGk=", "f": 1.5})
            )
            .is_empty()
        );
        let errs = validate(
            &s,
            &json!({"a": 1.5, "b": "nope", "c": "x", "d": "nope", "e": "!!", "f": 0.3}),
        );
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, vec!["a", "b", "c", "d", "e", "f"]);
        assert!(errs[0].message.contains("oneOf"), "{}", errs[0]);
    }

    #[test]
    fn pruning_keeps_declared_and_preserved_fields() {
        let mut o = obj(json!({"replicas": 1, "color": "red", "unknown": 1,
            "extra": {"kept": {"deep": true}},
            "labels": {"a": "b"},
            "taints": [{"key": "a", "effect": "NoSchedule", "bogus": 1}]}));
        o["status"] = json!({"ready": true, "junk": 1});
        o["topLevelJunk"] = json!(1);
        let pruned = prune(&schema(), &mut o);
        assert_eq!(
            pruned,
            vec![
                "spec.taints[0].bogus",
                "spec.unknown",
                "status.junk",
                "topLevelJunk"
            ]
        );
        assert_eq!(o["spec"]["extra"], json!({"kept": {"deep": true}}));
        assert_eq!(o["spec"]["labels"], json!({"a": "b"}));
        assert_eq!(o["metadata"]["name"], "w");
        assert_eq!(o["kind"], "Widget");
        assert!(o.get("topLevelJunk").is_none());
    }

    #[test]
    fn defaults_are_applied() {
        let mut o = obj(json!({"replicas": 1, "color": "red", "mode": null,
            "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule", "weight": 5}]}));
        apply_defaults(&schema(), &mut o);
        assert_eq!(o["spec"]["enabled"], json!(true));
        assert_eq!(o["spec"]["mode"], json!("fast"));
        assert_eq!(o["spec"]["taints"][0]["weight"], json!(1));
        assert_eq!(o["spec"]["taints"][1]["weight"], json!(5));
        assert!(o["spec"].get("note").is_none());
    }

    #[test]
    fn structural_schema_checks() {
        assert!(
            check_structural(&schema(), "s").is_empty(),
            "{:?}",
            check_structural(&schema(), "s")
        );
        let bad = json!({"type": "string"});
        assert_eq!(
            check_structural(&bad, "s")[0].to_string(),
            "s.type: Invalid value: \"string\": must be object at the root"
        );
        let bad = json!({"type": "object", "properties": {
            "untyped": {"properties": {"a": {"type": "string"}}},
            "list": {"type": "array"},
            "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "ios": {"type": "string", "x-kubernetes-int-or-string": true},
            "keyed": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
            "branchy": {"type": "string", "anyOf": [{"type": "integer"}]},
            "defaulted": {"type": "integer", "maximum": 3, "default": 5},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
            "leafless": {"description": "no type"}
        }});
        let errs: Vec<String> = check_structural(&bad, "s")
            .iter()
            .map(ToString::to_string)
            .collect();
        let expected = [
            "s.properties[untyped].type: Required value: must not be empty for specified object fields",
            "s.properties[list].items: Required value: must be specified",
            "s.properties[both].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            "s.properties[ios].type: Forbidden: must be empty to be structural when x-kubernetes-int-or-string is true",
            "s.properties[keyed].x-kubernetes-list-map-keys: Invalid value: \"name\": entries must all be names of item properties",
            "s.properties[branchy].anyOf[0].type: Forbidden: must be undefined to be structural",
            "s.properties[defaulted].default: Invalid value: 5: <root> in body should be less than or equal to 3 (in the default value)",
            "s.properties[leafless].type: Required value: must not be empty for specified object fields",
        ];
        for e in expected {
            assert!(errs.iter().any(|x| x == e), "missing {e:?} in {errs:#?}");
        }
        assert_eq!(errs.len(), expected.len(), "{errs:#?}");
    }

    #[test]
    fn status_message() {
        let errs = validate(&schema(), &obj(json!({"color": "purple"})));
        assert_eq!(
            invalid_message("Widget.example.com", "w", &errs),
            "Widget.example.com \"w\" is invalid: [spec.replicas: Required value, spec.color: Unsupported value: \"purple\": supported values: \"red\", \"green\"]"
        );
        assert_eq!(
            invalid_message("Widget.example.com", "w", &errs[..1]),
            "Widget.example.com \"w\" is invalid: spec.replicas: Required value"
        );
    }
}
