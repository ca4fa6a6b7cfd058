//! How long a test server takes to start and answer its first request, per backend.
//!
//! ```text
//! cargo run --release -p kcr-envtest --example startup [-- RUNS]
//! ```
//!
//! Prints one line per backend:
//! `envtest-startup backend=<in-process|real> runs=N median_ms=M`. The real backend needs the
//! control plane built by `tools/control-plane/build.sh` (or `KUBEBUILDER_ASSETS`); without it
//! that line says why instead.

use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use kcr_envtest::{Backend, TestApiServer};
use kube::Api;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5)
        .max(1);
    for backend in [Backend::InProcess, Backend::Real] {
        let mut times = Vec::with_capacity(runs);
        let mut failure = None;
        for _ in 0..runs {
            let started = Instant::now();
            let server = match TestApiServer::builder().backend(backend).start().await {
                Ok(s) => s,
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            };
            // Started means serving: one request through the client every test uses.
            Api::<Namespace>::all(server.client())
                .get("default")
                .await?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
            drop(server);
        }
        match failure {
            Some(why) => println!("envtest-startup backend={backend} unavailable: {why}"),
            None => {
                times.sort_by(f64::total_cmp);
                let median = times[times.len() / 2];
                println!(
                    "envtest-startup backend={backend} runs={runs} median_ms={median:.0} min_ms={:.0} max_ms={:.0}",
                    times[0],
                    times[times.len() - 1]
                );
            }
        }
    }
    Ok(())
}
