//! Leader election between managers against kcr-envtest, with short real-time timings
//! (lease 2 s, renew deadline 1 s, retry 250 ms).
//!
//! The short lease is the point of the hand-over tests, and it has a price: on a loaded
//! machine a leader can miss its renew deadline (its lease requests are slow) and step down
//! on its own, as designed, while the other replica takes over. Where that can happen, a test
//! checks the safety property instead (never two leaders at once: a sampler of every
//! replica's `is_leader`, which keeps the timeline it prints) and that the loss was a missed
//! renewal, prints what happened, and does not fail; every other outcome still fails.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{CopyToSecret, configmap, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::leader::LeaderElectionError;
use kcr_controller::{LeaderElectionConfig, Manager, ManagerError, ManagerOptions, WatchOptions};
use kcr_envtest::TestApiServer;
use kube::api::{Api, Patch, PatchParams, PostParams};
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
    /// `Manager::run`'s task, until [`Replica::ended`] has seen it end.
    run: Option<JoinHandle<Result<(), ManagerError>>>,
    outcome: Option<Outcome>,
}

/// How a manager's run ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// `Ok(())`: stopped when asked to.
    Stopped,
    /// Leadership lost to a missed renew deadline (the lease requests were too slow): by
    /// design, the leader steps down before anyone may take over. The error's text.
    MissedRenewal(String),
    /// Any other error's text.
    Failed(String),
}

impl Replica {
    /// How the manager's run ended, waiting for that up to `limit`; `None` while it runs.
    async fn ended(&mut self, limit: Duration) -> Option<Outcome> {
        if self.outcome.is_none() {
            let run = self.run.as_mut()?;
            let joined = tokio::time::timeout(limit, run).await.ok()?;
            self.outcome = Some(match joined.expect("the manager's task does not panic") {
                Ok(()) => Outcome::Stopped,
                Err(e @ ManagerError::LeaderElection(LeaderElectionError::Lost { .. }))
                    if e.to_string().contains("renew deadline") =>
                {
                    Outcome::MissedRenewal(e.to_string())
                }
                Err(e) => Outcome::Failed(e.to_string()),
            });
            self.run = None;
        }
        self.outcome.clone()
    }

    /// Stops the manager and waits for its run; a missed renewal under load (the replica
    /// stepped down on its own earlier) is printed, any other error fails.
    async fn stop_and_check(mut self) {
        self.stop.cancel();
        match self.ended(Duration::from_secs(30)).await {
            Some(Outcome::Stopped) => {}
            Some(Outcome::MissedRenewal(e)) => {
                eprintln!("{} had stepped down on its own: {e}", self.identity)
            }
            other => panic!("{}: {other:?}", self.identity),
        }
    }

    /// Whether this replica's run has ended because it missed its renew deadline, waiting up
    /// to a lease duration for it to end; a run that ended otherwise fails the test.
    async fn missed_a_renewal(&mut self) -> bool {
        match self.ended(LEASE).await {
            None => false,
            Some(Outcome::MissedRenewal(e)) => {
                eprintln!("{} stepped down on its own: {e}", self.identity);
                true
            }
            Some(other) => panic!("{}'s run ended on its own: {other:?}", self.identity),
        }
    }
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
        run: Some(run),
        outcome: None,
    }
}

/// Samples every replica's leadership every 5 ms until stopped and fails the test if two ever
/// lead at once; keeps the timeline of who led (ms since its start) to print.
struct Sampler {
    stop: CancellationToken,
    task: JoinHandle<Vec<String>>,
}

impl Sampler {
    fn start(replicas: &[&Replica]) -> Sampler {
        let replicas: Vec<(String, Arc<Manager>)> = replicas
            .iter()
            .map(|r| (r.identity.clone(), r.mgr.clone()))
            .collect();
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut timeline = Vec::new();
            let mut last: Option<Vec<String>> = None;
            while !token.is_cancelled() {
                let leading: Vec<String> = replicas
                    .iter()
                    .filter(|(_, mgr)| mgr.is_leader())
                    .map(|(id, _)| id.clone())
                    .collect();
                if last.as_ref() != Some(&leading) {
                    timeline.push(format!(
                        "{:>6} ms: {}",
                        started.elapsed().as_millis(),
                        if leading.is_empty() {
                            "nobody leads".to_string()
                        } else {
                            format!("{} leads", leading.join(" and "))
                        }
                    ));
                    last = Some(leading.clone());
                }
                assert!(
                    leading.len() <= 1,
                    "two replicas lead at the same time:\n{}",
                    timeline.join("\n")
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            timeline
        });
        Sampler { stop, task }
    }

