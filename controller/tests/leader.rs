//! Leader election between managers against kcr-envtest, with short real-time timings
//! (lease 2 s, renew deadline 1 s, retry 250 ms).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{CopyToSecret, configmap, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::leader::LeaderElectionError;
use kcr_controller::{LeaderElectionConfig, Manager, ManagerError, ManagerOptions, WatchOptions};
use kcr_envtest::TestApiServer;
use kube::api::{Api, PostParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_millis(250);

fn election(identity: &str, release: bool) -> LeaderElectionConfig {
    LeaderElectionConfig::new("kcr-test-leader")
        .namespace("default")
        .identity(identity)
        .timings(LEASE, RENEW, RETRY)
        .release_on_cancel(release)
}

struct Replica {
    identity: String,
    mgr: Arc<Manager>,
    reconciler: CopyToSecret,
    stop: CancellationToken,
    run: JoinHandle<Result<(), ManagerError>>,
}

async fn replica(server: &TestApiServer, identity: &str, release: bool) -> Replica {
    replica_with(server, identity, release, false).await
}

/// With `stubborn`, also a leader-only runnable that ignores its stop token.
async fn replica_with(
    server: &TestApiServer,
    identity: &str,
    release: bool,
    stubborn: bool,
) -> Replica {
    let options = ManagerOptions::default()
        .metrics_bind_address("0")
        .unwrap()
        .health_probe_bind_address("127.0.0.1:0")
        .unwrap()
        .leader_election(election(identity, release));
    let mgr = Manager::new(server.client(), options).await.unwrap();
    let reconciler = CopyToSecret::new(&mgr, "copier", identity);
    mgr.controller()
        .named("copier")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace("default"))
        .owns::<Secret>(WatchOptions::new().namespace("default"))
        .complete(reconciler.clone())
        .unwrap();
    if stubborn {
        mgr.add_runnable("stubborn", true, |_token| async {
            std::future::pending::<()>().await;
            Ok(())
        })
        .unwrap();
    }
    let (mgr, stop, run) = common::spawn_manager(mgr);
    Replica {
        identity: identity.to_string(),
        mgr,
        reconciler,
        stop,
        run,
    }
}

