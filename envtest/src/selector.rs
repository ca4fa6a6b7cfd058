//! Label and field selectors, parsed and matched as the Kubernetes API server does.
//!
//! # Label selectors
//!
//! [`LabelSelector::parse`] accepts the full string syntax of `?labelSelector=`:
//!
//! | syntax            | meaning                                               |
//! |-------------------|-------------------------------------------------------|
//! | `k=v`, `k==v`     | label `k` present with value `v`                      |
//! | `k!=v`            | label `k` absent, or present with another value       |
//! | `k in (a,b)`      | label `k` present with value `a` or `b`               |
//! | `k notin (a,b)`   | label `k` absent, or present with neither `a` nor `b` |
//! | `k`               | label `k` present                                     |
//! | `!k`              | label `k` absent                                      |
//! | `k>5`, `k<5`      | label `k` present with an integer value above/below   |
//! | `r1,r2`           | both requirements hold (comma is AND)                 |
//!
//! Whitespace around operators, values and commas is ignored, as in client-go's lexer
//! (`app = web , tier in ( a , b )` is valid). Keys must be qualified names (optional DNS
//! subdomain prefix and `/`, then a name of at most 63 characters of `[A-Za-z0-9._-]` starting
//! and ending alphanumeric); values must be empty or follow the same rule as the name part.
//! The empty string selects everything.
//!
//! [`LabelSelector::from_metav1`] converts a `metav1.LabelSelector` (`matchLabels` +
//! `matchExpressions`, as a JSON value) to the same representation.
//!
//! # Field selectors
//!
//! [`FieldSelector::parse`] accepts `path=value`, `path==value` and `path!=value` terms joined by
//! commas (empty terms are skipped, nothing is trimmed, as upstream); values may escape `\,`,
//! `\=` and `\\`. Paths are dotted field paths
//! (`metadata.name`, `metadata.namespace`, `spec.nodeName`, `status.phase`, ...).
//! [`FieldSelector::matches`] looks the path up in a JSON object; a missing field or `null`
//! reads as the empty string (so `spec.nodeName=` selects unscheduled pods, as on the real
//! server), numbers and booleans read as their JSON text. Which paths a resource supports is
//! the server's business: see [`FieldSelector::check_supported`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use kcr_envtest::selector::{FieldSelector, LabelSelector};
//! use serde_json::json;
//!
//! let sel = LabelSelector::parse("app=web, tier in (front, edge), !canary")?;
//! let labels = BTreeMap::from([("app".to_string(), "web".to_string()), ("tier".to_string(), "edge".to_string())]);
//! assert!(sel.matches(&labels));
//! assert!(LabelSelector::parse("app in (a").is_err());
//!
//! let pods_on_node = FieldSelector::parse("spec.nodeName=node-1")?;
//! assert!(pods_on_node.matches(&json!({"spec": {"nodeName": "node-1"}})));
//! # Ok::<(), kcr_envtest::selector::SelectorError>(())
//! ```
//!
//! Errors are [`SelectorError`]s; the server turns them into `400 BadRequest`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

/// A selector string (or `metav1.LabelSelector`) that cannot be parsed or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector string does not follow the grammar.
    #[error("unable to parse requirement: {0}")]
    Syntax(String),
    /// A label key is not a valid qualified name.
    #[error("unable to parse requirement: key: Invalid value: {key:?}: {reason}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A label value is not a valid label value.
    #[error(
        "unable to parse requirement: values[{index}][{key}]: Invalid value: {value:?}: {reason}"
    )]
    InvalidValue {
        /// The key of the requirement.
        key: String,
        /// Position of the value in the requirement's value list.
        index: usize,
        /// The offending value.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A field selector term has no operator.
    #[error("invalid selector: '{0}'; can't understand '{1}'")]
    FieldSyntax(String, String),
    /// The field path is not supported for the resource.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
    /// A `metav1.LabelSelector` object is malformed.
    #[error("invalid label selector object: {0}")]
    Object(String),
}

