//! Rate limiter and jitter arithmetic.

use std::collections::HashSet;
use std::time::Duration;

use kcr_queue::rate_limiter::exponential_backoff;
use kcr_queue::{
    ConfigError, DefaultControllerRateLimiter, FastSlow, ItemExponential, Jitter, MaxOf,
    RateLimiter, RateLimiterExt, TokenBucket, WithMaxWait,
};
use tokio::time::advance;

const MS: Duration = Duration::from_millis(1);

#[test]
fn exponential_doubles_per_failure_and_caps() {
    let l = ItemExponential::new(5 * MS, Duration::from_secs(1));
    let delays: Vec<_> = (0..10).map(|_| l.when(&"a")).collect();
    assert_eq!(
        delays,
        [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]
            .map(|ms| ms * MS)
            .to_vec()
    );
    assert_eq!(l.num_requeues(&"a"), 10);
    assert_eq!(l.when(&"b"), 5 * MS, "keys are independent");
    l.forget(&"a");
    assert_eq!(l.num_requeues(&"a"), 0);
    assert_eq!(l.when(&"a"), 5 * MS, "forget resets the exponent");
}

#[test]
fn exponential_never_overflows() {
    assert_eq!(
        exponential_backoff(Duration::from_secs(1), 200, Duration::MAX),
        Duration::MAX
    );
    assert_eq!(
        exponential_backoff(Duration::from_secs(1), 63, Duration::MAX),
        Duration::from_secs(1 << 63)
    );
    assert_eq!(
        exponential_backoff(Duration::from_secs(1), 64, Duration::MAX),
        Duration::MAX
    );
    assert_eq!(
        exponential_backoff(Duration::from_nanos(1), 40, Duration::MAX),
        Duration::from_nanos(1 << 40)
    );
    assert_eq!(
        exponential_backoff(Duration::ZERO, 1000, Duration::MAX),
        Duration::ZERO
    );
    assert_eq!(exponential_backoff(MS, u32::MAX, 7 * MS), 7 * MS);
    assert_eq!(
        exponential_backoff(10 * MS, 0, MS),
        MS,
        "max below base caps at max"
    );

    let l = ItemExponential::new(Duration::from_secs(1), Duration::MAX);
    let mut last = Duration::ZERO;
    for _ in 0..300 {
        let d = l.when(&1u8);
        assert!(d >= last);
        last = d;
    }
    assert_eq!(last, Duration::MAX);
    assert_eq!(l.num_requeues(&1), 300);
}

#[test]
fn fast_slow_switches_after_the_fast_attempts() {
    let l = FastSlow::new(MS, Duration::from_secs(10), 3);
    let delays: Vec<_> = (0..5).map(|_| l.when(&"k")).collect();
    assert_eq!(
        delays,
        vec![MS, MS, MS, Duration::from_secs(10), Duration::from_secs(10)]
    );
    assert_eq!(l.num_requeues(&"k"), 5);
    l.forget(&"k");
    assert_eq!(l.when(&"k"), MS);
}

#[test]
fn max_of_and_max_wait_combine() {
    let l = MaxOf::new()
        .with(ItemExponential::new(MS, Duration::from_secs(100)))
        .with(FastSlow::new(
            Duration::from_millis(3),
            Duration::from_secs(1),
            2,
        ));
    assert_eq!(l.when(&1), 3 * MS);
    assert_eq!(l.when(&1), 3 * MS);
    assert_eq!(l.when(&1), Duration::from_secs(1));
    assert_eq!(l.num_requeues(&1), 3);
    l.forget(&1);
    assert_eq!(l.num_requeues(&1), 0);
    assert_eq!(l.when(&1), 3 * MS);
    assert_eq!(MaxOf::<u8>::new().when(&0), Duration::ZERO);

    let capped = ItemExponential::new(Duration::from_secs(1), Duration::from_secs(1000))
        .with_max_wait(Duration::from_secs(3));
    let delays: Vec<_> = (0..4).map(|_| capped.when(&"x").as_secs()).collect();
    assert_eq!(delays, vec![1, 2, 3, 3]);
    let explicit = WithMaxWait::new(FastSlow::new(MS, Duration::from_secs(9), 0), 2 * MS);
    assert_eq!(explicit.when(&"y"), 2 * MS);
    assert_eq!(explicit.num_requeues(&"y"), 1);
}

#[test]
fn jitter_stays_within_bounds_and_only_lengthens() {
    let j = Jitter::new(0.25).with_seed(42);
    let d = Duration::from_millis(800);
    let max = d + Duration::from_millis(200);
    let mut min_seen = Duration::MAX;
    let mut max_seen = Duration::ZERO;
    for _ in 0..10_000 {
        let x = j.apply(d);
        assert!(x >= d && x <= max, "{x:?} outside [{d:?}, {max:?}]");
        min_seen = min_seen.min(x);
        max_seen = max_seen.max(x);
    }
    // 10,000 uniform draws cover the range (deterministic with the seed).
    assert!(min_seen < d + Duration::from_millis(2), "{min_seen:?}");
    assert!(max_seen > max - Duration::from_millis(2), "{max_seen:?}");
}

