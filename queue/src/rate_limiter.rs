//! Rate limiters: how long a key waits before its next retry.
//!
//! A [`RateLimiter`] answers [`RateLimiter::when`] ("this key failed again: how long until it may
//! be retried?"), [`RateLimiter::forget`] ("this key succeeded: reset it") and
//! [`RateLimiter::num_requeues`]. [`WorkQueue::add_rate_limited`](crate::WorkQueue::add_rate_limited)
//! calls `when` and delays the key by the answer.
//!
//! | limiter | delay |
//! |---|---|
//! | [`ItemExponential`] | `base * 2^failures(key)`, capped at `max`, overflow-safe |
//! | [`FastSlow`] | `fast` for the first `max_fast` failures of a key, `slow` afterwards |
//! | [`TokenBucket`] | global `qps` with `burst`; one outstanding token per key (see below) |
//! | [`MaxOf`] | the largest delay of several limiters |
//! | [`WithMaxWait`] | another limiter's delay, capped at a maximum |
//! | [`Jittered`] | another limiter's delay, lengthened by a [`Jitter`] |
//! | [`DefaultControllerRateLimiter`] | controller-runtime's default plus 10 % jitter |
//!
//! Every limiter can be jittered or capped through [`RateLimiterExt`].
//!
//! # The token bucket and failure storms
//!
//! client-go's `BucketRateLimiter` reserves a token on *every* call and never gives one back.
//! When many keys fail over and over (or one key is rate-limited again while it is still
//! waiting), the reservations pile up and the delays grow without bound
//! (kubernetes/kubernetes#104554): the second reservation of a key that is already waiting is
//! wasted, because the queue keeps the earliest time anyway, yet it pushes every later key back.
//!
//! [`TokenBucket`] is a virtual-time bucket (GCRA: interval `1/qps`, tolerance `burst - 1`
//! intervals) that differs in three ways:
//! 1. **One outstanding token per key.** If `when(key)` is called while the key still holds a
//!    reservation in the future, the same reservation is returned (the remaining time to it) and
//!    no new token is taken. The debt of the bucket is therefore at most one token per distinct
//!    failing key, and a key's delay is at most about `n / qps` for `n` distinct failing keys,
//!    however long the storm lasts: with `n` keys failing forever, each is retried once every
//!    `n / qps`, a fair round-robin at exactly the configured rate (the test
//!    `bucket_delays_stay_bounded_under_a_failure_storm` runs 1000 keys at 10 qps for 20
//!    simulated minutes: the longest delay is 100 s). A key whose delay is zero holds no
//!    reservation, so calling `when` again takes another token, as in client-go.
//! 2. **`forget` gives the token back.** A key that succeeds (or is forgotten) before its
//!    reservation is due returns its token, so the keys behind it move up.
//! 3. **Optional hard cap.** [`TokenBucket::with_max_delay`] bounds every delay; a call that would
//!    exceed the cap gets the cap and takes *no* token (the bucket stays saturated instead of
//!    going further into debt), so after a storm the bucket recovers within the cap. The cap
//!    trades rate accuracy for latency: keys at the cap may exceed `qps` together.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::FastMap;
use crate::error::ConfigError;
use crate::jitter::Jitter;

/// Decides how long a key waits before it is retried.
///
/// Implementations must be cheap and must not block: `when` is called on the caller's task.
pub trait RateLimiter<T>: Send + Sync + 'static {
    /// The key failed (again): how long until it may be retried.
    fn when(&self, item: &T) -> Duration;
    /// The key succeeded or is given up on: reset whatever the limiter tracks for it.
    fn forget(&self, item: &T);
    /// How many times the key has been rate-limited since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// `Box<L>` and `Arc<L>` (also of `dyn RateLimiter<T>`) are rate limiters: they ask the one
/// inside.
macro_rules! forward_rate_limiter {
    ($($pointer:ident),*) => {$(
        impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for $pointer<L> {
            fn when(&self, item: &T) -> Duration {
                (**self).when(item)
            }
            fn forget(&self, item: &T) {
                (**self).forget(item)
            }
            fn num_requeues(&self, item: &T) -> u32 {
                (**self).num_requeues(item)
            }
        }
    )*};
}

