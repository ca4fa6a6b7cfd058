//! `add_all` against `add`: the same keys added one by one or in batches, on the W1 shape (one
//! producer task adds 1,000,000 distinct keys while one consumer gets and completes them) and
//! the W2 shape (100 rounds of 1,000 keys x 10 duplicates, then get and complete the 1,000).
//!
//! The producer spends tokio's cooperative budget once per key, batched or not (it yields
//! every 128 keys), as the `throughput` example does.
//!
//! `cargo run --release -p kcr-queue --example batch_adds` prints
//! `batch-bench workload=<W1|W2> batch=<1|n> ops=<n> secs=<float> rate=<ops per second>`,
//! where batch=1 is plain `add`.

use kcr_queue::{DEFAULT_PRIORITY, WorkQueue};

const KEYS: u64 = 1_000_000;
const BATCHES: [usize; 3] = [1, 16, 256];

fn report(workload: &str, batch: usize, ops: u64, secs: f64) {
    println!(
        "batch-bench workload={workload} batch={batch} ops={ops} secs={secs:.4} rate={:.0}",
        ops as f64 / secs
    );
}

fn add(queue: &WorkQueue<u64>, keys: &[u64], batch: usize) {
    if batch == 1 {
        keys.iter().for_each(|k| queue.add(*k));
    } else {
        queue.add_all(keys.iter().copied(), DEFAULT_PRIORITY);
    }
}

async fn w1(batch: usize) -> f64 {
    let queue = WorkQueue::<u64>::new("bench");
    let start = std::time::Instant::now();
    let producer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let keys: Vec<u64> = (0..KEYS).collect();
            for chunk in keys.chunks(batch) {
                add(&queue, chunk, batch);
                // The cooperative budget of one add per key, as in the throughput example, so
                // that the producer yields every 128 keys whatever the batch size.
                for _ in 0..chunk.len() {
                    tokio::task::consume_budget().await;
                }
            }
        })
    };
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for _ in 0..KEYS {
                queue.get().await.expect("queue is running").done();
            }
        })
    };
    producer.await.expect("producer");
    consumer.await.expect("consumer");
    start.elapsed().as_secs_f64()
}

async fn w2(batch: usize) -> f64 {
    let queue = WorkQueue::<u64>::new("bench");
    let keys: Vec<u64> = (0..1_000).collect();
    let start = std::time::Instant::now();
    for _ in 0..100 {
        for _ in 0..10 {
            for chunk in keys.chunks(batch) {
                add(&queue, chunk, batch);
            }
        }
        for _ in 0..1_000 {
            queue.get().await.expect("queue is running").done();
        }
    }
    start.elapsed().as_secs_f64()
}

fn run<F: std::future::Future<Output = f64>>(f: F) -> f64 {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

fn main() {
    for batch in BATCHES {
        report("W1", batch, KEYS, run(w1(batch)));
    }
    for batch in BATCHES {
        report("W2", batch, 1_000_000, run(w2(batch)));
    }
}