#[test]
fn jitter_is_reproducible_with_a_seed() {
    let a = Jitter::new(0.5).with_seed(7);
    let b = Jitter::new(0.5).with_seed(7);
    let c = Jitter::new(0.5).with_seed(8);
    let d = Duration::from_secs(1);
    let xs: Vec<_> = (0..100).map(|_| a.apply(d)).collect();
    let ys: Vec<_> = (0..100).map(|_| b.apply(d)).collect();
    let zs: Vec<_> = (0..100).map(|_| c.apply(d)).collect();
    assert_eq!(xs, ys);
    assert_ne!(xs, zs);
    let cloned = a.clone();
    assert_eq!(
        cloned.apply(d),
        a.apply(d),
        "a clone continues the same sequence"
    );
}

#[test]
fn jitter_edge_cases() {
    let none = Jitter::none();
    assert_eq!(none.apply(Duration::from_secs(3)), Duration::from_secs(3));
    assert_eq!(Jitter::default().factor(), 0.0);
    let j = Jitter::new(1.0).with_seed(1);
    assert_eq!(
        j.apply(Duration::ZERO),
        Duration::ZERO,
        "immediate stays immediate"
    );
    assert_eq!(
        j.apply(Duration::MAX),
        Duration::MAX,
        "saturates instead of overflowing"
    );
    assert_eq!(Jitter::new(f64::NAN).factor(), 0.0);
    assert_eq!(Jitter::new(-1.0).factor(), 0.0);
    assert_eq!(
        Jitter::new(1e9).factor(),
        kcr_queue::jitter::MAX_JITTER_FACTOR
    );
    let tiny = Jitter::new(0.1).with_seed(3);
    assert_eq!(
        tiny.apply(Duration::from_nanos(1)),
        Duration::from_nanos(1),
        "floor of < 1 ns"
    );
}

#[test]
fn jittered_limiter_spreads_keys_that_fail_together() {
    let plain = ItemExponential::new(Duration::from_secs(1), Duration::from_secs(60));
    let jittered = ItemExponential::new(Duration::from_secs(1), Duration::from_secs(60))
        .with_jitter(Jitter::new(0.1).with_seed(99));
    let plain: HashSet<_> = (0..1000).map(|k| plain.when(&k)).collect();
    let spread: Vec<_> = (0..1000).map(|k| jittered.when(&k)).collect();
    assert_eq!(
        plain.len(),
        1,
        "without jitter every key retries at the same instant"
    );
    let distinct: HashSet<_> = spread.iter().collect();
    assert!(distinct.len() > 990, "{} distinct delays", distinct.len());
    assert!(
        spread
            .iter()
            .all(|d| *d >= Duration::from_secs(1) && *d <= Duration::from_millis(1100))
    );
    assert_eq!(jittered.num_requeues(&5), 1);
}

#[test]
fn bucket_rejects_bad_parameters() {
    assert_eq!(
        TokenBucket::<u8>::new(0.0, 1).err(),
        Some(ConfigError::InvalidRate { qps: 0.0 })
    );
    assert!(matches!(
        TokenBucket::<u8>::new(f64::NAN, 1),
        Err(ConfigError::InvalidRate { .. })
    ));
    assert!(matches!(
        TokenBucket::<u8>::new(f64::INFINITY, 1),
        Err(ConfigError::InvalidRate { .. })
    ));
    assert_eq!(
        TokenBucket::<u8>::new(1.0, 0).err(),
        Some(ConfigError::InvalidBurst)
    );
}

#[tokio::test(start_paused = true)]
async fn bucket_allows_the_burst_then_spaces_by_the_rate() {
    let b = TokenBucket::new(10.0, 100).expect("valid");
    for k in 0..100 {
        assert_eq!(b.when(&k), Duration::ZERO, "key {k} is within the burst");
    }
    assert_eq!(b.when(&100), 100 * MS);
    assert_eq!(b.when(&101), 200 * MS);
    advance(Duration::from_secs(1)).await;
    // One second refilled 10 tokens, 2 of which were already promised.
    let next: Vec<_> = (200..210).map(|k| b.when(&k)).collect();
    assert_eq!(next[0], Duration::ZERO);
    assert_eq!(next[7], Duration::ZERO);
    assert_eq!(next[8], 100 * MS);
    assert_eq!(b.num_requeues(&100), 0);
}

