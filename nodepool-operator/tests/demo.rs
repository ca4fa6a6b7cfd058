//! The demo, as `nodepool-operator demo` runs it (minus printing to a terminal): it converges,
//! shows the membership, the status table with mixed-unit sums, and the webhook's refusal.

use std::time::Duration;

use nodepool_operator::demo::{DemoOptions, run_demo};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_converges_and_reports() {
    let options = DemoOptions {
        nodes: 6,
        timeout: Duration::from_secs(30),
        ..DemoOptions::default()
    };
    let report = run_demo(&options, CancellationToken::new()).await.unwrap();
    assert_eq!(
        report.members["worker"],
        vec!["envtest-node-0", "envtest-node-1", "envtest-node-2"]
    );
    assert_eq!(
        report.members["gpu"],
        vec!["envtest-node-3", "envtest-node-4"]
    );
    let worker = report.pools.iter().find(|r| r[0] == "worker").unwrap();
    // name, status, nodeCount, ready, cpu, memory: 4 + 500m + 4 CPU, 16Gi + 512Mi + 16Gi.
    assert_eq!(worker[1..], ["200", "3", "True", "8500m", "33280Mi"]);
    let gpu = report.pools.iter().find(|r| r[0] == "gpu").unwrap();
    assert_eq!(gpu[1..], ["200", "2", "True", "7900m", "32658004Ki"]);
    assert!(
        report.refused.contains("denied the request"),
        "{}",
        report.refused
    );
    assert!(
        report.refused.contains("spec.labels[xxx]"),
        "{}",
        report.refused
    );
    assert!(
        report
            .output
            .contains("~label node-pool.lailin.xyz/worker=10 -> 11"),
        "{}",
        report.output
    );
    assert!(
        report
            .output
            .contains("-taint node-pool.lailin.xyz=worker:NoSchedule"),
        "{}",
        report.output
    );
}
