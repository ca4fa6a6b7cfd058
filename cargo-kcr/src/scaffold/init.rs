//! `cargo kcr init`: a new operator crate ([`init`]).

use std::path::{Path, PathBuf};

use crate::scaffold::error::ScaffoldError;
use crate::scaffold::files::{NewFile, write_new};
use crate::scaffold::names::{
    DEFAULT_KUBERNETES, crate_name, kubernetes_feature, validate_project_name, validate_subdomain,
};
use crate::scaffold::render::{Template, render};

/// Where the generated project takes kcr's crates from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KcrSource {
    /// Path dependencies on a kcr checkout (its root directory); the checkout's `Cargo.lock`
    /// is copied into the project, so that it builds the versions kcr's workspace builds.
    Path(PathBuf),
    /// Version dependencies from crates.io (`0.1.0` means `^0.1.0`).
    Version(String),
}

impl Default for KcrSource {
    fn default() -> Self {
        KcrSource::Version(env!("CARGO_PKG_VERSION").to_string())
    }
}

/// What `cargo kcr init` makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitOptions {
    /// The project's directory (created if missing).
    pub dir: PathBuf,
    /// The project's name (a Cargo package name and a DNS label); default: the directory's
    /// name.
    pub name: Option<String>,
    /// The domain of the project's API groups (`<group>.<domain>`).
    pub domain: String,
    /// The Kubernetes version the binary builds against (`1.33` to `1.37`).
    pub kubernetes: String,
    /// Where kcr's crates come from.
    pub kcr: KcrSource,
    /// Overwrite existing files.
    pub force: bool,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions {
            dir: PathBuf::from("."),
            name: None,
            domain: "example.com".into(),
            kubernetes: DEFAULT_KUBERNETES.into(),
            kcr: KcrSource::default(),
            force: false,
        }
    }
}

macro_rules! template {
    ($path:literal) => {
        Template {
            name: $path,
            text: include_str!(concat!("templates/init/", $path)),
        }
    };
}

/// The files of a new project: its path in the project, and its template.
const FILES: &[(&str, Template)] = &[
    ("Cargo.toml", template!("Cargo.toml.tmpl")),
    (".gitignore", template!("gitignore.tmpl")),
    (".dockerignore", template!("dockerignore.tmpl")),
    ("Dockerfile", template!("Dockerfile.tmpl")),
    ("README.md", template!("README.md.tmpl")),
    ("src/main.rs", template!("main.rs.tmpl")),
    ("src/lib.rs", template!("lib.rs.tmpl")),
    ("src/api/mod.rs", template!("api_mod.rs.tmpl")),
    ("src/controller/mod.rs", template!("controller_mod.rs.tmpl")),
    ("tests/support/mod.rs", template!("support.rs.tmpl")),
    ("tests/manager.rs", template!("test_manager.rs.tmpl")),
    ("tests/manifests.rs", template!("test_manifests.rs.tmpl")),
    (
        "config/default/kustomization.yaml",
        template!("config/default_kustomization.yaml.tmpl"),
    ),
    (
        "config/default/metrics_service.yaml",
        template!("config/metrics_service.yaml.tmpl"),
    ),
    (
        "config/crd/kustomization.yaml",
        template!("config/crd_kustomization.yaml.tmpl"),
    ),
    (
        "config/manager/kustomization.yaml",
        template!("config/manager_kustomization.yaml.tmpl"),
    ),
    (
        "config/manager/manager.yaml",
        template!("config/manager.yaml.tmpl"),
    ),
    (
        "config/rbac/kustomization.yaml",
        template!("config/rbac_kustomization.yaml.tmpl"),
    ),
    (
        "config/rbac/service_account.yaml",
        template!("config/service_account.yaml.tmpl"),
    ),
    ("config/rbac/role.yaml", template!("config/role.yaml.tmpl")),
    (
        "config/rbac/role_binding.yaml",
        template!("config/role_binding.yaml.tmpl"),
    ),
    (
        "config/rbac/leader_election_role.yaml",
        template!("config/leader_election_role.yaml.tmpl"),
    ),
    (
        "config/rbac/leader_election_role_binding.yaml",
        template!("config/leader_election_role_binding.yaml.tmpl"),
    ),
    (
        "config/rbac/metrics_auth_role.yaml",
        template!("config/metrics_auth_role.yaml.tmpl"),
    ),
    (
        "config/rbac/metrics_auth_role_binding.yaml",
        template!("config/metrics_auth_role_binding.yaml.tmpl"),
    ),
    (
        "config/rbac/metrics_reader_role.yaml",
        template!("config/metrics_reader_role.yaml.tmpl"),
    ),
];