#[tokio::test(start_paused = true)]
async fn bucket_gives_a_waiting_key_its_existing_reservation() {
    let b = TokenBucket::new(1.0, 1).expect("valid");
    assert_eq!(b.when(&"a"), Duration::ZERO);
    assert_eq!(b.when(&"b"), Duration::from_secs(1));
    for _ in 0..50 {
        assert_eq!(
            b.when(&"b"),
            Duration::from_secs(1),
            "no new token while waiting"
        );
    }
    assert_eq!(
        b.when(&"c"),
        Duration::from_secs(2),
        "c is not pushed back by b's repeats"
    );
    advance(Duration::from_millis(400)).await;
    assert_eq!(
        b.when(&"b"),
        Duration::from_millis(600),
        "the remaining time"
    );
}

#[tokio::test(start_paused = true)]
async fn bucket_forget_returns_the_token() {
    let b = TokenBucket::new(1.0, 1).expect("valid");
    assert_eq!(b.when(&1), Duration::ZERO);
    assert_eq!(b.when(&2), Duration::from_secs(1));
    assert_eq!(b.when(&3), Duration::from_secs(2));
    b.forget(&2);
    assert_eq!(
        b.when(&4),
        Duration::from_secs(2),
        "2's token went back: 4 takes the slot"
    );
    b.forget(&1); // its reservation was immediate: nothing to give back
    assert_eq!(b.when(&5), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn bucket_delays_stay_bounded_under_a_failure_storm() {
    // 1000 keys fail over and over at 10 qps / burst 100, for 20 simulated minutes: every key
    // retries as soon as it may. client-go's bucket would have handed out delays growing without
    // bound (six tokens per wait here); one token per key bounds every delay by keys / qps =
    // 100 s: a fair round-robin at exactly 10 qps.
    let b = TokenBucket::new(10.0, 100).expect("valid");
    let keys = 1000u32;
    let mut due = vec![Duration::ZERO; keys as usize];
    let mut now = Duration::ZERO;
    let mut max_delay = Duration::ZERO;
    let mut calls = 0u64;
    while now < Duration::from_secs(1200) {
        for k in 0..keys {
            if due[k as usize] <= now {
                // Each failing key that has to wait is also rate-limited 5 more times while it
                // waits (events keep coming); those calls must not take tokens.
                let d = b.when(&k);
                if !d.is_zero() {
                    for _ in 0..5 {
                        assert_eq!(b.when(&k), d);
                    }
                }
                calls += 6;
                max_delay = max_delay.max(d);
                due[k as usize] = now + d;
            }
        }
        advance(Duration::from_millis(100)).await;
        now += Duration::from_millis(100);
    }
    assert!(calls > 50_000, "{calls} calls");
    assert!(max_delay <= Duration::from_millis(100_100), "{max_delay:?}");
    assert!(
        max_delay >= Duration::from_secs(80),
        "the rate is still enforced: {max_delay:?}"
    );

    // The storm ends (everything succeeds): after the backlog drains the bucket is fresh.
    for k in 0..keys {
        b.forget(&k);
    }
    advance(Duration::from_secs(10)).await;
    assert_eq!(b.when(&u32::MAX), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn bucket_max_delay_caps_and_takes_no_token() {
    let b = TokenBucket::new(10.0, 10)
        .expect("valid")
        .with_max_delay(Duration::from_secs(1));
    let delays: Vec<_> = (0..10_000u32).map(|k| b.when(&k)).collect();
    assert!(delays.iter().all(|d| *d <= Duration::from_secs(1)));
    assert_eq!(
        delays
            .iter()
            .filter(|d| **d == Duration::from_secs(1))
            .count(),
        10_000 - 10 - 9
    );
    // Saturated calls took no token, so the bucket's debt is at most one second.
    advance(Duration::from_millis(1100)).await;
    assert_eq!(b.when(&u32::MAX), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn default_controller_limiter_matches_controller_runtime_plus_jitter() {
    let exact = DefaultControllerRateLimiter::<u32>::new().with_jitter(Jitter::none());
    let delays: Vec<_> = (0..4).map(|_| exact.when(&1)).collect();
    assert_eq!(delays, [5, 10, 20, 40].map(|ms| ms * MS).to_vec());
    for _ in 0..40 {
        exact.when(&1);
    }
    assert_eq!(exact.when(&1), Duration::from_secs(1000), "exponential cap");
    assert_eq!(exact.num_requeues(&1), 45);
    exact.forget(&1);
    assert_eq!(exact.num_requeues(&1), 0);
    // The bucket: key 1 used 45 tokens of the burst; past it, the 10 qps spacing dominates.
    let bucket_delays: Vec<_> = (2..200).map(|k| exact.when(&k)).collect();
    assert_eq!(bucket_delays[0], 5 * MS);
    assert!(
        bucket_delays[197] >= Duration::from_secs(10),
        "{:?}",
        bucket_delays[197]
    );

    let jittered = kcr_queue::default_controller_rate_limiter::<u32>();
    for k in 0..50 {
        let d = jittered.when(&k);
        assert!(d >= 5 * MS && d <= Duration::from_micros(5500), "{d:?}");
    }
}
