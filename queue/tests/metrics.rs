//! Metrics: client-go names, the `controller` and `name` labels, and values, checked with metrics-util's
//! `DebuggingRecorder` installed as a local recorder.

use std::collections::HashMap;
use std::time::Duration;

use kcr_queue::{ItemExponential, WorkQueue};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tokio::time::advance;

/// Every metric labelled `controller = name = queue` (and nothing else), by metric name. Taking a snapshot resets counters
/// and gauges to 0 and drains histograms.
fn snapshot(snapshotter: &Snapshotter, queue: &str) -> HashMap<String, DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let mut labels: Vec<(&str, &str)> =
                key.key().labels().map(|l| (l.key(), l.value())).collect();
            labels.sort();
            labels == [("controller", queue), ("name", queue)]
        })
        .map(|(key, _, _, value)| (key.key().name().to_string(), value))
        .collect()
}

fn counter(values: &HashMap<String, DebugValue>, name: &str) -> u64 {
    match values.get(name) {
        Some(DebugValue::Counter(v)) => *v,
        other => panic!("{name}: expected a counter, got {other:?}"),
    }
}

fn gauge(values: &HashMap<String, DebugValue>, name: &str) -> f64 {
    match values.get(name) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("{name}: expected a gauge, got {other:?}"),
    }
}

fn histogram(values: &HashMap<String, DebugValue>, name: &str) -> Vec<f64> {
    match values.get(name) {
        Some(DebugValue::Histogram(v)) => v.iter().map(|x| x.into_inner()).collect(),
        other => panic!("{name}: expected a histogram, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn client_go_metric_names_and_values() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let q = metrics::with_local_recorder(&recorder, || {
        WorkQueue::<u32>::builder("orders")
            .rate_limiter(ItemExponential::new(
                Duration::from_secs(1),
                Duration::from_secs(10),
            ))
            .build()
    });
    let _other = metrics::with_local_recorder(&recorder, || WorkQueue::<u32>::new("other"));

    q.add(1);
    q.add(1); // de-duplicated: not an add
    q.add(2);
    advance(Duration::from_secs(2)).await;
    let one = q.get().await.expect("running");
    q.add(1); // dirty: counts as an add (client-go counts it too)
    advance(Duration::from_secs(3)).await;
    one.done();
    q.add_rate_limited(3);

    let v = snapshot(&snapshotter, "orders");
    assert_eq!(counter(&v, "workqueue_adds_total"), 3);
    assert_eq!(counter(&v, "workqueue_retries_total"), 1);
    // 2 ready, 1 handed out, 1 re-queued when done.
    assert_eq!(gauge(&v, "workqueue_depth"), 2.0);
    assert_eq!(histogram(&v, "workqueue_queue_duration_seconds"), vec![2.0]);
    assert_eq!(histogram(&v, "workqueue_work_duration_seconds"), vec![3.0]);
    assert!(
        snapshot(&snapshotter, "other").contains_key("workqueue_depth"),
        "each queue has its own label"
    );

    // The rate-limited key becomes ready after its delay and counts as an add then.
    advance(Duration::from_secs(1)).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(*q.get().await.expect("running"));
    }
    got.sort();
    assert_eq!(got, vec![1, 2, 3]);
    let v = snapshot(&snapshotter, "orders");
    assert_eq!(counter(&v, "workqueue_adds_total"), 1);
    assert_eq!(
        gauge(&v, "workqueue_depth"),
        -2.0,
        "relative to the previous snapshot's reset"
    );
    let waits = histogram(&v, "workqueue_queue_duration_seconds");
    assert_eq!(waits.len(), 3);
    assert!(waits.contains(&6.0), "key 2 waited 6 s: {waits:?}");
}

#[tokio::test(start_paused = true)]
async fn unfinished_work_gauges() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let q = metrics::with_local_recorder(&recorder, || WorkQueue::<u32>::new("slow"));
    q.add(1);
    q.add(2);
    let a = q.get().await.expect("running");
    advance(Duration::from_secs(1)).await;
    let b = q.get().await.expect("running");
    advance(Duration::from_secs(2)).await;
    assert!(q.refresh_unfinished_work());
    let v = snapshot(&snapshotter, "slow");
    assert_eq!(gauge(&v, "workqueue_unfinished_work_seconds"), 5.0);
    assert_eq!(
        gauge(&v, "workqueue_longest_running_processor_seconds"),
        3.0
    );

    // The background refresher updates them on its own every 500 ms.
    drop(a);
    advance(Duration::from_millis(600)).await;
    tokio::task::yield_now().await;
    let v = snapshot(&snapshotter, "slow");
    let longest = gauge(&v, "workqueue_longest_running_processor_seconds");
    assert!((2.0..=2.6).contains(&longest), "{longest}");

    drop(b);
    q.shutdown();
    assert!(
        !q.refresh_unfinished_work(),
        "nothing left to watch after shutdown"
    );
    let v = snapshot(&snapshotter, "slow");
    assert_eq!(gauge(&v, "workqueue_unfinished_work_seconds"), 0.0);
}

#[tokio::test(start_paused = true)]
async fn metrics_follow_the_recorder_unless_forced() {
    // No recorder installed (this test binary installs none globally): metrics are skipped.
    let q = WorkQueue::<u32>::new("auto");
    assert!(!q.refresh_unfinished_work(), "no recorder: no metrics");
    let forced = WorkQueue::<u32>::builder("forced").metrics(true).build();
    assert!(
        forced.refresh_unfinished_work(),
        "forced on: no-op handles, still reporting"
    );
    let recorder = DebuggingRecorder::new();
    let q = metrics::with_local_recorder(&recorder, || WorkQueue::<u32>::new("auto"));
    assert!(
        q.refresh_unfinished_work(),
        "a recorder is installed: metrics on"
    );
}

#[tokio::test(start_paused = true)]
async fn metrics_can_be_turned_off() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let q = metrics::with_local_recorder(&recorder, || {
        WorkQueue::<u32>::builder("quiet").metrics(false).build()
    });
    q.add(1);
    q.get().await.expect("running").done();
    assert!(snapshot(&snapshotter, "quiet").is_empty());
    assert!(!q.refresh_unfinished_work());
}

#[tokio::test(start_paused = true)]
async fn add_all_counts_like_single_adds() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let q = metrics::with_local_recorder(&recorder, || WorkQueue::<u32>::new("batch"));
    q.add(1);
    let in_flight = q.get().await.expect("key 1");
    // 1 is in flight (dirty on re-add), 2 and 3 are new, the second 3 is a duplicate.
    q.add_all([1, 2, 3, 3], 0);
    let values = snapshot(&snapshotter, "batch");
    assert_eq!(counter(&values, "workqueue_adds_total"), 1 + 3);
    assert_eq!(gauge(&values, "workqueue_depth"), 2.0);
    in_flight.done();
}