forward_rate_limiter!(Box, Arc);

/// Combinators available on every [`RateLimiter`].
pub trait RateLimiterExt<T>: RateLimiter<T> + Sized {
    /// Lengthen every delay of this limiter by `jitter` (see [`Jitter`]).
    fn with_jitter(self, jitter: Jitter) -> Jittered<Self> {
        Jittered {
            inner: self,
            jitter,
        }
    }
    /// Cap every delay of this limiter at `max_wait`.
    fn with_max_wait(self, max_wait: Duration) -> WithMaxWait<Self> {
        WithMaxWait {
            inner: self,
            max_wait,
        }
    }
}

impl<T, L: RateLimiter<T>> RateLimiterExt<T> for L {}

/// `base * 2^exp` capped at `max`, without overflow for any `exp`.
pub fn exponential_backoff(base: Duration, exp: u32, max: Duration) -> Duration {
    if base.is_zero() {
        return Duration::ZERO;
    }
    let base_ns = base.as_nanos();
    let max_ns = max.as_nanos();
    let ns = if exp >= 127 {
        max_ns
    } else {
        base_ns
            .checked_mul(1u128 << exp)
            .map_or(max_ns, |v| v.min(max_ns))
    };
    duration_from_nanos(ns)
}

/// A `Duration` from nanoseconds; `ns` never exceeds a `Duration` in the callers, and
/// anything larger saturates at `Duration::MAX`.
fn duration_from_nanos(ns: u128) -> Duration {
    let secs = ns / 1_000_000_000;
    match u64::try_from(secs) {
        Ok(secs) => Duration::new(secs, (ns % 1_000_000_000) as u32),
        Err(_) => Duration::MAX,
    }
}

/// Per-key exponential back-off: the `n`-th failure of a key (counting from 0) waits
/// `base * 2^n`, capped at `max`. `forget` resets the key to `n = 0`.
///
/// client-go's `ItemExponentialFailureRateLimiter`; overflow-safe for any number of failures.
#[derive(Debug)]
pub struct ItemExponential<T> {
    base: Duration,
    max: Duration,
    failures: Failures<T>,
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> ItemExponential<T> {
    /// Delays start at `base` and double per failure up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Failures::default(),
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> RateLimiter<T> for ItemExponential<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = self.failures.record(item) - 1;
        exponential_backoff(self.base, exp, self.max)
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.count(item)
    }
}

/// Per-key failure counts, the memory of the per-key limiters.
#[derive(Debug)]
struct Failures<T>(Mutex<FastMap<T, u32>>);

impl<T> Default for Failures<T> {
    fn default() -> Self {
        Self(Mutex::new(FastMap::default()))
    }
}

impl<T: Hash + Eq + Clone> Failures<T> {
    /// Counts one more failure of `item`; returns its count including this one (at least 1).
    fn record(&self, item: &T) -> u32 {
        let mut counts = self.0.lock();
        match counts.get_mut(item) {
            Some(n) => {
                *n = n.saturating_add(1);
                *n
            }
            None => {
                counts.insert(item.clone(), 1);
                1
            }
        }
    }

    fn forget(&self, item: &T) {
        self.0.lock().remove(item);
    }

    fn count(&self, item: &T) -> u32 {
        self.0.lock().get(item).copied().unwrap_or(0)
    }
}

