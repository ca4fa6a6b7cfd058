//! The record kcr-testkit writes while the tests run: one JSON object a line, one
//! [`RecordedAccess`] each, in one or more `*.jsonl` files of a directory.
//!
//! ```json
//! {"verb":"patch","group":"apps","resource":"deployments","subresource":"status","namespace":"demo"}
//! ```
//!
//! `group` is `""` for the core group; `subresource` and `namespace` are `null` (or absent)
//! when the request had none. Unknown members are ignored, so a newer recorder's lines still
//! read.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::RbacError;
use crate::permission::{Permission, WILDCARD};

/// One distinct request the operator made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
pub struct RecordedAccess {
    /// The RBAC verb.
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural), without subresource.
    pub resource: String,
    /// The subresource, if any.
    #[serde(default)]
    pub subresource: Option<String>,
    /// The namespace of the request's path; `None` for a cluster-scoped resource or a
    /// namespaced one across all namespaces.
    #[serde(default)]
    pub namespace: Option<String>,
}

impl RecordedAccess {
    /// The permission this access needs.
    pub fn permission(&self) -> Permission {
        let resource = match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        };
        Permission::new(&self.verb, &self.group, &resource)
    }

    /// Why this is no request a role can describe, if it is not.
    fn problem(&self) -> Option<&'static str> {
        let word = |s: &str| !s.is_empty() && !s.contains('/') && s != WILDCARD;
        if !word(&self.verb) {
            Some("the verb must be one word")
        } else if !word(&self.resource) {
            Some("the resource must be one word")
        } else if self.group.contains('/') || self.group == WILDCARD {
            Some("the group must be one word or empty")
        } else if self.subresource.as_deref().is_some_and(|s| !word(s)) {
            Some("the subresource must be one word")
        } else if self.namespace.as_deref() == Some("") {
            Some("the namespace must be null or a name")
        } else {
            None
        }
    }
}

/// The accesses of `text`, the lines of the record file `source` (named in errors). Blank
/// lines are skipped.
pub fn parse_lines(text: &str, source: &Path) -> Result<Vec<RecordedAccess>, RbacError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason: String| RbacError::BadRecordLine {
            path: source.to_owned(),
            line: i + 1,
            reason,
        };
        let access: RecordedAccess = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if let Some(problem) = access.problem() {
            return Err(bad(problem.to_owned()));
        }
        out.push(access);
    }
    Ok(out)
}

/// The accesses recorded at `path`: a record file, or a directory whose `*.jsonl` files are
/// read in name order. Duplicates are kept; [`RbacError::NoRecord`] if nothing was recorded.
pub fn read_record(path: &Path) -> Result<Vec<RecordedAccess>, RbacError> {
    let read_err = |path: &Path| {
        let path = path.to_owned();
        move |source| RbacError::Read { path, source }
    };
    if !path.exists() {
        return Err(RbacError::NoRecord {
            path: path.to_owned(),
        });
    }
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(read_err(path))? {
            let file = entry.map_err(read_err(path))?.path();
            if file.extension().is_some_and(|e| e == "jsonl") && file.is_file() {
                files.push(file);
            }
        }
        files.sort();
        files
    } else {
        vec![path.to_owned()]
    };
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(read_err(&file))?;
        out.extend(parse_lines(&text, &file)?);
    }
    if out.is_empty() {
        return Err(RbacError::NoRecord {
            path: path.to_owned(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_with_and_without_optional_members() -> Result<(), RbacError> {
        let text = r#"{"verb":"patch","group":"apps","resource":"deployments","subresource":"status","namespace":"a"}

{"verb":"list","group":"","resource":"nodes","extra":1}"#;
        let got = parse_lines(text, Path::new("r.jsonl"))?;
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0].permission().to_string(),
            "patch apps/deployments/status"
        );
        assert_eq!(got[0].namespace.as_deref(), Some("a"));
        assert_eq!(got[1].permission().to_string(), "list core/nodes");
        assert_eq!(got[1].namespace, None);
        Ok(())
    }

    #[test]
    fn a_bad_line_is_an_error_naming_file_and_line() {
        for (text, reason) in [
            ("{\"verb\":\"get\"}", "missing field"),
            ("not json", "expected"),
            (
                r#"{"verb":"get","group":"","resource":"pods/status"}"#,
                "resource must be one word",
            ),
            (
                r#"{"verb":"","group":"","resource":"pods"}"#,
                "verb must be one word",
            ),
            (
                r#"{"verb":"get","group":"*","resource":"pods"}"#,
                "group must be",
            ),
            (
                r#"{"verb":"get","group":"","resource":"pods","namespace":""}"#,
                "namespace must be",
            ),
        ] {
            let text = format!("\n{text}");
            let err = parse_lines(&text, Path::new("r.jsonl")).err();
            let shown = err.map(|e| e.to_string()).unwrap_or_default();
            assert!(shown.starts_with("r.jsonl:2: "), "{shown}");
            assert!(shown.contains(reason), "{shown} lacks {reason}");
        }
    }

    #[test]
    fn a_directory_is_read_file_by_file_and_an_empty_one_is_no_record()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let empty = read_record(dir.path()).err().map(|e| e.to_string());
        assert!(empty.is_some_and(|e| e.contains("no recorded request")));
        std::fs::write(
            dir.path().join("1.jsonl"),
            "{\"verb\":\"get\",\"group\":\"\",\"resource\":\"pods\"}\n",
        )?;
        std::fs::write(
            dir.path().join("2.jsonl"),
            "{\"verb\":\"list\",\"group\":\"\",\"resource\":\"pods\"}\n",
        )?;
        std::fs::write(dir.path().join("notes.txt"), "not a record")?;
        let verbs: Vec<String> = read_record(dir.path())?
            .into_iter()
            .map(|a| a.verb)
            .collect();
        assert_eq!(verbs, ["get", "list"]);
        let missing = read_record(&dir.path().join("nope"))
            .err()
            .map(|e| e.to_string());
        assert!(missing.is_some_and(|e| e.contains("nope")));
        Ok(())
    }
}
