//! One member cluster of a fleet behind a silent network partition (kcr-envtest's blackhole:
//! every connection to its API server frozen for good, nothing closed), on either backend: the
//! other member keeps being reconciled without added delay, the partitioned one shows as not
//! ready on `/readyz/fleet` within the fleet's connection bounds, and after the heal it is
//! ready again and what changed in it meanwhile is reconciled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_connect::ConnectionOptions;
use kcr_controller::{Action, Context, Manager, ManagerOptions};
use kcr_envtest::{Backend, TestApiServer, eventually};
use kcr_multicluster::{Cluster, ClusterRequest, Fleet, FleetReconciler};
use kcr_source::WatchScope;
use parking_lot::Mutex;
use tokio::time::Instant;

/// `(status, body)` of a GET of the manager's probe server (bounded: a second).
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let get = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        let text = String::from_utf8_lossy(&response).to_string();
        let status = text.split(' ').nth(1).unwrap().parse().unwrap();
        (status, text)
    };
    tokio::time::timeout(Duration::from_secs(1), get)
        .await
        .expect("the probe server answers")
}

/// When each `(cluster, name)` was first reconciled.
#[derive(Clone, Default)]
struct Record(Arc<Mutex<BTreeMap<(String, String), Instant>>>);

impl Record {
    fn at(&self, cluster: &str, name: &str) -> Option<Instant> {
        self.0
            .lock()
            .get(&(cluster.to_owned(), name.to_owned()))
            .copied()
    }
}

impl FleetReconciler for Record {
    type Error = anyhow::Error;
    async fn reconcile(
        &self,
        request: &ClusterRequest,
        _cluster: &Cluster,
        _ctx: &Context,
    ) -> anyhow::Result<Action> {
        self.0
            .lock()
            .entry((request.cluster.to_string(), request.request.name.clone()))
            .or_insert_with(Instant::now);
        Ok(Action::done())
    }
}

async fn member() -> TestApiServer {
    let mut builder = TestApiServer::builder();
    if Backend::from_env().unwrap() == Backend::InProcess {
        builder = builder.bookmark_interval(Duration::from_millis(200));
    }
    builder.start().await.unwrap()
}

async fn create_cm(server: &TestApiServer, name: &str) -> Instant {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    // Created past the fault proxy: the blackhole is between the fleet and the server only.
    server
        .upsert(serde_json::to_value(&cm).unwrap())
        .await
        .unwrap();
    Instant::now()
}

const IDLE: Duration = Duration::from_secs(2);

/// How long each of three ConfigMaps created in `server` took to be reconciled there.
async fn east_delays(server: &TestApiServer, record: &Record, prefix: &str) -> Vec<Duration> {
    let mut delays = Vec::new();
    for i in 0..3 {
        let name = format!("{prefix}-{i}");
        let created = create_cm(server, &name).await;
        eventually("east reconciles", Duration::from_secs(10), || {
            let record = record.clone();
            let name = name.clone();
            async move { record.at("east", &name).is_some() }
        })
        .await;
        delays.push(
            record
                .at("east", &name)
                .unwrap()
                .saturating_duration_since(created),
        );
    }
    delays
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_member_is_unready_within_the_bound_and_holds_up_no_other() {
    let (hub, east, west) = tokio::join!(TestApiServer::start(), member(), member());
    let hub = hub.unwrap();
    let mgr = Manager::new(
        hub.client(),
        ManagerOptions::default()
            .metrics_bind_address("0")
            .unwrap()
            .health_probe_bind_address("127.0.0.1:0")
            .unwrap(),
    )
    .await
    .unwrap();
    let bounds = ConnectionOptions::default()
        .connect_timeout(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(1))
        .watch_start_timeout(Duration::from_secs(1))
        .watch_idle_timeout(IDLE)
        .pool_idle_timeout(Duration::from_secs(1))
        .pings(Duration::from_millis(500), Duration::from_millis(500));
    let fleet = Fleet::new("hub").connection(bounds);
    fleet.install(&mgr).unwrap();
    for (name, server) in [("east", &east), ("west", &west)] {
        fleet
            .engage_kubeconfig(name, server.kubeconfig())
            .await
            .unwrap();
    }
    let record = Record::default();
    fleet
        .controller(&mgr)
        .named("recorder")
        .members_only()
        .for_kind::<ConfigMap>(WatchScope::all().namespace(east.namespace()))
        .complete(record.clone())
        .unwrap();
    let probes = mgr.health_probe_addr().unwrap();
    let mgr = Arc::new(mgr);
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });

    for server in [&east, &west] {
        create_cm(server, "before").await;
    }
    eventually("both members reconciled", Duration::from_secs(60), || {
        let record = record.clone();
        async move { record.at("east", "before").is_some() && record.at("west", "before").is_some() }
    })
    .await;
    eventually("the fleet is ready", Duration::from_secs(30), || async {
        http_get(probes, "/readyz/fleet").await.0 == 200
    })
    .await;

    let baseline = east_delays(&east, &record, "before").await;
    west.faults().blackhole();
    let partitioned = Instant::now();
    create_cm(&west, "during").await;
    // West is reported not ready within its bound (its watch's idle bound, and the watch
    // retries' start bound, after the partition began).
    let unready = loop {
        let (status, body) = http_get(probes, "/readyz/fleet").await;
        if status != 200 && body.contains("cluster west not ready") {
            break Some((partitioned.elapsed(), body));
        }
        if partitioned.elapsed() > IDLE * 4 {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (took, body) = unready.expect("west shown not ready");
    eprintln!("west not ready {took:?} after the partition began: {body}");
    assert!(!body.contains("cluster east"), "east stays ready: {body}");
    assert!(body.contains("unreachable"), "{body}");

    // East keeps going: each change reconciled as fast as before the partition.
    let during = east_delays(&east, &record, "during").await;
    eprintln!("east's reconcile delays before west's partition: {baseline:?}, during: {during:?}");
    let slowest_before = baseline.iter().max().copied().unwrap_or_default();
    assert!(
        during
            .iter()
            .all(|d| *d < slowest_before + Duration::from_secs(1)),
        "no added delay: before {baseline:?}, during {during:?}"
    );

    west.faults().heal();
    let healed = Instant::now();
    eventually(
        "west's change during the partition is reconciled",
        Duration::from_secs(15),
        || {
            let record = record.clone();
            async move { record.at("west", "during").is_some() }
        },
    )
    .await;
    eventually(
        "the fleet is ready again",
        Duration::from_secs(15),
        || async { http_get(probes, "/readyz/fleet").await.0 == 200 },
    )
    .await;
    eprintln!(
        "west reconciled and ready {:?} after the heal",
        healed.elapsed()
    );
    assert!(
        record.at("west", "during").unwrap() > healed,
        "not before the heal"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
}
