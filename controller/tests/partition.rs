//! Managers behind a silent network partition (kcr-envtest's blackhole: every connection
//! frozen for good, nothing closed), on either backend: a controller and its cache converge
//! within the bound after the heal, a manager started during the partition becomes ready
//! within the bound after it, and a partitioned leader steps down, another replica takes over,
//! and the server's record of who wrote shows no overlap.
//!
//! The bounds are scaled down (a partition of seconds outlasts them); the defaults' figures
//! come from `cargo run --release -p nodepool-operator --example partition`. With
//! `KCR_TEST_UNBOUNDED=1` the managers get bounds of an hour, as a client without kcr-connect
//! has none: the convergence tests then fail, which shows what the bounds fix.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{http_get, spawn_manager};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_connect::ConnectionOptions;
use kcr_controller::{
    Action, Context, LeaderElectionConfig, Manager, ManagerError, ManagerOptions, Reconciler,
    WatchOptions,
};
use kcr_envtest::{Backend, Relay, TestApiServer};
use kcr_handler::Request;
use kcr_source::{Reader, WatchBackoff};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

const NS: &str = "default";

/// Bounds for a partition of seconds (see the module docs for `KCR_TEST_UNBOUNDED`).
fn bounds() -> ConnectionOptions {
    if std::env::var_os("KCR_TEST_UNBOUNDED").is_some() {
        let hour = Duration::from_secs(3600);
        return ConnectionOptions::default()
            .connect_timeout(hour)
            .request_timeout(hour)
            .watch_start_timeout(hour)
            .watch_idle_timeout(hour)
            .pings(hour, hour)
            .pool_idle_timeout(hour);
    }
    ConnectionOptions::default()
        .connect_timeout(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(1))
        .watch_start_timeout(Duration::from_secs(1))
        .watch_idle_timeout(Duration::from_secs(2))
        .pool_idle_timeout(Duration::from_secs(1))
        .pings(Duration::from_millis(500), Duration::from_millis(500))
}

/// Longer than every bound above.
const PARTITION: Duration = Duration::from_secs(5);
/// Convergence after the heal: a frozen watch is noticed within its idle bound (2 s) or an
/// attempt made during the partition within its start bound (1 s), the cache's watch retries
/// within its backoff (at most 1 s here), then a reconcile and its write (1 s bound each);
/// with room for a loaded machine.
const CONVERGED_WITHIN: Duration = Duration::from_secs(12);

/// A server of this test's own (a blackhole freezes every client of a server); in process
/// its bookmarks come every 200 ms (kube-apiserver's every minute are fixed: there the idle
/// bound above cuts quiet watches too, which resume at once).
async fn own_server() -> TestApiServer {
    let mut builder = TestApiServer::builder();
    if Backend::from_env().unwrap() == Backend::InProcess {
        builder = builder.bookmark_interval(Duration::from_millis(200));
    }
    builder.start().await.unwrap()
}

async fn config_for(kubeconfig: kube::config::Kubeconfig) -> kube::Config {
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap()
}

/// Stamps each ConfigMap with `stamped` = its `data.v` and `writer` = this replica, from the
/// manager's cache, writing only when the stamp differs.
#[derive(Clone)]
struct Stamp {
    api: Api<ConfigMap>,
    reader: Reader<ConfigMap>,
    identity: String,
}

impl Reconciler<Request> for Stamp {
    type Error = kube::Error;

    async fn reconcile(&self, request: &Request, _ctx: &Context) -> Result<Action, kube::Error> {
        let Ok(Some(cm)) = self.reader.get(&request.name, Some(NS)) else {
            return Ok(Action::done());
        };
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default();
        let stamped = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("stamped"));
        if stamped != Some(&value) {
            let patch =
                json!({"metadata": {"annotations": {"stamped": value, "writer": self.identity}}});
            self.api
                .patch(
                    &request.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        Ok(Action::done())
    }
}

/// A manager on `config` with the test's bounds, a short cache backoff and a stamping
/// controller; leader election when `identity` names a replica.
async fn stamping_manager(config: kube::Config, identity: &str, elect: bool) -> Manager {
    let mut options = ManagerOptions::default()
        .metrics_bind_address("0")
        .unwrap()
        .health_probe_bind_address("127.0.0.1:0")
        .unwrap()
        .graceful_shutdown_timeout(Duration::from_secs(5))
        .connection(bounds());
    if elect {
        options = options.leader_election(
            LeaderElectionConfig::new("kcr-partition-test")
                .namespace(NS)
                .identity(identity)
                .timings(
                    Duration::from_secs(3),
                    Duration::from_secs(2),
                    Duration::from_millis(250),
                ),
        );
    }
    let mgr = Manager::connect(config, options).await.unwrap();
    mgr.cache()
        .set_watch_backoff(
            WatchBackoff::default().delays(Duration::from_millis(200), Duration::from_secs(1)),
        )
        .unwrap();
    let reconciler = Stamp {
        api: Api::namespaced(mgr.kube_client(), NS),
        reader: mgr
            .reader::<ConfigMap>(kcr_source::WatchScope::all().namespace(NS))
            .unwrap(),
        identity: identity.to_owned(),
    };
    mgr.controller()
        .named("stamp")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(NS))
        .complete(reconciler)
        .unwrap();
    mgr
}