/// Operator of one label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelOperator {
    /// `=` or `==`: present with exactly this value.
    Equals,
    /// `!=`: absent or another value.
    NotEquals,
    /// `in (..)`: present with one of the values.
    In,
    /// `notin (..)`: absent or none of the values.
    NotIn,
    /// `key`: present.
    Exists,
    /// `!key`: absent.
    DoesNotExist,
    /// `key>n`: present with an integer value greater than `n`.
    GreaterThan,
    /// `key<n`: present with an integer value less than `n`.
    LessThan,
}

/// One requirement of a label selector (the selector is their conjunction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: LabelOperator,
    /// The values (one for `=`/`!=`/`>`/`<`, one or more for `in`/`notin`, none otherwise).
    pub values: BTreeSet<String>,
}

impl LabelRequirement {
    /// Checks and builds a requirement (key, value syntax and arity per operator).
    pub fn new(
        key: impl Into<String>,
        operator: LabelOperator,
        values: impl IntoIterator<Item = String>,
    ) -> Result<Self, SelectorError> {
        let key = key.into();
        validate_label_key(&key)?;
        let values: Vec<String> = values.into_iter().collect();
        match operator {
            LabelOperator::In | LabelOperator::NotIn => {
                if values.is_empty() {
                    return Err(SelectorError::Syntax(format!(
                        "for 'in', 'notin' operators, values set can't be empty (key {key:?})"
                    )));
                }
            }
            LabelOperator::Equals | LabelOperator::NotEquals => {
                if values.len() != 1 {
                    return Err(SelectorError::Syntax(format!(
                        "exact-match compatibility requires one single value (key {key:?})"
                    )));
                }
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist => {
                if !values.is_empty() {
                    return Err(SelectorError::Syntax(format!(
                        "values set must be empty for exists and does not exist (key {key:?})"
                    )));
                }
            }
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                if values.len() != 1 {
                    return Err(SelectorError::Syntax(format!(
                        "for 'Gt', 'Lt' operators, exactly one value is required (key {key:?})"
                    )));
                }
                if values[0].parse::<i64>().is_err() {
                    return Err(SelectorError::Syntax(format!(
                        "for 'Gt', 'Lt' operators, the value must be an integer, got {:?}",
                        values[0]
                    )));
                }
            }
        }
        for (index, value) in values.iter().enumerate() {
            if let Err(reason) = check_label_value(value) {
                return Err(SelectorError::InvalidValue {
                    key,
                    index,
                    value: value.clone(),
                    reason,
                });
            }
        }
        Ok(Self {
            key,
            operator,
            values: values.into_iter().collect(),
        })
    }

    /// Whether the labels satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }

    /// Whether a label value (`None`: label absent) satisfies this requirement.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match self.operator {
            LabelOperator::Equals | LabelOperator::In => {
                value.is_some_and(|v| self.values.contains(v))
            }
            LabelOperator::NotEquals | LabelOperator::NotIn => {
                value.is_none_or(|v| !self.values.contains(v))
            }
            LabelOperator::Exists => value.is_some(),
            LabelOperator::DoesNotExist => value.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                let Some(actual) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                // `new` checked that the single value is an integer.
                let Some(bound) = self
                    .values
                    .iter()
                    .next()
                    .and_then(|v| v.parse::<i64>().ok())
                else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = || self.values.iter().cloned().collect::<Vec<_>>().join(",");
        match self.operator {
            LabelOperator::Equals => write!(f, "{}={}", self.key, joined()),
            LabelOperator::NotEquals => write!(f, "{}!={}", self.key, joined()),
            LabelOperator::In => write!(f, "{} in ({})", self.key, joined()),
            LabelOperator::NotIn => write!(f, "{} notin ({})", self.key, joined()),
            LabelOperator::Exists => write!(f, "{}", self.key),
            LabelOperator::DoesNotExist => write!(f, "!{}", self.key),
            LabelOperator::GreaterThan => write!(f, "{}>{}", self.key, joined()),
            LabelOperator::LessThan => write!(f, "{}<{}", self.key, joined()),
        }
    }
}