    /// Stops sampling; the timeline (fails the test if two replicas ever led at once).
    async fn finish(self) -> String {
        self.stop.cancel();
        self.task.await.unwrap().join("\n")
    }
}

/// Creates the config maps `names` and waits until each has its copy.
async fn create_and_converge(server: &TestApiServer, names: &[&str]) {
    if let Err(why) = try_converge(server, names).await {
        panic!("{why}");
    }
}

/// Creates the config maps `names` and waits up to 20 s until each has its copy; Err says
/// which did not.
async fn try_converge(server: &TestApiServer, names: &[&str]) -> Result<(), String> {
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(server.client(), "default");
    for name in names {
        cms.create(&PostParams::default(), &configmap(name, "v1"))
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for name in names {
        let copy = format!("{name}-copy");
        while secrets.get_opt(&copy).await.ok().flatten().is_none() {
            if Instant::now() > deadline {
                return Err(format!("{copy} not created within 20 s"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

fn reconciled_by(r: &CopyToSecret) -> usize {
    r.log.lock().len()
}

/// Before the stop: the follower stays a follower while the leader renews, is ready as a
/// standby, and only the leader reconciles. Err says what did not hold.
async fn leader_alone(
    server: &TestApiServer,
    leader: &Replica,
    follower: &Replica,
) -> Result<(), String> {
    // Two lease durations: long enough for the follower to take a lease it wrongly thought
    // expired.
    tokio::time::sleep(LEASE * 2).await;
    if !leader.mgr.is_leader() || follower.mgr.is_leader() {
        return Err(format!(
            "after {:?} {} leads: {}, {} leads: {}",
            LEASE * 2,
            leader.identity,
            leader.mgr.is_leader(),
            follower.identity,
            follower.mgr.is_leader()
        ));
    }
    // the follower is ready too (standby), with warm caches
    let probes = follower.mgr.health_probe_addr().unwrap();
    eventually("standby ready", Duration::from_secs(10), || async {
        common::http_get(probes, "/readyz").await.map(|r| r.0) == Some(200)
    })
    .await;
    try_converge(server, &["one", "two", "three"]).await?;
    let (by_leader, by_follower) = (
        reconciled_by(&leader.reconciler),
        reconciled_by(&follower.reconciler),
    );
    if by_leader < 3 || by_follower != 0 {
        return Err(format!(
            "only the leader reconciles: {} reconciled {by_leader}, {} {by_follower}",
            leader.identity, follower.identity
        ));
    }
    Ok(())
}

/// Two replicas; the leader is stopped and the follower takes over. Returns how long the
/// hand-over took, or `None` when, on a loaded machine, a leader stepped down on its own
/// before the stop (a missed renewal): then the follower's take-over and the safety property
/// are checked, the timeline is printed, and there is no stop to time.
async fn handover(release: bool) -> Option<Duration> {
    let server = TestApiServer::start().await.unwrap();
    let a = replica(&server, "replica-a", release).await;
    let b = replica(&server, "replica-b", release).await;
    let sampler = Sampler::start(&[&a, &b]);

    eventually("a leader", Duration::from_secs(10), || async {
        a.mgr.is_leader() || b.mgr.is_leader()
    })
    .await;
    let (mut leader, follower) = if a.mgr.is_leader() { (a, b) } else { (b, a) };

    if let Err(why) = leader_alone(&server, &leader, &follower).await {
        assert!(leader.missed_a_renewal().await, "{why}");
        // The follower takes the lease once it expires, and reconciles.
        eventually("the follower takes over", LEASE * 3, || async {
            follower.mgr.is_leader()
        })
        .await;
        let before = reconciled_by(&follower.reconciler);
        create_and_converge(&server, &["after-the-loss"]).await;
        assert!(reconciled_by(&follower.reconciler) > before);
        let timeline = sampler.finish().await;
        eprintln!(
            "{} missed a renewal before it was stopped ({why}); no hand-over to time. \
             Leadership (never two at once):\n{timeline}",
            leader.identity
        );
        follower.stop_and_check().await;
        return None;
    }

    // stop the leader; the follower takes over
    let stopped = Instant::now();
    leader.stop.cancel();
    match leader.ended(Duration::from_secs(30)).await {
        Some(Outcome::Stopped) => {}
        Some(Outcome::MissedRenewal(e)) => {
            // It stepped down on its own just before the stop.
            eventually("the follower takes over", LEASE * 3, || async {
                follower.mgr.is_leader()
            })
            .await;
            let timeline = sampler.finish().await;
            eprintln!(
                "{} missed a renewal just before it was stopped: {e}; no hand-over to time. \
                 Leadership (never two at once):\n{timeline}",
                leader.identity
            );
            follower.stop_and_check().await;
            return None;
        }
        other => panic!("the stopped leader's run: {other:?}"),
    }
    assert!(!leader.mgr.is_leader());
    eventually("follower takes over", LEASE * 3, || async {
        follower.mgr.is_leader()
    })
    .await;
    let took = stopped.elapsed();

    let before = reconciled_by(&leader.reconciler);
    let mut follower = follower;
    match try_converge(&server, &["four"]).await {
        Ok(()) => assert!(
            reconciled_by(&follower.reconciler) >= 1,
            "the new leader reconciles"
        ),
        // The new leader stepped down on its own before it got to "four": nobody leads.
        Err(why) => assert!(follower.missed_a_renewal().await, "{why}"),
    }
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

    let timeline = sampler.finish().await;
    eprintln!("hand-over in {took:?}; leadership:\n{timeline}");
    follower.stop_and_check().await;
    Some(took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_reconciles_and_a_stopped_leader_hands_over_within_the_lease() {
    // without a release the follower waits for the lease to expire, then retries (the slack
    // absorbs request latency on a loaded machine)
    if let Some(took) = handover(false).await {
        assert!(
            took <= LEASE + RETRY.mul_f64(2.2) + Duration::from_millis(1500),
            "handover took {took:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_on_shutdown_hands_over_at_once() {
    // the follower takes the released lease on its next (jittered) retry
    if let Some(took) = handover(true).await {
        assert!(took < LEASE, "handover took {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lease_stops_controllers_and_run_fails() {
    let server = TestApiServer::start().await.unwrap();
    // graceful_shutdown_timeout is 30 s, but after a lost lease the manager waits at most
    // lease_duration - renew_deadline for runnables (here one that never stops)
    let mut r = replica_with(&server, "replica-lost", false, true).await;
    eventually("leader", Duration::from_secs(10), || async {
        r.mgr.is_leader()
    })
    .await;
    if let Err(why) = try_converge(&server, &["x"]).await {
        // On a loaded machine it can lose the lease on its own first: the same loss, untimed.
        assert!(r.missed_a_renewal().await, "{why}");
        assert!(!r.mgr.is_leader());
        eprintln!("the leader missed a renewal before the faults: nothing to time");
        return;
    }

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
    let outcome = r.ended(LEASE * 3).await;
    // the stubborn runnable was abandoned after lease_duration - renew_deadline
    let returned = t0.elapsed();
    assert!(
        returned < dropped + (LEASE - RENEW) + Duration::from_millis(1500),
        "run returned after {returned:?}"
    );
    assert!(!r.mgr.is_leader());
    match outcome {
        Some(Outcome::MissedRenewal(err)) => {
            assert!(err.contains("leader election lost"), "{err}")
        }
        other => panic!("run returns the renew deadline's error: {other:?}"),
    }
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
    let mut r = replica(&server, "replica-robbed", false).await;
    eventually("leader", Duration::from_secs(10), || async {
        r.mgr.is_leader()
    })
    .await;
    // A merge patch, not a read-modify-write: the leader renews every 250 ms, and a replace
    // carrying the resourceVersion read before a renewal would be a 409 Conflict.
    let leases: Api<Lease> = Api::namespaced(server.client(), "default");
    leases
        .patch(
            "kcr-test-leader",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"holderIdentity": "intruder"}})),
        )
        .await
        .unwrap();
    let outcome = r.ended(LEASE * 2).await;
    assert!(!r.mgr.is_leader());
    match outcome {
        Some(Outcome::Failed(err)) => assert!(err.contains("held by intruder"), "{err}"),
        // On a loaded machine it can miss its renew deadline before it reads the lease again.
        Some(Outcome::MissedRenewal(err)) => {
            eprintln!("the leader missed a renewal before it saw the intruder: {err}")
        }
        other => panic!("run returns an error: {other:?}"),
    }
}

/// `leader_election_slowpath_total{name}` of `lease`, summed over the snapshots taken so far
/// (a snapshot resets the debugging recorder's counters).
fn slowpath_count(
    snapshotter: &metrics_util::debugging::Snapshotter,
    seen: &std::sync::atomic::AtomicU64,
    lease: &str,
) -> u64 {
    use std::sync::atomic::Ordering;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if key.name() == "leader_election_slowpath_total"
            && key
                .labels()
                .any(|l| l.key() == "name" && l.value() == lease)
            && let metrics_util::debugging::DebugValue::Counter(n) = value
        {
            seen.fetch_add(n, Ordering::SeqCst);
        }
    }
    seen.load(Ordering::SeqCst)
}

/// client-go's fast path: the leader renews with one write of the Lease as it last wrote it,
/// without reading it; a Lease changed behind its back makes that write a 409 Conflict, and the
/// leader takes the slow path (read, then write) once, counted in
/// `leader_election_slowpath_total`, then goes back to the fast path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_take_the_fast_path_and_a_changed_lease_the_slow_path() {
    use kcr_controller::leader::LeaderElector;
    use metrics_util::debugging::DebuggingRecorder;

    const NAME: &str = "kcr-test-fastpath";
    let server = TestApiServer::start().await.unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // Long lease and renew deadline (a slow machine must not lose the lease here), renewals
    // every 100 ms.
    let config = LeaderElectionConfig::new(NAME)
        .namespace("default")
        .identity("fast")
        .timings(
            Duration::from_secs(20),
            Duration::from_secs(10),
            Duration::from_millis(100),
        );
    let elector = Arc::new(metrics::with_local_recorder(&recorder, || {
        LeaderElector::new(server.client(), config)
    }));
    let stop = CancellationToken::new();
    assert!(elector.acquire(&stop).await);
    let slow = std::sync::atomic::AtomicU64::new(0);
    assert_eq!(
        slowpath_count(&snapshotter, &slow, NAME),
        0,
        "acquiring is not a renewal"
    );

    let faults = server.faults();
    faults.reset_counts();
    let renewing = tokio::spawn({
        let (elector, stop) = (elector.clone(), stop.clone());
        async move { elector.renew_until_lost(&stop).await }
    });
    eventually("five renewals", Duration::from_secs(20), || async {
        faults.request_count("update", "leases") >= 5
    })
    .await;
    assert_eq!(
        faults.request_count("get", "leases"),
        0,
        "renewals on the fast path read nothing"
    );
    assert_eq!(slowpath_count(&snapshotter, &slow, NAME), 0);

    // Someone else writes the Lease (a label: the holder stays): the next fast-path write is a
    // 409, the slow path reads the Lease and renews it.
    let leases: Api<Lease> = Api::namespaced(server.client(), "default");
    leases
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    eventually("one slow path", Duration::from_secs(20), || async {
        slowpath_count(&snapshotter, &slow, NAME) == 1
    })
    .await;
    let updates = faults.request_count("update", "leases");
    eventually("back on the fast path", Duration::from_secs(20), || async {
        faults.request_count("update", "leases") >= updates + 3
    })
    .await;
    assert_eq!(
        faults.request_count("get", "leases"),
        1,
        "one read, by the one slow path"
    );
    assert_eq!(slowpath_count(&snapshotter, &slow, NAME), 1);
    let lease = leases.get(NAME).await.unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("fast")
    );
    assert_eq!(
        lease
            .metadata
            .labels
            .unwrap_or_default()
            .get("touched")
            .map(String::as_str),
        Some("yes"),
        "the slow path renewed the Lease it read, keeping the other writer's change"
    );
    assert!(!renewing.is_finished(), "still leading");
    stop.cancel();
    renewing.await.unwrap().unwrap();
}

/// The Lease carries the configured labels from its creation, and a Lease taken over from
/// another holder gains them (only those keys: other labels stay); bad labels are refused
/// before anything is written.
#[tokio::test]
async fn the_lease_carries_its_labels_when_created_and_when_taken_over() {
    use kcr_controller::leader::LeaderElector;

    let server = TestApiServer::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(server.client(), "default");
    let labelled = |name: &str, identity: &str| {
        LeaderElectionConfig::new(name)
            .namespace("default")
            .identity(identity)
            .timings(LEASE, RENEW, RETRY)
            .labels([("app.kubernetes.io/name", "demo"), ("tier", "control")])
    };
    let stop = CancellationToken::new();

    // Created with the labels.
    let elector = LeaderElector::new(server.client(), labelled("kcr-labelled", "a"));
    assert!(elector.acquire(&stop).await);
    let lease = leases.get("kcr-labelled").await.unwrap();
    let labels = lease.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("app.kubernetes.io/name").map(String::as_str),
        Some("demo")
    );
    assert_eq!(labels.get("tier").map(String::as_str), Some("control"));

    // A Lease another holder created without them, expired: taking it adds them.
    let unlabelled = LeaderElector::new(
        server.client(),
        LeaderElectionConfig::new("kcr-taken")
            .namespace("default")
            .identity("old")
            .timings(LEASE, RENEW, RETRY),
    );
    assert!(unlabelled.acquire(&stop).await);
    leases
        .patch(
            "kcr-taken",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"kept": "yes"}}})),
        )
        .await
        .unwrap();
    let taker = LeaderElector::new(server.client(), labelled("kcr-taken", "new"));
    // The old holder stops renewing; the new one takes over once the lease ran out.
    assert!(taker.acquire(&stop).await);
    let lease = leases.get("kcr-taken").await.unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("new")
    );
    let labels = lease.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("tier").map(String::as_str), Some("control"));
    assert_eq!(labels.get("kept").map(String::as_str), Some("yes"));

    // Bad labels: a clear error naming the label, before any request.
    for (key, value, said) in [
        ("not a key", "v", "label key \"not a key\""),
        ("tier", "not a value!", "value \"not a value!\""),
    ] {
        let err = labelled("kcr-bad", "x")
            .labels([(key, value)])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains(said), "{err}");
    }
    assert!(leases.get_opt("kcr-bad").await.unwrap().is_none());
}

