//! One test per semantic point of the queue, on tokio's paused clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use kcr_queue::{ItemExponential, LOW_PRIORITY, QueueError, WorkQueue};
use tokio::time::{Instant, advance, timeout};

fn queue<T: std::hash::Hash + Eq + Clone + Send + Sync + 'static>() -> WorkQueue<T> {
    WorkQueue::builder("test")
        .rate_limiter(ItemExponential::new(
            Duration::from_millis(10),
            Duration::from_secs(1),
        ))
        .build()
}

/// `get` within one second of (paused) time, or `None`.
async fn try_get<T: std::hash::Hash + Eq + Clone + Send + Sync + 'static>(
    q: &WorkQueue<T>,
) -> Option<kcr_queue::WorkItem<T>> {
    timeout(Duration::from_secs(1), q.get())
        .await
        .ok()
        .flatten()
}

/// Counts how often the inner future is polled.
struct CountPolls<F> {
    inner: Pin<Box<F>>,
    polls: Arc<AtomicUsize>,
}

impl<F: Future> Future for CountPolls<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.inner.as_mut().poll(cx)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    namespace: Option<String>,
    name: String,
}

#[tokio::test(start_paused = true)]
async fn generic_over_any_hashable_key() {
    let q = queue::<ObjectKey>();
    let key = ObjectKey {
        namespace: Some("default".into()),
        name: "web".into(),
    };
    q.add(key.clone());
    let item = q.get().await.expect("running");
    assert_eq!(*item, key);
    assert_eq!(item.item().name, "web");

    let strings = queue::<String>();
    strings.add("a".to_string());
    assert_eq!(strings.get().await.expect("running").as_str(), "a");
}

#[tokio::test(start_paused = true)]
async fn adding_a_waiting_key_is_a_noop() {
    let q = queue::<u32>();
    q.add(1);
    q.add(1);
    q.add(2);
    q.add(1);
    assert_eq!(q.len(), 2);
    assert_eq!(*q.get().await.expect("running"), 1);
    assert_eq!(*q.get().await.expect("running"), 2);
    assert!(q.is_empty());
    assert!(
        try_get(&q).await.is_none(),
        "the duplicate must not be handed out"
    );
}

