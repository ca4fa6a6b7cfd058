//! Pagination of lists: the `limit`, `continue`, `resourceVersion` and `resourceVersionMatch`
//! parameters, the snapshot a list is served from, continue tokens, and the merge of the
//! current objects with the store's overlay of the snapshot (the state at the snapshot of the
//! keys written since).

use serde_json::Value;

use super::query::Query;
use crate::error::ApiError;
use crate::store::ObjKey;

/// Continue token contents: the snapshot and the last key served.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

/// The opaque `continue` value of a page that ended at `key` of the snapshot `rv`.
pub(crate) fn encode_continue(rv: u64, key: &ObjKey) -> String {
    use base64::Engine;
    let token = ContinueToken {
        rv,
        ns: key.0.clone(),
        name: key.1.clone(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&token).unwrap_or_default())
}

/// Reads a `continue` value (400 when it is not one this server handed out; a value that is
/// not base64 or not JSON is worded as the real server words it).
pub(crate) fn decode_continue(s: &str) -> Result<ContinueToken, ApiError> {
    use base64::Engine;
    let invalid = |why: String| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    };
    // Go's RawURLEncoding: no padding, trailing bits of the last symbol ignored.
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
    );
    let bytes = engine.decode(s).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            base64::DecodeError::InvalidLength(len) => len,
            base64::DecodeError::InvalidPadding => s.len(),
        };
        invalid(format!("illegal base64 data at input byte {at}"))
    })?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| invalid(crate::json::go_syntax_error(&bytes, &e)))?;
    serde_json::from_value(value).map_err(|_| ApiError::bad_request("invalid continue token"))
}

/// A resourceVersion parameter (400 when it is not an integer).
pub(crate) fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid resource version: resourceVersion: Invalid value: \"{s}\": {}",
            super::options::parse_uint_error(s)
        ))
    })
}

/// The pagination parameters of a list request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ListParams {
    /// Items per page; 0 means all.
    pub limit: usize,
    cont: Option<ContinueToken>,
    rv: Option<String>,
    rv_match: String,
}

impl ListParams {
    /// Reads the parameters; a resourceVersion other than `0` with a continue token is a 400.
    pub(crate) fn parse(q: &Query) -> Result<Self, ApiError> {
        super::options::check_rv_match(q)?;
        let limit = match q.get("limit") {
            Some(l) if !l.is_empty() => l
                .parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l}")))?,
            _ => 0,
        };
        let cont = q
            .get("continue")
            .filter(|c| !c.is_empty())
            .map(|c| decode_continue(c))
            .transpose()?;
        let rv = q.get("resourceVersion").filter(|r| !r.is_empty()).cloned();
        let rv_match = q.get("resourceVersionMatch").cloned().unwrap_or_default();
        if cont.is_some() && rv.as_deref().is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(Self {
            limit,
            cont,
            rv,
            rv_match,
        })
    }

    /// The page size to serve: a list at resourceVersion `0` (no continue token) is served
    /// whole, as the real server's watch cache does, whatever the limit.
    pub(crate) fn page_limit(&self) -> usize {
        if self.cont.is_none() && self.rv.as_deref() == Some("0") {
            0
        } else {
            self.limit
        }
    }

    /// The snapshot to serve when the store is at `current`: its resourceVersion (`None`: the
    /// current state) and the key after which the page starts.
    pub(crate) fn snapshot(&self, current: u64) -> Result<(Option<u64>, Option<ObjKey>), ApiError> {
        let (snapshot_rv, after) = match &self.cont {
            Some(c) => (Some(c.rv), Some((c.ns.clone(), c.name.clone()))),
            None => match (self.rv.as_deref(), self.rv_match.as_str()) {
                (None, _) | (Some("0"), _) => (None, None),
                (Some(r), "Exact") => (Some(parse_rv(r)?), None),
                (Some(r), "NotOlderThan") | (Some(r), "") => {
                    let r = parse_rv(r)?;
                    if r > current {
                        return Err(super::options::too_large_rv(r, current));
                    }
                    // Legacy semantics: a limit with an explicit RV and no match is Exact.
                    if self.limit > 0 && self.rv_match.is_empty() {
                        (Some(r), None)
                    } else {
                        (None, None)
                    }
                }
                (Some(_), other) => {
                    return Err(ApiError::bad_request(format!(
                        "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
                    )));
                }
            },
        };
        if let Some(r) = snapshot_rv.filter(|r| *r > current) {
            return Err(super::options::too_large_rv(r, current));
        }
        Ok((snapshot_rv, after))
    }
}

/// One page of a list.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Page<T> {
    /// The selected objects, in key order.
    pub items: Vec<T>,
    /// The key of the last item, when more items follow (the continue point).
    pub next: Option<ObjKey>,
    /// How many selected objects follow the page.
    pub remaining: usize,
}

