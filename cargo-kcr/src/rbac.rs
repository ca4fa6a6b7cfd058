//! `cargo kcr rbac`: the roles from the record ([`generate`], [`write()`]), or the checked-in
//! roles against it ([`check`]), as [`RbacOptions`] say.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::check::{CheckReport, compare};
use crate::error::RbacError;
use crate::permission::Permission;
use crate::plan::{GroupResource, Split, split};
use crate::record::{RecordedAccess, read_record};
use crate::role::{RoleDocument, RoleKind, read_role_file, render, rules_of};

/// Where the record is when neither `--record` nor `KCR_RBAC_RECORD` says.
pub const DEFAULT_RECORD: &str = "target/kcr-rbac";

/// What `cargo kcr rbac` reads and writes. [`RbacOptions::default`] holds the command's
/// defaults (kubebuilder's file and role names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacOptions {
    /// The record: files, or directories of `*.jsonl` files.
    pub records: Vec<PathBuf>,
    /// The directory of the role files (`config/rbac`).
    pub dir: PathBuf,
    /// The ClusterRole's file in [`dir`](Self::dir) (`role.yaml`).
    pub cluster_role_file: String,
    /// The ClusterRole's name (`manager-role`).
    pub cluster_role_name: String,
    /// The namespaced Role's file in [`dir`](Self::dir) (`leader_election_role.yaml`).
    pub role_file: String,
    /// The namespaced Role's name (`leader-election-role`).
    pub role_name: String,
    /// The namespaced Role's namespace, the operator's own (`system`, kubebuilder's, which
    /// kustomize replaces).
    pub role_namespace: String,
    /// The resources whose accesses go to the namespaced Role
    /// (`coordination.k8s.io/leases`, leader election's).
    pub role_resources: Vec<GroupResource>,
    /// Role-like YAML files whose rules are added to the roles although no request shows
    /// them (a document of kind `Role` to the Role, any other to the ClusterRole).
    pub extra: Vec<PathBuf>,
    /// Checked-in role files bound to the operator that `cargo kcr rbac` does not write (e.g.
    /// kubebuilder's `metrics_auth_role.yaml`): what they grant is left out of the written
    /// roles, and the check reports their verbs no test used.
    pub kept: Vec<PathBuf>,
}

impl Default for RbacOptions {
    fn default() -> Self {
        RbacOptions {
            records: vec![PathBuf::from(DEFAULT_RECORD)],
            dir: PathBuf::from("config/rbac"),
            cluster_role_file: "role.yaml".to_owned(),
            cluster_role_name: "manager-role".to_owned(),
            role_file: "leader_election_role.yaml".to_owned(),
            role_name: "leader-election-role".to_owned(),
            role_namespace: "system".to_owned(),
            role_resources: vec![GroupResource {
                group: "coordination.k8s.io".to_owned(),
                resource: "leases".to_owned(),
            }],
            extra: Vec::new(),
            kept: Vec::new(),
        }
    }
}

impl RbacOptions {
    /// The ClusterRole's path.
    pub fn cluster_role_path(&self) -> PathBuf {
        self.dir.join(&self.cluster_role_file)
    }

    /// The namespaced Role's path.
    pub fn role_path(&self) -> PathBuf {
        self.dir.join(&self.role_file)
    }

    /// The permissions each role written by `cargo kcr rbac` needs: the record's, plus the
    /// extra files', less what the [kept](Self::kept) roles grant.
    pub fn needed(&self) -> Result<Split, RbacError> {
        Ok(self.needs()?.0)
    }

    /// [`needed`](Self::needed), and every permission needed before the kept roles' were
    /// left out.
    fn needs(&self) -> Result<(Split, BTreeSet<Permission>), RbacError> {
        let mut accesses: Vec<RecordedAccess> = Vec::new();
        for record in &self.records {
            accesses.extend(read_record(record)?);
        }
        let mut needed = split(&accesses, &self.role_resources)?;
        for extra in &self.extra {
            for RoleDocument { kind, permissions } in read_documents(extra)? {
                let into = if kind.as_deref() == Some(RoleKind::Role.as_str()) {
                    &mut needed.namespaced
                } else {
                    &mut needed.cluster
                };
                into.extend(permissions);
            }
        }
        let all: BTreeSet<Permission> = needed.cluster.union(&needed.namespaced).cloned().collect();
        let kept = self.kept_grants()?;
        let granted_elsewhere =
            |p: &Permission| kept.iter().any(|(_, g)| g.iter().any(|g| g.grants(p)));
        needed.cluster.retain(|p| !granted_elsewhere(p));
        needed.namespaced.retain(|p| !granted_elsewhere(p));
        Ok((needed, all))
    }

