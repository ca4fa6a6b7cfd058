//! `kcr-envtest` binary: runs the in-process API server standalone so that kubectl and other
//! clients can talk to it.
//!
//! ```text
//! cargo run -p kcr-envtest -- --port 6443 --kubeconfig /tmp/envtest.kubeconfig --nodes 3
//! KUBECONFIG=/tmp/envtest.kubeconfig kubectl get nodes
//! ```

use std::path::PathBuf;

use clap::Parser;
use kcr_envtest::TestApiServer;

/// Command line of the standalone server.
#[derive(Debug, Parser)]
#[command(
    name = "kcr-envtest",
    about = "In-process Kubernetes API server for tests (plain HTTP on 127.0.0.1)"
)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free port).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Write a kubeconfig for this server to this file.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Number of simulated nodes to create at start.
    #[arg(long, default_value_t = 0)]
    nodes: usize,
    /// Events kept for watch resumption.
    #[arg(long, default_value_t = 100_000)]
    history_window: usize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let server = TestApiServer::builder()
        .port(args.port)
        .nodes(args.nodes)
        .history_window(args.history_window)
        .start()
        .await?;
    if let Some(path) = &args.kubeconfig {
        server.write_kubeconfig(path)?;
        println!("kubeconfig written to {}", path.display());
    }
    println!("kcr-envtest serving on {}", server.url());
    tokio::signal::ctrl_c().await?;
    println!("shutting down");
    Ok(())
}
