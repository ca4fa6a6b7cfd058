//! The kubebuilder book's own test of the CronJob controller ("Should increase CronJob
//! Status.Active count when new Jobs are created"), on kcr: create a CronJob, and once its
//! scheduled time has come (the test moves the clock; nothing sleeps), the Job of that run
//! appears, owned by the CronJob, and `status.active` lists it while it runs.
//!
//! Runs on kcr-envtest's in-process API server (`cargo test`) or on kube-apiserver and etcd
//! (`KCR_ENVTEST_BACKEND=real`), one server for this file's tests.

mod support;

use std::time::Duration;

use kcr_controller::objects::controller_of;
use kcr_testkit::{consistently, eventually, that_ok};
use kube::ResourceExt;
use support::{HOLD, Harness, WAIT, created, job_name, plus};

// ANCHOR: tutorial_test
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_run_creates_a_job_that_status_lists_while_it_is_active() -> anyhow::Result<()>
{
    let h = Harness::start("tutorial").await?;

    // The book's CronJob: minute 1 of every hour.
    let cronjob = h.create("test-cronjob", "1 * * * *", |_| {}).await?;
    assert_eq!(cronjob.spec.schedule, "1 * * * *");

    // While the clock stands before the first run, no Job and nothing active.
    let jobs_and_active = || async {
        let jobs = h.job_names().await?.len();
        Ok::<_, kube::Error>((jobs, h.status("test-cronjob").await?.active.len()))
    };
    consistently("no Job and no active Job before the first run", || async {
        that_ok(jobs_and_active().await, |seen| *seen == (0, 0))
    })
    .for_duration(HOLD)
    .await?;

    // The first run: minute 1 of the hour after the CronJob's creation (or of its own hour).
    let created = created(&cronjob);
    let hour = created.as_second().div_euclid(3600) * 3600;
    let mut run = jiff::Timestamp::from_second(hour + 60)?;
    if run <= created {
        run = plus(run, 3600);
    }
    h.set_clock(plus(run, 20))?;

    // The run's Job appears, named after the run, owned by the CronJob, annotated with it.
    let name = job_name("test-cronjob", run);
    let job = eventually(format!("the Job {name}"), || async {
        that_ok(h.jobs.get_opt(&name).await, Option::is_some)
    })
    .timeout(WAIT)
    .await?
    .unwrap_or_default();
    let owner = controller_of(&job).cloned().unwrap_or_default();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("CronJob", "test-cronjob")
    );
    assert_eq!(Some(owner.uid), cronjob.uid());
    let scheduled_at = job.annotations().get("batch.example.kcr.dev/scheduled-at");
    assert_eq!(scheduled_at, Some(&run.to_string()));

    // Running (no Complete or Failed condition), it is listed as active, and the run is the
    // CronJob's last schedule time.
    h.mark_running(&name).await?;
    h.wait_for_active("test-cronjob", &[&name]).await?;
    let status = h.status("test-cronjob").await?;
    assert_eq!(status.last_schedule_time.map(|t| t.0), Some(run));

    // Finished, it no longer is; and no other Job comes before the next run.
    h.finish(&name, true).await?;
    h.wait_for_active("test-cronjob", &[]).await?;
    consistently("one Job until the next run", || async {
        that_ok(h.job_names().await, |jobs| jobs.len() == 1)
    })
    .for_duration(HOLD)
    .interval(Duration::from_millis(100))
    .await?;

    h.stop().await
}
// ANCHOR_END: tutorial_test
