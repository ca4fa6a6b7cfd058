//! Metrics: client-go names, the `controller` and `name` labels, and values, checked with metrics-util's
//! `DebuggingRecorder` installed as a local recorder.

use std::collections::HashMap;
use std::time::Duration;

use kcr_queue::{DEFAULT_PRIORITY, ItemExponential, LOW_PRIORITY, WorkQueue};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tokio::time::advance;

/// Every metric labelled `controller = name = queue` (and, for `workqueue_depth`, a
/// `priority`), by metric name; the depth of priority `p` is `workqueue_depth{priority=p}`. Taking a snapshot resets counters
/// and gauges to 0 and drains histograms.
fn snapshot(snapshotter: &Snapshotter, queue: &str) -> HashMap<String, DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let name = key.key().name().to_string();
            let mut labels: Vec<(&str, &str)> =
                key.key().labels().map(|l| (l.key(), l.value())).collect();
            labels.sort();
            let priority = labels
                .iter()
                .position(|(k, _)| *k == "priority")
                .map(|i| labels.remove(i).1.to_owned());
            if labels != [("controller", queue), ("name", queue)] {
                return None;
            }
            match (name.as_str(), priority) {
                ("workqueue_depth", Some(p)) => {
                    Some((format!("workqueue_depth{{priority={p}}}"), value))
                }
                ("workqueue_depth", None) => panic!("workqueue_depth without a priority label"),
                (_, Some(_)) => panic!("{name} has a priority label"),
                (_, None) => Some((name, value)),
            }
        })
        .collect()
}

/// The default priority's depth.
const DEPTH: &str = "workqueue_depth{priority=0}";

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
    assert_eq!(gauge(&v, DEPTH), 2.0);
    assert_eq!(histogram(&v, "workqueue_queue_duration_seconds"), vec![2.0]);
    assert_eq!(histogram(&v, "workqueue_work_duration_seconds"), vec![3.0]);
    assert!(
        snapshot(&snapshotter, "other").contains_key(DEPTH),
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
        gauge(&v, DEPTH),
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
    assert_eq!(gauge(&values, DEPTH), 2.0);
    in_flight.done();
}

/// The depths of every priority seen, from one snapshot (values relative to the previous one).
fn depths(snapshotter: &Snapshotter, queue: &str) -> HashMap<String, f64> {
    snapshot(snapshotter, queue)
        .into_iter()
        .filter(|(k, _)| k.starts_with("workqueue_depth"))
        .map(|(k, v)| match v {
            DebugValue::Gauge(g) => (k, g.into_inner()),
            other => panic!("{k}: expected a gauge, got {other:?}"),
        })
        .collect()
}

fn depth_of(depths: &HashMap<String, f64>, priority: i32) -> f64 {
    depths
        .get(&format!("workqueue_depth{{priority={priority}}}"))
        .copied()
        .unwrap_or_else(|| panic!("no depth for priority {priority}: {depths:?}"))
}

