//! The lexer and parser of the `labelSelector` string syntax (client-go's
//! `labels.Parse`), producing [`LabelRequirement`]s.

use std::fmt;

use super::SelectorError;
use super::requirement::{LabelOperator, LabelRequirement};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Token {
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
            // As client-go's lexer: the end of the input is the empty literal.
            Token::End => f.write_str(""),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | '(' | ')' | ',' | '<' | '>')
}

pub(super) fn lex(input: &str) -> Result<Vec<Token>, SelectorError> {
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

pub(super) struct Parser {
    pub(super) tokens: Vec<Token>,
    pub(super) pos: usize,
}

impl Parser {
    pub(super) fn peek(&self) -> &Token {
        // `lex` always ends the vector with `End`, and `next` never moves past it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    pub(super) fn next(&mut self) -> Token {
        let tok = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        tok
    }

    /// Takes a value token: an identifier, or `in`/`notin`, which are plain values after an
    /// operator or in a value list.
    fn value(&mut self) -> Option<String> {
        let value = match self.peek() {
            Token::Ident(v) => v.clone(),
            Token::In => "in".into(),
            Token::NotIn => "notin".into(),
            _ => return None,
        };
        self.next();
        Some(value)
    }

    /// A value token, or the empty value when the next token is one of `ends` (not taken);
    /// any other token is an error saying what was `expected`.
    fn value_or_empty(
        &mut self,
        ends: [Token; 2],
        expected: &str,
    ) -> Result<String, SelectorError> {
        if let Some(value) = self.value() {
            return Ok(value);
        }
        let next = self.peek();
        if ends.contains(next) {
            Ok(String::new())
        } else {
            Err(SelectorError::Syntax(format!(
                "found '{next}', expected: {expected}"
            )))
        }
    }

    pub(super) fn requirement(&mut self) -> Result<LabelRequirement, SelectorError> {
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
                // `k=` selects the empty value, like client-go.
                let value = self.value_or_empty([Token::End, Token::Comma], "identifier")?;
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
                        // `(a,,b)` and `(a,)` contain the empty value, like client-go.
                        let value = self.value_or_empty(
                            [Token::Comma, Token::CloseParen],
                            "',', ')' or identifier",
                        )?;
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
