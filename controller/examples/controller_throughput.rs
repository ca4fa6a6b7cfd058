//! Controller throughput, kcr vs kube-runtime, no cluster needed.
//!
//! Both pipelines get the same events for the same objects and run a no-op reconciler:
//!
//! - **kcr**: a [`Channel`] source → a predicate → [`EnqueueRequestForObject`] → the work queue →
//!   `workers` workers.
//! - **kube-runtime**: `Controller::for_shared_stream` fed by a channel of `Arc<ConfigMap>` (the
//!   same predicate as a stream filter) with a reflector `Store` holding the objects, concurrency
//!   `workers`.
//!
//! Events cycle over `objects` distinct objects, so both sides de-duplicate bursts for one key;
//! the rate is completed reconciles per second from the first event until everything is
//! processed.
//!
//! ```sh
//! cargo run --release -p kcr-controller --example controller_throughput [-- <events> <objects> <workers,...> <kcr,kube-runtime>]
//! ```
//!
//! Prints `controller-bench impl=<kcr|kube-runtime> workers=<n> ops=<reconciles> secs=<s>
//! rate=<reconciles/s>` lines. `BENCH_THREADS` sets the runtime's worker threads (default 2);
//! `BENCH_METRICS=1` installs the Prometheus recorder first (kcr then records its metrics).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Builder, Context, Reconciler, WatchOptions};
use kcr_handler::{EnqueueRequestForObject, EventHandler, Request};
use kcr_predicate::Predicate;
use kcr_queue::WorkQueue;
use kcr_source::{Channel, Event};
use kube_runtime::controller::{Action as KubeAction, Config, Controller as KubeController};
use kube_runtime::{reflector, watcher};
use tokio_util::sync::CancellationToken;

fn objects(n: usize) -> Vec<Arc<ConfigMap>> {
    (0..n)
        .map(|i| {
            let mut c = ConfigMap::default();
            c.metadata.name = Some(format!("cm-{i}"));
            c.metadata.namespace = Some(format!("ns-{}", i % 10));
            c.metadata.resource_version = Some(i.to_string());
            c.metadata.labels = Some([("app".to_string(), "bench".to_string())].into());
            Arc::new(c)
        })
        .collect()
}

/// The predicate both sides apply: the object carries the app=bench label.
fn wanted(c: &ConfigMap) -> bool {
    c.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get("app").is_some_and(|v| v == "bench"))
}

/// [`wanted`] as a kcr predicate.
struct Wanted;

impl Predicate<ConfigMap> for Wanted {
    fn evaluate(&self, event: &Event<ConfigMap>) -> bool {
        wanted(event.object())
    }
}

struct Noop {
    count: Arc<AtomicU64>,
}

impl Reconciler<Request> for Noop {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, _request: &Request, _ctx: &Context) -> Result<Action, Self::Error> {
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(Action::done())
    }
}

/// Counts handled events, then enqueues the object.
struct CountingHandler {
    handled: Arc<AtomicU64>,
}

impl EventHandler<ConfigMap> for CountingHandler {
    fn handle(&self, event: &Event<ConfigMap>, queue: &WorkQueue<Request>) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        EnqueueRequestForObject.handle(event, queue);
    }
}

async fn bench_kcr(objs: &[Arc<ConfigMap>], events: u64, workers: usize) -> (u64, f64) {
    let reconciles = Arc::new(AtomicU64::new(0));
    let handled = Arc::new(AtomicU64::new(0));
    let channel = Channel::<ConfigMap>::new(4096);
    let controller = Builder::new()
        .named(format!("bench-{workers}"))
        .max_concurrent_reconciles(workers)
        .watches(
            channel.clone(),
            CountingHandler {
                handled: handled.clone(),
            },
            WatchOptions::new().predicate(Wanted),
        )
        .build(Noop {
            count: reconciles.clone(),
        })
        .expect("named");
    let queue = controller.queue().clone();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    while channel.subscribers() == 0 {
        tokio::task::yield_now().await;
    }

    let start = Instant::now();
    let producer = {
        let channel = channel.clone();
        let objs = objs.to_vec();
        tokio::spawn(async move {
            for i in 0..events as usize {
                let object = objs[i % objs.len()].clone();
                channel
                    .send(Event::Generic { object })
                    .await
                    .expect("channel open");
            }
        })
    };
    producer.await.expect("producer");
    while handled.load(Ordering::Relaxed) < events || !queue.is_empty() || queue.num_in_flight() > 0
    {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    stop.cancel();
    task.await.expect("no panic").expect("clean shutdown");
    (reconciles.load(Ordering::Relaxed), secs)
}

async fn bench_kube_runtime(objs: &[Arc<ConfigMap>], events: u64, workers: usize) -> (u64, f64) {
    let (reader, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&watcher::Event::Init);
    for o in objs {
        writer.apply_watcher_event(&watcher::Event::InitApply((**o).clone()));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);

    let (tx, rx) = tokio::sync::mpsc::channel::<Arc<ConfigMap>>(4096);
    let trigger = tokio_stream::wrappers::ReceiverStream::new(rx).filter(|c| {
        let keep = wanted(c);
        async move { keep }
    });
    let reconciles = Arc::new(AtomicU64::new(0));
    let ctx = reconciles.clone();
    let config = Config::default().concurrency(workers as u16);
    let run = KubeController::for_shared_stream(trigger, reader)
        .with_config(config)
        .run(
            |_obj: Arc<ConfigMap>, count: Arc<AtomicU64>| async move {
                count.fetch_add(1, Ordering::Relaxed);
                Ok::<_, std::convert::Infallible>(KubeAction::await_change())
            },
            |_obj, _err: &std::convert::Infallible, _ctx| KubeAction::await_change(),
            ctx,
        )
        .for_each(|_| std::future::ready(()));
    let runner = tokio::spawn(run);

    let start = Instant::now();
    for i in 0..events as usize {
        tx.send(objs[i % objs.len()].clone())
            .await
            .expect("controller running");
    }
    drop(tx);
    // The controller's stream ends once its trigger ended and every scheduled reconcile ran.
    runner.await.expect("no panic");
    let secs = start.elapsed().as_secs_f64();
    drop(writer);
    (reconciles.load(Ordering::Relaxed), secs)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let events: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let n_objects: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let worker_counts: Vec<usize> = args
        .get(2)
        .map(|a| a.split(',').filter_map(|w| w.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 4]);
    let impls: Vec<String> = args
        .get(3)
        .map(|a| a.split(',').map(str::to_string).collect())
        .unwrap_or_else(|| vec!["kcr".to_string(), "kube-runtime".to_string()]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::env::var("BENCH_THREADS")
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(2),
        )
        .enable_all()
        .build()
        .expect("runtime");
    let objs = objects(n_objects);
    if std::env::var_os("BENCH_METRICS").is_some() {
        // kcr's controller and queue metrics through the Prometheus recorder, as a Manager with
        // /metrics enabled runs them (kube-runtime's Controller has no metrics).
        let _guard = rt.enter();
        assert!(kcr_controller::http::prometheus_handle().is_some());
        println!("# kcr metrics on (Prometheus recorder installed)");
    }
    rt.block_on(async {
        for &workers in &worker_counts {
            for implementation in impls.iter().map(String::as_str) {
                let (ops, secs) = match implementation {
                    "kcr" => bench_kcr(&objs, events, workers).await,
                    _ => bench_kube_runtime(&objs, events, workers).await,
                };
                println!(
                    "controller-bench impl={implementation} workers={workers} ops={ops} secs={secs:.3} rate={:.0}",
                    ops as f64 / secs
                );
            }
        }
    });
}
