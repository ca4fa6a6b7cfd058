//! One requirement of a label selector ([`LabelRequirement`]: a key, an operator and values),
//! checked with the API server's rules and messages and matched against a label value: what
//! both the selector ([`super::LabelSelector`]) and its parser build on.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::SelectorError;

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
