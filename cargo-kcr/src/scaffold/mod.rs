//! # The scaffolder: `cargo kcr init` and `cargo kcr create api`
//!
//! kubebuilder's `kubebuilder init` and `kubebuilder create api`, for kcr:
//!
//! - [`init()`] makes a new operator crate: a `Cargo.toml` picking the user's Kubernetes version
//!   (k8s-openapi's `v1_33` to `v1_37`, with its `schemars` feature for status conditions),
//!   kcr's crates as path dependencies on a checkout (its `Cargo.lock` copied) or as version
//!   dependencies; `src/main.rs` with the manager (`run`: leader election, secured metrics,
//!   health and ready probes, HTTP/2 off; `crd`: the CRDs as YAML); `src/lib.rs` with
//!   `add_to_manager` and `crds`; a test harness on kcr-testkit (`tests/support/`: the CRDs
//!   installed once per test binary, each test's controllers scoped to its namespace) and two
//!   tests (the manager starts and stops; `config/crd/bases/` is what the code derives);
//!   `config/` (CRDs, RBAC, the manager's Deployment, kustomizations); a Dockerfile building a
//!   static binary; a `.gitignore`; a README.
//! - [`create_api()`] adds a kind: `src/api/<kind>.rs` (a `CustomResource` with a status of
//!   `conditions`), `src/controller/<kind>.rs` (a reconciler with a finalizer, a `Ready`
//!   condition and Events), `tests/<kind>.rs` (create → Ready and an Event; delete → the
//!   cleanup), its CRD in `config/crd/bases/`, its RBAC rules and a sample; it registers the
//!   kind above the `+kcr:scaffold:` marker comments of the files `init` made.
//!
//! Templates are text files under `templates/` with `{{placeholder}}`s ([`render`]). Input is
//! checked before anything is written ([`names`]), and existing files are never overwritten
//! without `force` ([`files`]); every failure is a [`ScaffoldError`].
//!
//! ```
//! use cargo_kcr::scaffold::{ApiOptions, InitOptions, create_api, init};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tmp = tempfile::tempdir()?;
//! let dir = tmp.path().join("guestbook");
//! init(&InitOptions { dir: dir.clone(), ..InitOptions::default() })?;
//! let api = ApiOptions {
//!     dir: dir.clone(),
//!     group: "webapp".into(),
//!     version: "v1".into(),
//!     kind: "Guestbook".into(),
//!     namespaced: true,
//!     force: false,
//! };
//! create_api(&api)?;
//! assert!(dir.join("src/controller/guestbook.rs").is_file());
//! assert!(dir.join("config/crd/bases/webapp.example.com_guestbooks.yaml").is_file());
//! // Once is enough: a second run writes nothing.
//! let again = create_api(&api).unwrap_err();
//! assert!(again.to_string().contains("exists already"), "{again}");
//! # Ok(())
//! # }
//! ```

pub mod api;
pub mod args;
pub mod error;
pub mod files;
pub mod init;
pub mod names;
pub mod render;

pub use api::{ApiOptions, create_api};
pub use args::{ApiArgs, CreateCommand, InitArgs};
pub use error::ScaffoldError;
pub use init::{InitOptions, KcrSource, init};

#[cfg(test)]
mod tests;
