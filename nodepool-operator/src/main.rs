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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", nodepool_operator::crd::crd_yaml()?);
        }
    }
    Ok(())
}