/// Samples both replicas' leadership every 5 ms until `stop`; fails if both ever lead.
fn watch_for_split_brain(
    a: Arc<Manager>,
    b: Arc<Manager>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            assert!(
                !(a.is_leader() && b.is_leader()),
                "both replicas lead at the same time"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

async fn create_and_converge(server: &TestApiServer, names: &[&str]) {
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(server.client(), "default");
    for name in names {
        cms.create(&PostParams::default(), &configmap(name, "v1"))
            .await
            .unwrap();
    }
    for name in names {
        let copy = format!("{name}-copy");
        eventually("secret copied", Duration::from_secs(20), || async {
            secrets.get_opt(&copy).await.ok().flatten().is_some()
        })
        .await;
    }
}

fn reconciled_by(r: &CopyToSecret) -> usize {
    r.log.lock().len()
}

async fn handover(release: bool) -> Duration {
    let server = TestApiServer::start().await.unwrap();
    let a = replica(&server, "replica-a", release).await;
    let b = replica(&server, "replica-b", release).await;
    let sampler_stop = CancellationToken::new();
    let sampler = watch_for_split_brain(a.mgr.clone(), b.mgr.clone(), sampler_stop.clone());

    eventually("a leader", Duration::from_secs(10), || async {
        a.mgr.is_leader() || b.mgr.is_leader()
    })
    .await;
    let (leader, follower) = if a.mgr.is_leader() { (a, b) } else { (b, a) };
    // the follower stays a follower while the leader renews
    tokio::time::sleep(LEASE * 2).await;
    assert!(leader.mgr.is_leader() && !follower.mgr.is_leader());
    // the follower is ready too (standby), with warm caches
    let probes = follower.mgr.health_probe_addr().unwrap();
    eventually("standby ready", Duration::from_secs(10), || async {
        common::http_get(probes, "/readyz").await.map(|r| r.0) == Some(200)
    })
    .await;

    create_and_converge(&server, &["one", "two", "three"]).await;
    assert!(reconciled_by(&leader.reconciler) >= 3);
    assert_eq!(
        reconciled_by(&follower.reconciler),
        0,
        "only the leader reconciles"
    );

    // stop the leader; the follower takes over
    let stopped = Instant::now();
    leader.stop.cancel();
    leader.run.await.unwrap().unwrap();
    assert!(!leader.mgr.is_leader());
    eventually("follower takes over", LEASE * 3, || async {
        follower.mgr.is_leader()
    })
    .await;
    let took = stopped.elapsed();

    let before = reconciled_by(&leader.reconciler);
    create_and_converge(&server, &["four"]).await;
    assert!(
        reconciled_by(&follower.reconciler) >= 1,
        "the new leader reconciles"
    );
    assert_eq!(
        reconciled_by(&leader.reconciler),
        before,
        "the old leader is stopped"
    );

    let lease: Api<Lease> = Api::namespaced(server.client(), "default");
    let lease = lease.get("kcr-test-leader").await.unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity, Some(follower.identity.clone()));
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert!(spec.lease_transitions.unwrap_or(0) >= 1);

    sampler_stop.cancel();
    sampler.await.unwrap();
    follower.stop.cancel();
    follower.run.await.unwrap().unwrap();
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_reconciles_and_a_stopped_leader_hands_over_within_the_lease() {
    let took = handover(false).await;
    // without a release the follower waits for the lease to expire, then retries (the slack
    // absorbs request latency on a loaded machine)
    assert!(
        took <= LEASE + RETRY.mul_f64(2.2) + Duration::from_millis(1500),
        "handover took {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_on_shutdown_hands_over_at_once() {
    let took = handover(true).await;
    // the follower takes the released lease on its next (jittered) retry
    assert!(took < LEASE, "handover took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lease_stops_controllers_and_run_fails() {
    let server = TestApiServer::start().await.unwrap();
    // graceful_shutdown_timeout is 30 s, but after a lost lease the manager waits at most
    // lease_duration - renew_deadline for runnables (here one that never stops)
    let r = replica_with(&server, "replica-lost", false, true).await;
    eventually("leader", Duration::from_secs(10), || async {
        r.mgr.is_leader()
    })
    .await;
    create_and_converge(&server, &["x"]).await;

    // the API server refuses every lease request from now on
    server.faults().fail_next("get", "leases", 1_000_000, 500);
    server
        .faults()
        .fail_next("update", "leases", 1_000_000, 500);
    let t0 = Instant::now();
    // it gives up within the renew deadline (plus one retry), before the lease could expire
    eventually("leadership dropped", LEASE, || async { !r.mgr.is_leader() }).await;
    let dropped = t0.elapsed();
    assert!(dropped < LEASE, "gave up after {dropped:?}");
    let err = tokio::time::timeout(LEASE * 3, r.run)
        .await
        .expect("run returns once leadership is lost")
        .unwrap()
        .unwrap_err();
    // the stubborn runnable was abandoned after lease_duration - renew_deadline
    let returned = t0.elapsed();
    assert!(
        returned < dropped + (LEASE - RENEW) + Duration::from_millis(1500),
        "run returned after {returned:?}"
    );
    assert!(!r.mgr.is_leader());
    match &err {
        ManagerError::LeaderElection(LeaderElectionError::Lost { reason, .. }) => {
            assert!(reason.contains("renew deadline"), "{reason}")
        }
        other => panic!("unexpected error: {other}"),
    }
    assert!(err.to_string().contains("leader election lost"), "{err}");
    server.faults().clear();

    // controllers are stopped: nothing reconciles a new object
    let before = reconciled_by(&r.reconciler);
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    cms.create(&PostParams::default(), &configmap("after", "v1"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(reconciled_by(&r.reconciler), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_lease_is_noticed_on_the_next_renewal() {
    let server = TestApiServer::start().await.unwrap();
    let r = replica(&server, "replica-robbed", false).await;
    eventually("leader", Duration::from_secs(10), || async {
        r.mgr.is_leader()
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(server.client(), "default");
    let mut lease = leases.get("kcr-test-leader").await.unwrap();
    lease.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
    leases
        .replace("kcr-test-leader", &PostParams::default(), &lease)
        .await
        .unwrap();
    let err = tokio::time::timeout(LEASE * 2, r.run)
        .await
        .expect("run returns")
        .unwrap()
        .unwrap_err();
    assert!(!r.mgr.is_leader());
    assert!(err.to_string().contains("held by intruder"), "{err}");
}
