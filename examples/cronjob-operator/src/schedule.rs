//! [`Schedule`]: a CronJob's `spec.schedule`, parsed once per reconcile, and the two questions
//! the controller asks it: which run is due now, and when is the next one.
//!
//! The syntax is Kubernetes' (robfig/cron's standard parser): five fields (minute, hour, day
//! of month, month, day of week; names such as `MON` or `JAN` allowed) or a nickname
//! (`@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`). A seconds or a year field is
//! refused. Times are UTC. The parsing and searching is [croner]'s, on jiff time (the time
//! type k8s-openapi's `Time` wraps).
//!
//! Unlike the book, which walks forward from the last run one occurrence at a time (and gives
//! up after 100 missed runs), [`Schedule::due`] searches backwards from now for the latest
//! run: a CronJob that missed a year of runs costs one search, not a crash loop.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// A schedule that cannot be followed; the message names the schedule and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid schedule {schedule:?}: {reason}")]
pub struct ScheduleError {
    /// The schedule as written.
    pub schedule: String,
    /// Why it was refused.
    pub reason: String,
}

/// A parsed cron schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    source: String,
    cron: Cron,
}

impl Schedule {
    /// Parses a schedule in Kubernetes' syntax (see the [module docs](self)).
    ///
    /// ```
    /// use cronjob_operator::schedule::Schedule;
    ///
    /// assert!(Schedule::parse("*/5 * * * *").is_ok());
    /// assert!(Schedule::parse("@hourly").is_ok());
    /// let err = Schedule::parse("every five minutes").unwrap_err();
    /// assert!(err.to_string().starts_with("invalid schedule \"every five minutes\""));
    /// ```
    pub fn parse(schedule: &str) -> Result<Schedule, ScheduleError> {
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(schedule)
            .map_err(|e| ScheduleError {
                schedule: schedule.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Schedule {
            source: schedule.to_string(),
            cron,
        })
    }

    /// The first run strictly after `t`. An error for a schedule that never comes (such as
    /// `0 0 30 2 *`, the 30th of February).
    pub fn next_after(&self, t: Timestamp) -> Result<Timestamp, ScheduleError> {
        self.cron
            .find_next_occurrence(&t.to_zoned(TimeZone::UTC), false)
            .map(|z| z.timestamp())
            .map_err(|e| self.error(format!("no run after {t}: {e}")))
    }

    /// The run that is due at `now`: the latest one at or before `now` and strictly after
    /// `after` (the last run that was started, or the CronJob's creation). `None` when no run
    /// fell in between.
    pub fn due(&self, after: Timestamp, now: Timestamp) -> Option<Timestamp> {
        if now <= after {
            return None;
        }
        // An error here means no run at all before `now`: then none is due.
        let latest = self
            .cron
            .find_previous_occurrence(&now.to_zoned(TimeZone::UTC), true)
            .ok()?
            .timestamp();
        (latest > after).then_some(latest)
    }

    fn error(&self, reason: String) -> ScheduleError {
        ScheduleError {
            schedule: self.source.clone(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn kubernetes_syntax_is_accepted_and_other_syntaxes_are_not() {
        for ok in [
            "* * * * *",
            "0 */2 * * MON-FRI",
            "30 4 1 JAN *",
            "@daily",
            "@hourly",
        ] {
            assert!(Schedule::parse(ok).is_ok(), "{ok}");
        }
        // Seconds, years, too few fields, words, nothing.
        for bad in [
            "0 * * * * *",
            "0 0 0 1 1 * 2030",
            "* * * *",
            "daily",
            "",
            "61 * * * *",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_next_run_is_strictly_after_the_given_time() {
        let hourly = Schedule::parse("0 * * * *").unwrap();
        let next = hourly.next_after(t("2025-03-01T10:00:00Z")).unwrap();
        assert_eq!(next, t("2025-03-01T11:00:00Z"));
        let next = hourly.next_after(t("2025-03-01T10:59:59.9Z")).unwrap();
        assert_eq!(next, t("2025-03-01T11:00:00Z"));
    }

    #[test]
    fn the_due_run_is_the_latest_one_since_the_last() {
        let hourly = Schedule::parse("0 * * * *").unwrap();
        let last = t("2025-03-01T10:00:00Z");
        // Nothing new yet.
        assert_eq!(hourly.due(last, t("2025-03-01T10:59:00Z")), None);
        // Exactly on time.
        let now = t("2025-03-01T11:00:00Z");
        assert_eq!(hourly.due(last, now), Some(now));
        // Three runs missed: only the latest is due.
        let due = hourly.due(last, t("2025-03-01T13:30:00Z"));
        assert_eq!(due, Some(t("2025-03-01T13:00:00Z")));
        // A year of missed runs costs one search.
        let due = hourly.due(last, t("2026-03-01T10:30:00Z"));
        assert_eq!(due, Some(t("2026-03-01T10:00:00Z")));
    }

    #[test]
    fn a_schedule_that_never_comes_has_no_next_run() {
        let never = Schedule::parse("0 0 30 2 *").unwrap();
        let err = never.next_after(t("2025-01-01T00:00:00Z")).unwrap_err();
        assert!(err.reason.starts_with("no run after"), "{err}");
        assert_eq!(
            never.due(t("2024-01-01T00:00:00Z"), t("2025-01-01T00:00:00Z")),
            None
        );
    }
}
