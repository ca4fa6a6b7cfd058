//! [`eventually`] and [`consistently`]: poll a check until it holds, or for as long as it must
//! keep holding, with a timeout, a poll interval and failures that show the last value seen.
//!
//! A check is an async closure returning an [`Outcome`]: `bool`, `Option<T>` (`None` has not
//! happened yet) or `Result<T, E>` (the error says why not). Both builders are futures (await
//! them); they resolve to `Ok` with the check's value, or to a [`WaitError`] that names what was
//! awaited, how long and how often it was checked, and what the check last saw. To make "the
//! last value" tell something, return it: [`that`] turns a value and a predicate into a
//! `Result` whose error is the value itself, and [`that_ok`] does the same for the `Result` of
//! a fallible read (a failure then shows `Ok(<value>)` or the error).
//!
//! Time is tokio's: under a paused clock (`#[tokio::test(start_paused = true)]`) the waits
//! advance it instead of sleeping. Against an API server, real time passes as it must.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::Duration;
//! use kcr_testkit::{consistently, eventually, that};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kcr_testkit::WaitError> {
//! let count = AtomicU32::new(0);
//! // Polls until the value satisfies the predicate; the value comes back.
//! let seen = eventually("the count reaches 3", || async {
//!     that(count.fetch_add(1, Ordering::SeqCst) + 1, |n| *n >= 3)
//! })
//! .timeout(Duration::from_secs(5))
//! .await?;
//! assert_eq!(seen, 3);
//!
//! // Holds on every poll for the whole duration, or fails at once with what it saw.
//! consistently("the count stays below 100", || async {
//!     that(count.load(Ordering::SeqCst), |n| *n < 100)
//! })
//! .for_duration(Duration::from_millis(200))
//! .interval(Duration::from_millis(20))
//! .await?;
//!
//! // A failure shows the last value seen.
//! let err = eventually("the count reaches 1000", || async {
//!     that(count.load(Ordering::SeqCst), |n| *n >= 1000)
//! })
//! .timeout(Duration::from_millis(50))
//! .await
//! .unwrap_err();
//! assert!(err.to_string().contains("last seen: 3"), "{err}");
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project::pin_project;
use tokio::time::{Instant, Sleep};

/// Default timeout of [`eventually`]: generous, because a real API server on a loaded CI
/// machine can take seconds; a passing test does not wait for it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default duration of [`consistently`].
pub const DEFAULT_DURATION: Duration = Duration::from_secs(1);
/// Default poll interval of both.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(20);

/// What a check returns: whether the condition holds, with its value, or what was seen
/// instead.
pub trait Outcome {
    /// The value handed back when the condition holds.
    type Value;

    /// `Ok(value)` when the condition holds, otherwise a description of what was seen.
    fn into_outcome(self) -> Result<Self::Value, String>;
}

impl Outcome for bool {
    type Value = ();

    fn into_outcome(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("false".into()) }
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;

    fn into_outcome(self) -> Result<T, String> {
        self.ok_or_else(|| "None".into())
    }
}

impl<T, E: fmt::Display> Outcome for Result<T, E> {
    type Value = T;

    fn into_outcome(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// A value that did not satisfy its predicate (see [`that`]); displays as the value's `Debug`.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmet<T>(pub T);

impl<T: fmt::Debug> fmt::Display for Unmet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// `Ok(value)` when `predicate(&value)` holds, otherwise `Err(Unmet(value))`: the check form
/// whose failure message shows the value.
pub fn that<T: fmt::Debug>(value: T, predicate: impl FnOnce(&T) -> bool) -> Result<T, Unmet<T>> {
    if predicate(&value) {
        Ok(value)
    } else {
        Err(Unmet(value))
    }
}

/// `Ok(value)` when `result` is `Ok` and `predicate(&value)` holds, otherwise
/// `Err(Unmet(result))`: for a check that reads through a fallible call, whose failure message
/// shows either the value (`Ok(0)`) or the error.
pub fn that_ok<T: fmt::Debug, E: fmt::Debug>(
    result: Result<T, E>,
    predicate: impl FnOnce(&T) -> bool,
) -> Result<T, Unmet<Result<T, E>>> {
    match result {
        Ok(value) if predicate(&value) => Ok(value),
        other => Err(Unmet(other)),
    }
}

/// Which wait failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// [`eventually`]: the condition never held in time.
    Eventually,
    /// [`consistently`]: the condition stopped holding.
    Consistently,
}

/// A failed [`eventually`] or [`consistently`]. Its `Debug` is its message, so that
/// `.unwrap()` in a test prints it whole.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub struct WaitError {
    /// Which wait failed.
    pub kind: WaitKind,
    /// What was awaited (the description given).
    pub what: String,
    /// Time from the first check to the failure.
    pub elapsed: Duration,
    /// How many times the check ran.
    pub checks: u64,
    /// What the failing check saw (for `eventually`, the last check).
    pub last_seen: String,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WaitKind::Eventually => write!(
                f,
                "timed out after {:?} ({} checks) waiting for: {}; last seen: {}",
                self.elapsed, self.checks, self.what, self.last_seen
            ),
            WaitKind::Consistently => write!(
                f,
                "stopped holding after {:?} (check {}): {}; seen: {}",
                self.elapsed, self.checks, self.what, self.last_seen
            ),
        }
    }
}