/// A parsed label selector: a conjunction of [`LabelRequirement`]s. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// The selector that selects everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses the `labelSelector` query string syntax (see the module docs).
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let tokens = lex(input)?;
        let mut parser = Parser { tokens, pos: 0 };
        let mut requirements = Vec::new();
        if parser.peek() == &Token::End {
            return Ok(Self { requirements });
        }
        loop {
            requirements.push(parser.requirement()?);
            match parser.next() {
                Token::End => break,
                Token::Comma => {
                    if parser.peek() == &Token::End {
                        return Err(SelectorError::Syntax(
                            "found 'end of string', expected: identifier or '!'".into(),
                        ));
                    }
                }
                other => {
                    return Err(SelectorError::Syntax(format!(
                        "found '{other}', expected: ',' or 'end of string'"
                    )));
                }
            }
        }
        Ok(Self { requirements })
    }

    /// Converts a `metav1.LabelSelector` JSON object (`matchLabels`, `matchExpressions`).
    /// `null` or `{}` selects everything (as for most API fields using it).
    pub fn from_metav1(selector: &Value) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if selector.is_null() {
            return Ok(Self { requirements });
        }
        let obj = selector
            .as_object()
            .ok_or_else(|| SelectorError::Object("expected an object".into()))?;
        if let Some(labels) = obj.get("matchLabels").filter(|v| !v.is_null()) {
            let labels = labels
                .as_object()
                .ok_or_else(|| SelectorError::Object("matchLabels must be an object".into()))?;
            for (k, v) in labels {
                let v = v.as_str().ok_or_else(|| {
                    SelectorError::Object(format!("matchLabels.{k} must be a string"))
                })?;
                requirements.push(LabelRequirement::new(
                    k.clone(),
                    LabelOperator::Equals,
                    [v.to_string()],
                )?);
            }
        }
        if let Some(exprs) = obj.get("matchExpressions").filter(|v| !v.is_null()) {
            let exprs = exprs
                .as_array()
                .ok_or_else(|| SelectorError::Object("matchExpressions must be a list".into()))?;
            for (i, expr) in exprs.iter().enumerate() {
                let key = expr.get("key").and_then(Value::as_str).ok_or_else(|| {
                    SelectorError::Object(format!("matchExpressions[{i}].key is required"))
                })?;
                let op = match expr.get("operator").and_then(Value::as_str) {
                    Some("In") => LabelOperator::In,
                    Some("NotIn") => LabelOperator::NotIn,
                    Some("Exists") => LabelOperator::Exists,
                    Some("DoesNotExist") => LabelOperator::DoesNotExist,
                    other => {
                        return Err(SelectorError::Object(format!(
                            "matchExpressions[{i}].operator: {other:?} is not a valid label selector operator"
                        )));
                    }
                };
                let mut values = Vec::new();
                if let Some(vals) = expr.get("values").filter(|v| !v.is_null()) {
                    let vals = vals.as_array().ok_or_else(|| {
                        SelectorError::Object(format!(
                            "matchExpressions[{i}].values must be a list"
                        ))
                    })?;
                    for v in vals {
                        values.push(
                            v.as_str()
                                .ok_or_else(|| {
                                    SelectorError::Object(format!(
                                        "matchExpressions[{i}].values must be strings"
                                    ))
                                })?
                                .to_string(),
                        );
                    }
                }
                requirements.push(LabelRequirement::new(key, op, values)?);
            }
        }
        Ok(Self { requirements })
    }

    /// The requirements, in input order.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// Whether this selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches the `metadata.labels` of a JSON object (missing labels = no labels), reading
    /// the JSON in place (no copy of the labels).
    pub fn matches_object(&self, object: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        self.requirements.iter().all(|r| {
            let value = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            r.matches_value(value)
        })
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Reads `metadata.labels` of a JSON object as a map (non-string values are skipped).
pub fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    In,
    NotIn,
    OpenParen,
    CloseParen,
    Comma,
    End,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Ident(s) => write!(f, "{s}"),
            Token::Not => f.write_str("!"),
            Token::Eq => f.write_str("="),
            Token::DoubleEq => f.write_str("=="),
            Token::NotEq => f.write_str("!="),
            Token::Gt => f.write_str(">"),
            Token::Lt => f.write_str("<"),
            Token::In => f.write_str("in"),
            Token::NotIn => f.write_str("notin"),
            Token::OpenParen => f.write_str("("),
            Token::CloseParen => f.write_str(")"),
            Token::Comma => f.write_str(","),
            Token::End => f.write_str("end of string"),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | '(' | ')' | ',' | '<' | '>')
}

