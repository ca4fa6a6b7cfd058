//! Randomised many-producer / many-worker stress test of the queue's invariants:
//! 1. every key is processed at least once after its last add;
//! 2. a key is never processed by two workers at once;
//! 3. after a drained shutdown nothing is in flight.
//!
//! Producers mix plain, prioritised, delayed and batched (`add_all`) adds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use kcr_queue::{FastSlow, LOW_PRIORITY, WorkQueue};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const PRODUCERS: u64 = 4;
const WORKERS: usize = 4;
const OPS_PER_PRODUCER: usize = 20_000;
/// Seeds per test run (each runs three key-space sizes); `KCR_STRESS_SEED` picks the first.
const SEEDS: u64 = 8;

struct Tracker {
    /// Logical clock shared by producers and workers.
    clock: AtomicU64,
    /// Per key: logical time just before its last add (0 = never added).
    last_add: Vec<AtomicU64>,
    /// Per key: latest logical time a worker started processing it.
    last_start: Vec<AtomicU64>,
    /// Per key: a worker holds it right now.
    busy: Vec<AtomicBool>,
    violations: AtomicUsize,
    processed: AtomicUsize,
}

async fn run(seed: u64, keys: usize, metrics: bool) {
    let q: WorkQueue<usize> = WorkQueue::builder(format!("stress-{seed}"))
        .rate_limiter(FastSlow::new(Duration::ZERO, Duration::from_micros(50), 2))
        .metrics(metrics)
        .build();
    let t = Arc::new(Tracker {
        clock: AtomicU64::new(1),
        last_add: (0..keys).map(|_| AtomicU64::new(0)).collect(),
        last_start: (0..keys).map(|_| AtomicU64::new(0)).collect(),
        busy: (0..keys).map(|_| AtomicBool::new(false)).collect(),
        violations: AtomicUsize::new(0),
        processed: AtomicUsize::new(0),
    });

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (q, t) = (q.clone(), t.clone());
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((w as u64) << 32));
                while let Some(item) = q.get().await {
                    let key = *item;
                    let start = t.clock.fetch_add(1, Ordering::SeqCst);
                    if t.busy[key].swap(true, Ordering::SeqCst) {
                        t.violations.fetch_add(1, Ordering::SeqCst);
                    }
                    t.last_start[key].fetch_max(start, Ordering::SeqCst);
                    if rng.random_bool(0.3) {
                        tokio::task::yield_now().await;
                    }
                    t.busy[key].store(false, Ordering::SeqCst);
                    t.processed.fetch_add(1, Ordering::Relaxed);
                    match rng.random_range(0..10) {
                        0 => item.retry_rate_limited(),
                        1 => item.done_and_forget(),
                        _ => item.done(),
                    }
                }
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (q, t) = (q.clone(), t.clone());
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(p));
                for i in 0..OPS_PER_PRODUCER {
                    let key = rng.random_range(0..keys);
                    let op = rng.random_range(0..6);
                    if op == 0 {
                        // Delayed adds (tiny: lazily timed, or exactly timed) are not tracked:
                        // a drain drops delayed keys that are not due yet.
                        let delay = Duration::from_micros(rng.random_range(1..200));
                        q.add_after(key, delay);
                        continue;
                    }
                    let stamp = t.clock.fetch_add(1, Ordering::SeqCst);
                    t.last_add[key].fetch_max(stamp, Ordering::SeqCst);
                    match op {
                        1 => q.add_with_priority(key, LOW_PRIORITY),
                        2 => q.add_with_priority(key, rng.random_range(-5..5)),
                        3 => {
                            // A batch: this key and a few more (duplicates allowed), each
                            // stamped before the one add_all call.
                            let mut batch = vec![key];
                            for _ in 0..rng.random_range(0..8) {
                                let other = rng.random_range(0..keys);
                                let stamp = t.clock.fetch_add(1, Ordering::SeqCst);
                                t.last_add[other].fetch_max(stamp, Ordering::SeqCst);
                                batch.push(other);
                            }
                            q.add_all(batch, rng.random_range(-5..5));
                        }
                        _ => q.add(key),
                    }
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.expect("producer");
    }
    q.shutdown_with_drain(Duration::from_secs(30))
        .await
        .expect("drain completes");
    // A worker that sleeps through the end of a drain is a lost wake-up: fail with the queue's
    // state instead of hanging.
    for w in workers {
        match tokio::time::timeout(Duration::from_secs(10), w).await {
            Ok(joined) => joined.expect("worker"),
            Err(_) => panic!("seed {seed}: a worker still waits after the drain: {q:?}"),
        }
    }

    assert_eq!(
        t.violations.load(Ordering::SeqCst),
        0,
        "seed {seed}: two workers on one key"
    );
    assert_eq!(
        q.num_in_flight(),
        0,
        "seed {seed}: in flight after a drained shutdown"
    );
    assert_eq!(
        q.len(),
        0,
        "seed {seed}: ready keys left after a drained shutdown"
    );
    let mut added = 0;
    for key in 0..keys {
        let last_add = t.last_add[key].load(Ordering::SeqCst);
        if last_add == 0 {
            continue;
        }
        added += 1;
        let last_start = t.last_start[key].load(Ordering::SeqCst);
        assert!(
            last_start > last_add,
            "seed {seed}: key {key} last added at {last_add} but last processed at {last_start}"
        );
    }
    assert!(
        added > keys / 2,
        "seed {seed}: the test exercised too few keys"
    );
    assert!(t.processed.load(Ordering::Relaxed) >= added);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn randomised_producers_and_workers_keep_the_invariants() {
    let base: u64 = std::env::var("KCR_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    // Several seeds: races between getters, adds and a drain show up in a fraction of runs
    // (a lost wake-up at the start of a drain hung about one seed in five before it was fixed).
    for round in 0..SEEDS {
        for (i, keys) in [16usize, 200, 5_000].into_iter().enumerate() {
            run(base + 3 * round + i as u64, keys, false).await;
        }
    }
}

/// The same with metrics forced on (no recorder needed): the in-flight start-time table and
/// the clock reads run on every get and done, including a stale claim's undo.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_invariants_hold_with_metrics_on() {
    let base: u64 = std::env::var("KCR_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64)
        .wrapping_add(1_000);
    for round in 0..SEEDS / 2 {
        for (i, keys) in [16usize, 200, 5_000].into_iter().enumerate() {
            run(base + 3 * round + i as u64, keys, true).await;
        }
    }
}
