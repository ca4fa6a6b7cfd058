//! Query parsing: the query string as a map (percent-decoded), the flags the verbs read, and
//! the output mode the `Accept` header asks for.

use std::collections::HashMap;

/// A request's query parameters, percent-decoded (a repeated key keeps its first value, as Go's
/// `url.Values.Get` reads it).
pub(crate) type Query = HashMap<String, String>;

/// How objects are rendered, from the request's `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputMode {
    /// The objects themselves.
    Full,
    /// `PartialObjectMetadata` (metadata only).
    Metadata,
    /// `meta.k8s.io/v1` `Table` (kubectl get).
    Table {
        /// `includeObject=Object` rather than metadata.
        include_object: bool,
    },
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string (`a=1&b=x%20y`); keys without `=` get the empty value.
pub(crate) fn parse_query(q: Option<&str>) -> Query {
    let mut query = Query::new();
    for (k, v) in q
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
    {
        query.entry(k).or_insert(v);
    }
    query
}

/// Whether a boolean query parameter is set (`true` or `1`).
pub(crate) fn flag(q: &Query, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

/// The output mode asked for by the `Accept` header (the first media type that names one).
pub(crate) fn output_mode(req_accept: Option<&str>, q: &Query) -> OutputMode {
    let accept = req_accept.unwrap_or_default();
    // Take the first acceptable media type (clients list preferences in order).
    for part in accept.split(',') {
        if part.contains("as=Table") {
            return OutputMode::Table {
                include_object: q.get("includeObject").is_some_and(|v| v == "Object"),
            };
        }
        if part.contains("as=PartialObjectMetadata") {
            return OutputMode::Metadata;
        }
        if part.contains("application/json") || part.contains("*/*") {
            return OutputMode::Full;
        }
    }
    OutputMode::Full
}

/// Whether the request is a dry run (`dryRun=All`).
pub(crate) fn dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_decodes_pairs() {
        let q = parse_query(Some(
            "labelSelector=app%3Dweb%2Ctier+in+%28a%29&limit=5&watch&",
        ));
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["limit"], "5");
        assert_eq!(q["watch"], "");
        assert_eq!(q.len(), 3);
        assert!(parse_query(None).is_empty());
        assert!(parse_query(Some("")).is_empty());
    }

    #[test]
    fn bad_escapes_are_kept() {
        let q = parse_query(Some("a=100%&b=%zz&c=%4"));
        assert_eq!(q["a"], "100%");
        assert_eq!(q["b"], "%zz");
        assert_eq!(q["c"], "%4");
    }

    #[test]
    fn flags_and_dry_run() {
        let q = parse_query(Some("watch=1&allowWatchBookmarks=true&x=false&dryRun=All"));
        assert!(flag(&q, "watch"));
        assert!(flag(&q, "allowWatchBookmarks"));
        assert!(!flag(&q, "x"));
        assert!(!flag(&q, "missing"));
        assert!(dry_run(&q));
        assert!(!dry_run(&parse_query(Some("dryRun=None"))));
    }

    #[test]
    fn output_mode_follows_the_first_acceptable_type() {
        let q = parse_query(Some("includeObject=Object"));
        let none = Query::new();
        assert_eq!(output_mode(None, &none), OutputMode::Full);
        assert_eq!(
            output_mode(
                Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
                &none
            ),
            OutputMode::Table {
                include_object: false
            }
        );
        assert_eq!(
            output_mode(Some("application/json;as=Table;v=v1;g=meta.k8s.io"), &q),
            OutputMode::Table {
                include_object: true
            }
        );
        assert_eq!(
            output_mode(
                Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
                &none
            ),
            OutputMode::Metadata
        );
        assert_eq!(
            output_mode(
                Some("application/json, application/json;as=Table;g=meta.k8s.io;v=v1"),
                &none
            ),
            OutputMode::Full
        );
    }
}
