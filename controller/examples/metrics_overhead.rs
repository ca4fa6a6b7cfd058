//! What kcr's own metrics cost: a request through the `rest_client_*` layer
//! ([`kcr_controller::rest_client::instrument`]) against the same request without it, and one
//! read of the process and runtime metrics ([`kcr_controller::process::render`], done at every
//! scrape). Requests are sequential GETs of one ConfigMap from the in-process kcr-envtest, the
//! Prometheus recorder installed, best of five rounds.
//!
//! `cargo run --release -p kcr-controller --example metrics_overhead [requests per round]`

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestApiServer;
use kube::api::{Api, PostParams};

async fn round(api: &Api<ConfigMap>, n: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        api.get("probe").await.expect("the ConfigMap exists");
    }
    start.elapsed() / n
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: u32 = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2000);
    kcr_controller::http::prometheus_handle();
    let server = TestApiServer::start().await?;
    let plain: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("probe".into());
    plain.create(&PostParams::default(), &cm).await?;
    let instrumented: Api<ConfigMap> = Api::namespaced(
        kcr_controller::rest_client::instrument(server.client(), server.addr().to_string()),
        "default",
    );
    let (mut best_plain, mut best_instrumented) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        best_plain = best_plain.min(round(&plain, n).await);
        best_instrumented = best_instrumented.min(round(&instrumented, n).await);
    }
    println!(
        "GET per request: plain {:.1} us, with rest_client_* {:.1} us (+{:.1} us), {n} requests x 5 rounds",
        best_plain.as_secs_f64() * 1e6,
        best_instrumented.as_secs_f64() * 1e6,
        (best_instrumented.as_secs_f64() - best_plain.as_secs_f64()) * 1e6
    );
    let reads = 1000u32;
    let start = Instant::now();
    let mut out = String::new();
    for _ in 0..reads {
        out.clear();
        kcr_controller::process::render(&mut out);
    }
    println!(
        "process and runtime metrics per scrape: {:.1} us ({} bytes)",
        start.elapsed().as_secs_f64() * 1e6 / f64::from(reads),
        out.len()
    );
    Ok(())
}
