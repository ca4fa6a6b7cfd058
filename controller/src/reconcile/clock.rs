//! The [`Clock`] a reconciler reads "now" through, and a [`ManualClock`] a test moves by hand.
//!
//! A schedule-driven controller (a CronJob operator, a certificate renewer, anything returning
//! [`Action::requeue_after`](crate::Action::requeue_after) computed from the current time) is
//! only testable without real sleeps if its notion of time can be replaced. As in
//! controller-runtime's CronJob tutorial, the clock is injected: reconcilers read
//! [`Context::now`](crate::Context::now) (and [`Context::clock`](crate::Context::clock)) instead
//! of the system time, and a test gives the controller a [`ManualClock`]'s [`Clock`] through
//! [`ControllerOptions::clock`](crate::ControllerOptions::clock),
//! [`ManagerOptions::clock`](crate::ManagerOptions::clock) or
//! [`Builder::clock`](crate::Builder::clock).
//!
//! ## What follows the clock
//!
//! - [`Context::now`](crate::Context::now) and [`Clock::now`];
//! - [`Clock::sleep`];
//! - the delay of [`Action::requeue_after`](crate::Action::requeue_after): under a manual clock
//!   the controller arms a timer on the clock that adds the request to the queue once the clock
//!   has been advanced by the delay, so the request comes back when the *test* says so, not
//!   when tokio's clock (paused or not) gets there. As in the queue, where an immediate add
//!   cancels a pending delayed one, the request's next reconcile (an event's, say) cancels the
//!   requeue: what that reconcile returns decides when the request comes back.
//!
//! Everything else stays on real (tokio) time: rate-limited retries after errors, panics and
//! timeouts, the reconcile timeout, cache-sync and shutdown timeouts, leader election, and the
//! queue's own `add_after`. Those are about the controller's machinery, not about the schedule
//! an object describes, and tokio's paused clock already tests them.
//!
//! ## Cost
//!
//! [`Clock`] is an enum of the system clock and a shared manual state: the default
//! ([`Clock::system`]) holds no allocation, reads the time with [`jiff::Timestamp::now`], sleeps
//! with [`tokio::time::sleep`], and leaves the controller's requeue path exactly as it is
//! without a clock (one `WorkQueue::add_after`).
//!
//! ## The manual clock
//!
//! A [`ManualClock`] holds the current time and a map of timers ordered by (deadline, sequence
//! number). [`ManualClock::advance`] and [`ManualClock::set`] move the time forward, take every
//! timer whose deadline is at or before the new time out of the map under the lock, release the
//! lock, and run them in deadline order (timers with equal deadlines in the order they were
//! armed). The time jumps: a timer that is re-armed from a callback is relative to the new time,
//! so a periodic timer fires once per `advance` however large the step (advance in smaller
//! steps to see every period, as with Kubernetes' `FakeClock.Step`). A timer armed with a zero
//! delay is due at once and runs before the call that armed it returns.
//!
//! Time never moves backwards: [`ManualClock::set`] to an earlier time is
//! [`ClockError::Backwards`]. Nothing panics on large durations: a deadline, an
//! [`advance`](ManualClock::advance) or a sleep beyond [`jiff::Timestamp::MAX`] *saturates* at
//! `Timestamp::MAX` (the end of year 9999), where every timer is due.
//!
//! ```
//! use std::time::Duration;
//! use kcr_controller::{Action, Clock, Context, ControllerOptions, ManualClock, Reconciler};
//!
//! /// Runs something at the top of every hour.
//! struct Hourly;
//!
//! impl Reconciler<String> for Hourly {
//!     type Error = anyhow::Error;
//!     async fn reconcile(&self, _request: &String, ctx: &Context) -> anyhow::Result<Action> {
//!         let now = ctx.now();
//!         let into_hour = now.as_second().rem_euclid(3600) as u64;
//!         Ok(Action::requeue_after(Duration::from_secs(3600 - into_hour)))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! let manual = ManualClock::new("2024-05-01T10:45:00Z".parse()?);
//!
//! // A reconciler called by hand reads the manual time.
//! let ctx = Context::new("hourly").with_clock(manual.clock());
//! let action = Hourly.reconcile(&"job".to_string(), &ctx).await?;
//! assert_eq!(action, Action::requeue_after(Duration::from_secs(15 * 60)));
//!
//! // A controller given the clock requeues on it (see ControllerOptions::clock).
//! let options = ControllerOptions { clock: manual.clock(), ..Default::default() };
//! assert!(options.clock.is_manual());
//!
//! // Sleeps on the manual clock end when the test advances it.
//! let clock = manual.clock();
//! let sleeper = tokio::spawn(async move { clock.sleep(Duration::from_secs(60)).await });
//! tokio::task::yield_now().await;
//! assert_eq!(manual.pending_timers(), 1);
//! manual.advance(Duration::from_secs(60));
//! sleeper.await?;
//! assert_eq!(manual.now().to_string(), "2024-05-01T10:46:00Z");
//!
//! // The default is the system clock.
//! assert!(!Clock::default().is_manual());
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;

