//! # cargo-kcr: RBAC from what a kcr operator really does
//!
//! kubebuilder derives an operator's RBAC from `+kubebuilder:rbac` markers written by hand
//! beside the code, which drift from what the code does. `cargo kcr rbac` derives it from the
//! requests the operator's tests really made:
//!
//! 1. The tests run with `KCR_RBAC_RECORD=<directory>`: kcr-testkit's managers record every
//!    request of the manager's client as RBAC authorizes it (verb, API group, resource,
//!    subresource, namespace), one JSON line per distinct request, one file per test process
//!    ([`record`]).
//! 2. `cargo kcr rbac` writes the minimal roles to `config/rbac/` ([`rbac::generate`]): a
//!    ClusterRole (`role.yaml`, `manager-role`) with every access but leader election's Leases,
//!    which go to a Role in the operator's namespace (`leader_election_role.yaml`,
//!    `leader-election-role`); [`plan`] says which access goes where, [`role`] how the YAML is
//!    written (deterministic: one rule per group and verb set, sorted).
//! 3. `cargo kcr rbac --check` ([`rbac::check`], for CI) fails when a checked-in role lacks a
//!    verb a test used (missing) or grants one no test used (unused), naming each ([`check`]).
//!
//! ```sh
//! rm -rf target/kcr-rbac
//! KCR_RBAC_RECORD=$PWD/target/kcr-rbac cargo test
//! cargo kcr rbac --record target/kcr-rbac           # writes config/rbac/*.yaml
//! cargo kcr rbac --record target/kcr-rbac --check   # exit 1 on a difference, 2 on an error
//! ```
//!
//! A permission no request shows goes in a role-like file given with `--extra`: the API
//! server checks `update` on `<owner>/finalizers` when an owner reference blocks its owner's
//! deletion (admission's OwnerReferencesPermissionEnforcement), without a request for it. A
//! checked-in role bound to the operator that `cargo kcr rbac` does not write (kubebuilder's
//! `metrics_auth_role.yaml`) is given with `--keep`: what it grants stays out of the written
//! roles, and the check reports its verbs no test used.
//!
//! The same as a library:
//!
//! ```
//! use cargo_kcr::rbac::{RbacOptions, check, generate, write};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let project = tempfile::tempdir()?;
//! let record = project.path().join("record");
//! std::fs::create_dir(&record)?;
//! std::fs::write(
//!     record.join("1-a.jsonl"),
//!     concat!(
//!         r#"{"verb":"watch","group":"apps","resource":"deployments","subresource":null,"namespace":null}"#, "\n",
//!         r#"{"verb":"patch","group":"apps","resource":"deployments","subresource":"status","namespace":"t1"}"#, "\n",
//!         r#"{"verb":"update","group":"coordination.k8s.io","resource":"leases","subresource":null,"namespace":"t1"}"#, "\n",
//!     ),
//! )?;
//! let options = RbacOptions {
//!     records: vec![record],
//!     dir: project.path().join("config/rbac"),
//!     ..RbacOptions::default()
//! };
//! let files = generate(&options)?;
//! assert_eq!(files.len(), 2, "a ClusterRole and the leader election Role");
//! assert!(files[0].yaml.contains("kind: ClusterRole"));
//! assert!(files[1].yaml.contains("  - leases\n  verbs:\n  - update\n"));
//! write(&files)?;
//! assert!(check(&options)?.is_ok());
//!
//! // A verb no test used, added by hand: the check names it.
//! let path = options.cluster_role_path();
//! let role = std::fs::read_to_string(&path)?.replace("  - watch\n", "  - watch\n  - delete\n");
//! std::fs::write(&path, role)?;
//! let report = check(&options)?;
//! assert!(report.to_string().contains("delete apps/deployments"), "{report}");
//! # Ok(())
//! # }
//! ```
//!
//! `cargo kcr init` and `cargo kcr create api` make a new operator crate and add kinds to it:
//! [`scaffold`].
//!
//! The command line is [`cli`]; `src/main.rs` only calls it. Errors are [`RbacError`], each
//! naming the file (and line) it is about.

#![forbid(unsafe_code)]

pub mod check;
pub mod cli;
pub mod error;
pub mod permission;
pub mod plan;
pub mod rbac;
pub mod record;
pub mod role;
pub mod scaffold;

pub use check::{CheckReport, Finding, Problem};
pub use error::RbacError;
pub use permission::Permission;
pub use rbac::{RbacOptions, RoleFile};
pub use record::RecordedAccess;