/// With a client of its own, the Lease lives where that client points (here another API
/// server), not in the manager's cluster, and the manager still leads and runs.
#[tokio::test]
async fn leader_election_with_a_client_of_its_own_writes_the_lease_there() {
    let objects = TestApiServer::start().await.unwrap();
    let elsewhere = TestApiServer::start().await.unwrap();
    let options = ManagerOptions::default()
        .metrics_bind_address("0")
        .unwrap()
        .health_probe_bind_address("0")
        .unwrap()
        .leader_election(
            LeaderElectionConfig::new("kcr-own-client")
                .namespace("default")
                .identity("solo")
                .timings(LEASE, RENEW, RETRY)
                .client(elsewhere.client()),
        );
    let mgr = Arc::new(Manager::new(objects.client(), options).await.unwrap());
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let there: Api<Lease> = Api::namespaced(elsewhere.client(), "default");
    eventually(
        "the Lease on the other server",
        Duration::from_secs(20),
        || async {
            there
                .get_opt("kcr-own-client")
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .as_deref()
                == Some("solo")
        },
    )
    .await;
    let here: Api<Lease> = Api::namespaced(objects.client(), "default");
    assert!(
        here.get_opt("kcr-own-client").await.unwrap().is_none(),
        "no Lease in the manager's own cluster"
    );
    stop.cancel();
    run.await.unwrap().unwrap();
}
