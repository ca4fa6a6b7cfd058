//! Explores the NodePool operator: pools created, nodes joining and leaving, a pool changed,
//! a pool deleted; a crash at every write, missed intermediate states, stale caches.
//!
//! ```sh
//! cargo run -p kcr-perturb --example nodepool                      # every point
//! KCR_PERTURB_MAX_SECONDS=120 cargo run -p kcr-perturb --example nodepool  # a time budget
//! ```
//!
//! It prints the report, then one line:
//! `perturbation-run controller=nodepool points=P runs=R findings=F seconds=S`.

mod exploration;

use std::time::Duration;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .init();
    let mut exploration = exploration::exploration();
    if let Some(seconds) = std::env::var("KCR_PERTURB_MAX_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        exploration = exploration.max_time(Duration::from_secs(seconds));
    }
    if let Some(runs) = std::env::var("KCR_PERTURB_MAX_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        exploration = exploration.max_runs(runs);
    }
    let report = exploration.run().await?;
    println!("{report}");
    println!("{}", report.summary_line("nodepool"));
    Ok(())
}
