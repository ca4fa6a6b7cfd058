//! Small readers of `serde_json` values shared across the server.

use serde_json::Value;

/// The strings of the JSON array `v`, in order (other items skipped; none when `v` is not an
/// array).
pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}