fn configmap(name: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": NS}, "data": {"v": value}})
}

/// `name`'s stamp and writer as the server has them, read on a new connection.
async fn stamp_of(api: &Api<ConfigMap>, name: &str) -> Option<(String, String)> {
    let cm = api.get_opt(name).await.ok()??;
    let annotations = cm.metadata.annotations.unwrap_or_default();
    Some((
        annotations.get("stamped")?.clone(),
        annotations.get("writer")?.clone(),
    ))
}

/// Waits until every `(name, value)` is stamped, up to `bound`; how long it took, or what was
/// missing.
async fn stamped(
    server: &TestApiServer,
    wanted: &[(&str, &str)],
    bound: Duration,
) -> Result<Duration, String> {
    // The test's own reads go through a client made now: the server's own client may hold a
    // connection the partition froze.
    let config = config_for(server.kubeconfig()).await;
    let api: Api<ConfigMap> = Api::namespaced(
        kcr_connect::client(config, ConnectionOptions::default()).unwrap(),
        NS,
    );
    let start = Instant::now();
    loop {
        let mut missing = Vec::new();
        for (name, value) in wanted {
            match stamp_of(&api, name).await {
                Some((v, _)) if v == *value => {}
                other => missing.push(format!("{name}={value} (now {other:?})")),
            }
        }
        if missing.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > bound {
            return Err(format!("not stamped after {bound:?}: {missing:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_and_its_cache_converge_within_the_bound_after_a_partition() {
    let server = own_server().await;
    let mgr = stamping_manager(config_for(server.kubeconfig()).await, "only", false).await;
    let (_mgr, stop, run) = spawn_manager(mgr);
    server.upsert(configmap("before", "0")).await.unwrap();
    stamped(&server, &[("before", "0")], Duration::from_secs(30))
        .await
        .unwrap();

    server.faults().blackhole();
    server.upsert(configmap("before", "1")).await.unwrap();
    server.upsert(configmap("during", "1")).await.unwrap();
    tokio::time::sleep(PARTITION).await;
    server.faults().heal();
    server.upsert(configmap("after", "2")).await.unwrap();

    let took = stamped(
        &server,
        &[("before", "1"), ("during", "1"), ("after", "2")],
        CONVERGED_WITHIN,
    )
    .await;
    eprintln!("converged after the heal in {took:?}");
    assert!(
        server.faults().frozen_connections() > 0,
        "the partition froze something"
    );
    stop.cancel();
    run.await.unwrap().unwrap();
    took.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_started_during_a_partition_is_ready_within_the_bound_after_the_heal() {
    let server = own_server().await;
    server.faults().blackhole();
    let mgr = stamping_manager(config_for(server.kubeconfig()).await, "late", true).await;
    let probes = mgr.health_probe_addr().unwrap();
    let (mgr, stop, run) = spawn_manager(mgr);
    tokio::time::sleep(PARTITION).await;
    let (code, body) = http_get(probes, "/readyz").await.unwrap();
    assert_ne!(code, 200, "not ready during the partition: {body}");
    assert!(
        !mgr.is_leader(),
        "no Lease could be read during the partition"
    );

    server.faults().heal();
    let healed = Instant::now();
    server.upsert(configmap("after", "1")).await.unwrap();
    let took = stamped(&server, &[("after", "1")], CONVERGED_WITHIN).await;
    let ready = loop {
        match http_get(probes, "/readyz").await {
            Some((200, _)) => break Some(healed.elapsed()),
            _ if healed.elapsed() > CONVERGED_WITHIN => break None,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    eprintln!("after the heal: reconciled in {took:?}, ready in {ready:?}");
    assert!(mgr.is_leader());
    stop.cancel();
    run.await.unwrap().unwrap();
    took.unwrap();
    assert!(
        ready.is_some(),
        "not ready within {CONVERGED_WITHIN:?} of the heal"
    );
}

/// Every write of a stamp the server recorded, in resourceVersion order: `(rv, writer, stamp)`
/// of each event whose stamp or writer changed.
type Writes = Arc<Mutex<Vec<(u64, String, String, String)>>>;

fn record_writes(api: Api<ConfigMap>) -> (Writes, tokio::task::JoinHandle<()>) {
    let writes: Writes = Arc::default();
    let task = tokio::spawn({
        let writes = writes.clone();
        async move {
            let mut last: BTreeMap<String, (String, String)> = BTreeMap::new();
            let mut stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = stream.next().await {
                let Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = event else {
                    continue;
                };
                let annotations = cm.metadata.annotations.clone().unwrap_or_default();
                let (Some(writer), Some(stamp)) =
                    (annotations.get("writer"), annotations.get("stamped"))
                else {
                    continue;
                };
                let name = cm.metadata.name.clone().unwrap_or_default();
                let now = (writer.clone(), stamp.clone());
                if last.get(&name) != Some(&now) {
                    let rv = cm
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse().ok())
                        .unwrap_or(0);
                    writes
                        .lock()
                        .push((rv, name.clone(), writer.clone(), stamp.clone()));
                    last.insert(name, now);
                }
            }
        }
    });
    (writes, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_steps_down_before_another_replica_writes() {
    // Each replica reaches the server through a relay of its own: only the leader's is cut.
    let server = own_server().await;
    let (relay_a, relay_b) = (
        Relay::start(server.addr()).await.unwrap(),
        Relay::start(server.addr()).await.unwrap(),
    );
    let direct: Api<ConfigMap> = Api::namespaced(server.client(), NS);
    let (writes, recorder) = record_writes(direct.clone());

    let a = stamping_manager(
        config_for(relay_a.kubeconfig(&server).unwrap()).await,
        "a",
        true,
    )
    .await;
    let (a, stop_a, run_a) = spawn_manager(a);
    tokio::time::timeout(Duration::from_secs(30), a.elected())
        .await
        .expect("a leads");
    let b = stamping_manager(
        config_for(relay_b.kubeconfig(&server).unwrap()).await,
        "b",
        true,
    )
    .await;
    let (b, stop_b, run_b) = spawn_manager(b);
    server.upsert(configmap("x", "0")).await.unwrap();
    stamped(&server, &[("x", "0")], Duration::from_secs(30))
        .await
        .unwrap();

    relay_a.blackhole();
    let partitioned = Instant::now();
    server.upsert(configmap("x", "1")).await.unwrap();
    // The leader cannot renew: it steps down at its renew deadline, with an error.
    let lost = tokio::time::timeout(Duration::from_secs(20), run_a)
        .await
        .expect("the partitioned leader stops")
        .unwrap();
    let stepped_down = partitioned.elapsed();
    assert!(
        matches!(lost, Err(ManagerError::LeaderElection(_))),
        "{lost:?}"
    );
    assert!(!a.is_leader());
    // The other replica takes over and writes.
    stamped(&server, &[("x", "1")], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(b.is_leader());
    let rest = PARTITION.saturating_sub(partitioned.elapsed());
    tokio::time::sleep(rest).await;

    relay_a.heal();
    // The stepped-down replica comes back, as its Deployment would restart it.
    let a2 = stamping_manager(
        config_for(relay_a.kubeconfig(&server).unwrap()).await,
        "a",
        true,
    )
    .await;
    let (a2, stop_a2, run_a2) = spawn_manager(a2);
    server.upsert(configmap("y", "2")).await.unwrap();
    stamped(&server, &[("y", "2")], CONVERGED_WITHIN)
        .await
        .unwrap();

    // After the heal both agree on one leader: b, as the Lease says.
    let leases: Api<Lease> = Api::namespaced(server.client(), NS);
    let holder = leases
        .get("kcr-partition-test")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("b"));
    assert!(b.is_leader() && !a2.is_leader());

    // The server's record: the partitioned leader's last write comes before the other's first.
    kcr_envtest::eventually(
        "the recorder saw y's stamp",
        Duration::from_secs(10),
        || async { writes.lock().iter().any(|(_, name, _, _)| name == "y") },
    )
    .await;
    let writes = writes.lock().clone();
    let last_a = writes.iter().filter(|w| w.2 == "a").map(|w| w.0).max();
    let first_b = writes.iter().filter(|w| w.2 == "b").map(|w| w.0).min();
    eprintln!(
        "writes (rv, object, writer, stamp): {writes:?}; a stepped down after {stepped_down:?}"
    );
    assert!(last_a.is_some() && first_b.is_some(), "{writes:?}");
    assert!(last_a < first_b, "a wrote after b had started: {writes:?}");

    recorder.abort();
    stop_b.cancel();
    stop_a2.cancel();
    stop_a.cancel();
    run_b.await.unwrap().unwrap();
    run_a2.await.unwrap().unwrap();
}
