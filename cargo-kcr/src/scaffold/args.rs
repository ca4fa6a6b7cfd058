//! The command-line arguments of `cargo kcr init` and `cargo kcr create api` (clap), and what
//! they mean as [`InitOptions`] and [`ApiOptions`].

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::scaffold::api::ApiOptions;
use crate::scaffold::init::{InitOptions, KcrSource};
use crate::scaffold::names::DEFAULT_KUBERNETES;

/// The options of `cargo kcr init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The project's directory (created if missing).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The project's name [default: the directory's name].
    #[arg(long)]
    pub name: Option<String>,
    /// The domain of the project's API groups (a kind of group G is in G.DOMAIN).
    #[arg(long, default_value = "example.com")]
    pub domain: String,
    /// The Kubernetes version the operator is built against (1.33 to 1.37).
    #[arg(long = "k8s", value_name = "VERSION", default_value = DEFAULT_KUBERNETES)]
    pub kubernetes: String,
    /// Depend on kcr's crates in this checkout (path dependencies), and copy its Cargo.lock.
    #[arg(long, value_name = "PATH", conflicts_with = "kcr_version")]
    pub kcr_path: Option<PathBuf>,
    /// Depend on this version of kcr's crates [default: cargo-kcr's own].
    #[arg(long, value_name = "VERSION")]
    pub kcr_version: Option<String>,
    /// Overwrite existing files.
    #[arg(long)]
    pub force: bool,
}

impl InitArgs {
    /// The options these arguments say.
    pub fn options(&self) -> InitOptions {
        let kcr = match (&self.kcr_path, &self.kcr_version) {
            (Some(path), _) => KcrSource::Path(path.clone()),
            (None, Some(version)) => KcrSource::Version(version.clone()),
            (None, None) => KcrSource::default(),
        };
        InitOptions {
            dir: self.dir.clone(),
            name: self.name.clone(),
            domain: self.domain.clone(),
            kubernetes: self.kubernetes.clone(),
            kcr,
            force: self.force,
        }
    }
}

/// The subcommands of `cargo kcr create`.
#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Add a kind: its type with status conditions, a controller with a finalizer and an
    /// Event, its CRD, RBAC rules, a sample and tests.
    Api(ApiArgs),
}

/// The options of `cargo kcr create api`.
#[derive(Debug, Args)]
pub struct ApiArgs {
    /// The API group (G.DOMAIN, DOMAIN being the project's; or G as given when it holds a dot).
    #[arg(long)]
    pub group: String,
    /// The version: v1, v1alpha1, v2beta1...
    #[arg(long)]
    pub version: String,
    /// The kind, CamelCase.
    #[arg(long)]
    pub kind: String,
    /// A namespaced kind (the default).
    #[arg(long, conflicts_with = "cluster")]
    pub namespaced: bool,
    /// A cluster-scoped kind.
    #[arg(long)]
    pub cluster: bool,
    /// The project's directory.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite the kind's files if they exist.
    #[arg(long)]
    pub force: bool,
}

impl ApiArgs {
    /// The options these arguments say.
    pub fn options(&self) -> ApiOptions {
        ApiOptions {
            dir: self.dir.clone(),
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            namespaced: !self.cluster,
            force: self.force,
        }
    }
}