fn lex(input: &str) -> Result<Vec<Token>, SelectorError> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if is_special(c) {
            chars.next();
            let tok = match c {
                '!' if chars.peek() == Some(&'=') => {
                    chars.next();
                    Token::NotEq
                }
                '!' => Token::Not,
                '=' if chars.peek() == Some(&'=') => {
                    chars.next();
                    Token::DoubleEq
                }
                '=' => Token::Eq,
                '(' => Token::OpenParen,
                ')' => Token::CloseParen,
                ',' => Token::Comma,
                '<' => Token::Lt,
                _ => Token::Gt,
            };
            tokens.push(tok);
            continue;
        }
        let mut ident = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || is_special(c) {
                break;
            }
            ident.push(c);
            chars.next();
        }
        tokens.push(match ident.as_str() {
            "in" => Token::In,
            "notin" => Token::NotIn,
            _ => Token::Ident(ident),
        });
    }
    tokens.push(Token::End);
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        // `lex` always ends the vector with `End`, and `next` never moves past it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let tok = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        tok
    }

    fn requirement(&mut self) -> Result<LabelRequirement, SelectorError> {
        let negated = if self.peek() == &Token::Not {
            self.next();
            true
        } else {
            false
        };
        let key = match self.next() {
            Token::Ident(k) => k,
            other => {
                return Err(SelectorError::Syntax(format!(
                    "found '{other}', expected: identifier"
                )));
            }
        };
        if negated {
            return LabelRequirement::new(key, LabelOperator::DoesNotExist, []);
        }
        match self.peek().clone() {
            Token::End | Token::Comma => LabelRequirement::new(key, LabelOperator::Exists, []),
            Token::Eq | Token::DoubleEq | Token::NotEq | Token::Gt | Token::Lt => {
                let op = match self.next() {
                    Token::NotEq => LabelOperator::NotEquals,
                    Token::Gt => LabelOperator::GreaterThan,
                    Token::Lt => LabelOperator::LessThan,
                    _ => LabelOperator::Equals,
                };
                let value = match self.peek().clone() {
                    Token::Ident(v) => {
                        self.next();
                        v
                    }
                    // `k=` selects the empty value, like client-go.
                    Token::End | Token::Comma => String::new(),
                    // `in`/`notin` are plain values after an operator.
                    Token::In => {
                        self.next();
                        "in".into()
                    }
                    Token::NotIn => {
                        self.next();
                        "notin".into()
                    }
                    other => {
                        return Err(SelectorError::Syntax(format!(
                            "found '{other}', expected: identifier"
                        )));
                    }
                };
                LabelRequirement::new(key, op, [value])
            }
            Token::In | Token::NotIn => {
                let op = if self.next() == Token::In {
                    LabelOperator::In
                } else {
                    LabelOperator::NotIn
                };
                if self.next() != Token::OpenParen {
                    return Err(SelectorError::Syntax(format!(
                        "found '{}', expected: '('",
                        self.tokens[self.pos.saturating_sub(1)]
                    )));
                }
                let mut values = Vec::new();
                if self.peek() == &Token::CloseParen {
                    self.next();
                } else {
                    loop {
                        let value = match self.peek().clone() {
                            Token::Ident(v) => {
                                self.next();
                                v
                            }
                            Token::In => {
                                self.next();
                                "in".into()
                            }
                            Token::NotIn => {
                                self.next();
                                "notin".into()
                            }
                            // `(a,,b)` and `(a,)` contain the empty value, like client-go.
                            Token::Comma | Token::CloseParen => String::new(),
                            other => {
                                return Err(SelectorError::Syntax(format!(
                                    "found '{other}', expected: ',', ')' or identifier"
                                )));
                            }
                        };
                        values.push(value);
                        match self.next() {
                            Token::Comma => continue,
                            Token::CloseParen => break,
                            other => {
                                return Err(SelectorError::Syntax(format!(
                                    "found '{other}', expected: ',' or ')'"
                                )));
                            }
                        }
                    }
                }
                LabelRequirement::new(key, op, values)
            }
            other => Err(SelectorError::Syntax(format!(
                "found '{other}', expected: in, notin, =, ==, !=, gt, lt"
            ))),
        }
    }
}

