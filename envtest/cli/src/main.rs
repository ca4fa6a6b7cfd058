//! `kcr-envtest` binary: runs a test API server standalone so that kubectl and other clients
//! can talk to it: the in-process server, with `KCR_ENVTEST_BACKEND=real` a real control
//! plane behind its fault proxy (served on `--port` either way, plain HTTP), or with
//! `KCR_ENVTEST_BACKEND=existing` the cluster of `KUBECONFIG` behind that proxy (HTTPS and a
//! token, which the written kubeconfig carries), in a fresh namespace deleted on exit.
//!
//! ```text
//! cargo run -p kcr-envtest-cli -- --port 6443 --kubeconfig /tmp/envtest.kubeconfig --nodes 3
//! KUBECONFIG=/tmp/envtest.kubeconfig kubectl get nodes
//! ```

use std::io::Write as _;
use std::path::PathBuf;

use clap::Parser;
use kcr_envtest::TestApiServer;

/// Command line of the standalone server.
#[derive(Debug, Parser)]
#[command(
    name = "kcr-envtest",
    about = "Kubernetes API server for tests (plain HTTP on 127.0.0.1); KCR_ENVTEST_BACKEND=real runs kube-apiserver behind a proxy, KCR_ENVTEST_BACKEND=existing proxies the cluster of KUBECONFIG in a namespace of its own"
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
    /// Events kept for watch resumption (in-process backend only; default 100000).
    #[arg(long)]
    history_window: Option<usize>,
    /// Real backend: write what other processes need to use this control plane to this file
    /// (test processes given it in KCR_ENVTEST_SHARED_CONTROL_PLANE share it).
    #[arg(long)]
    attachment: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // Display, not Debug: the errors say what to do (for example which command builds
            // the control plane).
            eprintln!("kcr-envtest: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let mut builder = TestApiServer::builder().port(args.port).nodes(args.nodes);
    if let Some(events) = args.history_window {
        builder = builder.history_window(events);
    }
    let server = builder.start().await?;
    if let Some(path) = &args.kubeconfig {
        server.write_kubeconfig(path)?;
        println!("kubeconfig written to {}", path.display());
    }
    if let Some(path) = &args.attachment {
        server.write_attachment(path)?;
        println!("attachment written to {}", path.display());
    }
    println!("kcr-envtest serving on {}", server.url());
    // SIGINT or SIGTERM: drop the server, which on the real backend stops its processes.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result?,
        _ = terminate.recv() => {}
    }
    // stdout may be gone (a parent that stopped reading): say it where possible, never panic.
    let _ = writeln!(std::io::stdout(), "shutting down");
    drop(server);
    Ok(())
}
