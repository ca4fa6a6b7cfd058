//! Exact Kubernetes resource quantities: parsing, addition and canonical formatting.
//!
//! A pool's `status.allocatable` is the per-resource sum of its members' allocatable resources,
//! and nodes report those in whatever unit they like (`4` and `500m` CPU, `1Gi` and `512Mi`
//! memory). Floating point would lose precision, so a [`Quantity`] is held exactly as
//! `mantissa × 10^scale` with an `i128` mantissa: binary suffixes are integers (`1Ki` = 1024), so
//! every quantity Kubernetes accepts is such a number. Arithmetic is checked; an overflow is an
//! error, never a wrong sum.
//!
//! Formatting follows Kubernetes' canonical form (`resource.Quantity.String()`):
//! - the sum keeps the format (decimal SI, binary SI or decimal exponent) of its first non-zero
//!   operand, as Go's `Quantity.Add` does;
//! - decimal SI and exponent forms use the largest exponent (a multiple of 3, from `n` to `E`)
//!   that leaves an integer mantissa: 4.5 is `4500m`, 1,000,000 is `1M`;
//! - binary SI uses the largest power of 1024 that divides the value (`1536Mi`), and falls back to
//!   decimal SI for values below 1024 or with a fractional part, as Kubernetes does;
//! - precision finer than `1n` is rounded up (away from zero) to `1n`, as Kubernetes does.

use std::fmt;
use std::str::FromStr;

/// Errors from parsing or adding quantities.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not a Kubernetes quantity.
    #[error("invalid quantity {input:?}: {reason}")]
    Invalid {
        /// The text that failed to parse.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The value does not fit the exact representation (about 1.7e38 in units of its scale).
    #[error("quantity overflow while computing {0}")]
    Overflow(String),
}

/// How a quantity is written, remembered from parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `m`, ``, `k`, `M`, ... (and `n`, `u`).
    DecimalSI,
    /// `Ki`, `Mi`, `Gi`, ...
    BinarySI,
    /// `1e3`, `5E-3`.
    DecimalExponent,
}

/// An exact quantity: `mantissa × 10^scale`, normalised (no trailing zeros in the mantissa;
/// zero has scale 0), plus the format to print it in.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    mantissa: i128,
    scale: i32,
    format: Format,
}

/// The smallest scale kept: nano units.
const MIN_SCALE: i32 = -9;
/// The largest decimal exponent with an SI suffix (`E`).
const MAX_SI_EXPONENT: i32 = 18;
/// Bound on exponents in `e` notation, far beyond anything that fits the mantissa anyway.
const MAX_EXPONENT_MAGNITUDE: i32 = 200;

impl Quantity {
    /// The zero quantity (decimal SI).
    pub const ZERO: Quantity = Quantity {
        mantissa: 0,
        scale: 0,
        format: Format::DecimalSI,
    };