/// A timer's callback.
type Callback = Box<dyn FnOnce() + Send + 'static>;

/// A timer's key in the map: its deadline, then the order in which timers were armed.
type TimerKey = (Timestamp, u64);

/// An error of the [`ManualClock`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    /// [`ManualClock::set`] was asked to move the time backwards.
    #[error("a manual clock cannot move backwards: it reads {now}, asked to set it to {to}")]
    Backwards {
        /// The clock's time when `set` was called.
        now: Timestamp,
        /// The earlier time that was asked for.
        to: Timestamp,
    },
}

/// The source of "now" for reconcilers: the system clock (the default) or a [`ManualClock`].
///
/// Cloning a manual clock shares its state. See the [module docs](self).
#[derive(Clone, Default)]
pub struct Clock {
    kind: Kind,
}

#[derive(Clone, Default)]
enum Kind {
    #[default]
    System,
    Manual(Arc<ManualState>),
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::System => f.write_str("Clock::System"),
            Kind::Manual(state) => {
                let (now, pending) = state.snapshot();
                f.debug_struct("Clock::Manual")
                    .field("now", &now)
                    .field("pending_timers", &pending)
                    .finish()
            }
        }
    }
}

impl Clock {
    /// The system clock: [`jiff::Timestamp::now`] and [`tokio::time::sleep`].
    pub const fn system() -> Self {
        Clock { kind: Kind::System }
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        match &self.kind {
            Kind::System => Timestamp::now(),
            Kind::Manual(state) => state.now(),
        }
    }

    /// Completes after `duration`: on the system clock after `duration` of tokio time; on a
    /// manual clock once it has been advanced to (or past) the time of the call plus
    /// `duration` (at once for a zero duration). Dropping the future disarms its timer.
    pub async fn sleep(&self, duration: Duration) {
        match &self.kind {
            Kind::System => tokio::time::sleep(duration).await,
            Kind::Manual(state) => {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let Some(key) = state.schedule(duration, move || {
                    // The sleeper may be gone; then nobody needs waking.
                    let _ = tx.send(());
                }) else {
                    // Due at once: the callback has run.
                    return;
                };
                let _disarm = Disarm { state, key };
                // The sender is dropped unsent only if the timer is removed, which happens
                // only through `_disarm`; either way there is nothing left to wait for.
                let _ = rx.await;
            }
        }
    }

    /// Whether this is a [`ManualClock`]'s clock.
    pub fn is_manual(&self) -> bool {
        matches!(self.kind, Kind::Manual(_))
    }

    /// Arms a timer on a manual clock that runs `f` once the clock reaches now + `after` (at
    /// once, before returning, if `after` is zero); returns `true`. On the system clock it
    /// returns `false` and drops `f` unrun: the caller uses its real-time path instead.
    pub(crate) fn schedule(&self, after: Duration, f: impl FnOnce() + Send + 'static) -> bool {
        match &self.kind {
            Kind::System => false,
            Kind::Manual(state) => {
                state.schedule(after, f);
                true
            }
        }
    }
}

/// Removes a sleep's timer when the sleep is dropped before it fired.
struct Disarm<'a> {
    state: &'a ManualState,
    key: TimerKey,
}

impl Drop for Disarm<'_> {
    fn drop(&mut self) {
        // Taken out under the lock, dropped after it (dropping a callback may run arbitrary
        // destructors).
        let removed = self.state.inner.lock().timers.remove(&self.key);
        drop(removed);
    }
}

/// The state a [`ManualClock`] and its [`Clock`]s share.
struct ManualState {
    inner: Mutex<Inner>,
}

struct Inner {
    now: Timestamp,
    /// The sequence number of the next timer (orders timers with equal deadlines).
    next_seq: u64,
    timers: BTreeMap<TimerKey, Callback>,
}

impl Inner {
    /// Takes every timer due at the current time out of the map, in deadline order.
    fn take_due(&mut self) -> Vec<Callback> {
        let mut due = Vec::new();
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            due.push(entry.remove());
        }
        due
    }
}

