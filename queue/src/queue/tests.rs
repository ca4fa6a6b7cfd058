//! Unit tests of the queue's internals (key state words, priority levels, sweeping, the slot
//! pool, shrinking).

use std::time::Duration;

use super::slot::{D, DSEQ_SHIFT, L, P, R, RSEQ_SHIFT, SEQ_MASK, bump_dseq, bump_rseq, dseq, rseq};
use super::{MAX_IDLE_LEVELS, SWEEP_SLACK, WorkQueue};

#[test]
fn sequence_numbers_wrap_inside_their_field() {
    let w = R | P | (SEQ_MASK << RSEQ_SHIFT) | (5 << DSEQ_SHIFT);
    let bumped = bump_rseq(w);
    assert_eq!(rseq(bumped), 0);
    assert_eq!(dseq(bumped), 5);
    assert_eq!(bumped & (R | P | D | L), R | P);
    let bumped = bump_dseq(w | (SEQ_MASK << DSEQ_SHIFT));
    assert_eq!(dseq(bumped), 0);
    assert_eq!(rseq(bumped), SEQ_MASK);
}

#[tokio::test(start_paused = true)]
async fn empty_priority_levels_are_dropped() {
    let q = WorkQueue::<i32>::builder("levels").metrics(false).build();
    for p in 0..1000 {
        q.add_with_priority(p, p);
    }
    assert_eq!(*q.get().await.expect("running"), 999);
    assert!(q.inner.work.lock().levels.len() >= 999);
    for want in (0..999).rev() {
        assert_eq!(*q.get().await.expect("running"), want);
    }
    let levels = q.inner.work.lock().levels.len();
    assert!(levels <= MAX_IDLE_LEVELS, "{levels} levels left");
}

#[tokio::test(start_paused = true)]
async fn idle_keys_are_swept_from_the_map() {
    let q = WorkQueue::<u64>::builder("sweep").metrics(false).build();
    for key in 0..100_000u64 {
        q.add(key);
        q.get().await.expect("running").done();
    }
    let size = q.inner.adds.lock().map.len();
    assert!(size <= SWEEP_SLACK + 3, "map holds {size}");
    // Keys whose slot is idle (or swept) come back as fresh keys.
    for key in [99_999u64, 99_998, 5] {
        q.add(key);
    }
    assert_eq!(q.len(), 3);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(*q.get().await.expect("running"));
    }
    assert_eq!(got, vec![99_999, 99_998, 5]);
    // A sweep never drops a key that is in flight: its dirty mark survives.
    q.add(1);
    let one = q.get().await.expect("running");
    for key in 1_000_000..1_000_000 + 3 * SWEEP_SLACK as u64 {
        q.add(key);
        q.get().await.expect("running").done();
    }
    q.add(1); // dirty
    drop(one);
    assert_eq!(q.len(), 1);
    assert_eq!(*q.get().await.expect("running"), 1);
}

#[tokio::test(start_paused = true)]
async fn pooled_slots_come_back_clean() {
    let q = WorkQueue::<u64>::builder("pool").metrics(false).build();
    // Give keys a priority, a delay, a dirty mark, then let them all go idle.
    let n = 2 * SWEEP_SLACK as u64;
    for key in 0..n {
        q.add_with_priority(key, 7);
        q.add_after(key + n, Duration::from_millis(1));
    }
    let held = q.get().await.expect("running");
    q.add(*held); // dirty
    drop(held);
    tokio::time::advance(Duration::from_millis(2)).await;
    while !q.is_empty() {
        q.get().await.expect("running").done();
    }
    assert_eq!(q.num_delayed(), 0);
    // New keys make the map sweep, which fills the pool.
    for key in 10 * n..13 * n {
        q.add(key);
        q.get().await.expect("running").done();
    }
    assert!(!q.inner.adds.lock().pool.is_empty());
    // Keys 1 and 2 come back in reused slots: no priority, delay or mark carried over.
    q.add(1);
    q.add_with_priority(2, 1);
    assert_eq!(q.len(), 2);
    assert_eq!(q.num_delayed(), 0);
    assert_eq!(*q.get().await.expect("running"), 2);
    assert_eq!(*q.get().await.expect("running"), 1);
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_map_that_grew_is_shrunk_when_mostly_idle() {
    let q = WorkQueue::<u64>::builder("shrink").metrics(false).build();
    for key in 0..50_000u64 {
        q.add(key);
    }
    for _ in 0..50_000u64 {
        q.get().await.expect("running").done();
    }
    let grown = q.inner.adds.lock().map.capacity();
    assert!(grown >= 50_000);
    for key in 100_000..150_000u64 {
        q.add(key);
        q.get().await.expect("running").done();
    }
    let adds = q.inner.adds.lock();
    assert!(
        adds.map.capacity() < grown / 4,
        "capacity {} after growing to {grown}",
        adds.map.capacity()
    );
}
