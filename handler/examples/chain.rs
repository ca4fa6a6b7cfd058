//! Benchmark: events per second through a typical chain (a `GenerationChanged` predicate, then
//! `EnqueueRequestForObject` into a `kcr_queue::WorkQueue`), and the cost of one shared `Kind`
//! store update fanned out to subscribers.
//!
//! Run with `cargo run --release -p kcr-handler --example chain`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_handler::{EnqueueRequestForObject, EventHandler, Request};
use kcr_predicate::{GenerationChanged, Predicate};
use kcr_queue::WorkQueue;
use kcr_source::{Event, Kind, Source};
use kube::runtime::watcher;

const OBJECTS: usize = 10_000;
const EVENTS: usize = 2_000_000;
const STORE_UPDATES: usize = 200_000;

fn deployment(i: usize, generation: i64, rv: u64) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = Some(format!("deploy-{i}"));
    d.metadata.namespace = Some(format!("ns-{}", i % 10));
    d.metadata.generation = Some(generation);
    d.metadata.resource_version = Some(rv.to_string());
    d
}

fn config_map(i: usize, rv: u64) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(format!("cm-{i}"));
    c.metadata.namespace = Some("default".into());
    c.metadata.resource_version = Some(rv.to_string());
    c.data = Some([("key".to_string(), "x".repeat(200))].into());
    c
}

/// Events/s through predicate + handler into the queue, `pass_ratio` of updates changing the
/// generation. Workers drain the queue concurrently, as in a controller.
async fn chain(pass_every: usize) -> (f64, usize) {
    let queue: WorkQueue<Request> = WorkQueue::builder("bench").metrics(false).build();
    // Pre-built events: updates that bump the resourceVersion and, every `pass_every`, the
    // generation.
    let olds: Vec<Arc<Deployment>> = (0..OBJECTS)
        .map(|i| Arc::new(deployment(i, 1, 1)))
        .collect();
    let news: Vec<Arc<Deployment>> = (0..OBJECTS)
        .map(|i| {
            let generation = if i % pass_every == 0 { 2 } else { 1 };
            Arc::new(deployment(i, generation, 2))
        })
        .collect();
    let events: Vec<Event<Deployment>> = (0..EVENTS)
        .map(|n| Event::Update {
            old: Arc::clone(&olds[n % OBJECTS]),
            new: Arc::clone(&news[n % OBJECTS]),
        })
        .collect();
    let worker = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut handled = 0usize;
            while let Some(item) = queue.get().await {
                handled += 1;
                drop(item);
            }
            handled
        })
    };
    let predicate = GenerationChanged;
    let handler = EnqueueRequestForObject;
    let start = Instant::now();
    for event in &events {
        if predicate.evaluate(event) {
            handler.handle(event, &queue);
        }
    }
    let elapsed = start.elapsed();
    queue
        .shutdown_with_drain(Duration::from_secs(60))
        .await
        .expect("drains");
    let handled = worker.await.expect("worker");
    (EVENTS as f64 / elapsed.as_secs_f64(), handled)
}

/// Mean time per store update (watch event applied, old object looked up, fanned out) with
/// `subscribers` subscribers reading concurrently.
async fn store_updates(subscribers: usize) -> Duration {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let kind = Kind::<ConfigMap>::from_watcher_with_buffer(rx, 4096).expect("runtime");
    let mut readers = Vec::new();
    let last_rv = (STORE_UPDATES + 1) as u64;
    let last_name = format!("cm-{}", (STORE_UPDATES - 1) % 1000);
    for _ in 0..subscribers {
        let mut events = kind.start().expect("start").events;
        let last_name = last_name.clone();
        readers.push(tokio::spawn(async move {
            let mut seen = 0u64;
            while let Some(Ok(event)) = events.next().await {
                seen += 1;
                let o = event.object();
                if o.metadata.name.as_deref() == Some(&last_name)
                    && o.metadata.resource_version.as_deref() == Some(&last_rv.to_string())
                {
                    break;
                }
            }
            seen
        }));
    }
    // initial list of 1000 objects, then updates cycling over them
    tx.unbounded_send(Ok(watcher::Event::Init)).expect("open");
    for i in 0..1000 {
        tx.unbounded_send(Ok(watcher::Event::InitApply(config_map(i, 1))))
            .expect("open");
    }
    tx.unbounded_send(Ok(watcher::Event::InitDone))
        .expect("open");
    let updates: Vec<ConfigMap> = (0..STORE_UPDATES)
        .map(|n| config_map(n % 1000, n as u64 + 2))
        .collect();
    kind.start()
        .expect("start")
        .sync
        .wait()
        .await
        .expect("synced");
    let start = Instant::now();
    for u in updates {
        tx.unbounded_send(Ok(watcher::Event::Apply(u)))
            .expect("open");
    }
    if subscribers == 0 {
        // wait until the informer has processed everything
        while kind.stats().watch_events < (STORE_UPDATES + 1002) as u64 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    for r in readers {
        r.await.expect("reader");
    }
    let elapsed = start.elapsed();
    let stats = kind.stats();
    if stats.lags > 0 {
        println!(
            "  ({} subscriber lag(s) resynced from the store)",
            stats.lags
        );
    }
    elapsed / STORE_UPDATES as u32
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!(
        "chain: GenerationChanged -> EnqueueRequestForObject -> WorkQueue ({EVENTS} update events over {OBJECTS} objects, 1 worker draining)"
    );
    for pass_every in [1, 10] {
        let (rate, handled) = chain(pass_every).await;
        println!(
            "  1/{pass_every} of updates change the generation: {:.2} M events/s ({handled} reconciles after de-duplication)",
            rate / 1e6
        );
    }
    println!("shared Kind store update ({STORE_UPDATES} watch events over 1000 ConfigMaps)");
    for subscribers in [0, 1, 4] {
        let per = store_updates(subscribers).await;
        println!(
            "  {subscribers} subscriber(s): {:.0} ns per update ({:.2} M updates/s)",
            per.as_nanos() as f64,
            1e9 / per.as_nanos().max(1) as f64 / 1e6
        );
    }
}