    /// Parses a quantity (`"4"`, `"500m"`, `"1.5Gi"`, `"1e3"`, `"-2k"`).
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        let invalid = |reason| QuantityError::Invalid {
            input: input.to_owned(),
            reason,
        };
        let s = input.trim();
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            Some(_) => (false, s),
            None => return Err(invalid("empty")),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') {
            return Err(invalid("more than one decimal point"));
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid("no digits"));
        }
        let mut mantissa: i128 = 0;
        for d in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(d - b'0')))
                .ok_or_else(|| QuantityError::Overflow(input.to_owned()))?;
        }
        let frac_len = i32::try_from(frac_part.len()).map_err(|_| invalid("too many digits"))?;
        let mut scale = -frac_len;
        let format;
        match suffix {
            "" => format = Format::DecimalSI,
            "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => {
                format = Format::DecimalSI;
                scale += si_exponent(suffix).unwrap_or(0);
            }
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                format = Format::BinarySI;
                let power = binary_power(suffix).unwrap_or(0);
                let factor = 1024i128.pow(power);
                mantissa = mantissa
                    .checked_mul(factor)
                    .ok_or_else(|| QuantityError::Overflow(input.to_owned()))?;
            }
            _ if suffix.starts_with(['e', 'E']) => {
                format = Format::DecimalExponent;
                let exp: i32 = suffix[1..].parse().map_err(|_| invalid("bad exponent"))?;
                if exp.abs() > MAX_EXPONENT_MAGNITUDE {
                    return Err(QuantityError::Overflow(input.to_owned()));
                }
                scale += exp;
            }
            _ => return Err(invalid("unknown suffix")),
        }
        if negative {
            mantissa = -mantissa;
        }
        Ok(Quantity {
            mantissa,
            scale,
            format,
        }
        .normalized())
    }

    /// The format this quantity prints in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// The exact sum; keeps `self`'s format unless `self` is zero (then `other`'s), like Go's
    /// `Quantity.Add`.
    pub fn checked_add(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        let overflow = || QuantityError::Overflow(format!("{self} + {other}"));
        let scale = self.scale.min(other.scale);
        let a = scale_up(self.mantissa, self.scale - scale).ok_or_else(overflow)?;
        let b = scale_up(other.mantissa, other.scale - scale).ok_or_else(overflow)?;
        let mantissa = a.checked_add(b).ok_or_else(overflow)?;
        let format = if self.is_zero() {
            other.format
        } else {
            self.format
        };
        Ok(Quantity {
            mantissa,
            scale,
            format,
        }
        .normalized())
    }

    /// Sums quantities exactly; the empty sum is zero.
    pub fn sum<'a>(
        items: impl IntoIterator<Item = &'a Quantity>,
    ) -> Result<Quantity, QuantityError> {
        items
            .into_iter()
            .try_fold(Quantity::ZERO, |acc, q| acc.checked_add(q))
    }

    /// Rounds finer-than-nano precision up (away from zero), strips trailing zeros.
    fn normalized(mut self) -> Quantity {
        if self.mantissa == 0 {
            self.scale = 0;
            return self;
        }
        if self.scale < MIN_SCALE {
            let shift = (MIN_SCALE - self.scale) as u32;
            // Dividing by 10^shift: a shift beyond i128's digits leaves 0 plus a remainder.
            let divisor = 10i128.checked_pow(shift);
            let (q, r) = match divisor {
                Some(d) => (self.mantissa / d, self.mantissa % d),
                None => (0, self.mantissa),
            };
            self.mantissa = if r == 0 {
                q
            } else {
                q + self.mantissa.signum()
            };
            self.scale = MIN_SCALE;
        }
        while self.mantissa != 0 && self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.scale += 1;
        }
        self
    }

    /// The value as an exact integer, when it is one and fits.
    fn as_integer(&self) -> Option<i128> {
        if self.scale < 0 {
            return None;
        }
        scale_up(self.mantissa, self.scale)
    }

    fn fmt_decimal(&self, f: &mut fmt::Formatter<'_>, exponent_form: bool) -> fmt::Result {
        // Largest multiple of 3 not above `scale` (the mantissa has no trailing zeros), in the
        // SI range.
        let exp = (self.scale.div_euclid(3) * 3).clamp(MIN_SCALE, MAX_SI_EXPONENT);
        let Some(m) = scale_up(self.mantissa, self.scale - exp) else {
            // Too large for an integer mantissa at `E`: print in exponent form, still exact.
            return write!(f, "{}e{}", self.mantissa, self.scale);
        };
        if exponent_form {
            if exp == 0 {
                write!(f, "{m}")
            } else {
                write!(f, "{m}e{exp}")
            }
        } else {
            let suffix = match exp {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                0 => "",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                _ => "E",
            };
            write!(f, "{m}{suffix}")
        }
    }
}

fn si_exponent(suffix: &str) -> Option<i32> {
    Some(match suffix {
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "" => 0,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        _ => return None,
    })
}

fn binary_power(suffix: &str) -> Option<u32> {
    Some(match suffix {
        "Ki" => 1,
        "Mi" => 2,
        "Gi" => 3,
        "Ti" => 4,
        "Pi" => 5,
        "Ei" => 6,
        _ => return None,
    })
}

/// `m × 10^shift` for `shift ≥ 0`, checked.
fn scale_up(m: i128, shift: i32) -> Option<i128> {
    if m == 0 {
        return Some(0);
    }
    let shift = u32::try_from(shift).ok()?;
    10i128.checked_pow(shift).and_then(|p| m.checked_mul(p))
}

impl PartialEq for Quantity {
    /// Values are compared, not formats: `1k` equals `1000`.
    fn eq(&self, other: &Self) -> bool {
        self.mantissa == other.mantissa && self.scale == other.scale
    }
}

impl Eq for Quantity {}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mantissa == 0 {
            return f.write_str("0");
        }
        match self.format {
            Format::BinarySI => match self.as_integer() {
                Some(v) if v.abs() >= 1024 => {
                    let mut power = 0usize;
                    let mut m = v;
                    while power < 6 && m % 1024 == 0 {
                        m /= 1024;
                        power += 1;
                    }
                    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
                    write!(f, "{m}{suffix}")
                }
                _ => self.fmt_decimal(f, false),
            },
            Format::DecimalSI => self.fmt_decimal(f, false),
            Format::DecimalExponent => self.fmt_decimal(f, true),
        }
    }
}

impl From<&Quantity> for k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    fn from(q: &Quantity) -> Self {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.to_string())
    }
}

#[cfg(test)]
mod tests;