/// Merges the current objects (`current`, in key order) with the state at the snapshot of the
/// keys written since (`overlay`, in key order, `None` for a key absent at the snapshot; it
/// wins over `current`), keeps the objects `keep` selects and stops after `limit` of them (0:
/// no limit), counting the selected objects after the page.
pub(crate) fn merge_page<'a, T: Clone + 'a>(
    current: impl Iterator<Item = (&'a ObjKey, &'a T)>,
    overlay: impl Iterator<Item = (&'a ObjKey, &'a Option<T>)>,
    mut keep: impl FnMut(&T) -> bool,
    limit: usize,
) -> Page<T> {
    let mut current = current.peekable();
    let mut overlay = overlay.peekable();
    let mut items = Vec::new();
    let mut last: Option<ObjKey> = None;
    let mut remaining = 0;
    loop {
        let next_keys = (
            current.peek().map(|(k, _)| *k),
            overlay.peek().map(|(k, _)| *k),
        );
        let from_overlay = match next_keys {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(ck), Some(ok)) => {
                if ck == ok {
                    current.next();
                }
                ck >= ok
            }
        };
        let (key, value) = if from_overlay {
            let Some((k, v)) = overlay.next() else { break };
            (k, v.as_ref())
        } else {
            let Some((k, v)) = current.next() else { break };
            (k, Some(v))
        };
        let Some(obj) = value else { continue };
        if !keep(obj) {
            continue;
        }
        if limit > 0 && items.len() == limit {
            remaining += 1;
            continue;
        }
        last = Some(key.clone());
        items.push(obj.clone());
    }
    let next = if remaining > 0 { last } else { None };
    Page {
        items,
        next,
        remaining,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::query::parse_query;

    fn key(name: &str) -> ObjKey {
        ("ns".to_string(), name.to_string())
    }

    fn params(query: &str) -> Result<ListParams, ApiError> {
        ListParams::parse(&parse_query(Some(query)))
    }

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, &key("b"));
        let decoded = decode_continue(&token).unwrap();
        assert_eq!(
            decoded,
            ContinueToken {
                rv: 42,
                ns: "ns".into(),
                name: "b".into()
            }
        );
        assert_eq!(decode_continue("not a token").unwrap_err().code, 400);
        let p = params(&format!("continue={token}&limit=2")).unwrap();
        assert_eq!(p.limit, 2);
        assert_eq!(p.snapshot(50).unwrap(), (Some(42), Some(key("b"))));
        // A token from the future (another server) is not served.
        assert_eq!(p.snapshot(41).unwrap_err().code, 504);
        assert_eq!(
            params(&format!("continue={token}&resourceVersion=5"))
                .unwrap_err()
                .code,
            400
        );
        assert!(params(&format!("continue={token}&resourceVersion=0")).is_ok());
    }

    #[test]
    fn snapshots_follow_resource_version_semantics() {
        let at = |q: &str| params(q).and_then(|p| p.snapshot(10));
        assert_eq!(at("").unwrap(), (None, None));
        assert_eq!(at("resourceVersion=0&limit=5").unwrap(), (None, None));
        assert_eq!(at("resourceVersion=7").unwrap(), (None, None));
        assert_eq!(
            at("resourceVersion=7&resourceVersionMatch=NotOlderThan&limit=1").unwrap(),
            (None, None)
        );
        // Legacy: a limit with an explicit resourceVersion and no match is Exact.
        assert_eq!(at("resourceVersion=7&limit=1").unwrap(), (Some(7), None));
        assert_eq!(
            at("resourceVersion=7&resourceVersionMatch=Exact").unwrap(),
            (Some(7), None)
        );
        assert_eq!(at("resourceVersion=11").unwrap_err().code, 504);
        assert_eq!(
            at("resourceVersion=11&resourceVersionMatch=Exact")
                .unwrap_err()
                .code,
            504
        );
        assert_eq!(at("resourceVersion=x").unwrap_err().code, 400);
        // As upstream's ListOptions validation: 422 Invalid.
        assert_eq!(
            at("resourceVersion=7&resourceVersionMatch=Newest")
                .unwrap_err()
                .code,
            422
        );
        assert_eq!(at("resourceVersionMatch=Exact").unwrap_err().code, 422);
        assert_eq!(params("limit=-1").unwrap_err().code, 400);
    }

    #[test]
    fn pages_merge_the_overlay_and_stop_at_the_limit() {
        let current: BTreeMap<ObjKey, &str> =
            [(key("a"), "a2"), (key("c"), "c1"), (key("d"), "d2")].into();
        // At the snapshot: `a` was older, `b` existed (deleted since), `d` did not exist.
        let overlay: BTreeMap<ObjKey, Option<&str>> = [
            (key("a"), Some("a1")),
            (key("b"), Some("b1")),
            (key("d"), None),
        ]
        .into();
        let page = |limit, keep: &dyn Fn(&&str) -> bool| {
            merge_page(current.iter(), overlay.iter(), keep, limit)
        };
        let all = page(0, &|_| true);
        assert_eq!(all.items, ["a1", "b1", "c1"]);
        assert_eq!(all.next, None);
        let first = page(2, &|_| true);
        assert_eq!(first.items, ["a1", "b1"]);
        assert_eq!(first.next, Some(key("b")));
        // Exactly `limit` items left: no continue point.
        assert_eq!(page(3, &|_| true).next, None);
        let selected = page(1, &|v| v.starts_with('c') || v.starts_with('a'));
        assert_eq!(
            (selected.items, selected.next),
            (vec!["a1"], Some(key("a")))
        );
        let empty: BTreeMap<ObjKey, Option<&str>> = BTreeMap::new();
        let live = merge_page(current.iter(), empty.iter(), |_| true, 0);
        assert_eq!(live.items, ["a2", "c1", "d2"]);
    }
}