/// `fast` for the first `max_fast_attempts` failures of a key, `slow` afterwards
/// (client-go's `ItemFastSlowRateLimiter`).
#[derive(Debug)]
pub struct FastSlow<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    attempts: Failures<T>,
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> FastSlow<T> {
    /// `fast` delays for the first `max_fast_attempts` failures, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            fast,
            slow,
            max_fast_attempts,
            attempts: Failures::default(),
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> RateLimiter<T> for FastSlow<T> {
    fn when(&self, item: &T) -> Duration {
        if self.attempts.record(item) <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &T) {
        self.attempts.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.attempts.count(item)
    }
}

/// A key's reservation in the bucket.
#[derive(Debug, Clone, Copy)]
struct Reservation {
    /// When the key may run, in nanoseconds since the bucket's epoch.
    at: u64,
    /// Whether the reservation consumed a token (saturated calls do not).
    holds_token: bool,
}

#[derive(Debug)]
struct BucketState<T> {
    /// Theoretical arrival time of the next token (GCRA), nanoseconds since `epoch`.
    tat: u64,
    reservations: FastMap<T, Reservation>,
    /// Sweep stale reservations when the map grows past this size.
    sweep_at: usize,
}

/// A global token bucket (`qps` tokens per second, `burst` tokens deep) with one outstanding
/// token per key, tokens returned on `forget`, and an optional delay cap. See the
/// [module docs](self) for why and exactly how it differs from client-go's.
#[derive(Debug)]
pub struct TokenBucket<T> {
    interval_ns: u64,
    tolerance_ns: u64,
    max_delay: Option<Duration>,
    epoch: Instant,
    state: Mutex<BucketState<T>>,
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> TokenBucket<T> {
    /// A bucket refilling `qps` tokens per second, holding at most `burst` tokens (full at start).
    ///
    /// Errors if `qps` is not a positive finite number or `burst` is zero.
    pub fn new(qps: f64, burst: u32) -> Result<Self, ConfigError> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(ConfigError::InvalidRate { qps });
        }
        if burst == 0 {
            return Err(ConfigError::InvalidBurst);
        }
        let interval_ns = ((1e9 / qps) as u64).max(1);
        Ok(Self {
            interval_ns,
            tolerance_ns: interval_ns.saturating_mul(u64::from(burst) - 1),
            max_delay: None,
            epoch: Instant::now(),
            state: Mutex::new(BucketState {
                tat: 0,
                reservations: FastMap::default(),
                sweep_at: 1024,
            }),
        })
    }

    /// Cap every delay at `max_delay`; calls that would wait longer get `max_delay` and take no
    /// token.
    #[must_use]
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = Some(max_delay);
        self
    }

    fn now_ns(&self) -> u64 {
        nanos_since(self.epoch, Instant::now())
    }
}

