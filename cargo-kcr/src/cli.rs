//! The command line: `cargo kcr rbac [--check] [options]` ([`parse`], [`run`]).
//!
//! Cargo runs `cargo kcr ...` as `cargo-kcr kcr ...`; both `cargo-kcr kcr rbac` and
//! `cargo-kcr rbac` are read the same.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::check::CheckReport;
use crate::error::RbacError;
use crate::plan::GroupResource;
use crate::rbac::{DEFAULT_RECORD, RbacOptions, check, generate, write};

/// The environment variable kcr-testkit records into; the default record.
pub const RECORD_ENV: &str = "KCR_RBAC_RECORD";

/// `cargo kcr`: tools for kcr operators.
#[derive(Debug, Parser)]
#[command(name = "cargo kcr", bin_name = "cargo kcr", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the minimal ClusterRole and Role from the requests the tests made (recorded by
    /// kcr-testkit with KCR_RBAC_RECORD=DIR), or check the checked-in ones (--check).
    Rbac(RbacArgs),
    /// Make a new operator crate: Cargo.toml, main.rs with the manager, a test harness,
    /// config/ (CRDs, RBAC, Deployment, kustomizations), a Dockerfile and a README.
    Init(crate::scaffold::InitArgs),
    /// Add to the project made by `cargo kcr init`.
    Create {
        /// What to add.
        #[command(subcommand)]
        command: crate::scaffold::CreateCommand,
    },
}

/// The options of `cargo kcr rbac`.
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Compare the role files with the record instead of writing them; fail listing missing
    /// verbs (used by a test, absent from a role) and unused verbs (in a role, never used).
    #[arg(long)]
    pub check: bool,
    /// The record: a directory of *.jsonl files or one file; repeatable [default:
    /// $KCR_RBAC_RECORD, else target/kcr-rbac].
    #[arg(long = "record", value_name = "PATH")]
    pub records: Vec<PathBuf>,
    /// The directory of the role files.
    #[arg(long, value_name = "DIR", default_value = "config/rbac")]
    pub dir: PathBuf,
    /// The ClusterRole's file in --dir.
    #[arg(long, value_name = "FILE", default_value = "role.yaml")]
    pub cluster_role_file: String,
    /// The ClusterRole's name.
    #[arg(long, value_name = "NAME", default_value = "manager-role")]
    pub cluster_role_name: String,
    /// The namespaced Role's file in --dir.
    #[arg(long, value_name = "FILE", default_value = "leader_election_role.yaml")]
    pub role_file: String,
    /// The namespaced Role's name.
    #[arg(long, value_name = "NAME", default_value = "leader-election-role")]
    pub role_name: String,
    /// The namespaced Role's namespace (the operator's own).
    #[arg(long, value_name = "NAMESPACE", default_value = "system")]
    pub role_namespace: String,
    /// The resources whose accesses go to the namespaced Role, comma-separated
    /// GROUP/RESOURCE (core/RESOURCE for the core group); an empty value puts
    /// everything in the ClusterRole.
    #[arg(
        long,
        value_name = "RESOURCES",
        value_delimiter = ',',
        default_value = "coordination.k8s.io/leases"
    )]
    pub role_resources: Vec<String>,
    /// A role-like YAML file whose rules are added although no request shows them (e.g.
    /// `update` on `OWNER/finalizers`, which the API server checks for an owner reference
    /// that blocks the owner's deletion); a document of kind Role goes to the Role, any other
    /// to the ClusterRole. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub extra: Vec<PathBuf>,
    /// A checked-in role file bound to the operator that cargo kcr rbac does not write (e.g.
    /// metrics_auth_role.yaml): what it grants is left out of the written roles, and --check
    /// reports its verbs no test used. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub keep: Vec<PathBuf>,
}

