//! The partition drill with the default bounds: every connection of the operator frozen for
//! 45 s (nothing closed), a node joining its pool during the partition and another right after
//! the heal; prints how long after the heal the cluster converged and the operator was ready,
//! for the operator running through the partition, with `--leader-elect` (it steps down and is
//! restarted during the partition) and started during the partition.
//!
//! `cargo run --release -p nodepool-operator --example partition [-- PARTITION_SECONDS]`
//! on the backend of `KCR_ENVTEST_BACKEND` (in process by default; `real` for kube-apiserver).
//! See `nodepool_operator::partition`.

use std::time::Duration;

use nodepool_operator::partition::{Drill, Scenario, run};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let partition = std::env::args()
        .nth(1)
        .map(|s| s.parse::<u64>())
        .transpose()?
        .unwrap_or(45);
    let backend = kcr_envtest::Backend::from_env()?;
    println!(
        "partition drill: backend={} partition={partition}s, default bounds ({:?})",
        backend.as_str(),
        kcr_connect::ConnectionOptions::default()
    );
    println!(
        "| scenario | converged after the heal | ready after the heal | restarts | frozen connections |"
    );
    println!("|---|---|---|---|---|");
    for scenario in Scenario::ALL {
        let drill = Drill {
            scenario,
            partition: Duration::from_secs(partition),
            connection: kcr_connect::ConnectionOptions::default(),
            leader_timings: None,
            give_up_after: Duration::from_secs(300),
        };
        match run(&drill).await {
            Ok(report) => println!(
                "| {} | {:.1} s | {:.1} s | {} | {} |",
                scenario.name(),
                report.converged_after_heal.as_secs_f64(),
                report.ready_after_heal.as_secs_f64(),
                report.restarts,
                report.frozen_connections
            ),
            Err(e) => println!("| {} | failed: {e} | | | |", scenario.name()),
        }
    }
    Ok(())
}
