//! `nodepool-operator`: the NodePool operator's command line.

use clap::{Parser, Subcommand};

/// The NodePool operator.
#[derive(Debug, Parser)]
#[command(name = "nodepool-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the NodePool CustomResourceDefinition as YAML.
    Crd,
    /// Write the generated deployment files (CRD, RBAC, webhook configurations) under a
    /// directory (normally nodepool-operator/config).
    Manifests {
        /// The config directory.
        #[arg(long, default_value = "config")]
        dir: std::path::PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", nodepool_operator::crd::crd_yaml()?);
        }
        Command::Manifests { dir } => {
            nodepool_operator::deploy::write_manifests(&dir)?;
        }
    }
    Ok(())
}
