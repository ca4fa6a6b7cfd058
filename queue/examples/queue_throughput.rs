//! Throughput of kcr-queue against kube-runtime's `scheduler`, on the workloads of issue 2.
//!
//! ```sh
//! cargo run --release -p kcr-queue --example queue_throughput
//! ```
//!
//! Prints one line per result:
//! `queue-bench impl=<kcr|kube-runtime> workload=<W1|W2|W3|W4> ops=<n> secs=<float> rate=<ops/s>`.
//!
//! - W1: one producer task adds 1,000,000 distinct keys while one consumer task gets and
//!   completes all of them (ops = keys).
//! - W2: 100 rounds of: add 1,000 keys x 10 duplicates each (ten passes over the 1,000 keys),
//!   then get and complete the 1,000 (ops = adds).
//! - W3: as W1, every add delayed by 1 us with `add_after` (ops = keys).
//! - W4: 4 producer tasks and 4 worker tasks, 1,000,000 distinct keys in total (ops = keys).
//!
//! Keys are `u64`. Every workload runs on a fresh multi-threaded tokio runtime (one worker
//! thread per core), the same for both implementations. Producers behave like ordinary async tasks: after each add they call
//! `tokio::task::consume_budget()`, so they yield to the scheduler every 128 adds (tokio's
//! cooperative budget), as a task awaiting a channel would. Without that, a producer that never
//! yields keeps the consumer it wakes parked in its worker's LIFO slot (which other workers
//! cannot steal from), and W1 degenerates into "add everything, then get everything" for both
//! implementations. kube-runtime's scheduler is fed through an unbounded futures channel of
//! `ScheduleRequest { run_at: now (W1, W2) or now + 1 us (W3) }` and consumed as a stream. It has
//! no W4 line: a `Scheduler` is a single `Stream` polled through `&mut`, so four workers cannot
//! take keys from it concurrently, and it has no notion of a key being in flight (completion),
//! so "one in flight per key" cannot be expressed without building a work queue around it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kcr_queue::WorkQueue;
use kube::runtime::scheduler::{ScheduleRequest, scheduler};
use tokio::time::Instant;

const KEYS: u64 = 1_000_000;
const W2_ROUNDS: u64 = 100;
const W2_KEYS: u64 = 1_000;
const W2_DUPS: u64 = 10;
const W4_TASKS: u64 = 4;
const DELAY: Duration = Duration::from_micros(1);

fn report(imp: &str, workload: &str, ops: u64, secs: f64) {
    println!(
        "queue-bench impl={imp} workload={workload} ops={ops} secs={secs:.4} rate={:.0}",
        ops as f64 / secs
    );
}

async fn kcr_w1(delay: Option<Duration>) -> f64 {
    let queue = WorkQueue::<u64>::new("bench");
    let start = std::time::Instant::now();
    let producer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for key in 0..KEYS {
                match delay {
                    Some(d) => queue.add_after(key, d),
                    None => queue.add(key),
                }
                tokio::task::consume_budget().await;
            }
        })
    };
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for _ in 0..KEYS {
                let item = queue.get().await.expect("queue is running");
                item.done();
            }
        })
    };
    producer.await.expect("producer");
    consumer.await.expect("consumer");
    start.elapsed().as_secs_f64()
}

async fn kcr_w2() -> f64 {
    let queue = WorkQueue::<u64>::new("bench");
    let start = std::time::Instant::now();
    for _ in 0..W2_ROUNDS {
        for _ in 0..W2_DUPS {
            for key in 0..W2_KEYS {
                queue.add(key);
            }
        }
        for _ in 0..W2_KEYS {
            queue.get().await.expect("queue is running").done();
        }
    }
    assert!(queue.is_empty());
    start.elapsed().as_secs_f64()
}

async fn kcr_w4() -> f64 {
    let queue = WorkQueue::<u64>::new("bench");
    let processed = Arc::new(AtomicUsize::new(0));
    let start = std::time::Instant::now();
    let mut tasks = Vec::new();
    for p in 0..W4_TASKS {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let per = KEYS / W4_TASKS;
            for key in p * per..(p + 1) * per {
                queue.add(key);
                tokio::task::consume_budget().await;
            }
        }));
    }
    for _ in 0..W4_TASKS {
        let queue = queue.clone();
        let processed = processed.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(item) = queue.get().await {
                item.done();
                if processed.fetch_add(1, Ordering::Relaxed) + 1 == KEYS as usize {
                    queue.shutdown();
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(processed.load(Ordering::Relaxed), KEYS as usize);
    start.elapsed().as_secs_f64()
}

async fn kube_w1(delay: Duration) -> f64 {
    let (tx, rx) = futures::channel::mpsc::unbounded::<ScheduleRequest<u64>>();
    // The scheduler ends as soon as its request stream does, even with keys still scheduled:
    // keep a sender alive until the consumer has everything.
    let keep_open = tx.clone();
    let start = std::time::Instant::now();
    let producer = tokio::spawn(async move {
        for key in 0..KEYS {
            let run_at = Instant::now() + delay;
            tx.unbounded_send(ScheduleRequest {
                message: key,
                run_at,
            })
            .expect("receiver alive");
            tokio::task::consume_budget().await;
        }
    });
    let consumer = tokio::spawn(async move {
        let mut stream = std::pin::pin!(scheduler(rx));
        for _ in 0..KEYS {
            stream.next().await.expect("scheduler is running");
        }
    });
    producer.await.expect("producer");
    consumer.await.expect("consumer");
    let secs = start.elapsed().as_secs_f64();
    drop(keep_open);
    secs
}

async fn kube_w2() -> f64 {
    let (tx, rx) = futures::channel::mpsc::unbounded::<ScheduleRequest<u64>>();
    let mut stream = std::pin::pin!(scheduler(rx));
    let start = std::time::Instant::now();
    for _ in 0..W2_ROUNDS {
        for _ in 0..W2_DUPS {
            for key in 0..W2_KEYS {
                let run_at = Instant::now();
                tx.unbounded_send(ScheduleRequest {
                    message: key,
                    run_at,
                })
                .expect("alive");
            }
        }
        for _ in 0..W2_KEYS {
            stream.next().await.expect("scheduler is running");
        }
    }
    start.elapsed().as_secs_f64()
}

/// Runs one workload on a fresh multi-threaded runtime (one worker per core), so that nothing
/// left over from an earlier workload (tasks, timers) competes with it.
fn run<F: std::future::Future<Output = f64>>(workload: F) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(workload)
}

fn main() {
    let ops_w2 = W2_ROUNDS * W2_DUPS * W2_KEYS;
    report("kcr", "W1", KEYS, run(kcr_w1(None)));
    report("kube-runtime", "W1", KEYS, run(kube_w1(Duration::ZERO)));
    report("kcr", "W2", ops_w2, run(kcr_w2()));
    report("kube-runtime", "W2", ops_w2, run(kube_w2()));
    report("kcr", "W3", KEYS, run(kcr_w1(Some(DELAY))));
    report("kube-runtime", "W3", KEYS, run(kube_w1(DELAY)));
    report("kcr", "W4", KEYS, run(kcr_w4()));
}
