//! Just enough DER to read a certificate's validity period and subject.

/// One attribute of a distinguished name: its type (`CN`, `O`, or a dotted OID for types without
/// a short name) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameAttribute {
    /// `CN`, `O`, `OU`, `C`, `L`, `ST`, `STREET`, `DC`, `SERIALNUMBER`, `UID`, or the dotted OID.
    pub kind: String,
    /// The value (a value that is not a string is written as `#` and its DER in hex).
    pub value: String,
    /// Whether `value` is the `#`-hex form (not escaped in [`ClientCertificate::subject`](crate::ClientCertificate::subject)).
    pub(crate) hex: bool,
}

/// One TLV: (tag, contents, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// `(notBefore, notAfter)` in unix seconds.
pub(crate) fn validity(cert: &[u8]) -> Option<(i64, i64)> {
    let (0x30, cert, _) = tlv(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(cert)? else {
        return None;
    };
    let mut rest = tbs;
    // [0] EXPLICIT version, optional.
    if rest.first() == Some(&0xa0) {
        rest = tlv(rest)?.2;
    }
    // serialNumber, signature, issuer.
    for _ in 0..3 {
        rest = tlv(rest)?.2;
    }
    let (0x30, validity, _) = tlv(rest)? else {
        return None;
    };
    let (t1, nb, rest) = tlv(validity)?;
    let (t2, na, _) = tlv(rest)?;
    Some((time(t1, nb)?, time(t2, na)?))
}

/// The subject of a certificate: its relative distinguished names in order, each with its
/// attributes.
pub(crate) fn subject(cert: &[u8]) -> Option<Vec<Vec<NameAttribute>>> {
    let (0x30, cert, _) = tlv(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(cert)? else {
        return None;
    };
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = tlv(rest)?.2;
    }
    // serialNumber, signature, issuer, validity.
    for _ in 0..4 {
        rest = tlv(rest)?.2;
    }
    let (0x30, mut name, _) = tlv(rest)? else {
        return None;
    };
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (0x31, mut set, after) = tlv(name)? else {
            return None;
        };
        name = after;
        let mut rdn = Vec::new();
        while !set.is_empty() {
            let (0x30, atv, after) = tlv(set)? else {
                return None;
            };
            set = after;
            let (0x06, oid, value) = tlv(atv)? else {
                return None;
            };
            let (tag, text, _) = tlv(value)?;
            let (value, hex) = match tag {
                // UTF8String, PrintableString, TeletexString, IA5String.
                0x0c | 0x13 | 0x14 | 0x16 => (String::from_utf8_lossy(text).into_owned(), false),
                // BMPString.
                0x1e => {
                    let units: Vec<u16> = text
                        .chunks(2)
                        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                        .collect();
                    (String::from_utf16_lossy(&units), false)
                }
                _ => {
                    let whole = &value[..value.len() - tlv(value)?.2.len()];
                    let hex: String = whole.iter().map(|b| format!("{b:02x}")).collect();
                    (format!("#{hex}"), true)
                }
            };
            rdn.push(NameAttribute {
                kind: attribute_kind(oid)?,
                value,
                hex,
            });
        }
        rdns.push(rdn);
    }
    Some(rdns)
}

/// The short name of an attribute type (RFC 4514's, plus `SERIALNUMBER`), else its dotted
/// OID.
fn attribute_kind(oid: &[u8]) -> Option<String> {
    let short = match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x05] => "SERIALNUMBER",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "STREET",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        _ => return dotted(oid),
    };
    Some(short.to_owned())
}

fn dotted(oid: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut acc: u64 = 0;
    for (i, b) in oid.iter().enumerate() {
        acc = acc.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (acc / 40).min(2);
                arcs.push(first);
                arcs.push(acc - first * 40);
            } else {
                arcs.push(acc);
            }
            acc = 0;
        } else if i == oid.len() - 1 {
            return None;
        }
    }
    (!arcs.is_empty()).then(|| {
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(".")
    })
}

fn digits(s: &[u8]) -> Option<i64> {
    s.iter().try_fold(0i64, |acc, b| {
        b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
    })
}

/// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) to unix seconds.
fn time(tag: u8, s: &[u8]) -> Option<i64> {
    let (year, rest) = match tag {
        0x17 if s.len() == 13 => {
            let yy = digits(s.get(..2)?)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, s.get(2..)?)
        }
        0x18 if s.len() == 15 => (digits(s.get(..4)?)?, s.get(4..)?),
        _ => return None,
    };
    if rest.last() != Some(&b'Z') {
        return None;
    }
    let f = |i: usize| digits(rest.get(i..i + 2)?);
    let (month, day, h, m, sec) = (f(0)?, f(2)?, f(4)?, f(6)?, f(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        assert_eq!(time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(time(0x18, b"20000301000000Z"), Some(951_868_800));
        assert_eq!(time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(time(0x17, b"70010100000Z"), None);
        assert_eq!(time(0x17, b"701301000000Z"), None);
        assert_eq!(time(0x18, b"2000030100000xZ"), None);
        assert_eq!(time(0x02, b"700101000000Z"), None);
    }

    #[test]
    fn garbage_does_not_parse() {
        for input in [&b""[..], b"\x30", b"\x30\x84\xff\xff\xff\xff", b"\x30\x00"] {
            assert_eq!(validity(input), None);
            assert_eq!(subject(input), None);
        }
    }

    #[test]
    fn oids_print_dotted() {
        assert_eq!(attribute_kind(&[0x55, 0x04, 0x0a]).as_deref(), Some("O"));
        // 1.2.840.113549.1.9.1 (emailAddress)
        assert_eq!(
            attribute_kind(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]).as_deref(),
            Some("1.2.840.113549.1.9.1")
        );
        assert_eq!(dotted(&[0x2a, 0x86]), None);
    }
}
