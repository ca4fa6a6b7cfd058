//! Channel fan-out with a deliberately slow consumer, on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kcr_source::{Channel, Event, Overflow, Source, SourceError};
use tokio::time::Instant;

const N: u64 = 200;
const CAPACITY: usize = 8;

#[tokio::test(start_paused = true)]
async fn wait_mode_is_lossless_and_bounds_the_lead_of_fast_consumers() {
    let ch = Channel::<u64>::new(CAPACITY);
    let mut fast = ch.start().expect("start").events;
    let mut slow = ch.start().expect("start").events;
    let slow_seen = Arc::new(AtomicU64::new(0));

    let producer = {
        let ch = ch.clone();
        tokio::spawn(async move {
            for i in 0..N {
                ch.send(Event::generic(i)).await.expect("open");
            }
            ch.close();
        })
    };
    drop(ch);
    let slow_task = {
        let slow_seen = slow_seen.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(item) = slow.next().await {
                let event = item.expect("no lag in wait mode");
                got.push(**event.object());
                slow_seen.store(got.len() as u64, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            got
        })
    };
    let mut fast_got = Vec::new();
    while let Some(item) = fast.next().await {
        let i = **item.expect("no lag in wait mode").object();
        // The fast consumer can run ahead of the slow one by at most its buffer plus the slow
        // one's buffer and the event in its hands.
        let lead = i + 1 - slow_seen.load(Ordering::SeqCst);
        assert!(lead <= 2 * CAPACITY as u64 + 1, "lead {lead} at {i}");
        fast_got.push(i);
    }
    producer.await.expect("no panic");
    let slow_got = slow_task.await.expect("no panic");
    let expected: Vec<u64> = (0..N).collect();
    assert_eq!(fast_got, expected);
    assert_eq!(slow_got, expected);
}

#[tokio::test(start_paused = true)]
async fn lag_mode_never_blocks_and_accounts_for_every_event() {
    let ch = Channel::<u64>::with_overflow(CAPACITY, Overflow::Lag);
    let mut fast = ch.start().expect("start").events;
    let mut slow = ch.start().expect("start").events;
    let start = Instant::now();

    let slow_task = tokio::spawn(async move {
        let (mut got, mut missed) = (Vec::new(), 0u64);
        while let Some(item) = slow.next().await {
            match item {
                Ok(event) => got.push(**event.object()),
                Err(SourceError::Lagged { missed: n }) => missed += n,
                Err(other) => panic!("unexpected {other}"),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (got, missed)
    });
    let fast_task = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Some(item) = fast.next().await {
            got.push(**item.expect("fast never lags").object());
        }
        (got, Instant::now())
    });
    for i in 0..N {
        ch.send(Event::generic(i)).await.expect("open");
        // let the fast consumer keep up; the slow one sleeps 10 ms per event
        tokio::task::yield_now().await;
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "the producer never waited");
    ch.close();
    drop(ch);
    let (fast_got, fast_done) = fast_task.await.expect("no panic");
    let (slow_got, missed) = slow_task.await.expect("no panic");
    assert_eq!(fast_got, (0..N).collect::<Vec<_>>());
    assert_eq!(
        fast_done - start,
        Duration::ZERO,
        "fast consumer never slowed down"
    );
    assert!(missed > 0, "the slow consumer must have lagged");
    assert_eq!(
        slow_got.len() as u64 + missed,
        N,
        "every event delivered or reported"
    );
    assert!(slow_got.windows(2).all(|w| w[0] < w[1]), "order kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_producers_many_consumers_keep_per_producer_order() {
    use rand::{Rng, SeedableRng};
    const PRODUCERS: u64 = 4;
    const PER: u64 = 500;
    let ch = Channel::<(u64, u64)>::new(4);
    let consumers: Vec<_> = (0..3)
        .map(|c| {
            let mut s = ch.start().expect("start").events;
            tokio::spawn(async move {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(c);
                let mut last = vec![None::<u64>; PRODUCERS as usize];
                let mut count = 0;
                while let Some(item) = s.next().await {
                    let (p, i) = *item.expect("wait mode never lags").object().as_ref();
                    assert!(
                        last[p as usize].is_none_or(|l| l < i),
                        "order of producer {p}"
                    );
                    last[p as usize] = Some(i);
                    count += 1;
                    if rng.random_bool(0.1) {
                        tokio::task::yield_now().await;
                    }
                }
                count
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let ch = ch.clone();
            tokio::spawn(async move {
                for i in 0..PER {
                    ch.send(Event::generic((p, i))).await.expect("open");
                }
            })
        })
        .collect();
    for p in producers {
        p.await.expect("no panic");
    }
    ch.close();
    for c in consumers {
        assert_eq!(c.await.expect("no panic"), PRODUCERS * PER);
    }
}