impl fmt::Debug for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Polls `check` until it holds (see the [module docs](self)); configure with
/// [`timeout`](Eventually::timeout) and [`interval`](Eventually::interval), then await.
pub fn eventually<F, Fut>(what: impl Into<String>, check: F) -> Eventually<F>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Outcome,
{
    Eventually {
        what: what.into(),
        limit: DEFAULT_TIMEOUT,
        interval: DEFAULT_INTERVAL,
        check,
    }
}

/// Polls `check` for a duration, failing as soon as it does not hold (see the
/// [module docs](self)); configure with [`for_duration`](Consistently::for_duration) and
/// [`interval`](Consistently::interval), then await. Resolves to the last check's value.
pub fn consistently<F, Fut>(what: impl Into<String>, check: F) -> Consistently<F>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Outcome,
{
    Consistently {
        what: what.into(),
        limit: DEFAULT_DURATION,
        interval: DEFAULT_INTERVAL,
        check,
    }
}

/// An [`eventually`] wait, not started until awaited.
#[must_use = "a wait does nothing until it is awaited"]
pub struct Eventually<F> {
    what: String,
    limit: Duration,
    interval: Duration,
    check: F,
}

/// A [`consistently`] wait, not started until awaited.
#[must_use = "a wait does nothing until it is awaited"]
pub struct Consistently<F> {
    what: String,
    limit: Duration,
    interval: Duration,
    check: F,
}

impl<F> Eventually<F> {
    /// Give up after this long (default [`DEFAULT_TIMEOUT`]). The check always runs at least
    /// once.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limit = timeout;
        self
    }

    /// Wait this long between checks (default [`DEFAULT_INTERVAL`]).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
}

impl<F> Consistently<F> {
    /// Keep checking for this long (default [`DEFAULT_DURATION`]).
    pub fn for_duration(mut self, duration: Duration) -> Self {
        self.limit = duration;
        self
    }

    /// Wait this long between checks (default [`DEFAULT_INTERVAL`]).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
}

impl<F, Fut> IntoFuture for Eventually<F>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Outcome,
{
    type Output = Result<<Fut::Output as Outcome>::Value, WaitError>;
    type IntoFuture = Wait<F, Fut>;

    fn into_future(self) -> Self::IntoFuture {
        Wait::new(
            WaitKind::Eventually,
            self.what,
            self.limit,
            self.interval,
            self.check,
        )
    }
}

impl<F, Fut> IntoFuture for Consistently<F>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Outcome,
{
    type Output = Result<<Fut::Output as Outcome>::Value, WaitError>;
    type IntoFuture = Wait<F, Fut>;

    fn into_future(self) -> Self::IntoFuture {
        Wait::new(
            WaitKind::Consistently,
            self.what,
            self.limit,
            self.interval,
            self.check,
        )
    }
}

/// The running wait of an [`Eventually`] or a [`Consistently`].
#[pin_project]
#[must_use = "a wait does nothing until it is awaited"]
pub struct Wait<F, Fut> {
    kind: WaitKind,
    what: String,
    limit: Duration,
    interval: Duration,
    check: F,
    started: Option<Instant>,
    checks: u64,
    #[pin]
    state: State<Fut>,
}

