//! The cost of kcr-queue's metrics: the same single-task workload with metrics turned off, with
//! metrics on but no recorder installed, and with a Prometheus recorder installed.
//!
//! ```sh
//! cargo run --release -p kcr-queue --example metrics_cost
//! ```
//!
//! Workload: 1,000 rounds of adding 1,000 distinct keys then getting and completing them, on a
//! current-thread runtime (no contention, so the difference is the metrics work itself). Each
//! configuration runs three times; the best run is printed as
//! `queue-metrics-cost metrics=<config> keys=<n> secs=<float> ns_per_key=<float>` for:
//! `off` (`metrics(false)`), `default-no-recorder` (the default with no recorder installed:
//! metrics are skipped), `forced-on-no-recorder` (`metrics(true)`: no-op handles, but the clock
//! reads remain), `default-prometheus` (the default after installing a Prometheus recorder).

use std::time::Instant;

use kcr_queue::WorkQueue;
use metrics_exporter_prometheus::PrometheusBuilder;

const ROUNDS: u64 = 1_000;
const KEYS: u64 = 1_000;

async fn run(metrics: Option<bool>) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let builder = WorkQueue::<u64>::builder("cost");
        let queue = match metrics {
            Some(on) => builder.metrics(on).build(),
            None => builder.build(),
        };
        let start = Instant::now();
        for round in 0..ROUNDS {
            for key in 0..KEYS {
                queue.add(round * KEYS + key);
            }
            for _ in 0..KEYS {
                queue.get().await.expect("queue is running").done();
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    best
}

fn report(label: &str, secs: f64) {
    let keys = ROUNDS * KEYS;
    println!(
        "queue-metrics-cost metrics={label} keys={keys} secs={secs:.4} ns_per_key={:.1}",
        secs * 1e9 / keys as f64
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    report("off", run(Some(false)).await);
    report("default-no-recorder", run(None).await);
    report("forced-on-no-recorder", run(Some(true)).await);
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_err() {
        eprintln!("a global recorder was already installed");
        return;
    }
    report("default-prometheus", run(None).await);
    let rendered = handle.render();
    assert!(
        rendered.contains("workqueue_adds_total{controller=\"cost\",name=\"cost\"}"),
        "{rendered}"
    );
}