#[tokio::test(start_paused = true)]
async fn one_in_flight_per_key_and_dirty_requeue() {
    let q = queue::<u32>();
    q.add(7);
    let first = q.get().await.expect("running");
    q.add(7);
    q.add(7);
    assert_eq!(q.len(), 0, "a key in flight is only marked dirty");
    assert_eq!(q.num_in_flight(), 1);
    assert!(
        try_get(&q).await.is_none(),
        "a second worker must not get the key"
    );
    drop(first);
    assert_eq!(q.len(), 1, "done re-queues the dirty key once");
    let second = q.get().await.expect("running");
    assert_eq!(*second, 7);
    second.done();
    assert!(
        try_get(&q).await.is_none(),
        "the two dirty adds collapsed into one"
    );
    assert_eq!(q.num_in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn get_is_fifo_and_waits_without_spinning() {
    let q = queue::<u32>();
    for k in [3, 1, 2] {
        q.add(k);
    }
    for k in [3, 1, 2] {
        assert_eq!(*q.get().await.expect("running"), k);
    }

    let polls = Arc::new(AtomicUsize::new(0));
    let waiter = {
        let q = q.clone();
        tokio::spawn(CountPolls {
            inner: Box::pin(async move { *q.get().await.unwrap() }),
            polls: polls.clone(),
        })
    };
    tokio::task::yield_now().await;
    advance(Duration::from_secs(3600)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished());
    assert!(
        polls.load(Ordering::SeqCst) <= 2,
        "an idle get must sleep, polled {polls:?} times"
    );
    q.add(9);
    assert_eq!(waiter.await.expect("waiter"), 9);
}

#[tokio::test(start_paused = true)]
async fn add_after_keeps_the_earliest_time() {
    let q = queue::<u32>();
    let t0 = Instant::now();
    q.add_after(1, Duration::from_secs(10));
    q.add_after(1, Duration::from_secs(5));
    q.add_after(1, Duration::from_secs(20));
    assert_eq!(q.num_delayed(), 1);
    assert!(q.is_empty());
    let item = q.get().await.expect("running");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_millis(5002),
        "{waited:?}"
    );
    drop(item);
    assert!(
        try_get(&q).await.is_none(),
        "the later delayed adds were merged away"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    advance(Duration::from_secs(30)).await;
    assert!(
        try_get(&q).await.is_none(),
        "nothing fires at 10 s or 20 s either"
    );
}

#[tokio::test(start_paused = true)]
async fn zero_delay_is_immediate_and_an_add_cancels_a_pending_delay() {
    let q = queue::<u32>();
    q.add_after(1, Duration::ZERO);
    assert_eq!(q.len(), 1);
    assert_eq!(q.num_delayed(), 0);
    q.get().await.expect("running").done();

    q.add_after(2, Duration::from_secs(10));
    q.add(2);
    assert_eq!(q.len(), 1);
    assert_eq!(
        q.num_delayed(),
        0,
        "an immediate add is earlier than the delay"
    );
    q.get().await.expect("running").done();
    advance(Duration::from_secs(11)).await;
    assert!(try_get(&q).await.is_none());

    q.add(3);
    q.add_after(3, Duration::from_secs(1));
    assert_eq!(
        q.num_delayed(),
        0,
        "a waiting key keeps its earlier (immediate) time"
    );
}

#[tokio::test(start_paused = true)]
async fn delayed_keys_come_out_in_time_order_across_fifo_and_heap() {
    let q = queue::<u32>();
    let t0 = Instant::now();
    // Non-monotone delays exercise both the timer FIFO and the heap.
    for (k, ms) in [(1, 30), (2, 10), (3, 20), (4, 40), (5, 5)] {
        q.add_after(k, Duration::from_millis(ms));
    }
    let mut order = Vec::new();
    for _ in 0..5 {
        let item = q.get().await.expect("running");
        order.push((*item, t0.elapsed().as_millis()));
    }
    assert_eq!(
        order.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec![5, 2, 3, 1, 4]
    );
    for (k, ms) in order {
        let want = [0, 30, 10, 20, 40, 5][k as usize];
        assert!(
            ms >= want && ms <= want + 2,
            "key {k} at {ms} ms, wanted {want}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn tiny_delays_are_never_handed_out_early() {
    let q = queue::<u32>();
    let t0 = Instant::now();
    q.add_after(1, Duration::from_micros(10));
    assert_eq!(q.num_delayed(), 1);
    assert!(q.is_empty());
    let item = q.get().await.expect("running");
    assert!(
        t0.elapsed() >= Duration::from_micros(10),
        "{:?}",
        t0.elapsed()
    );
    assert!(
        t0.elapsed() <= Duration::from_millis(2),
        "{:?}",
        t0.elapsed()
    );
    drop(item);
    assert_eq!(q.num_delayed(), 0);

    // A longer delay of a key with a tiny pending delay is a no-op.
    let t1 = Instant::now();
    q.add_after(2, Duration::from_micros(20));
    q.add_after(2, Duration::from_secs(1));
    assert_eq!(*q.get().await.expect("running"), 2);
    assert!(t1.elapsed() < Duration::from_millis(2));
    advance(Duration::from_secs(2)).await;
    assert!(try_get(&q).await.is_none(), "the 1 s delay was merged away");
}

#[tokio::test(start_paused = true)]
async fn tiny_delays_keep_the_earliest_time() {
    let q = queue::<u32>();
    // Shorter tiny replaces longer tiny; the key comes out once.
    q.add_after(1, Duration::from_micros(40));
    q.add_after(1, Duration::from_micros(5));
    q.add_after(1, Duration::from_micros(30));
    assert_eq!(q.num_delayed(), 1);
    assert_eq!(*q.get().await.expect("running"), 1);
    assert!(
        try_get(&q).await.is_none(),
        "the stale 40 us timer is skipped"
    );

    // A tiny delay beats an exactly timed long one (which needs a real clock reading).
    let t0 = Instant::now();
    q.add_after(2, Duration::from_secs(5));
    q.add_after(2, Duration::from_micros(10));
    assert_eq!(*q.get().await.expect("running"), 2);
    assert!(
        t0.elapsed() < Duration::from_millis(2),
        "{:?}",
        t0.elapsed()
    );
    advance(Duration::from_secs(6)).await;
    assert!(try_get(&q).await.is_none(), "the 5 s timer is stale");

    // A tiny delay of a key with an earlier exactly timed delay is a no-op.
    q.add_after(3, Duration::from_nanos(100));
    let item = q.get().await.expect("running");
    q.add_after(3, Duration::from_micros(1));
    drop(item);
    assert_eq!(
        *q.get().await.expect("running"),
        3,
        "a tiny delay while in flight: dirty"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sleeping_getter_is_woken_by_an_earlier_delay() {
    let q = queue::<u32>();
    q.add_after(1, Duration::from_secs(60));
    let t0 = Instant::now();
    let getter = {
        let q = q.clone();
        tokio::spawn(async move { (*q.get().await.unwrap(), t0.elapsed()) })
    };
    tokio::task::yield_now().await;
    q.add_after(2, Duration::from_secs(1));
    let (key, waited) = getter.await.expect("getter");
    assert_eq!(key, 2);
    assert!(waited < Duration::from_millis(1002), "{waited:?}");

    // The same for a lazily timed tiny delay.
    let getter = {
        let q = q.clone();
        tokio::spawn(async move { (*q.get().await.unwrap(), t0.elapsed()) })
    };
    tokio::task::yield_now().await;
    q.add_after(3, Duration::from_micros(7));
    let (key, waited) = getter.await.expect("getter");
    assert_eq!(key, 3);
    assert!(waited < Duration::from_millis(1004), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn delayed_add_of_an_in_flight_key_marks_it_dirty_when_due() {
    let q = queue::<u32>();
    q.add(1);
    let item = q.get().await.expect("running");
    q.add_after(1, Duration::from_secs(1));
    advance(Duration::from_secs(2)).await;
    assert!(try_get(&q).await.is_none(), "the key is in flight");
    drop(item);
    assert_eq!(*q.get().await.expect("running"), 1);
}

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_back_off_and_forget_resets() {
    let q = queue::<u32>();
    let t0 = Instant::now();
    q.add_rate_limited(1);
    q.get().await.expect("running").done();
    assert_eq!(t0.elapsed(), Duration::from_millis(10));
    q.add_rate_limited(1);
    q.get().await.expect("running").done();
    assert_eq!(t0.elapsed(), Duration::from_millis(30));
    assert_eq!(q.num_requeues(&1), 2);
    q.forget(&1);
    assert_eq!(q.num_requeues(&1), 0);
    let t1 = Instant::now();
    q.add_rate_limited(1);
    q.get().await.expect("running").done();
    assert_eq!(t1.elapsed(), Duration::from_millis(10));
}

#[tokio::test(start_paused = true)]
async fn higher_priority_first_fifo_within_priority() {
    let q = queue::<&'static str>();
    q.add_with_priority("list-a", LOW_PRIORITY);
    q.add_with_priority("list-b", LOW_PRIORITY);
    q.add("event-1");
    q.add_with_priority("urgent", 10);
    q.add("event-2");
    let mut order = Vec::new();
    while let Some(item) = try_get(&q).await {
        order.push(*item);
    }
    assert_eq!(
        order,
        vec!["urgent", "event-1", "event-2", "list-a", "list-b"]
    );
}

/// Adds made after a getter took the earlier ones still obey priority and FIFO order: a
/// higher-priority add overtakes keys the workers already hold, equal ones queue behind them.
#[tokio::test(start_paused = true)]
async fn later_adds_keep_priority_and_fifo_order() {
    let q = queue::<u32>();
    for key in 0..5 {
        q.add(key);
    }
    assert_eq!(*q.get().await.expect("running"), 0);
    q.add(5);
    q.add_with_priority(99, 10);
    q.add_with_priority(98, LOW_PRIORITY);
    let mut order = Vec::new();
    while let Some(item) = try_get(&q).await {
        order.push(*item);
    }
    assert_eq!(order, vec![99, 1, 2, 3, 4, 5, 98]);

    // A dirty key queues again behind the keys added before it was done.
    q.add(1);
    let one = q.get().await.expect("running");
    q.add(1); // dirty
    q.add(2);
    drop(one);
    assert_eq!(*q.get().await.expect("running"), 2);
    assert_eq!(*q.get().await.expect("running"), 1);
}

#[tokio::test(start_paused = true)]
async fn re_adding_keeps_the_higher_priority() {
    let q = queue::<&'static str>();
    q.add_with_priority("a", LOW_PRIORITY);
    q.add_with_priority("b", LOW_PRIORITY);
    q.add("c");
    q.add("a"); // raised from LOW_PRIORITY to 0, behind "c"
    q.add_with_priority("c", LOW_PRIORITY); // lowering is ignored
    assert_eq!(q.len(), 3);
    let mut order = Vec::new();
    while let Some(item) = try_get(&q).await {
        order.push(*item);
    }
    assert_eq!(order, vec!["c", "a", "b"]);

    // A dirty key keeps the higher priority of its re-adds too.
    q.add("x");
    q.add("y");
    let x = q.get().await.expect("running");
    q.add_with_priority("x", 5);
    q.add_with_priority("x", LOW_PRIORITY);
    drop(x);
    assert_eq!(*q.get().await.expect("running"), "x");
    assert_eq!(*q.get().await.expect("running"), "y");
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_waiters_and_refuses_adds() {
    let q = queue::<u32>();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await.is_none() })
        })
        .collect();
    tokio::task::yield_now().await;
    assert!(!q.is_shutting_down());
    q.shutdown();
    assert!(q.is_shutting_down());
    for w in waiters {
        assert!(w.await.expect("waiter"), "every waiter gets None");
    }
    q.add(1);
    q.add_after(2, Duration::from_millis(1));
    q.add_rate_limited(3);
    assert_eq!(q.len(), 0);
    assert_eq!(q.num_delayed(), 0);
    assert!(q.get().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn shutdown_hands_out_nothing_and_drops_dirty_marks() {
    let q = queue::<u32>();
    q.add(1);
    q.add(2);
    let one = q.get().await.expect("running");
    q.add(1);
    q.shutdown();
    assert!(
        q.get().await.is_none(),
        "ready keys are not handed out after shutdown"
    );
    drop(one);
    assert_eq!(q.num_in_flight(), 0);
    assert_eq!(
        q.len(),
        1,
        "the dirty mark of key 1 was dropped; key 2 stays unhanded"
    );
}

#[tokio::test(start_paused = true)]
async fn drain_waits_for_in_flight_and_hands_out_what_is_ready() {
    let q = queue::<u32>();
    q.add(1);
    q.add(2);
    q.add_after(3, Duration::from_secs(5));
    let one = q.get().await.expect("running");
    q.add(1); // dirty: will be handed out again during the drain
    let drain = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain(Duration::from_secs(60)).await })
    };
    tokio::task::yield_now().await;
    assert!(q.is_shutting_down());
    q.add(4);
    assert_eq!(*q.get().await.expect("draining"), 2);
    assert!(!drain.is_finished());
    drop(one);
    let one_again = q.get().await.expect("draining: the dirty key comes back");
    assert_eq!(*one_again, 1);
    assert!(!drain.is_finished());
    // Nothing ready, one in flight: a getter waits rather than giving up early.
    let last = {
        let q = q.clone();
        tokio::spawn(async move { q.get().await.map(|i| *i) })
    };
    tokio::task::yield_now().await;
    assert!(!last.is_finished());
    q.shutdown_with_drain(Duration::ZERO)
        .await
        .expect_err("still one in flight");
    assert_eq!(last.await.expect("getter"), None);
    assert!(!drain.is_finished(), "key 1 is still in flight");
    drop(one_again);
    assert_eq!(drain.await.expect("drain"), Ok(()));
    assert_eq!(q.num_delayed(), 1, "the delayed key was never promoted");
    assert_eq!(q.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn drain_completes_when_the_last_worker_is_done() {
    let q = queue::<u32>();
    q.add(1);
    let item = q.get().await.expect("running");
    let drain = {
        let q = q.clone();
        tokio::spawn(async move { q.shutdown_with_drain(Duration::from_secs(60)).await })
    };
    advance(Duration::from_secs(30)).await;
    assert!(!drain.is_finished());
    drop(item);
    assert_eq!(drain.await.expect("drain"), Ok(()));
    assert!(q.get().await.is_none());
    assert_eq!(q.num_in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn drain_times_out_with_a_report() {
    let q = queue::<u32>();
    q.add(1);
    q.add(2);
    let _stuck = q.get().await.expect("running");
    let t0 = Instant::now();
    let err = q
        .shutdown_with_drain(Duration::from_secs(3))
        .await
        .expect_err("stuck worker");
    assert_eq!(t0.elapsed(), Duration::from_secs(3));
    match err {
        QueueError::DrainTimeout {
            in_flight,
            ready,
            ref name,
            ..
        } => {
            assert_eq!((in_flight, ready, name.as_str()), (1, 1, "test"));
        }
    }
    assert!(err.to_string().contains("drain timed out"));
    assert!(
        q.get().await.is_none(),
        "after a timed-out drain the queue is shut down hard"
    );
}

#[tokio::test(start_paused = true)]
async fn clones_share_one_queue_across_tasks() {
    let q = queue::<u32>();
    let producer = {
        let q = q.clone();
        tokio::spawn(async move {
            for k in 0..100 {
                q.add(k);
            }
        })
    };
    producer.await.expect("producer");
    let mut seen = Vec::new();
    for _ in 0..100 {
        let item = q.get().await.expect("running");
        // The guard is Send: it can move into another task.
        seen.push(tokio::spawn(async move { *item }).await.expect("worker"));
    }
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    assert_eq!(q.num_in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_guard_marks_done_on_drop_even_on_early_return_or_panic() {
    let q = queue::<u32>();
    q.add(1);
    async fn worker(q: &WorkQueue<u32>) -> Result<(), &'static str> {
        let item = q.get().await.ok_or("closed")?;
        if *item == 1 {
            return Err("failed"); // no explicit done
        }
        Ok(())
    }
    assert_eq!(worker(&q).await, Err("failed"));
    assert_eq!(q.num_in_flight(), 0);

    q.add(2);
    let item = q.get().await.expect("running");
    let panicked = tokio::spawn(async move {
        let _item = item;
        panic!("reconcile panicked");
    })
    .await;
    assert!(panicked.is_err());
    assert_eq!(
        q.num_in_flight(),
        0,
        "a panicking worker still marks its key done"
    );
    q.add(2);
    assert_eq!(*q.get().await.expect("running"), 2);
}

#[tokio::test(start_paused = true)]
async fn guard_helpers_retry_and_forget() {
    let q = queue::<u32>();
    q.add(1);
    let t0 = Instant::now();
    q.get().await.expect("running").retry_rate_limited();
    assert_eq!(q.num_delayed(), 1);
    assert_eq!(q.num_in_flight(), 0);
    q.get()
        .await
        .expect("running")
        .retry_after(Duration::from_secs(2));
    assert_eq!(t0.elapsed(), Duration::from_millis(10));
    let item = q.get().await.expect("running");
    assert_eq!(t0.elapsed(), Duration::from_millis(2010));
    assert_eq!(q.num_requeues(&1), 1);
    item.done_and_forget();
    assert_eq!(q.num_requeues(&1), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelled_getters_do_not_lose_wakeups() {
    let q = queue::<u32>();
    // A getter cancelled while waiting must not swallow the next add's wake-up.
    assert!(timeout(Duration::from_millis(10), q.get()).await.is_err());
    let getter = {
        let q = q.clone();
        tokio::spawn(async move { *q.get().await.unwrap() })
    };
    tokio::task::yield_now().await;
    q.add(5);
    assert_eq!(getter.await.expect("getter"), 5);
}

#[test]
fn works_without_a_runtime_for_adds() {
    // Building and adding need no runtime (no background task is required).
    let q = WorkQueue::<u32>::new("no-runtime");
    q.add(1);
    q.add_after(2, Duration::from_millis(1));
    assert_eq!(q.len(), 1);
    assert_eq!(q.num_delayed(), 1);
    assert_eq!(q.name(), "no-runtime");
    assert!(format!("{q:?}").contains("no-runtime"));
}

/// What `q` hands out next, up to `n` keys, marking each done (or keeping it in flight when
/// `keep` says so, to make later adds of it dirty).
async fn drain_some(
    q: &WorkQueue<u32>,
    n: usize,
    keep: &mut Vec<kcr_queue::WorkItem<u32>>,
    hold: bool,
) -> Vec<u32> {
    let mut out = Vec::new();
    for _ in 0..n {
        let Some(item) = try_get(q).await else { break };
        out.push(*item);
        if hold {
            keep.push(item);
        } else {
            item.done();
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn add_all_behaves_like_adds_one_by_one() {
    use rand::{Rng, SeedableRng};
    for seed in 0..50u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let (batched, single) = (queue::<u32>(), queue::<u32>());
        let (mut held_b, mut held_s) = (Vec::new(), Vec::new());
        for step in 0..40 {
            match rng.random_range(0..10) {
                // A batch of keys (with duplicates) at one priority, to both queues.
                0..6 => {
                    let keys: Vec<u32> = (0..rng.random_range(0..12))
                        .map(|_| rng.random_range(0..10))
                        .collect();
                    let prio = rng.random_range(-2..3);
                    batched.add_all(keys.clone(), prio);
                    for k in keys {
                        single.add_with_priority(k, prio);
                    }
                }
                // Take a few; hold some in flight so that re-adds make them dirty.
                6..9 => {
                    let n = rng.random_range(1..5);
                    let hold = rng.random_bool(0.4);
                    let b = drain_some(&batched, n, &mut held_b, hold).await;
                    let s = drain_some(&single, n, &mut held_s, hold).await;
                    assert_eq!(b, s, "seed {seed} step {step}: different keys handed out");
                }
                // Finish what is held (dirty keys are queued again).
                _ => {
                    held_b.drain(..).for_each(|i| i.done());
                    held_s.drain(..).for_each(|i| i.done());
                }
            }
            assert_eq!(batched.len(), single.len(), "seed {seed} step {step}");
            assert_eq!(batched.num_in_flight(), single.num_in_flight());
        }
        held_b.drain(..).for_each(|i| i.done());
        held_s.drain(..).for_each(|i| i.done());
        let b = drain_some(&batched, 100, &mut held_b, false).await;
        let s = drain_some(&single, 100, &mut held_s, false).await;
        assert_eq!(b, s, "seed {seed}: final order");
    }
}

#[tokio::test(start_paused = true)]
async fn add_all_wakes_every_waiting_getter_it_has_keys_for() {
    let q = queue::<u32>();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                let item = q.get().await.expect("a key");
                let key = *item;
                // Hold the key until the end so that each getter gets its own.
                tokio::time::sleep(Duration::from_secs(1)).await;
                key
            })
        })
        .collect();
    tokio::task::yield_now().await;
    q.add_all([7, 8, 9], 0);
    let mut got = Vec::new();
    for g in getters {
        got.push(
            timeout(Duration::from_secs(5), g)
                .await
                .expect("woken")
                .expect("getter"),
        );
    }
    got.sort();
    assert_eq!(got, [7, 8, 9]);
    // After shutdown a batch is refused like a single add.
    q.shutdown();
    q.add_all([1, 2], 0);
    assert_eq!(q.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn add_tags_follow_the_first_add_through_delays_and_in_flight_adds() {
    use kcr_queue::queue::with_add_tag;
    let q = WorkQueue::<&str>::builder("tags").metrics(false).build();
    // A delayed add keeps its tag until it is due; an untagged add of the same key later does
    // not clear it.
    with_add_tag(3, || q.add_after("late", Duration::from_secs(5)));
    q.add_after("late", Duration::from_secs(1));
    let late = q.get().await.unwrap();
    assert_eq!((*late, late.take_tag()), ("late", 3));
    // An add while in flight (after the worker took the tag) tags the next hand-out.
    with_add_tag(9, || q.add("late"));
    late.done();
    let again = q.get().await.unwrap();
    assert_eq!((*again, again.take_tag()), ("late", 9));
    again.done();
    // Batched adds are tagged too; the tag is restored after the closure.
    with_add_tag(4, || q.add_all(["x", "y"], kcr_queue::DEFAULT_PRIORITY));
    q.add("z");
    for (key, tag) in [("x", 4), ("y", 4), ("z", 0)] {
        let item = q.get().await.unwrap();
        assert_eq!((*item, item.take_tag()), (key, tag));
    }
}