const NAME_RULE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
                && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Checks a label key (qualified name); the error text follows the API server's.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        if !is_dns_subdomain(prefix) {
            return Err("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into());
        }
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".into());
    }
    if !is_name_part(name) {
        return Err(NAME_RULE.into());
    }
    Ok(())
}

/// Checks a label value; the error text follows the API server's.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    if !value.is_empty() && !is_name_part(value) {
        return Err(VALUE_RULE.into());
    }
    Ok(())
}

fn validate_label_key(key: &str) -> Result<(), SelectorError> {
    check_label_key(key).map_err(|reason| SelectorError::InvalidKey {
        key: key.to_string(),
        reason,
    })
}

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

    /// Matches an object of `resource` (plural) in `group`, reading fields as the API server's
    /// selectable field sets do (see [`selectable_field`]), e.g. a node without
    /// `spec.unschedulable` reads `"false"`.
    pub fn matches_resource(&self, group: &str, resource: &str, object: &Value) -> bool {
        self.matches_with(|path| selectable_field(group, resource, object, path))
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

/// The value of a selectable field as the API server computes it for built-in resources:
/// booleans that default to false read `"false"` when absent (`spec.unschedulable` of nodes,
/// `spec.hostNetwork` of pods), `status.podIP` of pods is the first of `status.podIPs` when only
/// that is set; anything else is [`field_value`].
pub fn selectable_field(group: &str, resource: &str, object: &Value, path: &str) -> Option<String> {
    match (group, resource, path) {
        ("", "nodes", "spec.unschedulable") | ("", "pods", "spec.hostNetwork") => {
            Some(field_value(object, path).unwrap_or_else(|| "false".to_string()))
        }
        ("", "pods", "status.podIP") => field_value(object, path).or_else(|| {
            object
                .pointer("/status/podIPs/0/ip")
                .and_then(Value::as_str)
                .map(str::to_string)
        }),
        _ => field_value(object, path),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(sel("").matches(&labels(&[])));
        assert!(sel("   ").matches(&labels(&[("a", "b")])));
        assert!(sel("").is_empty());
    }

    #[test]
    fn equality_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert!(sel("app=web").matches(&l));
        assert!(sel("app==web").matches(&l));
        assert!(!sel("app=db").matches(&l));
        assert!(sel("app!=db").matches(&l));
        assert!(!sel("app!=web").matches(&l));
        // != matches objects without the label
        assert!(sel("missing!=x").matches(&l));
        assert!(!sel("missing=x").matches(&l));
        assert!(sel("app=web,tier=front").matches(&l));
        assert!(!sel("app=web,tier=back").matches(&l));
    }

    #[test]
    fn set_operators() {
        let l = labels(&[("env", "prod")]);
        assert!(sel("env in (prod,staging)").matches(&l));
        assert!(!sel("env in (dev,staging)").matches(&l));
        assert!(sel("env notin (dev,staging)").matches(&l));
        assert!(!sel("env notin (prod)").matches(&l));
        assert!(sel("other notin (prod)").matches(&l));
        assert!(!sel("other in (prod)").matches(&l));
    }

    #[test]
    fn existence_operators() {
        let l = labels(&[("gpu", "")]);
        assert!(sel("gpu").matches(&l));
        assert!(!sel("!gpu").matches(&l));
        assert!(sel("!cpu").matches(&l));
        assert!(!sel("cpu").matches(&l));
        assert!(sel("gpu=").matches(&l));
        assert!(sel("gpu,!cpu").matches(&l));
    }

    #[test]
    fn numeric_comparisons() {
        let l = labels(&[("size", "5")]);
        assert!(sel("size>3").matches(&l));
        assert!(!sel("size>5").matches(&l));
        assert!(sel("size<6").matches(&l));
        assert!(!sel("nope<6").matches(&l));
        assert!(LabelSelector::parse("size>abc").is_err());
    }

    #[test]
    fn whitespace_is_ignored_around_tokens() {
        let l = labels(&[("app", "web"), ("tier", "b")]);
        let s = sel("  app = web ,  tier  in ( a , b ) ");
        assert_eq!(s.requirements().len(), 2);
        assert!(s.matches(&l));
        assert!(sel("tier in(a,b)").matches(&l));
    }

    #[test]
    fn prefixed_keys() {
        let l = labels(&[("kubernetes.io/hostname", "node-1")]);
        assert!(sel("kubernetes.io/hostname=node-1").matches(&l));
        assert!(sel("kubernetes.io/hostname in (node-1, node-2)").matches(&l));
    }

    #[test]
    fn syntax_errors() {
        for bad in [
            "app=web,",
            ",app",
            "app web",
            "app in a,b",
            "app in (a,b",
            "app in ()",
            "app notin ()",
            "=web",
            "!",
            "app=(web)",
            "a=b=c",
            "app in (a b)",
        ] {
            let err = LabelSelector::parse(bad).expect_err(bad);
            assert!(
                err.to_string().starts_with("unable to parse requirement"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn invalid_keys_and_values() {
        let err = LabelSelector::parse("-app=web").unwrap_err();
        assert!(matches!(err, SelectorError::InvalidKey { .. }), "{err}");
        let err = LabelSelector::parse("app=-web").unwrap_err();
        assert!(matches!(err, SelectorError::InvalidValue { .. }), "{err}");
        assert!(err.to_string().contains("a valid label must be"), "{err}");
        let long = "a".repeat(64);
        assert!(LabelSelector::parse(&format!("{long}=x")).is_err());
        assert!(LabelSelector::parse(&format!("x={long}")).is_err());
        assert!(LabelSelector::parse("Bad_Prefix/x=y").is_err());
        assert!(LabelSelector::parse("/x=y").is_err());
        assert!(LabelSelector::parse("a.b/c_d.E=F-1").is_ok());
    }

    #[test]
    fn display_round_trips() {
        let s = sel("a=b,c!=d,e in (f,g),h notin (i),j,!k");
        let again = sel(&s.to_string());
        assert_eq!(s, again);
    }

    #[test]
    fn from_metav1_selector() {
        let s = LabelSelector::from_metav1(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                {"key": "canary", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod"), ("canary", "1")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "dev")])));
        assert!(LabelSelector::from_metav1(&json!({})).unwrap().is_empty());
        assert!(LabelSelector::from_metav1(&Value::Null).unwrap().is_empty());
        let err = LabelSelector::from_metav1(&json!({"matchExpressions": [
            {"key": "a", "operator": "Bogus"}]}))
        .unwrap_err();
        assert!(err.to_string().contains("Bogus"), "{err}");
        assert!(
            LabelSelector::from_metav1(&json!({"matchExpressions": [
            {"key": "a", "operator": "In", "values": []}]}))
            .is_err()
        );
    }

    #[test]
    fn matches_object_reads_metadata_labels() {
        let obj = json!({"metadata": {"name": "x", "labels": {"app": "web"}}});
        assert!(sel("app=web").matches_object(&obj));
        assert!(!sel("app=db").matches_object(&obj));
        assert!(sel("!app").matches_object(&json!({"metadata": {"name": "y"}})));
    }

    #[test]
    fn field_selectors() {
        let pod = json!({
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {"nodeName": "node-1", "replicas": 3},
            "status": {"phase": "Running"}
        });
        let f = |s: &str| FieldSelector::parse(s).unwrap();
        assert!(f("").matches(&pod));
        assert!(f("metadata.name=p1").matches(&pod));
        assert!(f("metadata.name==p1,metadata.namespace=default").matches(&pod));
        assert!(!f("metadata.name=p2").matches(&pod));
        assert!(f("metadata.name!=p2").matches(&pod));
        assert!(f("spec.nodeName=node-1").matches(&pod));
        assert!(!f("spec.nodeName=").matches(&pod));
        assert!(f("spec.replicas=3").matches(&pod));
        assert!(f("status.phase!=Pending").matches(&pod));
        let unscheduled = json!({"metadata": {"name": "p2"}, "spec": {}});
        assert!(f("spec.nodeName=").matches(&unscheduled));
        assert!(f("spec.nodeName!=node-1").matches(&unscheduled));
    }

    #[test]
    fn resource_aware_field_values() {
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        let f = |s: &str| FieldSelector::parse(s).unwrap();
        assert!(f("spec.unschedulable=false").matches_resource("", "nodes", &node));
        assert!(!f("spec.unschedulable=false").matches(&node));
        let cordoned = json!({"spec": {"unschedulable": true}});
        assert!(f("spec.unschedulable=true").matches_resource("", "nodes", &cordoned));
        let pod = json!({"status": {"podIPs": [{"ip": "10.0.0.5"}]}});
        assert!(f("status.podIP=10.0.0.5").matches_resource("", "pods", &pod));
        assert!(f("spec.hostNetwork=false").matches_resource("", "pods", &pod));
        assert!(f("metadata.name=n").matches_resource("", "nodes", &node));
    }

    #[test]
    fn field_selector_escapes_and_errors() {
        let obj = json!({"metadata": {"name": "a,b=c\\d"}});
        let s = FieldSelector::parse(r"metadata.name=a\,b\=c\\d").unwrap();
        assert_eq!(s.requirements()[0].value, "a,b=c\\d");
        assert!(s.matches(&obj));
        assert!(FieldSelector::parse("metadata.name").is_err());
        assert!(FieldSelector::parse(" ").is_err());
        let trailing = FieldSelector::parse("metadata.name=a,").unwrap();
        assert_eq!(trailing.requirements().len(), 1);
        assert!(FieldSelector::parse("=x").is_err());
        assert!(FieldSelector::parse(r"metadata.name=a\x").is_err());
        assert!(FieldSelector::parse("metadata.name=a=b").is_err());
        let err = FieldSelector::parse("metadata.name").unwrap_err();
        assert!(err.to_string().contains("can't understand"), "{err}");
    }

    #[test]
    fn field_selector_supported_check() {
        let s = FieldSelector::parse("metadata.name=x,spec.foo=y").unwrap();
        let err = s
            .check_supported(&["metadata.name", "metadata.namespace"])
            .unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: spec.foo");
        assert!(s.check_supported(&["metadata.name", "spec.foo"]).is_ok());
    }

    #[test]
    fn field_selector_matches_with_lookup() {
        let s = FieldSelector::parse("a=1,b!=2").unwrap();
        assert!(s.matches_with(|f| match f {
            "a" => Some("1".into()),
            _ => None,
        }));
        assert!(s.matches_with(|_| Some("1".into())));
        assert!(!s.matches_with(|_| Some("2".into())));
    }
}
