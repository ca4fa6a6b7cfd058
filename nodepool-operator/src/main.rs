//! `nodepool-operator`: the NodePool operator's command line.
//!
//! - `run [flags]`: production mode (kubeconfig or in-cluster configuration);
//! - `crd`: prints the CustomResourceDefinition;
//! - `manifests --dir DIR`: writes the generated deployment files;
//! - `demo [--nodes N] [--keep-running] [--kubeconfig-out FILE]`: the operator on an embedded API
//!   server (only with the cargo feature `demo`, on by default).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use nodepool_operator::operator::{Operator, RunOptions};

/// The NodePool operator.
#[derive(Debug, Parser)]
#[command(name = "nodepool-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator against a cluster (kubeconfig or in-cluster configuration).
    Run(RunArgs),
    /// Print the NodePool CustomResourceDefinition as YAML.
    Crd,
    /// Write the generated deployment files (CRD, RBAC, webhook configurations) under a
    /// directory (normally nodepool-operator/config).
    Manifests {
        /// The config directory.
        #[arg(long, default_value = "config")]
        dir: PathBuf,
    },
    /// Run the operator on an embedded API server with simulated nodes and show it working.
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Address of the Prometheus /metrics endpoint ("0" disables).
    #[arg(long, default_value = ":8080")]
    metrics_bind_address: String,
    /// Address of the /healthz and /readyz endpoints ("0" disables).
    #[arg(long, default_value = ":8081")]
    health_probe_bind_address: String,
    /// Serve /metrics over HTTPS to callers whose bearer token passes a TokenReview and a
    /// SubjectAccessReview for get /metrics (config/rbac/metrics_*_role.yaml).
    #[arg(long)]
    metrics_secure: bool,
    /// Directory with the metrics server's tls.crt and tls.key (with --metrics-secure; reloaded
    /// when they change).
    #[arg(long, default_value_os_t = std::env::temp_dir().join("k8s-metrics-server/metrics-certs"))]
    metrics_cert_dir: PathBuf,
    /// Elect a leader (Lease 97acaccf.lailin.xyz) so that only one replica reconciles.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the leader election Lease (default: $POD_NAMESPACE, else the kubeconfig's).
    #[arg(long)]
    leader_election_namespace: Option<String>,
    /// Port of the HTTPS admission webhook server.
    #[arg(long, default_value_t = nodepool_operator::webhook::DEFAULT_PORT)]
    webhook_port: u16,
    /// Directory with the webhook's tls.crt and tls.key (reloaded when they change).
    #[arg(long, default_value_os_t = std::env::temp_dir().join("k8s-webhook-server/serving-certs"))]
    cert_dir: PathBuf,
    /// Number of pools reconciled concurrently.
    #[arg(long, default_value_t = 1)]
    max_concurrent_reconciles: usize,
    /// Bound on graceful shutdown, in seconds.
    #[arg(long, default_value_t = 30)]
    graceful_shutdown_timeout_secs: u64,
}

#[cfg(feature = "demo")]
#[derive(Debug, Args)]
struct DemoArgs {
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 6)]
    nodes: usize,
    /// Stay up after converging and write a kubeconfig for kubectl.
    #[arg(long)]
    keep_running: bool,
    /// Where to write the kubeconfig (with --keep-running).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
}

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    init_tracing("info");
    let options = RunOptions {
        metrics_bind_address: args.metrics_bind_address,
        health_probe_bind_address: args.health_probe_bind_address,
        metrics_cert_dir: args.metrics_secure.then_some(args.metrics_cert_dir),
        leader_elect: args.leader_elect,
        leader_election_namespace: args.leader_election_namespace,
        webhook_port: args.webhook_port,
        cert_dir: args.cert_dir,
        max_concurrent_reconciles: args.max_concurrent_reconciles,
        graceful_shutdown_timeout: Duration::from_secs(args.graceful_shutdown_timeout_secs),
        ..RunOptions::default()
    };
    let config = kube::Config::infer().await?;
    // kcr's connection stack: no request or watch waits on a dead connection.
    let operator = Operator::connect(config, &options).await?;
    tracing::info!(webhook = ?operator.webhook_addr(), "starting the NodePool operator");
    operator
        .run(kcr_controller::signals::shutdown_on_signals())
        .await?;
    Ok(())
}

#[cfg(feature = "demo")]
async fn demo(args: DemoArgs) -> anyhow::Result<()> {
    init_tracing("warn");
    let options = nodepool_operator::demo::DemoOptions {
        nodes: args.nodes,
        keep_running: args.keep_running,
        kubeconfig_out: args.kubeconfig_out,
        ..Default::default()
    };
    let stop = if options.keep_running {
        kcr_controller::signals::shutdown_on_signals()
    } else {
        tokio_util::sync::CancellationToken::new()
    };
    nodepool_operator::demo::run_demo(&options, stop).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(args).await,
        Command::Crd => {
            print!("{}", nodepool_operator::crd::crd_yaml()?);
            Ok(())
        }
        Command::Manifests { dir } => {
            nodepool_operator::deploy::write_manifests(&dir)?;
            Ok(())
        }
        #[cfg(feature = "demo")]
        Command::Demo(args) => demo(args).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_args_parse() {
        // The args of config/manager/manager.yaml.
        let cli = Cli::try_parse_from([
            "nodepool-operator",
            "run",
            "--leader-elect",
            "--metrics-bind-address=:8080",
            "--health-probe-bind-address=:8081",
            "--webhook-port=9443",
            "--cert-dir=/tmp/k8s-webhook-server/serving-certs",
            "--max-concurrent-reconciles=2",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        assert!(args.leader_elect);
        assert_eq!(args.webhook_port, 9443);
        assert_eq!(args.max_concurrent_reconciles, 2);
        assert_eq!(
            args.cert_dir,
            PathBuf::from("/tmp/k8s-webhook-server/serving-certs")
        );
        assert!(!args.metrics_secure, "plain metrics unless asked");
    }

    #[test]
    fn secure_metrics_flags_parse() {
        let cli = Cli::try_parse_from([
            "nodepool-operator",
            "run",
            "--metrics-bind-address=:8443",
            "--metrics-secure",
            "--metrics-cert-dir=/tmp/metrics-certs",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        assert!(args.metrics_secure);
        assert_eq!(args.metrics_cert_dir, PathBuf::from("/tmp/metrics-certs"));
    }

    #[cfg(feature = "demo")]
    #[test]
    fn demo_defaults_and_flags() {
        let cli = Cli::try_parse_from(["nodepool-operator", "demo"]).unwrap();
        let Command::Demo(d) = cli.command else {
            panic!("not demo");
        };
        assert_eq!(d.nodes, 6);
        assert!(!d.keep_running);
        let cli = Cli::try_parse_from([
            "nodepool-operator",
            "demo",
            "--nodes",
            "3",
            "--keep-running",
            "--kubeconfig-out",
            "/tmp/x",
        ])
        .unwrap();
        let Command::Demo(d) = cli.command else {
            panic!("not demo");
        };
        assert_eq!((d.nodes, d.keep_running), (3, true));
        assert_eq!(d.kubeconfig_out, Some(PathBuf::from("/tmp/x")));
        assert!(Cli::try_parse_from(["nodepool-operator", "run", "--webhook-port", "x"]).is_err());
    }
}
