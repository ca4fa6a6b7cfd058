//! `cronjob-operator`: runs the CronJob controller against the cluster of the kubeconfig (or
//! the in-cluster configuration), or prints the CRD.
//!
//! ```text
//! cronjob-operator crd                      # the CustomResourceDefinition, as YAML
//! cronjob-operator run [--namespace NS]     # the controller and the webhooks, with leader election
//!     [--metrics-bind-address :8080] [--metrics-cert-dir DIR] [--health-probe-bind-address :8081]
//!     [--webhook-bind-address :9443] [--webhook-cert-dir DIR]
//! ```
//!
//! `run` elects a leader on the Lease `cronjob-operator` (in `$POD_NAMESPACE`, else the
//! kubeconfig's namespace), so several replicas can run; only the leader reconciles. SIGTERM
//! or Ctrl-C shut it down gracefully.
//!
//! Every replica serves the admission webhooks (HTTPS on `--webhook-bind-address`, with the
//! `tls.crt` and `tls.key` of `--webhook-cert-dir`, where cert-manager's Secret is mounted;
//! reloaded when they change), as kubebuilder's `main.go` does; `ENABLE_WEBHOOKS=false` turns
//! them off (a run from a laptop, without a certificate). With `--metrics-cert-dir`, `/metrics`
//! is served over HTTPS and only to callers the API server authorizes for `get /metrics`.

use std::io::Write as _;

use std::path::PathBuf;

use kcr_controller::secure_metrics::SecureMetrics;
use kcr_controller::{BindAddress, LeaderElectionConfig, Manager, ManagerOptions};
use kcr_webhook::{ManagerWebhookExt, ServerOptions, WebhookServer};

const USAGE: &str = "usage: cronjob-operator crd
       cronjob-operator run [--namespace NS] [--metrics-bind-address ADDR] [--metrics-cert-dir DIR]
                            [--health-probe-bind-address ADDR] [--webhook-bind-address ADDR] [--webhook-cert-dir DIR]";

/// The options of `run`.
struct RunArgs {
    namespace: Option<String>,
    metrics: String,
    metrics_cert_dir: Option<PathBuf>,
    probes: String,
    webhook: String,
    webhook_cert_dir: PathBuf,
}

impl RunArgs {
    /// The options after `run` (`--flag value` or `--flag=value`), or what is wrong with them.
    fn parse(mut args: impl Iterator<Item = String>) -> Result<RunArgs, String> {
        let mut run = RunArgs {
            namespace: None,
            metrics: ":8080".into(),
            metrics_cert_dir: None,
            probes: ":8081".into(),
            webhook: format!(":{}", cronjob_operator::webhook::DEFAULT_PORT),
            // controller-runtime's default, where cert-manager's Secret is usually mounted.
            webhook_cert_dir: std::env::temp_dir().join("k8s-webhook-server/serving-certs"),
        };
        while let Some(arg) = args.next() {
            let (flag, mut inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (arg.clone(), None),
            };
            let mut value = || {
                (inline.take())
                    .or_else(|| args.next())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--namespace" => run.namespace = Some(value()?),
                "--metrics-bind-address" => run.metrics = value()?,
                "--metrics-cert-dir" => run.metrics_cert_dir = Some(value()?.into()),
                "--health-probe-bind-address" => run.probes = value()?,
                "--webhook-bind-address" => run.webhook = value()?,
                "--webhook-cert-dir" => run.webhook_cert_dir = value()?.into(),
                _ => return Err(format!("unknown option {arg:?}")),
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
            let yaml = cronjob_operator::manifests::crd_yaml()?;
            std::io::stdout().write_all(yaml.as_bytes())?;
            Ok(())
        }
        Some("run") => run(RunArgs::parse(args).unwrap_or_else(|e| usage(&e))).await,
        Some(other) => usage(&format!("unknown command {other:?}")),
        None => usage("no command"),
    }
}

// ANCHOR: run
async fn run(args: RunArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut leader_election =
        LeaderElectionConfig::new(cronjob_operator::manifests::LEADER_ELECTION_ID);
    if let Ok(namespace) = std::env::var("POD_NAMESPACE") {
        leader_election = leader_election.namespace(namespace);
    }
    let mut options = ManagerOptions::default()
        .leader_election(leader_election)
        .event_reporter("cronjob-operator")
        .metrics_bind_address(&args.metrics)?
        .health_probe_bind_address(&args.probes)?;
    if let Some(dir) = &args.metrics_cert_dir {
        // HTTPS, and a TokenReview and SubjectAccessReview of each scraper's token.
        options = options.secure_metrics(SecureMetrics::from_dir(dir));
    }
    let client = kube::Client::try_default().await?;
    let mgr = Manager::new(client, options).await?;
    cronjob_operator::add_to_manager(&mgr, args.namespace.as_deref())?;

    // The webhooks, on every replica (the API server calls whichever the Service picks).
    if std::env::var("ENABLE_WEBHOOKS").as_deref() != Ok("false") {
        let BindAddress::Addr(addr) = args.webhook.parse()? else {
            anyhow::bail!(
                "--webhook-bind-address: set ENABLE_WEBHOOKS=false to disable the webhooks"
            );
        };
        let options = ServerOptions::default()
            .bind_address(addr)
            .cert_dir(&args.webhook_cert_dir);
        let server = WebhookServer::bind(options).await?;
        // A missing or broken certificate fails here; later rotations are picked up.
        server.cert_watcher().load()?;
        mgr.add_webhook_server(&server)?; // `/readyz` waits for a valid certificate
        cronjob_operator::webhook::register(&server)?;
    }
    mgr.run_until_signal().await?;
    Ok(())
}
// ANCHOR_END: run