/// Nanoseconds from `epoch` to `now` (0 if `now` is earlier), saturating at `u64::MAX`.
pub(crate) fn nanos_since(epoch: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> RateLimiter<T> for TokenBucket<T> {
    fn when(&self, item: &T) -> Duration {
        let now = self.now_ns();
        let mut st = self.state.lock();
        if let Some(r) = st.reservations.get(item)
            && r.at > now
        {
            return Duration::from_nanos(r.at - now);
        }
        let allowed = st.tat.saturating_sub(self.tolerance_ns).max(now);
        let delay = allowed - now;
        if let Some(max) = self.max_delay
            && u128::from(delay) > max.as_nanos()
        {
            let at = now.saturating_add(u64::try_from(max.as_nanos()).unwrap_or(u64::MAX));
            st.reservations.insert(
                item.clone(),
                Reservation {
                    at,
                    holds_token: false,
                },
            );
            return max;
        }
        st.tat = st.tat.max(now).saturating_add(self.interval_ns);
        if delay > 0 {
            st.reservations.insert(
                item.clone(),
                Reservation {
                    at: allowed,
                    holds_token: true,
                },
            );
        } else {
            st.reservations.remove(item);
        }
        if st.reservations.len() >= st.sweep_at {
            st.reservations.retain(|_, r| r.at > now);
            st.sweep_at = (st.reservations.len() * 2).max(1024);
        }
        Duration::from_nanos(delay)
    }

    fn forget(&self, item: &T) {
        let now = self.now_ns();
        let mut st = self.state.lock();
        if let Some(r) = st.reservations.remove(item)
            && r.holds_token
            && r.at > now
        {
            st.tat = st.tat.saturating_sub(self.interval_ns);
        }
    }

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The largest delay of several limiters; `forget` forgets in all of them and `num_requeues`
/// is the largest count (client-go's `MaxOfRateLimiter`).
pub struct MaxOf<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> std::fmt::Debug for MaxOf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOf")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<T: 'static> MaxOf<T> {
    /// No limiters yet (a delay of zero); add them with [`MaxOf::with`].
    pub fn new() -> Self {
        Self {
            limiters: Vec::new(),
        }
    }

    /// Also take `limiter` into account.
    #[must_use]
    pub fn with(mut self, limiter: impl RateLimiter<T>) -> Self {
        self.limiters.push(Box::new(limiter));
        self
    }
}

impl<T: 'static> Default for MaxOf<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: 'static> RateLimiter<T> for MaxOf<T> {
    fn when(&self, item: &T) -> Duration {
        // Every limiter sees every failure, as in client-go (each keeps its own count).
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }
    fn forget(&self, item: &T) {
        self.limiters.iter().for_each(|l| l.forget(item));
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Another limiter with every delay capped at `max_wait` (client-go's `WithMaxWaitRateLimiter`).
#[derive(Debug)]
pub struct WithMaxWait<L> {
    inner: L,
    max_wait: Duration,
}

impl<L> WithMaxWait<L> {
    /// `inner`, with its delays capped at `max_wait`.
    pub fn new(inner: L, max_wait: Duration) -> Self {
        Self { inner, max_wait }
    }
}

impl<T, L: RateLimiter<T>> RateLimiter<T> for WithMaxWait<L> {
    fn when(&self, item: &T) -> Duration {
        self.inner.when(item).min(self.max_wait)
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item)
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.inner.num_requeues(item)
    }
}

/// Another limiter with every delay lengthened by a [`Jitter`].
#[derive(Debug)]
pub struct Jittered<L> {
    inner: L,
    jitter: Jitter,
}

impl<L> Jittered<L> {
    /// `inner`, with its delays lengthened by `jitter`.
    pub fn new(inner: L, jitter: Jitter) -> Self {
        Self { inner, jitter }
    }
}

impl<T, L: RateLimiter<T>> RateLimiter<T> for Jittered<L> {
    fn when(&self, item: &T) -> Duration {
        self.jitter.apply(self.inner.when(item))
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item)
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.inner.num_requeues(item)
    }
}

/// Base delay of the default controller limiter's exponential part.
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(5);
/// Maximum delay of the default controller limiter's exponential part.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Tokens per second of the default controller limiter's bucket.
pub const DEFAULT_QPS: f64 = 10.0;
/// Depth of the default controller limiter's bucket.
pub const DEFAULT_BURST: u32 = 100;
/// Jitter factor of the default controller limiter (delays grow by up to 10 %).
pub const DEFAULT_JITTER_FACTOR: f64 = 0.1;

/// controller-runtime's default limiter (the larger of a per-key exponential 5 ms .. 1000 s and
/// a 10 qps / 100 burst [`TokenBucket`]), with the result lengthened by a
/// [`Jitter`] of factor [`DEFAULT_JITTER_FACTOR`] so that keys failing together spread out.
#[derive(Debug)]
pub struct DefaultControllerRateLimiter<T> {
    exponential: ItemExponential<T>,
    bucket: TokenBucket<T>,
    jitter: Jitter,
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> DefaultControllerRateLimiter<T> {
    /// The default limiter with its default jitter (unseeded).
    pub fn new() -> Self {
        let bucket = match TokenBucket::new(DEFAULT_QPS, DEFAULT_BURST) {
            Ok(bucket) => bucket,
            // DEFAULT_QPS is positive and DEFAULT_BURST non-zero, so `new` cannot fail.
            Err(_) => unreachable!("default bucket parameters are valid"),
        };
        Self {
            exponential: ItemExponential::new(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY),
            bucket,
            jitter: Jitter::new(DEFAULT_JITTER_FACTOR),
        }
    }

    /// The same limiter with another jitter (for instance a seeded one in tests, or
    /// [`Jitter::none`] for controller-runtime's exact delays).
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Default for DefaultControllerRateLimiter<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> RateLimiter<T>
    for DefaultControllerRateLimiter<T>
{
    fn when(&self, item: &T) -> Duration {
        let d = self.exponential.when(item).max(self.bucket.when(item));
        self.jitter.apply(d)
    }
    fn forget(&self, item: &T) {
        self.exponential.forget(item);
        self.bucket.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.exponential.num_requeues(item)
    }
}

/// controller-runtime's default controller rate limiter, plus jitter
/// (see [`DefaultControllerRateLimiter`]).
pub fn default_controller_rate_limiter<T: Hash + Eq + Clone + Send + Sync + 'static>()
-> DefaultControllerRateLimiter<T> {
    DefaultControllerRateLimiter::new()
}
