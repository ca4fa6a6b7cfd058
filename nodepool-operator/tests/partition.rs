//! The NodePool operator behind a silent network partition (every connection frozen for good,
//! nothing closed), on either backend: nodes join the pool during the partition and after the
//! heal, and the cluster converges within the bound after the heal, for the operator running
//! through it, with leader election (it steps down and is restarted during the partition), and
//! started during it. Bounds and the partition are seconds here; the example `partition` runs
//! the defaults with a 45 s partition (the README's table).

use std::time::Duration;

use kcr_connect::ConnectionOptions;
use nodepool_operator::partition::{Drill, Scenario, run};

fn drill(scenario: Scenario) -> Drill {
    Drill {
        scenario,
        partition: Duration::from_secs(5),
        connection: ConnectionOptions::default()
            .connect_timeout(Duration::from_secs(1))
            .request_timeout(Duration::from_secs(1))
            .watch_start_timeout(Duration::from_secs(1))
            .watch_idle_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(1))
            .pings(Duration::from_millis(500), Duration::from_millis(500)),
        leader_timings: Some((
            Duration::from_secs(3),
            Duration::from_secs(2),
            Duration::from_millis(250),
        )),
        give_up_after: Duration::from_secs(60),
    }
}

/// Converged after the heal within: the idle bound (2 s), a watch's start bound (1 s), the
/// cache's watch backoff grown during the partition (up to its 30 s cap, jittered: a watch
/// retried a few times in the 5 s partition waits at most about 6 s), a reconcile, and for
/// the leader, the old Lease's 3 s.
const BOUND: Duration = Duration::from_secs(20);

async fn converges(scenario: Scenario) {
    let report = run(&drill(scenario)).await.unwrap();
    eprintln!("{report:?}");
    assert!(
        report.frozen_connections > 0,
        "the partition froze something"
    );
    assert!(
        report.converged_after_heal < BOUND && report.ready_after_heal < BOUND,
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_relabelled_during_a_partition_converge_after_the_heal() {
    converges(Scenario::Running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leader_election_the_restarted_operator_converges_after_the_heal() {
    let report = run(&drill(Scenario::LeaderElect)).await.unwrap();
    eprintln!("{report:?}");
    assert!(
        report.restarts >= 1,
        "the leader stepped down and was restarted: {report:?}"
    );
    assert!(report.converged_after_heal < BOUND, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_started_during_a_partition_converges_after_the_heal() {
    converges(Scenario::StartedDuring).await;
}