/// kcr's crates a project depends on: the crate and its directory in a kcr checkout.
const KCR_DEPENDENCIES: &[(&str, &str)] = &[("kcr-controller", "controller"), ("kcr-tls", "tls")];

/// kcr's crates a project's tests depend on.
const KCR_DEV_DEPENDENCIES: &[(&str, &str)] = &[
    ("kcr-envtest", "envtest"),
    ("kcr-testkit", "testkit"),
    ("kcr-source", "source"),
];

/// A TOML basic string holding `s`.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The dependency lines of `crates` on `kcr`.
fn dependency_lines(crates: &[(&str, &str)], kcr: &KcrSource) -> String {
    crates
        .iter()
        .map(|(krate, dir)| match kcr {
            KcrSource::Path(root) => {
                let path = root.join(dir);
                format!(
                    "{krate} = {{ path = {} }}",
                    toml_string(&path.to_string_lossy())
                )
            }
            KcrSource::Version(version) => format!("{krate} = {}", toml_string(version)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The absolute path of a kcr checkout, checked to be one.
fn kcr_checkout(root: &Path) -> Result<PathBuf, ScaffoldError> {
    let invalid = |reason: &str| ScaffoldError::Invalid {
        what: "kcr path",
        value: root.display().to_string(),
        reason: reason.to_string(),
    };
    let root = std::fs::canonicalize(root).map_err(|_| invalid("no such directory"))?;
    if !root.join("controller/Cargo.toml").is_file() {
        return Err(invalid(
            "not a kcr checkout (no controller/Cargo.toml in it)",
        ));
    }
    Ok(root)
}

/// The project's name: the one given, else the directory's.
fn project_name(options: &InitOptions) -> Result<String, ScaffoldError> {
    let name = match &options.name {
        Some(name) => name.clone(),
        None => {
            let absolute =
                std::path::absolute(&options.dir).map_err(|source| ScaffoldError::Read {
                    path: options.dir.clone(),
                    source,
                })?;
            let name = absolute
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            name.ok_or_else(|| ScaffoldError::Invalid {
                what: "project name",
                value: String::new(),
                reason: format!("{} has no name: give --name", options.dir.display()),
            })?
        }
    };
    validate_project_name(&name)?;
    Ok(name)
}

/// The files of the project `options` describe, rendered, without writing them; bad input is
/// an error.
pub fn plan(options: &InitOptions) -> Result<Vec<NewFile>, ScaffoldError> {
    let name = project_name(options)?;
    validate_subdomain("domain", &options.domain)?;
    let k8s_feature = kubernetes_feature(&options.kubernetes)?;
    let kcr = match &options.kcr {
        KcrSource::Path(root) => KcrSource::Path(kcr_checkout(root)?),
        KcrSource::Version(v) if v.trim().is_empty() => {
            return Err(ScaffoldError::Invalid {
                what: "kcr version",
                value: v.clone(),
                reason: "empty".into(),
            });
        }
        other => other.clone(),
    };
    let krate = crate_name(&name);
    let namespace = format!("{name}-system");
    let leader_election_id = format!("{name}.{}", options.domain);
    let kcr_dependencies = dependency_lines(KCR_DEPENDENCIES, &kcr);
    let kcr_dev_dependencies = dependency_lines(KCR_DEV_DEPENDENCIES, &kcr);
    let k8s_version = options.kubernetes.trim_start_matches('v').to_string();
    let vars: [(&str, &str); 9] = [
        ("name", &name),
        ("crate", &krate),
        ("domain", &options.domain),
        ("namespace", &namespace),
        ("leader_election_id", &leader_election_id),
        ("k8s_feature", &k8s_feature),
        ("k8s_version", &k8s_version),
        ("kcr_dependencies", &kcr_dependencies),
        ("kcr_dev_dependencies", &kcr_dev_dependencies),
    ];
    let mut files = FILES
        .iter()
        .map(|(path, template)| {
            Ok(NewFile {
                path: options.dir.join(path),
                content: render(*template, &vars)?,
            })
        })
        .collect::<Result<Vec<_>, ScaffoldError>>()?;
    if let KcrSource::Path(root) = &kcr {
        let lock = root.join("Cargo.lock");
        if lock.is_file() {
            let content = std::fs::read_to_string(&lock).map_err(|source| ScaffoldError::Read {
                path: lock.clone(),
                source,
            })?;
            files.push(NewFile {
                path: options.dir.join("Cargo.lock"),
                content,
            });
        }
    }
    Ok(files)
}

/// Makes the project: checks the input, refuses (writing nothing) when a file exists unless
/// `force`, writes every file; returns their paths.
pub fn init(options: &InitOptions) -> Result<Vec<PathBuf>, ScaffoldError> {
    let files = plan(options)?;
    write_new(&files, options.force)
}
