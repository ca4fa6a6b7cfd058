//! Seedable, lock-free jitter for retry delays.
//!
//! [`Jitter`] stretches a delay by a random fraction of itself, so that many keys that failed
//! together do not all retry in the same instant. The exact rule, for a delay `d` and a factor `f`:
//!
//! ```text
//! apply(d) = d + floor(d_ns * f * u) nanoseconds      (saturating at Duration::MAX)
//! u        = (x >> 11) * 2^-53                          u in [0, 1), 53 random bits
//! x        = SplitMix64(state += 0x9E3779B97F4A7C15)   one step per call to apply()
//! ```
//!
//! so `d <= apply(d) <= d + d * f`: jitter only ever *lengthens* a delay, never shortens it.
//! This matters for the token bucket: a bucket delay is the earliest moment a retry is allowed,
//! and jitter must not let a retry through before that moment. A zero delay stays zero (an
//! immediate retry stays immediate) and a factor of `0` (see [`Jitter::none`]) is the identity.
//!
//! The generator state is one `AtomicU64` advanced with `fetch_add`, so concurrent callers never
//! block each other. [`Jitter::with_seed`] makes the sequence reproducible: with one caller, the
//! `n`-th call to [`Jitter::apply`] always draws the same `u` for the same seed. Without a seed
//! the state starts from operating-system randomness.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The SplitMix64 increment (the golden ratio in 64-bit fixed point).
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The largest jitter factor accepted; larger factors are clamped to it.
pub const MAX_JITTER_FACTOR: f64 = 10.0;

/// Random, seedable lengthening of delays; see the [module docs](self) for the exact formula.
#[derive(Debug)]
pub struct Jitter {
    factor: f64,
    state: AtomicU64,
}

impl Jitter {
    /// Jitter that lengthens a delay `d` by up to `d * factor`.
    ///
    /// `factor` is clamped into `[0, MAX_JITTER_FACTOR]`; a NaN factor counts as `0`. The
    /// generator is seeded from operating-system randomness; use [`Jitter::with_seed`] for
    /// reproducible sequences.
    pub fn new(factor: f64) -> Self {
        let factor = if factor.is_nan() {
            0.0
        } else {
            factor.clamp(0.0, MAX_JITTER_FACTOR)
        };
        Self {
            factor,
            state: AtomicU64::new(rand::random()),
        }
    }

    /// No jitter at all: [`Jitter::apply`] returns its argument unchanged.
    pub fn none() -> Self {
        Self {
            factor: 0.0,
            state: AtomicU64::new(0),
        }
    }

    /// The same jitter with a fixed seed, so that the sequence of draws is reproducible.
    #[must_use]
    pub fn with_seed(self, seed: u64) -> Self {
        Self {
            factor: self.factor,
            state: AtomicU64::new(seed),
        }
    }

    /// The (clamped) factor: delays grow by at most this fraction of themselves.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// The next uniform draw in `[0, 1)` (53 bits of a SplitMix64 output).
    fn next_unit(&self) -> f64 {
        let mut z = self
            .state
            .fetch_add(GOLDEN_GAMMA, Ordering::Relaxed)
            .wrapping_add(GOLDEN_GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `d` lengthened by a random amount in `[0, d * factor]` (see the module docs).
    pub fn apply(&self, d: Duration) -> Duration {
        if self.factor == 0.0 || d.is_zero() {
            return d;
        }
        let u = self.next_unit();
        // `as u64` saturates for out-of-range floats, so huge delays cannot overflow here.
        let extra = (d.as_nanos() as f64 * self.factor * u) as u64;
        d.saturating_add(Duration::from_nanos(extra))
    }
}

impl Clone for Jitter {
    /// A copy with the same factor and the generator's current state (same future draws).
    fn clone(&self) -> Self {
        Self {
            factor: self.factor,
            state: AtomicU64::new(self.state.load(Ordering::Relaxed)),
        }
    }
}

impl Default for Jitter {
    /// No jitter (same as [`Jitter::none`]).
    fn default() -> Self {
        Self::none()
    }
}
