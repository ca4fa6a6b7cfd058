//! Writing a scaffold: new files all or nothing ([`write_new`]), and lines inserted before the
//! marker comments of files the scaffolder made earlier ([`insert_before_marker`]).

use std::path::{Path, PathBuf};

use crate::scaffold::error::ScaffoldError;

/// A file to write: its path and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Where it goes.
    pub path: PathBuf,
    /// What it holds.
    pub content: String,
}

/// Fails with [`ScaffoldError::Exists`] on the first of `files` that exists, unless `force`.
pub fn refuse_existing(files: &[NewFile], force: bool) -> Result<(), ScaffoldError> {
    if force {
        return Ok(());
    }
    match files.iter().find(|f| f.path.exists()) {
        Some(f) => Err(ScaffoldError::Exists {
            path: f.path.clone(),
        }),
        None => Ok(()),
    }
}

/// Writes `files`, creating their directories; checks first that none exists (unless
/// `force`), so that a refused run writes nothing.
pub fn write_new(files: &[NewFile], force: bool) -> Result<Vec<PathBuf>, ScaffoldError> {
    refuse_existing(files, force)?;
    for file in files {
        write(&file.path, &file.content)?;
    }
    Ok(files.iter().map(|f| f.path.clone()).collect())
}

/// Writes one file, creating its directory.
pub fn write(path: &Path, content: &str) -> Result<(), ScaffoldError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| ScaffoldError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, content).map_err(|source| ScaffoldError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a file as text.
pub fn read(path: &Path) -> Result<String, ScaffoldError> {
    std::fs::read_to_string(path).map_err(|source| ScaffoldError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Inserts `blocks` (each one or more lines) before the line holding `marker`, each line
/// indented as the marker's line is. A block already in the text is not inserted again, so a
/// forced rerun does not register a kind twice. `path` names the file in errors.
pub fn insert_before_marker(
    path: &Path,
    text: &str,
    marker: &'static str,
    blocks: &[String],
) -> Result<String, ScaffoldError> {
    let Some(at) = text.find(marker) else {
        return Err(ScaffoldError::MissingMarker {
            path: path.to_path_buf(),
            marker,
        });
    };
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let indent: String = text[line_start..at]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    let mut insert = String::new();
    for block in blocks {
        let indented: String = block.lines().map(|l| format!("{indent}{l}\n")).collect();
        if !text.contains(&indented) {
            insert.push_str(&indented);
        }
    }
    Ok(format!(
        "{}{insert}{}",
        &text[..line_start],
        &text[line_start..]
    ))
}

/// Sorts the run of lines that start with `prefix` just before the line holding `marker`, as
/// rustfmt orders `mod` declarations.
pub fn sort_run_before_marker(text: &str, marker: &str, prefix: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(at) = lines.iter().position(|l| l.contains(marker)) else {
        return text.to_string();
    };
    let start = lines[..at]
        .iter()
        .rposition(|l| !l.trim_start().starts_with(prefix))
        .map_or(0, |i| i + 1);
    let mut run: Vec<&str> = lines[start..at].to_vec();
    run.sort_unstable();
    let mut out: Vec<&str> = lines[..start].to_vec();
    out.extend(run);
    out.extend(&lines[at..]);
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_indented_once() {
        let path = Path::new("lib.rs");
        let text = "fn f() {\n    // +m\n}\n";
        let once = insert_before_marker(path, text, "// +m", &["a();".into()]).unwrap();
        assert_eq!(once, "fn f() {\n    a();\n    // +m\n}\n");
        let twice = insert_before_marker(path, &once, "// +m", &["a();".into()]).unwrap();
        assert_eq!(twice, once);
        let err = insert_before_marker(path, "x", "// +m", &[]).unwrap_err();
        assert!(err.to_string().contains("no line with the marker"), "{err}");
    }

    #[test]
    fn mod_lines_are_sorted_as_rustfmt_sorts_them() {
        let text = "//! m\n\npub mod b;\npub mod a;\n// +m\n";
        let sorted = sort_run_before_marker(text, "// +m", "pub mod ");
        assert_eq!(sorted, "//! m\n\npub mod a;\npub mod b;\n// +m\n");
    }

    #[test]
    fn nothing_is_written_when_one_file_exists() {
        let dir = tempfile::tempdir().unwrap();
        let existing = dir.path().join("b");
        std::fs::write(&existing, "mine").unwrap();
        let files = [
            NewFile {
                path: dir.path().join("a/x"),
                content: "x".into(),
            },
            NewFile {
                path: existing.clone(),
                content: "theirs".into(),
            },
        ];
        let err = write_new(&files, false).unwrap_err();
        assert!(matches!(err, ScaffoldError::Exists { ref path } if *path == existing));
        assert!(!dir.path().join("a").exists());
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "mine");
        write_new(&files, true).unwrap();
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "theirs");
    }
}