impl RbacArgs {
    /// The options these arguments say; `record_env` is `KCR_RBAC_RECORD`'s value.
    pub fn options(&self, record_env: Option<OsString>) -> Result<RbacOptions, RbacError> {
        let records = if !self.records.is_empty() {
            self.records.clone()
        } else {
            match record_env.filter(|v| !v.is_empty()) {
                Some(dir) => vec![PathBuf::from(dir)],
                None => vec![PathBuf::from(DEFAULT_RECORD)],
            }
        };
        let role_resources = self
            .role_resources
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| r.parse::<GroupResource>())
            .collect::<Result<_, _>>()?;
        Ok(RbacOptions {
            records,
            dir: self.dir.clone(),
            cluster_role_file: self.cluster_role_file.clone(),
            cluster_role_name: self.cluster_role_name.clone(),
            role_file: self.role_file.clone(),
            role_name: self.role_name.clone(),
            role_namespace: self.role_namespace.clone(),
            role_resources,
            extra: self.extra.clone(),
            kept: self.keep.clone(),
        })
    }
}

/// Parses the command line (`args` with the program's name first), dropping the `kcr` cargo
/// puts before the subcommand.
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == "kcr") {
        args.remove(1);
    }
    Cli::try_parse_from(args)
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The role files written.
    Written(Vec<PathBuf>),
    /// The check's report.
    Checked(CheckReport),
}

impl Outcome {
    /// Whether the run succeeded (a check with findings did not).
    pub fn is_ok(&self) -> bool {
        match self {
            Outcome::Written(_) => true,
            Outcome::Checked(report) => report.is_ok(),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Written(files) => {
                for file in files {
                    writeln!(f, "wrote {}", file.display())?;
                }
                Ok(())
            }
            Outcome::Checked(report) => write!(f, "{report}"),
        }
    }
}

/// Runs `cli`; `record_env` is `KCR_RBAC_RECORD`'s value.
pub fn run(cli: &Cli, record_env: Option<OsString>) -> Result<Outcome, RbacError> {
    match &cli.command {
        Command::Rbac(args) => {
            let options = args.options(record_env)?;
            if args.check {
                return check(&options).map(Outcome::Checked);
            }
            let files = generate(&options)?;
            write(&files)?;
            Ok(Outcome::Written(
                files.into_iter().map(|f| f.path).collect(),
            ))
        }
        Command::Init(args) => Ok(Outcome::Written(crate::scaffold::init(&args.options())?)),
        Command::Create {
            command: crate::scaffold::CreateCommand::Api(args),
        } => Ok(Outcome::Written(crate::scaffold::create_api(
            &args.options(),
        )?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(
        args: &[&str],
        env: Option<&str>,
    ) -> Result<RbacOptions, Box<dyn std::error::Error>> {
        let cli = parse(args)?;
        let Command::Rbac(rbac) = &cli.command else {
            return Err("not rbac".into());
        };
        Ok(rbac.options(env.map(OsString::from))?)
    }

    #[test]
    fn as_cargo_runs_it_and_directly_with_the_defaults() -> Result<(), Box<dyn std::error::Error>> {
        let defaults = RbacOptions::default();
        assert_eq!(options(&["cargo-kcr", "kcr", "rbac"], None)?, defaults);
        assert_eq!(options(&["cargo-kcr", "rbac"], None)?, defaults);
        let from_env = options(&["cargo-kcr", "rbac"], Some("/tmp/rec"))?;
        assert_eq!(from_env.records, [PathBuf::from("/tmp/rec")]);
        let given = options(
            &["cargo-kcr", "rbac", "--record", "a", "--record", "b"],
            Some("/x"),
        )?;
        assert_eq!(given.records, [PathBuf::from("a"), PathBuf::from("b")]);
        Ok(())
    }

    #[test]
    fn role_resources_are_a_list_and_may_be_empty() -> Result<(), Box<dyn std::error::Error>> {
        let two = options(
            &[
                "cargo-kcr",
                "rbac",
                "--role-resources",
                "core/configmaps,coordination.k8s.io/leases",
            ],
            None,
        )?;
        assert_eq!(two.role_resources.len(), 2);
        let none = options(&["cargo-kcr", "rbac", "--role-resources", ""], None)?;
        assert!(none.role_resources.is_empty());
        let bad = options(&["cargo-kcr", "rbac", "--role-resources", "a/b/c"], None);
        assert!(bad.is_err_and(|e| e.to_string().contains("\"a/b/c\" is not a resource")));
        Ok(())
    }

    #[test]
    fn unknown_subcommands_and_flags_are_usage_errors() {
        assert!(parse(["cargo-kcr", "kcr", "scaffold"]).is_err());
        assert!(parse(["cargo-kcr", "rbac", "--nope"]).is_err());
    }
}
