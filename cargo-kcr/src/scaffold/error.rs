//! [`ScaffoldError`]: what `cargo kcr init` and `cargo kcr create api` refuse or fail with.

use std::path::PathBuf;

/// Errors of the scaffolder. Bad input is refused before any file is written; each error
/// names the value or the file it is about.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// A value given on the command line is not acceptable (a kind that is not CamelCase, a
    /// group that is not a DNS subdomain, a version that is not `v1`, `v1alpha1`, ...).
    #[error("invalid {what} {value:?}: {reason}")]
    Invalid {
        /// What the value is (`kind`, `group`, `version`, `project name`, `domain`).
        what: &'static str,
        /// The value given.
        value: String,
        /// Why it is refused, and what is expected.
        reason: String,
    },
    /// The Kubernetes version is not one the generated project can pick with k8s-openapi.
    #[error(
        "unsupported Kubernetes version {0:?}: expected one of 1.33, 1.34, 1.35, 1.36, 1.37 (k8s-openapi 0.29's range)"
    )]
    UnsupportedKubernetes(String),
    /// A file the scaffolder would write exists already (give `--force` to overwrite it).
    #[error("{path} exists already: nothing was written (give --force to overwrite)")]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The directory is not a project made by `cargo kcr init`.
    #[error(
        "{dir} is not a kcr project made by `cargo kcr init`: {reason} (run `cargo kcr create api` in the project's directory)"
    )]
    NotAProject {
        /// The directory.
        dir: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A file lacks the marker comment the scaffolder inserts before.
    #[error("{path} has no line with the marker {marker:?}: put it back where new code goes")]
    MissingMarker {
        /// The file.
        path: PathBuf,
        /// The marker.
        marker: &'static str,
    },
    /// A template still holds a placeholder after rendering (a bug of the scaffolder).
    #[error("template {template}: placeholder {placeholder} was not filled")]
    Unfilled {
        /// The template's name.
        template: &'static str,
        /// The first placeholder left, with its braces.
        placeholder: String,
    },
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file or directory could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