#[pin_project(project = StateProj)]
enum State<Fut> {
    /// About to run the check.
    Ready,
    /// The check is running.
    Checking(#[pin] Fut),
    /// Between checks.
    Sleeping(#[pin] Sleep),
}

impl<F, Fut> Wait<F, Fut> {
    fn new(kind: WaitKind, what: String, limit: Duration, interval: Duration, check: F) -> Self {
        Wait {
            kind,
            what,
            limit,
            interval,
            check,
            started: None,
            checks: 0,
            state: State::Ready,
        }
    }
}

impl<F, Fut> Future for Wait<F, Fut>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Outcome,
{
    type Output = Result<<Fut::Output as Outcome>::Value, WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Ready => {
                    this.started.get_or_insert_with(Instant::now);
                    *this.checks += 1;
                    let fut = (this.check)();
                    this.state.set(State::Checking(fut));
                }
                StateProj::Checking(fut) => {
                    let outcome = match fut.poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(output) => output.into_outcome(),
                    };
                    let started = this.started.unwrap_or_else(Instant::now);
                    let elapsed = started.elapsed();
                    let fail = |last_seen: String| WaitError {
                        kind: *this.kind,
                        what: this.what.clone(),
                        elapsed,
                        checks: *this.checks,
                        last_seen,
                    };
                    match (*this.kind, outcome) {
                        (WaitKind::Eventually, Ok(value)) => return Poll::Ready(Ok(value)),
                        (WaitKind::Eventually, Err(seen)) if elapsed >= *this.limit => {
                            return Poll::Ready(Err(fail(seen)));
                        }
                        (WaitKind::Consistently, Err(seen)) => {
                            return Poll::Ready(Err(fail(seen)));
                        }
                        (WaitKind::Consistently, Ok(value)) if elapsed >= *this.limit => {
                            return Poll::Ready(Ok(value));
                        }
                        _ => {
                            // Sleep no further than the deadline, so the last check runs at it.
                            let left = this.limit.saturating_sub(elapsed);
                            let nap = (*this.interval).min(left);
                            this.state.set(State::Sleeping(tokio::time::sleep(nap)));
                        }
                    }
                }
                StateProj::Sleeping(sleep) => match sleep.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => this.state.set(State::Ready),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test(start_paused = true)]
    async fn eventually_returns_the_value_once_the_check_holds() {
        let calls = Cell::new(0);
        let value = eventually("the third call", || {
            calls.set(calls.get() + 1);
            std::future::ready((calls.get() == 3).then_some(calls.get() * 10))
        })
        .await
        .unwrap();
        assert_eq!(value, 30);
        assert_eq!(calls.get(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn eventually_times_out_with_the_last_value_and_the_count_of_checks() {
        let calls = Cell::new(0u32);
        let start = Instant::now();
        let err = eventually("five", || {
            calls.set(calls.get() + 1);
            std::future::ready(that(calls.get(), |n| *n == 1_000))
        })
        .timeout(Duration::from_secs(1))
        .interval(Duration::from_millis(100))
        .await
        .unwrap_err();
        // Checks at 0, 100, ..., 1000 ms: the last one at the deadline.
        assert_eq!(err.checks, 11);
        assert_eq!(calls.get(), 11);
        assert_eq!(err.last_seen, "11");
        assert_eq!(err.kind, WaitKind::Eventually);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        let text = err.to_string();
        assert!(text.contains("waiting for: five"), "{text}");
        assert!(text.contains("last seen: 11"), "{text}");
        assert_eq!(format!("{err:?}"), text);
    }

    #[tokio::test(start_paused = true)]
    async fn eventually_runs_the_check_once_even_with_a_zero_timeout() {
        let err = eventually("never", || std::future::ready(false))
            .timeout(Duration::ZERO)
            .await
            .unwrap_err();
        assert_eq!(err.checks, 1);
        assert_eq!(err.last_seen, "false");
        assert!(
            eventually("at once", || std::future::ready(true))
                .timeout(Duration::ZERO)
                .await
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn consistently_holds_for_the_whole_duration() {
        let calls = Cell::new(0u32);
        let start = Instant::now();
        let last = consistently("always", || {
            calls.set(calls.get() + 1);
            std::future::ready(Ok::<_, String>(calls.get()))
        })
        .for_duration(Duration::from_millis(500))
        .interval(Duration::from_millis(100))
        .await
        .unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        // 0, 100, ..., 500 ms.
        assert_eq!(last, 6);
    }

    #[tokio::test(start_paused = true)]
    async fn consistently_fails_at_the_first_check_that_does_not_hold() {
        let calls = Cell::new(0u32);
        let start = Instant::now();
        let err = consistently("below three", || {
            calls.set(calls.get() + 1);
            std::future::ready(that(calls.get(), |n| *n < 3))
        })
        .for_duration(Duration::from_secs(10))
        .interval(Duration::from_millis(100))
        .await
        .unwrap_err();
        assert_eq!(err.kind, WaitKind::Consistently);
        assert_eq!(err.checks, 3);
        assert_eq!(err.last_seen, "3");
        assert_eq!(start.elapsed(), Duration::from_millis(200));
        assert!(err.to_string().contains("stopped holding"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn errors_and_nones_are_what_was_seen() {
        let err = eventually("a result", || {
            std::future::ready(Err::<(), _>("not yet: 2 of 3"))
        })
        .timeout(Duration::from_millis(10))
        .await
        .unwrap_err();
        assert_eq!(err.last_seen, "not yet: 2 of 3");
        let err = eventually("an option", || std::future::ready(None::<u8>))
            .timeout(Duration::from_millis(10))
            .await
            .unwrap_err();
        assert_eq!(err.last_seen, "None");
    }

    #[test]
    fn that_keeps_the_value_either_way() {
        assert_eq!(that(4, |n| n % 2 == 0), Ok(4));
        assert_eq!(that(vec![1], |v| v.is_empty()), Err(Unmet(vec![1])));
        assert_eq!(Unmet(vec![1]).to_string(), "[1]");
        assert_eq!(that_ok(Ok::<_, String>(2), |n| *n == 2), Ok(2));
        assert_eq!(
            that_ok(Ok::<_, String>(1), |n| *n == 2)
                .unwrap_err()
                .to_string(),
            "Ok(1)"
        );
        assert_eq!(
            that_ok(Err::<u8, _>("gone"), |_| true)
                .unwrap_err()
                .to_string(),
            "Err(\"gone\")"
        );
    }
}
