//! [`Health`]: whether a client's server answers, from what its requests saw: the most recent
//! outcome wins, an answer (response headers, a frame of a body, a watch's bookmark) or a
//! [`Timeout`]. For readiness checks of a server that kcr reaches but does not depend on (a
//! member cluster of a fleet): the blackholed one shows as unhealthy within its bounds, and
//! healthy again at its first answer after the heal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::Timeout;

/// The health of the server behind a client (cheap to clone; every clone is the same).
#[derive(Debug, Clone, Default)]
pub struct Health {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Nanoseconds since [`epoch`] (plus one, so that zero means never) of the last answer.
    answered: AtomicU64,
    /// The same for the last timeout.
    timed_out: AtomicU64,
    /// What the last timeout was.
    last_timeout: Mutex<Option<String>>,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

impl Health {
    /// A health with nothing recorded yet (healthy).
    pub fn new() -> Self {
        Health::default()
    }

    /// `Ok` unless the most recent outcome was a timeout; then what timed out.
    pub fn check(&self) -> Result<(), String> {
        let answered = self.inner.answered.load(Ordering::SeqCst);
        let timed_out = self.inner.timed_out.load(Ordering::SeqCst);
        if timed_out > answered {
            return Err(self
                .inner
                .last_timeout
                .lock()
                .clone()
                .unwrap_or_else(|| "a request timed out".to_owned()));
        }
        Ok(())
    }

    pub(crate) fn answered(&self) {
        self.inner.answered.store(now(), Ordering::SeqCst);
    }

    pub(crate) fn timed_out(&self, timeout: &Timeout) {
        *self.inner.last_timeout.lock() = Some(timeout.to_string());
        self.inner.timed_out.store(now(), Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::TimeoutKind;

    #[test]
    fn the_latest_outcome_wins() {
        let health = Health::new();
        assert!(health.check().is_ok(), "nothing recorded: healthy");
        health.answered();
        std::thread::sleep(Duration::from_millis(1));
        health.timed_out(&Timeout {
            kind: TimeoutKind::WatchIdle,
            host: "h:1".into(),
            what: "GET /api/v1/pods?watch=true".into(),
            bound: Duration::from_secs(70),
        });
        let why = health.check().unwrap_err();
        assert!(why.contains("GET /api/v1/pods?watch=true"), "{why}");
        std::thread::sleep(Duration::from_millis(1));
        health.answered();
        assert!(
            health.check().is_ok(),
            "an answer after the timeout heals it"
        );
    }
}
