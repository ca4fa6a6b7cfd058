//! Label selectors: the `labelSelector` string syntax and `metav1.LabelSelector` objects, parsed
//! into [`LabelSelector`]s and matched against label maps. Keys and values are checked with
//! the API server's rules and messages ([`kcr_names`]).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::SelectorError;
use super::parse::{Parser, Token, lex};
use super::requirement::{LabelOperator, LabelRequirement};

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
