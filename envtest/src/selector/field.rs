//! Field selectors: parsing (`path=value`, `path==value`, `path!=value`, escapes) and matching,
//! with the per-resource defaults of absent fields ([`SelectableField`]).

use std::str::FromStr;

use serde_json::Value;

use super::SelectorError;

/// Operator of one field selector term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `=` or `==`.
    Equals,
    /// `!=`.
    NotEquals,
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// Dotted field path, e.g. `spec.nodeName`.
    pub field: String,
    /// The operator.
    pub operator: FieldOperator,
    /// The value (unescaped).
    pub value: String,
}

/// A parsed field selector: a conjunction of [`FieldRequirement`]s. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// The selector that selects everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses the `fieldSelector` query string syntax (see the module docs).
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        // As upstream: empty terms (`a=b,`) are skipped, nothing is trimmed.
        for term in split_unescaped(input, ',') {
            if term.is_empty() {
                continue;
            }
            let (field, operator, raw) = split_term(&term)
                .ok_or_else(|| SelectorError::FieldSyntax(input.to_string(), term.clone()))?;
            if field.is_empty() {
                return Err(SelectorError::FieldSyntax(input.to_string(), term.clone()));
            }
            let value = unescape(raw).map_err(|reason| {
                SelectorError::FieldSyntax(input.to_string(), format!("{term}: {reason}"))
            })?;
            requirements.push(FieldRequirement {
                field: field.to_string(),
                operator,
                value,
            });
        }
        Ok(Self { requirements })
    }

    /// The terms, in input order.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether this selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Rejects terms whose field is not in `supported` (the server's per-resource list), with
    /// the API server's `field label not supported: X` message.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), SelectorError> {
        match self
            .requirements
            .iter()
            .find(|r| !supported.contains(&r.field.as_str()))
        {
            Some(r) => Err(SelectorError::UnsupportedField(r.field.clone())),
            None => Ok(()),
        }
    }

    /// Matches using a lookup from field path to value (`None` reads as the empty string).
    pub fn matches_with(&self, mut lookup: impl FnMut(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let actual = lookup(&r.field).unwrap_or_default();
            match r.operator {
                FieldOperator::Equals => actual == r.value,
                FieldOperator::NotEquals => actual != r.value,
            }
        })
    }

    /// Matches a JSON object by looking each dotted path up in it.
    pub fn matches(&self, object: &Value) -> bool {
        self.matches_with(|path| field_value(object, path))
    }

    /// Matches an object whose selectable fields are `fields`: a field in that list reads as
    /// its [`FieldDefault`] when the object lacks it (e.g. a node without
    /// `spec.unschedulable` reads `"false"`, as on the API server); other paths read as
    /// [`field_value`].
    pub fn matches_fields(&self, fields: &[SelectableField], object: &Value) -> bool {
        self.matches_with(|path| selectable_value(fields, object, path))
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The value of a dotted field path in a JSON object, as a field selector reads it: strings
/// as-is, numbers and booleans as JSON text, missing/`null`/objects/arrays as `None`.
pub fn field_value(object: &Value, path: &str) -> Option<String> {
    let mut cur = object;
    for part in path.split('.') {
        cur = cur.as_object()?.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// What a selectable field reads as when the object lacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldDefault {
    /// The empty string (what any missing field reads as).
    Empty,
    /// A fixed value: booleans that default to false read `"false"` (`spec.unschedulable` of
    /// nodes, `spec.hostNetwork` of pods).
    Value(&'static str),
    /// The value at this JSON pointer (`status.podIP` of a pod is the first of
    /// `status.podIPs` when only that is set).
    Pointer(&'static str),
}

/// A field a resource lets field selectors name, with what it reads as when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectableField {
    /// Dotted field path, e.g. `spec.unschedulable`.
    pub path: &'static str,
    /// What the field reads as when the object lacks it.
    pub absent: FieldDefault,
}

/// The value of `path` in `object` as the API server computes it for a resource whose
/// selectable fields are `fields`: [`field_value`], or, when absent, the field's
/// [`FieldDefault`].
pub fn selectable_value(fields: &[SelectableField], object: &Value, path: &str) -> Option<String> {
    let value = field_value(object, path);
    if value.is_some() {
        return value;
    }
    match fields.iter().find(|f| f.path == path)?.absent {
        FieldDefault::Empty => None,
        FieldDefault::Value(v) => Some(v.to_string()),
        FieldDefault::Pointer(p) => object
            .pointer(p)
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// Splits on `sep` not preceded by a backslash escape (escapes are kept for `unescape`).
fn split_unescaped(input: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = input.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            cur.push(c);
            if let Some(n) = chars.next() {
                cur.push(n);
            }
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    parts.push(cur);
    parts
}

/// Splits `field<op>value` at the first unescaped operator.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], FieldOperator::NotEquals, &term[i + 2..]));
            }
            b'=' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], FieldOperator::Equals, &term[i + 2..]));
            }
            b'=' => return Some((&term[..i], FieldOperator::Equals, &term[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => return Err(format!("invalid escape sequence \\{e}")),
                None => return Err("unterminated escape sequence".into()),
            }
        } else if c == '=' || c == ',' {
            return Err(format!("invalid field selector value: unescaped {c:?}"));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}
