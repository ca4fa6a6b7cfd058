//! `cargo kcr create api`: a kind, its controller, CRD, RBAC rules, sample and tests, added to
//! a project made by `cargo kcr init` ([`create_api`]).

use std::path::{Path, PathBuf};

use crate::scaffold::error::ScaffoldError;
use crate::scaffold::files::{
    NewFile, insert_before_marker, read, refuse_existing, sort_run_before_marker, write,
};
use crate::scaffold::names::{
    full_group, plural, snake_case, validate_kind, validate_project_name, validate_version,
};
use crate::scaffold::render::{Template, render};

/// What `cargo kcr create api` adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiOptions {
    /// The project's directory (where its `Cargo.toml` is).
    pub dir: PathBuf,
    /// The API group: `<group>.<domain>` when it holds no dot, else as given.
    pub group: String,
    /// The version (`v1`, `v1alpha1`, ...).
    pub version: String,
    /// The kind, CamelCase.
    pub kind: String,
    /// Namespaced (the default) or cluster-scoped.
    pub namespaced: bool,
    /// Overwrite the kind's files if they exist.
    pub force: bool,
}

macro_rules! template {
    ($path:literal) => {
        Template {
            name: $path,
            text: include_str!(concat!("templates/api/", $path)),
        }
    };
}

const KIND: Template = template!("kind.rs.tmpl");
const CONTROLLER: Template = template!("controller.rs.tmpl");
const TEST: Template = template!("test.rs.tmpl");
const SAMPLE: Template = template!("sample.yaml.tmpl");
const CRD: Template = template!("crd.yaml.tmpl");
const RULES: Template = template!("rules.yaml.tmpl");

/// The marker of `src/api/mod.rs`.
pub const API_MARKER: &str = "// +kcr:scaffold:api";
/// The marker of `src/controller/mod.rs`.
pub const CONTROLLER_MARKER: &str = "// +kcr:scaffold:controller";
/// The marker of `add_to_manager` in `src/lib.rs`.
pub const CONTROLLERS_MARKER: &str = "// +kcr:scaffold:controllers";
/// The marker of `crds` in `src/lib.rs`.
pub const CRDS_MARKER: &str = "// +kcr:scaffold:crds";
/// The marker of `config/crd/kustomization.yaml`.
pub const CRD_KUSTOMIZE_MARKER: &str = "# +kcr:scaffold:crdkustomizeresource";
/// The marker of `config/rbac/role.yaml` (optional: a role written by `cargo kcr rbac` has
/// none, and is left alone).
pub const RBAC_MARKER: &str = "# +kcr:scaffold:rbac";

/// The project's package name and API domain, from its `Cargo.toml` (`[package] name` and
/// `[package.metadata.kcr] domain`, which `cargo kcr init` writes).
fn project(dir: &Path) -> Result<(String, String), ScaffoldError> {
    let manifest = dir.join("Cargo.toml");
    let not_a_project = |reason: &str| ScaffoldError::NotAProject {
        dir: dir.to_path_buf(),
        reason: reason.to_string(),
    };
    if !manifest.is_file() {
        return Err(not_a_project("no Cargo.toml"));
    }
    let text = read(&manifest)?;
    let mut section = String::new();
    let (mut name, mut domain) = (None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match (section.as_str(), key.trim()) {
            ("[package]", "name") => name = Some(value),
            ("[package.metadata.kcr]", "domain") => domain = Some(value),
            _ => {}
        }
    }
    let name = name.ok_or_else(|| not_a_project("no [package] name in Cargo.toml"))?;
    let domain =
        domain.ok_or_else(|| not_a_project("no [package.metadata.kcr] domain in Cargo.toml"))?;
    validate_project_name(&name)?;
    Ok((name, domain))
}

/// A file the kind changes: its path and its new text.
struct Edit {
    path: PathBuf,
    text: String,
}

/// Inserts `blocks` before `marker` in the project's file `rel`.
fn edit(
    dir: &Path,
    rel: &str,
    marker: &'static str,
    blocks: &[String],
) -> Result<Edit, ScaffoldError> {
    let path = dir.join(rel);
    if !path.is_file() {
        return Err(ScaffoldError::NotAProject {
            dir: dir.to_path_buf(),
            reason: format!("no {rel}"),
        });
    }
    let mut text = insert_before_marker(&path, &read(&path)?, marker, blocks)?;
    if rel.ends_with("mod.rs") {
        text = sort_run_before_marker(&text, marker, "pub mod ");
    }
    Ok(Edit { path, text })
}

