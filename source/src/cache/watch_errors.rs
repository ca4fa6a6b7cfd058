//! What a cache's watches do when the API server refuses them: a hook that hears every watch
//! error ([`Cache::on_watch_error`](crate::Cache::on_watch_error), controller-runtime's
//! `WatchErrorHandler`) and the backoff between retries ([`WatchBackoff`],
//! [`Cache::set_watch_backoff`](crate::Cache::set_watch_backoff)).
//!
//! A watch never gives up: after an error it waits the backoff's next delay and lists or
//! watches again, and the delay grows until the watch has run without error for
//! [`WatchBackoff::reset_after`]. Each error is logged, kept as the informer's last error (what
//! a sync timeout reports), and handed to the hook with the kind and namespace it concerns, so
//! an operator can count, alert or stop on errors retrying cannot fix (a 403 after an RBAC
//! change, a 404 after a CRD was removed).

use std::sync::Arc;
use std::time::Duration;

use std::hash::{BuildHasher, Hasher};

use kube::runtime::utils::{Backoff, ResetTimerBackoff};
use kube::runtime::watcher;

/// One watch error, as the hook hears it.
#[derive(Debug)]
pub struct WatchError<'a> {
    /// The kind watched.
    pub kind: &'a str,
    /// The namespace of the watch (`None`: every namespace, or a cluster-scoped kind).
    pub namespace: Option<&'a str>,
    /// kube-runtime's error.
    pub error: &'a watcher::Error,
}

/// A hook called with every watch error of a cache's watches.
pub type WatchErrorHook = Arc<dyn Fn(&WatchError<'_>) + Send + Sync>;

/// The backoff of a cache's watches between retries: exponential from `initial` by `factor` up
/// to `max`, with jitter unless turned off, starting over once a watch has run for
/// `reset_after` without error. The default is kube-runtime's (`default_backoff`): 800 ms, ×2,
/// 30 s, jitter, reset after 120 s.
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use]
pub struct WatchBackoff {
    /// The first delay.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
    /// The growth of each delay over the previous one.
    pub factor: f32,
    /// Randomise each delay (between half of the computed delay and all of it), so that many
    /// watches failing together do not retry together.
    pub jitter: bool,
    /// A watch that ran this long without error starts over from `initial`.
    pub reset_after: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: true,
            reset_after: Duration::from_secs(120),
        }
    }
}

impl WatchBackoff {
    /// Sets the first and the longest delay.
    pub fn delays(mut self, initial: Duration, max: Duration) -> Self {
        self.initial = initial;
        self.max = max;
        self
    }

    /// Turns jitter on or off.
    pub fn jitter(mut self, jitter: bool) -> Self {
        self.jitter = jitter;
        self
    }

    /// kube-runtime's backoff of these settings.
    pub(crate) fn build(&self) -> ResetTimerBackoff<Exponential> {
        ResetTimerBackoff::new(
            Exponential {
                settings: *self,
                attempt: 0,
                seed: std::collections::hash_map::RandomState::new()
                    .build_hasher()
                    .finish(),
            },
            self.reset_after,
        )
    }

    /// The delay before retry `attempt` (0-based), before jitter.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let max = self.max.max(self.initial);
        let grown = self.initial.as_secs_f64()
            * f64::from(self.factor.max(1.0)).powi(attempt.min(64) as i32);
        Duration::from_secs_f64(grown.min(max.as_secs_f64()))
    }
}

/// A number in `[0, 1)` from a splitmix64 step of `seed`.
fn unit(seed: &mut u64) -> f64 {
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn random_seed() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// `period` scaled by a random factor in `[1 - spread, 1 + spread)`.
pub(crate) fn jittered(period: Duration, spread: f64) -> Duration {
    let u = unit(&mut random_seed());
    period.mul_f64(1.0 - spread + 2.0 * spread * u)
}

/// [`WatchBackoff`]'s delays, as kube-runtime's `Backoff`.
pub(crate) struct Exponential {
    settings: WatchBackoff,
    attempt: u32,
    seed: u64,
}

impl Iterator for Exponential {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.settings.delay(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        if !self.settings.jitter {
            return Some(delay);
        }
        Some(delay.mul_f64(0.5 + unit(&mut self.seed) / 2.0))
    }
}

impl Backoff for Exponential {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_max_jitter_stays_within_half_and_reset_starts_over() {
        let settings = WatchBackoff::default()
            .delays(Duration::from_millis(100), Duration::from_secs(1))
            .jitter(false);
        let mut plain = settings.build();
        let delays: Vec<_> = (0..6).map(|_| plain.next().unwrap()).collect();
        let ms: Vec<_> = delays.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        plain.reset();
        assert_eq!(plain.next(), Some(Duration::from_millis(100)));

        let mut jittered = settings.jitter(true).build();
        let mut distinct = std::collections::BTreeSet::new();
        for attempt in 0..40 {
            let d = jittered.next().unwrap();
            let full = settings.delay(attempt);
            assert!(
                d >= full / 2 && d <= full,
                "{d:?} outside [{:?}, {full:?}]",
                full / 2
            );
            distinct.insert(d);
        }
        assert!(
            distinct.len() > 10,
            "jitter varies the delays: {distinct:?}"
        );
    }

    #[test]
    fn a_jittered_period_stays_within_its_spread() {
        let period = Duration::from_secs(100);
        let periods: std::collections::BTreeSet<_> =
            (0..50).map(|_| jittered(period, 0.1)).collect();
        assert!(
            periods
                .iter()
                .all(|p| *p >= Duration::from_secs(90) && *p < Duration::from_secs(110)),
            "{periods:?}"
        );
        assert!(periods.len() > 10, "{periods:?}");
    }
}
