//! [`RbacError`]: what reading a record or a role, or writing a role, fails with.

use std::path::PathBuf;

/// Errors of `cargo kcr rbac`; each names the file (and line) it is about.
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
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
    /// No request was recorded at the given place.
    #[error(
        "no recorded request in {path}: run the tests with KCR_RBAC_RECORD=<absolute path of {path}> first (kcr-testkit's managers record there)"
    )]
    NoRecord {
        /// The record's directory or file.
        path: PathBuf,
    },
    /// A line of a record is not a recorded request.
    #[error("{path}:{line}: not a recorded request: {reason}")]
    BadRecordLine {
        /// The record file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A role file is not YAML role documents.
    #[error("{path}: not a role: {reason}")]
    BadRole {
        /// The role file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A role file holds a document of another kind than expected.
    #[error("{path}: a {found} where a {expected} was expected")]
    UnexpectedKind {
        /// The role file.
        path: PathBuf,
        /// The kind found.
        found: String,
        /// The kind expected.
        expected: &'static str,
    },
    /// A rule uses a field `cargo kcr rbac` neither writes nor checks.
    #[error("{path}: a rule with {field}: cargo kcr rbac neither writes nor checks them")]
    Unsupported {
        /// The role file.
        path: PathBuf,
        /// The field (`resourceNames`, `nonResourceURLs`).
        field: &'static str,
    },
    /// An access the namespaced Role should hold was made across all namespaces, which a Role
    /// cannot grant.
    #[error(
        "{access}: made across all namespaces, which the namespaced Role cannot grant: leave {resource} out of the Role's resources (--role-resources), or make the request in one namespace"
    )]
    ClusterWideInRole {
        /// The access, as `verb group/resource`.
        access: String,
        /// The Role's resource it matched.
        resource: String,
    },
    /// A resource given for the Role is not `<group>/<resource>` or `<resource>`.
    #[error(
        "{0:?} is not a resource: expected <group>/<resource> (core/<resource> for the core group) or <resource>"
    )]
    BadResource(String),
    /// A role's name or namespace is empty.
    #[error("the {0} must not be empty")]
    EmptyName(&'static str),
    /// `cargo kcr init` or `cargo kcr create` failed.
    #[error(transparent)]
    Scaffold(#[from] crate::scaffold::ScaffoldError),
}