/// Adds the kind: checks the input and the project, refuses (writing nothing) when one of the
/// kind's files exists unless `force`, then writes the new files and registers the kind above
/// the markers. Returns the paths written.
pub fn create_api(options: &ApiOptions) -> Result<Vec<PathBuf>, ScaffoldError> {
    validate_kind(&options.kind)?;
    validate_version(&options.version)?;
    let (name, domain) = project(&options.dir)?;
    let group = full_group(&options.group, &domain)?;
    let krate = name.replace('-', "_");
    let kind = options.kind.as_str();
    let module = snake_case(kind);
    let kind_dash = module.replace('_', "-");
    let kind_lower = kind.to_ascii_lowercase();
    let plural = plural(kind);
    let group_short = group.split('.').next().unwrap_or(&group).to_string();
    let sample_file = format!("{group_short}_{}_{module}.yaml", options.version);
    let crd_file = format!("{group}_{plural}.yaml");
    let (scope, crd_scope, api_scope) = if options.namespaced {
        ("namespaced,", "Namespaced", "default_namespaced")
    } else {
        ("// cluster-scoped: no `namespaced`", "Cluster", "all")
    };
    let vars: [(&str, &str); 14] = [
        ("crate", &krate),
        ("group", &group),
        ("version", &options.version),
        ("kind", kind),
        ("kind_module", &module),
        ("kind_dash", &kind_dash),
        ("kind_lower", &kind_lower),
        ("plural", &plural),
        ("scope", scope),
        ("crd_scope", crd_scope),
        ("api_scope", api_scope),
        ("sample_file", &sample_file),
        ("name", &name),
        ("domain", &domain),
    ];
    let dir = &options.dir;
    let files = [
        (format!("src/api/{module}.rs"), KIND),
        (format!("src/controller/{module}.rs"), CONTROLLER),
        (format!("tests/{module}.rs"), TEST),
        (format!("config/crd/bases/{crd_file}"), CRD),
        (format!("config/samples/{sample_file}"), SAMPLE),
    ]
    .into_iter()
    .map(|(path, template)| {
        Ok(NewFile {
            path: dir.join(path),
            content: render(template, &vars)?,
        })
    })
    .collect::<Result<Vec<_>, ScaffoldError>>()?;
    refuse_existing(&files, options.force)?;

    let mut edits = vec![
        edit(
            dir,
            "src/api/mod.rs",
            API_MARKER,
            &[format!("pub mod {module};")],
        )?,
        edit(
            dir,
            "src/controller/mod.rs",
            CONTROLLER_MARKER,
            &[format!("pub mod {module};")],
        )?,
        edit(
            dir,
            "config/crd/kustomization.yaml",
            CRD_KUSTOMIZE_MARKER,
            &[format!("- bases/{crd_file}")],
        )?,
    ];
    let lib = edit(
        dir,
        "src/lib.rs",
        CONTROLLERS_MARKER,
        &[format!("controller::{module}::add_to_manager(mgr)?;")],
    )?;
    let lib_text = insert_before_marker(
        &lib.path,
        &lib.text,
        CRDS_MARKER,
        &[format!(
            "<api::{module}::{kind} as kube::CustomResourceExt>::crd(),"
        )],
    )?;
    edits.push(Edit {
        path: lib.path,
        text: lib_text,
    });
    let role = dir.join("config/rbac/role.yaml");
    if role.is_file() {
        let text = read(&role)?;
        if text.contains(RBAC_MARKER) {
            let rules = render(RULES, &vars)?;
            let text = insert_before_marker(&role, &text, RBAC_MARKER, &[rules])?;
            edits.push(Edit { path: role, text });
        }
    }

    for file in &files {
        write(&file.path, &file.content)?;
    }
    for e in &edits {
        write(&e.path, &e.text)?;
    }
    let mut written: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
    written.extend(edits.into_iter().map(|e| e.path));
    Ok(written)
}
