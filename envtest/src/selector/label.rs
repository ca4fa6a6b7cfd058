//! Label selectors: the `labelSelector` string syntax and `metav1.LabelSelector` objects, parsed
//! into [`LabelSelector`]s and matched against label maps. Keys and values are checked with
//! the API server's rules and messages ([`kcr_names`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::SelectorError;
use super::parse::{Parser, Token, lex};

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
        let (arity_ok, arity_message) = match operator {
            LabelOperator::In | LabelOperator::NotIn => (
                !values.is_empty(),
                "for 'in', 'notin' operators, values set can't be empty",
            ),
            LabelOperator::Equals | LabelOperator::NotEquals => (
                values.len() == 1,
                "exact-match compatibility requires one single value",
            ),
            LabelOperator::Exists | LabelOperator::DoesNotExist => (
                values.is_empty(),
                "values set must be empty for exists and does not exist",
            ),
            LabelOperator::GreaterThan | LabelOperator::LessThan => (
                values.len() == 1,
                "for 'Gt', 'Lt' operators, exactly one value is required",
            ),
        };
        if !arity_ok {
            return Err(SelectorError::Syntax(format!(
                "{arity_message} (key {key:?})"
            )));
        }
        if matches!(
            operator,
            LabelOperator::GreaterThan | LabelOperator::LessThan
        ) && values[0].parse::<i64>().is_err()
        {
            return Err(SelectorError::Syntax(format!(
                "for 'Gt', 'Lt' operators, the value must be an integer, got {:?}",
                values[0]
            )));
        }
        for (index, value) in values.iter().enumerate() {
            let errors = kcr_names::validate_label_value(value);
            if !errors.is_empty() {
                return Err(SelectorError::InvalidValue {
                    key,
                    index,
                    value: value.clone(),
                    reason: errors.join("; "),
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
            if !matches!(parser.peek(), Token::Ident(_) | Token::Not) {
                return Err(SelectorError::Syntax(format!(
                    "found '{}', expected: !, identifier, or 'end of string'",
                    parser.peek()
                )));
            }
            requirements.push(parser.requirement().map_err(|e| match e {
                SelectorError::Syntax(m) => {
                    SelectorError::Syntax(format!("unable to parse requirement: {m}"))
                }
                other => other,
            })?);
            match parser.next() {
                Token::End => break,
                Token::Comma => {
                    if parser.peek() == &Token::End {
                        return Err(SelectorError::Syntax(
                            "found '', expected: identifier after ','".into(),
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

/// Checks a label key (a qualified name) with the API server's message: its rule texts joined
/// by `; `, as `labels.NewRequirement` reports them.
fn validate_label_key(key: &str) -> Result<(), SelectorError> {
    let errors = kcr_names::validate_qualified_name(key);
    if errors.is_empty() {
        return Ok(());
    }
    Err(SelectorError::InvalidKey {
        key: key.to_string(),
        reason: errors.join("; "),
    })
}