impl ManualState {
    fn now(&self) -> Timestamp {
        self.inner.lock().now
    }

    fn snapshot(&self) -> (Timestamp, usize) {
        let inner = self.inner.lock();
        (inner.now, inner.timers.len())
    }

    /// Arms a timer; runs `f` at once (outside the lock) and returns `None` if it is already
    /// due, else returns its key.
    fn schedule(&self, after: Duration, f: impl FnOnce() + Send + 'static) -> Option<TimerKey> {
        {
            let mut inner = self.inner.lock();
            let deadline = saturating_add(inner.now, after);
            if deadline > inner.now {
                let key = (deadline, inner.next_seq);
                inner.next_seq = inner.next_seq.wrapping_add(1);
                inner.timers.insert(key, Box::new(f));
                return Some(key);
            }
        }
        f();
        None
    }

    /// Moves the time to `to` (never backwards) and runs the timers that are then due.
    fn move_to(&self, to: impl FnOnce(Timestamp) -> Timestamp) -> Result<(), ClockError> {
        let due = {
            let mut inner = self.inner.lock();
            let to = to(inner.now);
            if to < inner.now {
                return Err(ClockError::Backwards { now: inner.now, to });
            }
            inner.now = to;
            inner.take_due()
        };
        for callback in due {
            callback();
        }
        Ok(())
    }
}

/// `at + by`, saturating at [`Timestamp::MAX`].
fn saturating_add(at: Timestamp, by: Duration) -> Timestamp {
    at.checked_add(by).unwrap_or(Timestamp::MAX)
}

/// A clock that moves only when told to: give its [`clock`](Self::clock) to a controller (or a
/// [`Context`](crate::Context)) and [`advance`](Self::advance) it from the test. Clones share the
/// time and the timers. See the [module docs](self).
#[derive(Clone)]
pub struct ManualClock {
    state: Arc<ManualState>,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (now, pending) = self.state.snapshot();
        f.debug_struct("ManualClock")
            .field("now", &now)
            .field("pending_timers", &pending)
            .finish()
    }
}

impl Default for ManualClock {
    /// [`ManualClock::starting_now`].
    fn default() -> Self {
        Self::starting_now()
    }
}

