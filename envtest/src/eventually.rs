//! Waiting in tests for something the server or a controller does in the background.
//!
//! Tests against a [`TestApiServer`](crate::TestApiServer) talk to it over sockets, so tokio's
//! paused clock cannot stand in for real time: [`eventually`] polls a check every 20 ms
//! until it holds, and fails the test with a message saying what was awaited (and, for a
//! check that returns a `Result`, why it last failed) once `timeout` has passed.
//!
//! To assert that something did *not* happen, do not wait and hope: follow the change that
//! must be ignored with one that must be seen on the same watch (events of one watch arrive in
//! order), and wait for that one instead.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::Duration;
//!
//! use kcr_envtest::eventually;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let polls = AtomicU32::new(0);
//! // A check returning bool...
//! eventually("three polls", Duration::from_secs(5), || async {
//!     polls.fetch_add(1, Ordering::SeqCst) >= 2
//! })
//! .await;
//! // ...or Result<(), impl Display>, whose error is reported on timeout.
//! eventually("a fourth poll", Duration::from_secs(5), || async {
//!     match polls.fetch_add(1, Ordering::SeqCst) {
//!         n if n >= 3 => Ok(()),
//!         n => Err(format!("only {n} polls so far")),
//!     }
//! })
//! .await;
//! # }
//! ```

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// How often [`eventually`] checks again.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// What a check given to [`eventually`] returns: `bool`, or `Result<(), E>` whose error says
/// why the condition does not hold yet.
pub trait Check {
    /// `Ok` when the condition holds, otherwise why not.
    fn outcome(self) -> Result<(), String>;
}

impl Check for bool {
    fn outcome(self) -> Result<(), String> {
        if self {
            Ok(())
        } else {
            Err("the check returned false".to_string())
        }
    }
}

impl<E: Display> Check for Result<(), E> {
    fn outcome(self) -> Result<(), String> {
        self.map_err(|e| e.to_string())
    }
}

/// Polls `check` every 20 ms until it holds.
///
/// # Panics
/// When `check` still does not hold after `timeout` (the test fails), with `what` and the
/// last reason the check gave.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Check,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // A check that hangs (a request on a dead connection) is cut at the deadline too.
        let why = match tokio::time::timeout_at(deadline, check()).await {
            Ok(outcome) => match outcome.outcome() {
                Ok(()) => return,
                Err(why) => why,
            },
            Err(_) => "the last check was still running".to_owned(),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what} ({why})"
        );
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_once_the_check_holds() {
        let mut calls = 0;
        eventually("three calls", Duration::from_secs(1), || {
            calls += 1;
            std::future::ready(calls == 3)
        })
        .await;
        assert_eq!(calls, 3);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "timed out after 1s waiting for: never (still 0)")]
    async fn panics_with_the_last_reason_after_the_timeout() {
        eventually("never", Duration::from_secs(1), || {
            std::future::ready(Err::<(), _>("still 0"))
        })
        .await;
    }
}
