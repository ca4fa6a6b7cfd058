//! Starts the real control plane for `bench/run.sh e2e` (kcr-envtest's `real` backend:
//! kube-apiserver, etcd and kube-controller-manager), installs the `Bench` CRD, writes a
//! kubeconfig straight to kube-apiserver (HTTPS, past kcr-envtest's fault proxy) to the path in
//! the first argument, prints `cluster ready`, and runs until SIGTERM or SIGINT.
//!
//! ```sh
//! cargo run -p kcr-bench --example cluster -- /tmp/bench.kubeconfig
//! ```

use kcr_bench::Bench;
use kcr_envtest::{Backend, TestApiServer};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: cluster <kubeconfig path>"))?;
    let server = TestApiServer::builder()
        .backend(Backend::Real)
        .port(0)
        .start()
        .await?;
    server.install_crd::<Bench>().await?;
    let kubeconfig = server.direct_kubeconfig()?;
    std::fs::write(&path, serde_json::to_string(&kubeconfig)?)?;
    println!(
        "cluster ready: kubeconfig {path}, api server {}",
        kubeconfig
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.server.clone())
            .unwrap_or_default()
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result?,
        _ = terminate.recv() => {}
    }
    drop(server);
    Ok(())
}