impl ManualClock {
    /// A manual clock reading `start`, with no timers.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            state: Arc::new(ManualState {
                inner: Mutex::new(Inner {
                    now: start,
                    next_seq: 0,
                    timers: BTreeMap::new(),
                }),
            }),
        }
    }

    /// A manual clock reading the current system time (then standing still).
    pub fn starting_now() -> Self {
        Self::new(Timestamp::now())
    }

    /// A [`Clock`] reading this manual clock (sharing its state).
    pub fn clock(&self) -> Clock {
        Clock {
            kind: Kind::Manual(self.state.clone()),
        }
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        self.state.now()
    }

    /// Moves the time forward by `by` (saturating at [`Timestamp::MAX`]), then runs, in deadline
    /// order, every timer whose deadline is at or before the new time, outside the clock's lock:
    /// a callback may read the clock and arm new timers, which are relative to the new time.
    pub fn advance(&self, by: Duration) {
        // Infallible: the new time is never earlier.
        let _ = self.state.move_to(|now| saturating_add(now, by));
    }

    /// Sets the time to `to`, then runs the timers that are due, as [`advance`](Self::advance).
    ///
    /// Errors: [`ClockError::Backwards`] if `to` is earlier than the current time (the clock and
    /// its timers are left as they were). Setting the current time again is allowed.
    pub fn set(&self, to: Timestamp) -> Result<(), ClockError> {
        self.state.move_to(|_| to)
    }

    /// How many timers are armed and have not fired (requeues waiting for the clock, sleeps).
    pub fn pending_timers(&self) -> usize {
        self.state.inner.lock().timers.len()
    }

    /// The deadline of the earliest armed timer, if any.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.state
            .inner
            .lock()
            .timers
            .first_key_value()
            .map(|((deadline, _), _)| *deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn start() -> Timestamp {
        "2024-01-01T00:00:00Z".parse().unwrap()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A log of fired timer ids, and a closure factory pushing to it.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u32>>>);

    impl Log {
        fn push(&self, id: u32) -> impl FnOnce() + Send + 'static {
            let log = self.0.clone();
            move || log.lock().push(id)
        }
        fn take(&self) -> Vec<u32> {
            std::mem::take(&mut *self.0.lock())
        }
    }

    #[test]
    fn advance_fires_due_timers_in_deadline_order_and_not_the_others() {
        let manual = ManualClock::new(start());
        let clock = manual.clock();
        let log = Log::default();
        assert!(clock.schedule(secs(30), log.push(30)));
        assert!(clock.schedule(secs(10), log.push(10)));
        assert!(clock.schedule(secs(20), log.push(20)));
        assert!(clock.schedule(secs(10), log.push(11))); // same deadline: armed later, runs later
        assert!(clock.schedule(secs(40), log.push(40)));
        assert_eq!(manual.pending_timers(), 5);
        assert_eq!(manual.next_deadline(), Some(start() + secs(10)));

        manual.advance(secs(9));
        assert_eq!(log.take(), Vec::<u32>::new());
        manual.advance(secs(1));
        assert_eq!(log.take(), vec![10, 11]);
        manual.advance(secs(20));
        assert_eq!(log.take(), vec![20, 30]);
        assert_eq!(manual.now(), start() + secs(30));
        assert_eq!(manual.pending_timers(), 1);
        assert_eq!(manual.next_deadline(), Some(start() + secs(40)));

        manual.set(start() + secs(100)).unwrap();
        assert_eq!(log.take(), vec![40]);
        assert_eq!(manual.pending_timers(), 0);
        assert_eq!(manual.next_deadline(), None);
    }

    #[test]
    fn zero_delay_runs_at_once_and_the_system_clock_declines() {
        let manual = ManualClock::new(start());
        let log = Log::default();
        assert!(manual.clock().schedule(Duration::ZERO, log.push(1)));
        assert_eq!(log.take(), vec![1]);
        assert_eq!(manual.pending_timers(), 0);

        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        assert!(!Clock::system().schedule(Duration::ZERO, move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "the system clock never runs f"
        );
    }

    #[test]
    fn set_backwards_is_an_error_and_changes_nothing() {
        let manual = ManualClock::new(start());
        let log = Log::default();
        manual.clock().schedule(secs(5), log.push(5));
        let earlier = start() - secs(1);
        let err = manual.set(earlier).unwrap_err();
        assert_eq!(
            err,
            ClockError::Backwards {
                now: start(),
                to: earlier
            }
        );
        assert!(err.to_string().contains("cannot move backwards"), "{err}");
        assert_eq!(manual.now(), start());
        assert_eq!(manual.pending_timers(), 1);
        // the same time again is fine
        manual.set(start()).unwrap();
        assert_eq!(log.take(), Vec::<u32>::new());
    }

    #[test]
    fn huge_durations_saturate() {
        let manual = ManualClock::new(start());
        let log = Log::default();
        manual.clock().schedule(Duration::MAX, log.push(1));
        assert_eq!(manual.next_deadline(), Some(Timestamp::MAX));
        manual.advance(Duration::from_secs(u64::MAX));
        assert_eq!(manual.now(), Timestamp::MAX);
        assert_eq!(log.take(), vec![1]);
        // at the end of time every timer is due at once; nothing panics
        manual.clock().schedule(Duration::MAX, log.push(2));
        manual.advance(Duration::MAX);
        assert_eq!(log.take(), vec![2]);
        assert_eq!(manual.pending_timers(), 0);
    }

    #[test]
    fn a_callback_may_read_the_clock_and_arm_another_timer() {
        let manual = ManualClock::new(start());
        let log = Log::default();
        let seen = Arc::new(Mutex::new(None));
        {
            let (m, log, seen) = (manual.clone(), log.clone(), seen.clone());
            manual.clock().schedule(secs(10), move || {
                *seen.lock() = Some(m.now());
                log.0.lock().push(1);
                // relative to the new time
                m.clock().schedule(secs(10), log.push(2));
                // due at once: runs inside this callback
                m.clock().schedule(Duration::ZERO, log.push(3));
            });
        }
        manual.advance(secs(15));
        assert_eq!(*seen.lock(), Some(start() + secs(15)));
        assert_eq!(log.take(), vec![1, 3]);
        assert_eq!(manual.next_deadline(), Some(start() + secs(25)));
        manual.advance(secs(9));
        assert_eq!(log.take(), Vec::<u32>::new());
        manual.advance(secs(1));
        assert_eq!(log.take(), vec![2]);
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_on_a_manual_clock_completes_only_after_advance() {
        let manual = ManualClock::new(start());
        let clock = manual.clock();
        let mut sleep = std::pin::pin!(clock.sleep(secs(60)));
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        assert_eq!(manual.pending_timers(), 1);
        // a day of tokio time does not end it
        assert!(
            tokio::time::timeout(secs(86_400), sleep.as_mut())
                .await
                .is_err()
        );
        manual.advance(secs(59));
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        manual.advance(secs(1));
        assert!(futures::poll!(sleep.as_mut()).is_ready());
        assert_eq!(manual.pending_timers(), 0);

        // zero: at once
        assert!(futures::poll!(std::pin::pin!(clock.sleep(Duration::ZERO))).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_sleep_disarms_its_timer() {
        let manual = ManualClock::new(start());
        let clock = manual.clock();
        {
            let mut sleep = std::pin::pin!(clock.sleep(secs(60)));
            assert!(futures::poll!(sleep.as_mut()).is_pending());
            assert_eq!(manual.pending_timers(), 1);
        }
        assert_eq!(manual.pending_timers(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_system_clock_sleeps_on_tokio_time() {
        let clock = Clock::system();
        assert!(!clock.is_manual());
        let started = tokio::time::Instant::now();
        clock.sleep(secs(5)).await;
        assert_eq!(started.elapsed(), secs(5));
        let before = Timestamp::now();
        assert!(clock.now() >= before);
    }

    #[test]
    fn debug_and_defaults() {
        assert_eq!(format!("{:?}", Clock::default()), "Clock::System");
        let manual = ManualClock::new(start());
        manual.clock().schedule(secs(1), || {});
        let shown = format!("{:?} {:?}", manual, manual.clock());
        assert!(shown.contains("2024-01-01T00:00:00Z"), "{shown}");
        assert!(shown.contains("pending_timers: 1"), "{shown}");
        assert!(manual.clock().is_manual());
        let fresh = ManualClock::default();
        assert!(fresh.now() <= Timestamp::now());
    }

    /// Many timers with random delays, the clock advanced by random steps: every timer fires
    /// exactly once, never before its deadline, at the first advance that reaches it, and in
    /// (deadline, arming) order.
    #[test]
    fn randomised_timers_fire_once_in_order_never_early() {
        let seed: u64 = rand::rng().random();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let manual = ManualClock::new(start());
        // (id, the clock's time when it fired)
        let fired: Arc<Mutex<Vec<(usize, Timestamp)>>> = Arc::default();
        let mut deadlines = Vec::new();
        let arm = |id: usize, delay: Duration, deadlines: &mut Vec<Timestamp>| {
            deadlines.push(manual.now() + delay);
            let (m, fired) = (manual.clone(), fired.clone());
            manual
                .clock()
                .schedule(delay, move || fired.lock().push((id, m.now())));
        };
        for id in 0..500 {
            let delay = Duration::from_millis(rng.random_range(1..100_000));
            arm(id, delay, &mut deadlines);
        }
        let mut previous = manual.now();
        let mut order = Vec::new();
        let mut steps = 0;
        while manual.pending_timers() > 0 {
            steps += 1;
            assert!(steps < 100_000, "seed {seed}: the timers never drained");
            // now and then, arm more timers between steps
            if rng.random_bool(0.1) && deadlines.len() < 1_000 {
                let id = deadlines.len();
                let delay = Duration::from_millis(rng.random_range(1..50_000));
                arm(id, delay, &mut deadlines);
            }
            let step = Duration::from_millis(rng.random_range(0..5_000));
            manual.advance(step);
            let now = manual.now();
            let batch = std::mem::take(&mut *fired.lock());
            for (id, at) in &batch {
                let deadline = deadlines[*id];
                assert_eq!(*at, now, "seed {seed}: timer {id} fired outside an advance");
                assert!(deadline <= now, "seed {seed}: timer {id} fired early");
                assert!(
                    deadline > previous,
                    "seed {seed}: timer {id} was due at an earlier advance"
                );
            }
            let mut sorted = batch.clone();
            sorted.sort_by_key(|(id, _)| (deadlines[*id], *id));
            assert_eq!(batch, sorted, "seed {seed}: fired out of deadline order");
            // nothing due is left behind
            if let Some(next) = manual.next_deadline() {
                assert!(next > now, "seed {seed}: a due timer is still pending");
            }
            order.extend(batch.into_iter().map(|(id, _)| id));
            previous = now;
        }
        let mut ids = order.clone();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), order.len(), "seed {seed}: a timer fired twice");
        assert_eq!(
            ids,
            (0..deadlines.len()).collect::<Vec<_>>(),
            "seed {seed}: a timer never fired"
        );
    }
}