    /// What each kept role file grants.
    fn kept_grants(&self) -> Result<Vec<(PathBuf, BTreeSet<Permission>)>, RbacError> {
        self.kept
            .iter()
            .map(|path| {
                let granted = read_documents(path)?
                    .into_iter()
                    .flat_map(|d| d.permissions)
                    .collect();
                Ok((path.clone(), granted))
            })
            .collect()
    }
}

/// The documents of the role-like file `path`.
fn read_documents(path: &Path) -> Result<Vec<RoleDocument>, RbacError> {
    let text = std::fs::read_to_string(path).map_err(|source| RbacError::Read {
        path: path.to_owned(),
        source,
    })?;
    rules_of(&text, path)
}

/// One role file to write: its path and YAML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleFile {
    /// Where it goes.
    pub path: PathBuf,
    /// Its YAML.
    pub yaml: String,
}

/// The role files the record calls for: the ClusterRole if any access needs it, the
/// namespaced Role if any needs that.
pub fn generate(options: &RbacOptions) -> Result<Vec<RoleFile>, RbacError> {
    for (what, name) in [
        ("ClusterRole's name", &options.cluster_role_name),
        ("Role's name", &options.role_name),
        ("Role's namespace", &options.role_namespace),
    ] {
        if name.is_empty() {
            return Err(RbacError::EmptyName(what));
        }
    }
    let needed = options.needed()?;
    let mut out = Vec::new();
    if !needed.cluster.is_empty() {
        out.push(RoleFile {
            path: options.cluster_role_path(),
            yaml: render(
                RoleKind::ClusterRole,
                &options.cluster_role_name,
                None,
                &needed.cluster,
            ),
        });
    }
    if !needed.namespaced.is_empty() {
        out.push(RoleFile {
            path: options.role_path(),
            yaml: render(
                RoleKind::Role,
                &options.role_name,
                Some(&options.role_namespace),
                &needed.namespaced,
            ),
        });
    }
    Ok(out)
}

/// Writes `files`, creating their directories.
pub fn write(files: &[RoleFile]) -> Result<(), RbacError> {
    for file in files {
        let error = |path: &Path| {
            let path = path.to_owned();
            move |source| RbacError::Write { path, source }
        };
        if let Some(dir) = file.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(error(dir))?;
        }
        std::fs::write(&file.path, &file.yaml).map_err(error(&file.path))?;
    }
    Ok(())
}

/// The checked-in role files against the record: every missing and unused verb. A role file
/// that does not exist grants nothing (fine when the record needs nothing of it).
pub fn check(options: &RbacOptions) -> Result<CheckReport, RbacError> {
    let (needed, all) = options.needs()?;
    let mut report = CheckReport::default();
    for (path, kind, needed) in [
        (
            options.cluster_role_path(),
            RoleKind::ClusterRole,
            &needed.cluster,
        ),
        (options.role_path(), RoleKind::Role, &needed.namespaced),
    ] {
        let granted: Option<BTreeSet<Permission>> = read_role_file(&path, kind)?;
        if granted.is_none() && needed.is_empty() {
            continue;
        }
        report
            .findings
            .extend(compare(&path, &granted.unwrap_or_default(), needed));
        report.files.push(path);
    }
    for (path, granted) in options.kept_grants()? {
        // Nothing is missing from a kept role (what it lacks is the written roles' concern).
        let used: BTreeSet<Permission> = all
            .iter()
            .filter(|p| granted.iter().any(|g| g.grants(p)))
            .cloned()
            .collect();
        report.findings.extend(compare(&path, &granted, &used));
        report.files.push(path);
    }
    Ok(report)
}
