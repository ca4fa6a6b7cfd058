//! `--check`: the permissions a checked-in role grants against those the record needs
//! ([`compare`]), and the report of every difference ([`CheckReport`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::permission::Permission;

/// How a role differs from the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Problem {
    /// A test used the permission; the role lacks it.
    Missing,
    /// The role grants the permission; no test used it (a wildcard always is: it grants
    /// more than the record shows).
    Unused,
}

/// One difference between a role file and the record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The role file.
    pub file: PathBuf,
    /// Missing or unused.
    pub problem: Problem,
    /// The permission.
    pub permission: Permission,
}

/// The differences between `granted`, what the role file `file` grants, and `needed`, what
/// the record needs: the needed permissions no grant covers ([`Problem::Missing`]), and the
/// grants that are not needed as they are ([`Problem::Unused`]).
pub fn compare(
    file: &Path,
    granted: &BTreeSet<Permission>,
    needed: &BTreeSet<Permission>,
) -> Vec<Finding> {
    let finding = |problem, permission: &Permission| Finding {
        file: file.to_owned(),
        problem,
        permission: permission.clone(),
    };
    let missing = needed
        .iter()
        .filter(|p| !granted.iter().any(|g| g.grants(p)))
        .map(|p| finding(Problem::Missing, p));
    let unused = granted
        .iter()
        .filter(|g| g.is_wildcard() || !needed.contains(g))
        .map(|g| finding(Problem::Unused, g));
    missing.chain(unused).collect()
}

/// The outcome of `cargo kcr rbac --check`: every difference, by file and problem.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// The differences, sorted by file, problem and permission.
    pub findings: Vec<Finding>,
    /// The role files compared.
    pub files: Vec<PathBuf>,
}

impl CheckReport {
    /// Whether the roles match the record exactly.
    pub fn is_ok(&self) -> bool {
        self.findings.is_empty()
    }

    /// The findings of one problem.
    pub fn of(&self, problem: Problem) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.problem == problem)
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        if self.is_ok() {
            return writeln!(
                f,
                "RBAC matches the record: {} grant exactly what the tests used",
                files.join(" and ")
            );
        }
        let mut last: Option<(&Path, Problem)> = None;
        for finding in &self.findings {
            let here = (finding.file.as_path(), finding.problem);
            if last != Some(here) {
                let what = match finding.problem {
                    Problem::Missing => "missing verbs (used by a test, absent from the role)",
                    Problem::Unused => "unused verbs (in the role, never used by a test)",
                };
                writeln!(f, "{}: {what}:", finding.file.display())?;
                last = Some(here);
            }
            let note = if finding.permission.is_wildcard() {
                " (a wildcard: list what the record shows instead)"
            } else {
                ""
            };
            writeln!(f, "  {}{note}", finding.permission)?;
        }
        writeln!(
            f,
            "{} missing, {} unused: regenerate with `cargo kcr rbac` (without --check), or change the tests",
            self.of(Problem::Missing).count(),
            self.of(Problem::Unused).count()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[(&str, &str, &str)]) -> BTreeSet<Permission> {
        items
            .iter()
            .map(|(v, g, r)| Permission::new(v, g, r))
            .collect()
    }

    #[test]
    fn missing_and_unused_verbs_are_found_and_shown() {
        let granted = set(&[
            ("get", "", "pods"),
            ("delete", "", "pods"),
            ("*", "apps", "deployments"),
        ]);
        let needed = set(&[
            ("get", "", "pods"),
            ("list", "", "pods"),
            ("get", "apps", "deployments"),
        ]);
        let findings = compare(Path::new("role.yaml"), &granted, &needed);
        let report = CheckReport {
            findings,
            files: vec!["role.yaml".into()],
        };
        assert!(!report.is_ok());
        let shown = report.to_string();
        assert_eq!(
            shown,
            "role.yaml: missing verbs (used by a test, absent from the role):\n  list core/pods\n\
             role.yaml: unused verbs (in the role, never used by a test):\n  delete core/pods\n  \
             * apps/deployments (a wildcard: list what the record shows instead)\n\
             1 missing, 2 unused: regenerate with `cargo kcr rbac` (without --check), or change the tests\n"
        );
    }

    #[test]
    fn equal_sets_have_no_findings() {
        let both = set(&[("get", "", "pods")]);
        assert!(compare(Path::new("r"), &both, &both).is_empty());
    }
}
