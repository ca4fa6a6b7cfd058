//! `sharding-bench`: how a sharded controller's throughput grows with its replicas.
//!
//! For each configuration (1 and 3 replicas by default), it starts that many managers in this
//! process, each with its own client to one kcr-envtest API server (in process by default; the
//! real kube-apiserver with `KCR_ENVTEST_BACKEND=real`), shards one ConfigMap controller across
//! them (5 workers each), creates the objects, waits until every object has been reconciled once
//! (so the sharder has assigned them all), then counts reconciles for a fixed time. Each
//! reconcile waits 10 ms, standing in for a call to an external system, and asks to be requeued
//! at once, so workers never wait for events. It prints one line per configuration:
//!
//! ```text
//! sharding-bench replicas=N workers=5 objects=M secs=S rate=R
//! ```
//!
//! `rate` is reconciles per second over all replicas. Environment: `SHARDING_BENCH_REPLICAS`
//! (default `1,3`), `SHARDING_BENCH_OBJECTS` (default 3000), `SHARDING_BENCH_SECS` (default 5).
//!
//! Run with `cargo run --release -p kcr-shard --example sharding`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcr_controller::{Action, Context, Manager, ManagerOptions, Reconciler, WatchOptions};
use kcr_envtest::TestApiServer;
use kcr_handler::Request;
use kcr_shard::{self as shard, ShardBuilderExt, ShardConfig, ShardOptionsExt};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const WORKERS: usize = 5;
const EXTERNAL_CALL: Duration = Duration::from_millis(10);

struct Slow {
    count: Arc<AtomicU64>,
    seen: Arc<Mutex<HashSet<String>>>,
}

impl Reconciler<Request> for Slow {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        tokio::time::sleep(EXTERNAL_CALL).await;
        self.count.fetch_add(1, Ordering::Relaxed);
        self.seen.lock().insert(request.name.clone());
        Ok(Action::requeue_after(Duration::ZERO))
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn run_config(
    server: &TestApiServer,
    replicas: usize,
    objects: usize,
    secs: u64,
) -> anyhow::Result<f64> {
    let group = format!("bench-{replicas}");
    let namespaces: Api<Namespace> = Api::all(server.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(group.clone());
    namespaces.create(&PostParams::default(), &ns).await?;

    let count = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let mut running = Vec::new();
    for i in 0..replicas {
        let config = ShardConfig::new(group.clone())
            .namespace(group.clone())
            .identity(format!("replica-{i}"))
            .timings(
                Duration::from_secs(4),
                Duration::from_secs(2),
                Duration::from_millis(500),
            );
        let options = ManagerOptions::default()
            .metrics_bind_address("0")?
            .health_probe_bind_address("0")?
            .shard_by_lease(config);
        let mgr = Arc::new(Manager::new(server.client(), options).await?);
        mgr.controller()
            .named(group.clone())
            .sharded()
            .for_kind::<ConfigMap>(WatchOptions::new().namespace(group.clone()))
            .max_concurrent_reconciles(WORKERS)
            .complete(Slow {
                count: count.clone(),
                seen: seen.clone(),
            })?;
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (mgr, stop) = (mgr.clone(), stop.clone());
            async move { mgr.run(stop).await }
        });
        running.push((mgr, stop, task));
    }
    // Wait until the sharder sees every replica, so that objects are assigned once.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = running
            .iter()
            .find_map(|(mgr, _, _)| shard::sharder_view(mgr));
        if view.is_some_and(|v| v.len() == replicas) {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "replicas did not join within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client(), &group);
    let created: Vec<kube::Result<ConfigMap>> = futures::stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move {
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some(format!("cm-{i}"));
                api.create(&PostParams::default(), &cm).await
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    for c in created {
        c?;
    }
    // Warm-up: every object assigned and reconciled once.
    let deadline = Instant::now() + Duration::from_secs(300);
    while seen.lock().len() < objects {
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {objects} objects reconciled within 300 s",
            seen.lock().len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start_count = count.load(Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let done = count.load(Ordering::Relaxed) - start_count;
    let rate = done as f64 / started.elapsed().as_secs_f64();
    println!(
        "sharding-bench replicas={replicas} workers={WORKERS} objects={objects} secs={secs} rate={rate:.0}"
    );
    for (_, stop, _) in &running {
        stop.cancel();
    }
    for (_, _, task) in running {
        task.await??;
    }
    Ok(rate)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let replicas: Vec<usize> = std::env::var("SHARDING_BENCH_REPLICAS")
        .unwrap_or_else(|_| "1,3".into())
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()?;
    let objects = env_or("SHARDING_BENCH_OBJECTS", 3000usize);
    let secs = env_or("SHARDING_BENCH_SECS", 5u64);
    let server = TestApiServer::start().await?;
    eprintln!("sharding-bench: backend {:?}", server.backend());
    let mut rates = Vec::new();
    for n in replicas {
        rates.push((n, run_config(&server, n, objects, secs).await?));
    }
    if let (Some((1, one)), Some((n, many))) = (rates.first().copied(), rates.last().copied())
        && n > 1
    {
        println!(
            "sharding-bench speedup replicas={n} vs 1: {:.2}x",
            many / one
        );
    }
    server.shutdown();
    Ok(())
}
