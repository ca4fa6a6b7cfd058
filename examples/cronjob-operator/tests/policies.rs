//! What a CronJob's spec asks of the controller beyond "run on schedule": history limits,
//! suspension, the concurrency policies, the starting deadline, and what it does with a
//! schedule it cannot follow. Each test has its own namespace on this file's API server and
//! its own manual clock; time moves only when a test moves it.
//!
//! The CronJobs run every minute (`* * * * *`): the first run is the first whole minute after
//! the CronJob's creation, the next ones follow a minute apart.

mod support;

use std::time::Duration;

use kcr_testkit::{consistently, eventually, that_ok};
use serde_json::json;
use support::{HOLD, Harness, WAIT, created, job_name, minute_of, next_minute, plus};

/// Runs `count` consecutive runs from `first`, each finished (as `succeeded` says) before the
/// next; returns the Job names.
async fn run_and_finish(
    h: &Harness,
    cronjob: &str,
    first: jiff::Timestamp,
    outcomes: &[bool],
    after_each: impl AsyncFn(usize, &[String]) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for (i, succeeded) in outcomes.iter().enumerate() {
        let run = plus(first, 60 * i as i64);
        h.set_clock(run)?;
        let name = job_name(cronjob, run);
        eventually(format!("the Job {name}"), || async {
            that_ok(h.job_names().await, |jobs| jobs.contains(&name))
        })
        .timeout(WAIT)
        .await?;
        h.wait_for_active(cronjob, &[&name]).await?;
        h.finish(&name, *succeeded).await?;
        h.wait_for_active(cronjob, &[]).await?;
        names.push(name);
        after_each(i, &names).await?;
    }
    Ok(names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_beyond_the_history_limits_are_deleted_oldest_first() -> anyhow::Result<()> {
    let h = Harness::start("history").await?;
    let cronjob = h
        .create("history", "* * * * *", |spec| {
            spec.successful_jobs_history_limit = Some(2);
            spec.failed_jobs_history_limit = Some(1);
        })
        .await?;
    let first = next_minute(created(&cronjob));

    // Three successes, then two failures, one run at a time.
    let outcomes = [true, true, true, false, false];
    let names = run_and_finish(
        &h,
        "history",
        first,
        &outcomes,
        async |i, names: &[String]| {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            match i {
                // Within the limits: every finished Job is kept.
                0 | 1 => {
                    consistently("every finished Job is kept", || async {
                        that_ok(h.job_names().await, |jobs| jobs.len() == names.len())
                    })
                    .for_duration(Duration::from_millis(500))
                    .await?;
                }
                // A third success: the oldest one goes, the newest two stay.
                2 => h.wait_for_jobs("two successes kept", &names[1..]).await?,
                // A first failure is kept beside the two successes.
                3 => h.wait_for_jobs("one failure kept", &names[1..]).await?,
                // A second failure: the older one goes.
                _ => {}
            }
            Ok(())
        },
    )
    .await?;
    let kept = [names[1].as_str(), &names[2], &names[4]];
    h.wait_for_jobs("the newest two successes and the newest failure", &kept)
        .await?;
    consistently("nothing more is deleted", || async {
        that_ok(h.job_names().await, |jobs| jobs.len() == kept.len())
    })
    .for_duration(HOLD)
    .await?;

    h.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_cronjob_starts_nothing_until_it_is_resumed() -> anyhow::Result<()> {
    let h = Harness::start("suspend").await?;
    let cronjob = h
        .create("suspended", "* * * * *", |spec| spec.suspend = Some(true))
        .await?;

    // Hours of runs go by; a spec change makes the controller look again at the late time.
    let later = plus(created(&cronjob), 3 * 3600 + 30);
    h.set_clock(later)?;
    h.patch_spec("suspended", json!({ "successfulJobsHistoryLimit": 5 }))
        .await?;
    let observed = || async {
        let status = h.status("suspended").await?;
        let condition = status.conditions.first();
        Ok::<_, kube::Error>(condition.and_then(|c| c.observed_generation))
    };
    eventually("the spec change is reconciled", || async {
        that_ok(observed().await, |generation| *generation == Some(2))
    })
    .timeout(WAIT)
    .await?;
    consistently("no Job while suspended", || async {
        that_ok(h.job_names().await, |jobs| jobs.is_empty())
    })
    .for_duration(HOLD)
    .await?;

    // Resumed: the latest missed run starts (only that one), at once.
    h.patch_spec("suspended", json!({ "suspend": false }))
        .await?;
    let latest = job_name("suspended", minute_of(later));
    h.wait_for_jobs("the latest missed run's Job", &[&latest])
        .await?;
    consistently("only the latest missed run starts", || async {
        that_ok(h.job_names().await, |jobs| jobs.len() == 1)
    })
    .for_duration(HOLD)
    .await?;

    h.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbid_waits_for_the_active_job_before_starting_the_next_run() -> anyhow::Result<()> {
    let h = Harness::start("forbid").await?;
    let cronjob = h
        .create("forbid", "* * * * *", |spec| {
            spec.concurrency_policy = cronjob_operator::ConcurrencyPolicy::Forbid;
        })
        .await?;
    let first = next_minute(created(&cronjob));
    let (job1, job2) = (
        job_name("forbid", first),
        job_name("forbid", plus(first, 60)),
    );

    h.set_clock(first)?;
    h.wait_for_jobs("the first run's Job", &[&job1]).await?;
    h.wait_for_active("forbid", &[&job1]).await?;

    // The second run comes while the first Job is active: it is held back, and says so.
    h.set_clock(plus(first, 60))?;
    eventually("a JobAlreadyActive event", || async {
        that_ok(h.event_count("forbid", "JobAlreadyActive").await, |n| {
            *n > 0
        })
    })
    .timeout(WAIT)
    .await?;
    consistently("no second Job while the first is active", || async {
        that_ok(h.job_names().await, |jobs| jobs.len() == 1)
    })
    .for_duration(HOLD)
    .await?;

    // Once the first Job has finished, the held-back run starts (late).
    h.finish(&job1, true).await?;
    h.wait_for_jobs("the second run's Job", &[&job1, &job2])
        .await?;
    h.wait_for_active("forbid", &[&job2]).await?;

    h.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_deletes_the_active_job_and_starts_the_next_run() -> anyhow::Result<()> {
    let h = Harness::start("replace").await?;
    let cronjob = h
        .create("replace", "* * * * *", |spec| {
            spec.concurrency_policy = cronjob_operator::ConcurrencyPolicy::Replace;
        })
        .await?;
    let first = next_minute(created(&cronjob));
    let (job1, job2) = (
        job_name("replace", first),
        job_name("replace", plus(first, 60)),
    );

    h.set_clock(first)?;
    h.wait_for_jobs("the first run's Job", &[&job1]).await?;
    h.wait_for_active("replace", &[&job1]).await?;

    // The second run replaces the still active first Job.
    h.set_clock(plus(first, 60))?;
    h.wait_for_jobs("only the second run's Job", &[&job2])
        .await?;
    h.wait_for_active("replace", &[&job2]).await?;

    h.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_later_than_its_starting_deadline_is_skipped() -> anyhow::Result<()> {
    let h = Harness::start("deadline").await?;
    let cronjob = h
        .create("deadline", "* * * * *", |spec| {
            spec.starting_deadline_seconds = Some(10);
        })
        .await?;
    let first = next_minute(created(&cronjob));

    // 30 s after the first run, 20 s past its deadline: skipped, with a Warning.
    h.set_clock(plus(first, 30))?;
    eventually("a MissSchedule event", || async {
        that_ok(h.event_count("deadline", "MissSchedule").await, |n| *n > 0)
    })
    .timeout(WAIT)
    .await?;
    consistently("no Job for a run past its deadline", || async {
        that_ok(h.job_names().await, |jobs| jobs.is_empty())
    })
    .for_duration(HOLD)
    .await?;

    // 5 s after the second run: within the deadline, it starts.
    let second = plus(first, 60);
    h.set_clock(plus(second, 5))?;
    h.wait_for_jobs("the second run's Job", &[&job_name("deadline", second)])
        .await?;

    h.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_schedule_is_reported_once_and_not_retried() -> anyhow::Result<()> {
    let h = Harness::start("bad-schedule").await?;
    h.create("bad", "every minute, please", |_| {}).await?;

    // Reported: a False condition naming the schedule, and a Warning Event.
    let condition = eventually("ScheduleValid=False", || async {
        that_ok(h.schedule_valid("bad").await, |c| {
            c.as_ref().is_some_and(|(status, _, _)| status == "False")
        })
    })
    .timeout(WAIT)
    .await?
    .unwrap_or_default();
    assert_eq!(condition.1, "InvalidSchedule");
    assert!(
        condition.2.contains("\"every minute, please\""),
        "{}",
        condition.2
    );
    eventually("an InvalidSchedule event", || async {
        that_ok(h.event_count("bad", "InvalidSchedule").await, |n| *n > 0)
    })
    .timeout(WAIT)
    .await?;

    // Not retried: a retry would record the Event again (the recorder counts repeats), and
    // neither time nor waiting brings one; no Job either.
    h.set_clock(plus(h.clock.now(), 24 * 3600))?;
    let reports_and_jobs = || async {
        let count = h.event_count("bad", "InvalidSchedule").await?;
        Ok::<_, kube::Error>((count, h.job_names().await?.len()))
    };
    consistently("the bad schedule is reported once, and no Job", || async {
        that_ok(reports_and_jobs().await, |seen| *seen == (1, 0))
    })
    .for_duration(Duration::from_secs(2))
    .interval(Duration::from_millis(100))
    .await?;

    // Fixed, the schedule is followed again.
    h.patch_spec("bad", json!({ "schedule": "* * * * *" }))
        .await?;
    eventually("ScheduleValid=True", || async {
        that_ok(h.schedule_valid("bad").await, |c| {
            c.as_ref().is_some_and(|(status, _, _)| status == "True")
        })
    })
    .timeout(WAIT)
    .await?;
    // The runs missed since the CronJob's creation count from there: the latest one starts
    // at once (no starting deadline), the next one when its minute comes.
    let missed = job_name("bad", minute_of(h.clock.now()));
    h.wait_for_jobs("the latest missed run's Job", &[&missed])
        .await?;
    let next = next_minute(h.clock.now());
    h.set_clock(next)?;
    h.wait_for_jobs("the next run's Job", &[&missed, &job_name("bad", next)])
        .await?;

    h.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_the_api_server_refuses_is_reported_once_and_not_retried() -> anyhow::Result<()> {
    let h = Harness::start("refused-job").await?;
    // A label value with spaces: the CronJob is valid, the Job made from it is not (422).
    let cronjob = h
        .create("refused", "* * * * *", |spec| {
            let labels = [("team".to_string(), "not a label value".to_string())];
            spec.job_template.metadata = Some(kube::api::ObjectMeta {
                labels: Some(labels.into()),
                ..Default::default()
            });
        })
        .await?;
    let first = next_minute(created(&cronjob));

    h.set_clock(first)?;
    eventually("a FailedCreate event", || async {
        that_ok(h.event_count("refused", "FailedCreate").await, |n| *n > 0)
    })
    .timeout(WAIT)
    .await?;
    let reports_and_jobs = || async {
        let count = h.event_count("refused", "FailedCreate").await?;
        Ok::<_, kube::Error>((count, h.job_names().await?.len()))
    };
    consistently("the refusal is reported once, and no Job", || async {
        that_ok(reports_and_jobs().await, |seen| *seen == (1, 0))
    })
    .for_duration(HOLD)
    .await?;

    // Fixed, the run that was refused starts (late).
    let labels = json!({ "metadata": { "labels": { "team": "a-label-value" } } });
    h.patch_spec("refused", json!({ "jobTemplate": labels }))
        .await?;
    h.wait_for_jobs("the first run's Job", &[&job_name("refused", first)])
        .await?;

    h.stop().await
}
