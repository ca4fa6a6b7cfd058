//! Label selector strings (`app=web,tier in (a,b),!legacy`) parsed into kube's
//! [`Selector`](kube_core::Selector).
//!
//! kube-core can build a `Selector` from a `LabelSelector` struct but has no string parser; this
//! module adds one, following the Kubernetes grammar (`k8s.io/apimachinery/pkg/labels.Parse`):
//! requirements separated by commas, each one of `key`, `!key`, `key=value`, `key==value`,
//! `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`. Keys and values are validated like the
//! API server does (qualified names, label values), by kcr-names, whose messages (the API
//! server's) are the `reason` of [`SelectorError::InvalidKey`] and
//! [`SelectorError::InvalidValue`]. The numeric operators `>` and `<` are
//! rejected with [`SelectorError::UnsupportedOperator`] because kube's `Expression` cannot
//! express them. A bad selector is always an error, never a panic.

use std::collections::BTreeSet;

use kube_core::{Expression, Selector};

/// Why a label selector string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A key is not a valid qualified name (`[prefix/]name`).
    #[error("invalid label selector {selector:?}: key {key:?}: {reason}")]
    InvalidKey {
        /// The whole selector.
        selector: String,
        /// The offending key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value is not a valid label value.
    #[error("invalid label selector {selector:?}: value {value:?}: {reason}")]
    InvalidValue {
        /// The whole selector.
        selector: String,
        /// The offending value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The selector does not follow the grammar.
    #[error("invalid label selector {selector:?} at byte {position}: {message}")]
    Syntax {
        /// The whole selector.
        selector: String,
        /// Byte offset of the problem.
        position: usize,
        /// What was expected.
        message: String,
    },
    /// `>` and `<` are valid in Kubernetes but cannot be expressed by kube's `Expression`.
    #[error("invalid label selector {selector:?}: operator {operator:?} is not supported")]
    UnsupportedOperator {
        /// The whole selector.
        selector: String,
        /// The operator.
        operator: String,
    },
}

/// Parses a label selector string. The empty string selects everything.
///
/// ```
/// use kube_core::SelectorExt;
/// let selector = kcr_core::parse_label_selector("app=web, tier in (a,b), !legacy").unwrap();
/// let labels = [("app", "web"), ("tier", "a")]
///     .into_iter()
///     .map(|(k, v)| (k.to_string(), v.to_string()))
///     .collect();
/// assert!(selector.matches(&labels));
/// assert!(kcr_core::parse_label_selector("app in (web").is_err());
/// ```
pub fn parse_label_selector(input: &str) -> Result<Selector, SelectorError> {
    Parser {
        input,
        bytes: input.as_bytes(),
        pos: 0,
    }
    .parse()
}

struct Parser<'a> {
    input: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/')
}

impl Parser<'_> {
    fn syntax(&self, position: usize, message: impl Into<String>) -> SelectorError {
        SelectorError::Syntax {
            selector: self.input.to_string(),
            position,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// A run of key/value characters (possibly empty).
    fn word(&mut self) -> &str {
        let start = self.pos;
        while self.pos < self.bytes.len() && is_word_byte(self.bytes[self.pos]) {
            self.pos += 1;
        }
        // Slicing at ASCII boundaries: `is_word_byte` only accepts ASCII bytes.
        &self.input[start..self.pos]
    }

    fn parse(mut self) -> Result<Selector, SelectorError> {
        let mut exprs = Vec::new();
        self.skip_ws();
        if self.peek().is_none() {
            return Ok(Selector::default());
        }
        loop {
            exprs.push(self.requirement()?);
            self.skip_ws();
            match self.peek() {
                None => break,
                Some(b',') => {
                    self.pos += 1;
                }
                Some(_) => return Err(self.syntax(self.pos, "expected ',' or end of selector")),
            }
        }
        let mut selector = Selector::default();
        selector.extend(exprs);
        Ok(selector)
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        self.skip_ws();
        let start = self.pos;
        let key = self.word().to_string();
        if key.is_empty() {
            return Err(self.syntax(start, "expected a label key"));
        }
        api_server_check(kcr_names::validate_qualified_name(&key)).map_err(|reason| {
            SelectorError::InvalidKey {
                selector: self.input.to_string(),
                key: key.clone(),
                reason,
            }
        })?;
        Ok(key)
    }

    fn value(&mut self) -> Result<String, SelectorError> {
        self.skip_ws();
        let value = self.word().to_string();
        api_server_check(kcr_names::validate_label_value(&value)).map_err(|reason| {
            SelectorError::InvalidValue {
                selector: self.input.to_string(),
                value: value.clone(),
                reason,
            }
        })?;
        Ok(value)
    }

    fn requirement(&mut self) -> Result<Expression, SelectorError> {
        self.skip_ws();
        if self.peek() == Some(b'!') {
            self.pos += 1;
            let key = self.key()?;
            return Ok(Expression::DoesNotExist(key));
        }
        let key = self.key()?;
        self.skip_ws();
        let op_start = self.pos;
        match self.peek() {
            None | Some(b',') => Ok(Expression::Exists(key)),
            Some(b'=') => {
                self.pos += 1;
                if self.peek() == Some(b'=') {
                    self.pos += 1;
                }
                Ok(Expression::Equal(key, self.value()?))
            }
            Some(b'!') => {
                self.pos += 1;
                if self.peek() != Some(b'=') {
                    return Err(self.syntax(op_start, "expected '!='"));
                }
                self.pos += 1;
                Ok(Expression::NotEqual(key, self.value()?))
            }
            Some(b'>') | Some(b'<') => Err(SelectorError::UnsupportedOperator {
                selector: self.input.to_string(),
                operator: (self.bytes[op_start] as char).to_string(),
            }),
            Some(_) => {
                let word = self.word().to_string();
                let values = match word.as_str() {
                    "in" | "notin" => self.value_set()?,
                    _ => {
                        return Err(self.syntax(
                            op_start,
                            "expected an operator (=, ==, !=, in, notin), ',' or end",
                        ));
                    }
                };
                if word == "in" {
                    Ok(Expression::In(key, values))
                } else {
                    Ok(Expression::NotIn(key, values))
                }
            }
        }
    }

    fn value_set(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        self.skip_ws();
        if self.peek() != Some(b'(') {
            return Err(self.syntax(self.pos, "expected '(' after in/notin"));
        }
        self.pos += 1;
        let mut values = BTreeSet::new();
        loop {
            values.insert(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b')') => {
                    self.pos += 1;
                    return Ok(values);
                }
                _ => return Err(self.syntax(self.pos, "expected ',' or ')' in value set")),
            }
        }
    }
}

/// kcr-names' messages for a key or value, joined into one reason; `Ok` when there are none.
fn api_server_check(messages: Vec<String>) -> Result<(), String> {
    if messages.is_empty() {
        Ok(())
    } else {
        Err(messages.join("; "))
    }
}

#[cfg(test)]
mod tests;
