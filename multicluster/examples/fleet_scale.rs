//! `fleet-scale`: one manager reconciling ConfigMaps across a fleet of kcr-envtest clusters.
//!
//! Starts `FLEET_CLUSTERS` servers (default 10; in process by default, so their stores live in
//! this process too; `KCR_ENVTEST_BACKEND=real` runs a kube-apiserver + etcd each), creates
//! `FLEET_OBJECTS` ConfigMaps (default 1,000, about 1 KiB each) in every one, then starts a
//! manager whose multi-cluster controller (`for_kind::<ConfigMap>` in every cluster, a no-op
//! reconciler) is fed by a static provider. It measures:
//!
//! - `sync_s`: from the manager's start until every object of every cluster was reconciled once;
//! - `rss_mib_before` / `rss_mib_after`: the process's resident memory before the manager
//!   starts and once synced (the difference is what the fleet's caches and controller add);
//! - with the first cluster's API server stopped, the delay from a create in another cluster
//!   to its reconcile, over 20 creates (`down_delay_ms_p50`, `down_delay_ms_max`).
//!
//! It prints one line:
//! `fleet-scale clusters=N objects=M sync_s= rss_mib_before= rss_mib_after= down_delay_ms_p50= down_delay_ms_max=`
//!
//! `cargo run --release -p kcr-multicluster --example fleet_scale`

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::process::ProcessStats;
use kcr_controller::{Action, Context, Manager, ManagerOptions};
use kcr_envtest::TestApiServer;
use kcr_multicluster::{Cluster, ClusterRequest, Fleet, FleetReconciler, StaticProvider};
use kcr_source::WatchScope;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_mib() -> f64 {
    ProcessStats::read().resident_memory_bytes.unwrap_or(0) as f64 / (1024.0 * 1024.0)
}

#[derive(Clone, Default)]
struct Seen {
    keys: Arc<Mutex<HashSet<String>>>,
    at: Arc<Mutex<BTreeMap<String, Instant>>>,
}

impl FleetReconciler for Seen {
    type Error = std::convert::Infallible;
    async fn reconcile(
        &self,
        request: &ClusterRequest,
        _cluster: &Cluster,
        _ctx: &Context,
    ) -> Result<Action, Self::Error> {
        let key = request.to_string();
        self.at
            .lock()
            .entry(key.clone())
            .or_insert_with(Instant::now);
        self.keys.lock().insert(key);
        Ok(Action::done())
    }
}

fn configmap(i: usize) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(format!("cm-{i:05}"));
    cm.metadata.labels = Some(BTreeMap::from([
        ("app".to_string(), "fleet-scale".to_string()),
        ("index".to_string(), (i % 10).to_string()),
    ]));
    cm.data = Some(BTreeMap::from([("payload".to_string(), "x".repeat(1024))]));
    cm
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let clusters = env("FLEET_CLUSTERS", 10);
    let objects = env("FLEET_OBJECTS", 1_000);
    let mut servers = Vec::new();
    for _ in 0..clusters {
        servers.push(TestApiServer::start().await?);
    }
    for server in &servers {
        let api: Api<ConfigMap> = Api::namespaced(server.client(), server.namespace());
        futures::stream::iter(0..objects)
            .map(|i| {
                let api = api.clone();
                async move { api.create(&PostParams::default(), &configmap(i)).await }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
    }
    let namespace = servers[0].namespace().to_string();
    let rss_before = rss_mib();

    let mgr = Manager::new(
        servers[0].client(),
        ManagerOptions::default()
            .metrics_bind_address("127.0.0.1:0")?
            .health_probe_bind_address("127.0.0.1:0")?,
    )
    .await?;
    let fleet = Fleet::new("manager");
    let mut provider = StaticProvider::new();
    for (i, server) in servers.iter().enumerate() {
        provider = provider.client(format!("c{i}"), server.client());
    }
    fleet.run_provider(&mgr, provider)?;
    let seen = Seen::default();
    fleet
        .controller(&mgr)
        .named("fleet-scale")
        .max_concurrent_reconciles(4)
        .for_kind::<ConfigMap>(WatchScope::all().namespace(namespace.clone()))
        .complete(seen.clone())?;
    let mgr = Arc::new(mgr);
    let stop = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let total = clusters * objects;
    while seen.keys.lock().len() < total {
        if started.elapsed() > Duration::from_secs(600) {
            anyhow::bail!(
                "only {} of {total} reconciled after 600 s",
                seen.keys.lock().len()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sync_s = started.elapsed().as_secs_f64();
    let rss_after = rss_mib();

    // One cluster down: creates elsewhere are reconciled as before.
    servers[0].shutdown();
    let other = &servers[clusters.min(2) - 1];
    let api: Api<ConfigMap> = Api::namespaced(other.client(), other.namespace());
    let mut delays = Vec::new();
    for i in 0..20 {
        let index = objects + i;
        let created = Instant::now();
        api.create(&PostParams::default(), &configmap(index))
            .await?;
        let key = format!(
            "c{}/{}/cm-{index:05}",
            clusters.min(2) - 1,
            other.namespace()
        );
        loop {
            if let Some(at) = seen.at.lock().get(&key) {
                delays.push(at.duration_since(created).as_secs_f64() * 1000.0);
                break;
            }
            if created.elapsed() > Duration::from_secs(60) {
                anyhow::bail!("{key} not reconciled within 60 s with a cluster down");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    delays.sort_by(f64::total_cmp);
    println!(
        "fleet-scale clusters={clusters} objects={objects} sync_s={sync_s:.2} rss_mib_before={rss_before:.1} rss_mib_after={rss_after:.1} down_delay_ms_p50={:.1} down_delay_ms_max={:.1}",
        delays[delays.len() / 2],
        delays[delays.len() - 1]
    );
    stop.cancel();
    run.await??;
    Ok(())
}
