//! `cronjob-operator`: runs the CronJob controller against the cluster of the kubeconfig (or
//! the in-cluster configuration), or prints the CRD.
//!
//! ```text
//! cronjob-operator crd                      # the CustomResourceDefinition, as YAML
//! cronjob-operator run [--namespace NS]     # the controller, with leader election
//!     [--metrics-bind-address :8080] [--health-probe-bind-address :8081]
//! ```
//!
//! `run` elects a leader on the Lease `cronjob-operator` (in `$POD_NAMESPACE`, else the
//! kubeconfig's namespace), so several replicas can run; only the leader reconciles. SIGTERM
//! or Ctrl-C shut it down gracefully.

use std::io::Write as _;

use cronjob_operator::CronJob;
use kcr_controller::{LeaderElectionConfig, Manager, ManagerOptions};
use kube::CustomResourceExt;

const USAGE: &str = "usage: cronjob-operator crd
       cronjob-operator run [--namespace NS] [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR]";

/// The options of `run`.
struct RunArgs {
    namespace: Option<String>,
    metrics: String,
    probes: String,
}

impl RunArgs {
    /// The options after `run`, or what is wrong with them.
    fn parse(mut args: impl Iterator<Item = String>) -> Result<RunArgs, String> {
        let mut run = RunArgs {
            namespace: None,
            metrics: ":8080".into(),
            probes: ":8081".into(),
        };
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--namespace" => run.namespace = Some(value()?),
                "--metrics-bind-address" => run.metrics = value()?,
                "--health-probe-bind-address" => run.probes = value()?,
                _ => return Err(format!("unknown option {flag:?}")),
            }
        }
        Ok(run)
    }
}

/// Prints `problem` and the usage, and exits with status 2.
fn usage(problem: &str) -> ! {
    eprintln!("{problem}\n{USAGE}");
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("crd") => {
            // An error, not a panic, when stdout is closed early (`crd | head`).
            let yaml = serde_saphyr::to_string(&CronJob::crd())?;
            std::io::stdout().write_all(yaml.as_bytes())?;
            Ok(())
        }
        Some("run") => run(RunArgs::parse(args).unwrap_or_else(|e| usage(&e))).await,
        Some(other) => usage(&format!("unknown command {other:?}")),
        None => usage("no command"),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut leader_election = LeaderElectionConfig::new("cronjob-operator");
    if let Ok(namespace) = std::env::var("POD_NAMESPACE") {
        leader_election = leader_election.namespace(namespace);
    }
    let options = ManagerOptions::default()
        .leader_election(leader_election)
        .event_reporter("cronjob-operator")
        .metrics_bind_address(&args.metrics)?
        .health_probe_bind_address(&args.probes)?;
    let client = kube::Client::try_default().await?;
    let mgr = Manager::new(client, options).await?;
    cronjob_operator::add_to_manager(&mgr, args.namespace.as_deref())?;
    mgr.run_until_signal().await?;
    Ok(())
}