/// `workqueue_depth{priority}` as controller-runtime's priority queue reports it: one series per
/// priority, each the ready keys of that priority; gets take from the right series, a raised key
/// moves between series, and the series always sum to `len()`.
#[tokio::test(start_paused = true)]
async fn depth_per_priority() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let q = metrics::with_local_recorder(&recorder, || WorkQueue::<u32>::new("prio"));
    // A snapshot resets gauges: keep running totals per series.
    let mut total: HashMap<String, f64> = HashMap::new();
    let mut take = |snapshotter: &Snapshotter| {
        for (k, v) in depths(snapshotter, "prio") {
            *total.entry(k).or_default() += v;
        }
        total.clone()
    };

    // Only the default priority's series exists before any add (registered with the queue).
    let before = take(&snapshotter);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(depth_of(&before, DEFAULT_PRIORITY), 0.0);

    // Priorities other than the default register their series on first sight, with the
    // recorder current then.
    metrics::with_local_recorder(&recorder, || {
        q.add_with_priority(1, 10);
        q.add_with_priority(2, 10);
        q.add_all([3, 4, 5], LOW_PRIORITY);
    });
    q.add(6);
    q.add_with_priority(2, 10); // duplicate: no change
    let d = take(&snapshotter);
    assert_eq!(depth_of(&d, 10), 2.0);
    assert_eq!(depth_of(&d, LOW_PRIORITY), 3.0);
    assert_eq!(depth_of(&d, DEFAULT_PRIORITY), 1.0);
    assert_eq!(d.values().sum::<f64>(), q.len() as f64);

    // A ready key re-added at a higher priority moves series.
    q.add_with_priority(3, 10);
    q.add_all([4], DEFAULT_PRIORITY);
    let d = take(&snapshotter);
    assert_eq!(depth_of(&d, 10), 3.0);
    assert_eq!(depth_of(&d, DEFAULT_PRIORITY), 2.0);
    assert_eq!(depth_of(&d, LOW_PRIORITY), 1.0);

    // Gets hand out the highest priority first and decrement its series.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(q.get().await.expect("running"));
    }
    let mut got: Vec<u32> = held.iter().map(|i| **i).collect();
    got.sort();
    assert_eq!(got, [1, 2, 3]);
    let d = take(&snapshotter);
    assert_eq!(depth_of(&d, 10), 0.0);
    assert_eq!(depth_of(&d, DEFAULT_PRIORITY), 2.0);
    assert_eq!(depth_of(&d, LOW_PRIORITY), 1.0);

    // A key added while in flight is dirty (not ready, not in any series) until its worker is
    // done; then it is queued again at the priority it was added with.
    q.add_with_priority(1, LOW_PRIORITY);
    assert_eq!(take(&snapshotter), d, "a dirty key is not ready");
    held.remove(0).done();
    let d = take(&snapshotter);
    assert_eq!(depth_of(&d, LOW_PRIORITY), 2.0);

    // Nothing lost: draining the queue empties every series.
    drop(held);
    while !q.is_empty() {
        q.get().await.expect("running").done();
    }
    let d = take(&snapshotter);
    for (series, depth) in &d {
        assert_eq!(*depth, 0.0, "{series}: {d:?}");
    }
    assert_eq!(d.len(), 3, "three priorities seen: {d:?}");

    // A delayed key counts when it comes due, in its delay's priority.
    q.add_after_with_priority(7, Duration::from_secs(1), 10);
    assert_eq!(depth_of(&take(&snapshotter), 10), 0.0, "not ready yet");
    advance(Duration::from_secs(2)).await;
    let due = q.get().await.expect("running");
    assert_eq!(*due, 7);
    let d = take(&snapshotter);
    assert_eq!(depth_of(&d, 10), 0.0, "promoted, then handed out");
    // Dirty again at a new priority while in flight, queued there when done.
    metrics::with_local_recorder(&recorder, || {
        q.add_with_priority(7, 3);
        due.done();
    });
    let d = take(&snapshotter);
    assert_eq!(depth_of(&d, 3), 1.0, "{d:?}");
    assert_eq!(d.values().sum::<f64>(), 1.0);
    assert_eq!(q.len(), 1);
}

/// More distinct priorities than the lock-free table holds: the rest go to the overflow list,
/// and every series still counts exactly.
#[tokio::test(start_paused = true)]
async fn depth_of_many_priorities() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let q = metrics::with_local_recorder(&recorder, || WorkQueue::<u32>::new("many"));
    metrics::with_local_recorder(&recorder, || {
        for key in 0..40u32 {
            q.add_with_priority(key, (key % 20) as i32 + 1);
        }
    });
    let d = depths(&snapshotter, "many");
    for p in 1..=20 {
        assert_eq!(depth_of(&d, p), 2.0, "priority {p}: {d:?}");
    }
    for _ in 0..40 {
        q.get().await.expect("running").done();
    }
    let d = depths(&snapshotter, "many");
    for p in 1..=20 {
        assert_eq!(
            depth_of(&d, p),
            -2.0,
            "relative to the previous snapshot: {d:?}"
        );
    }
}
