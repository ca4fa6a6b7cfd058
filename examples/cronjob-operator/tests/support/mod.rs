//! What every CronJob test needs: a namespace on the test binary's API server with the CRD, the
//! controller running in a manager that reads a clock the test moves, and a few reads and
//! writes of CronJobs, Jobs and Events.
//!
//! No Job ever runs here: there is no job controller (in process, nor among the real backend's
//! controllers). A test says how a Job ended by writing its status, as the book's tests do,
//! with the fields kube-apiserver's Job status validation asks for.

#![allow(dead_code)] // each test binary uses its own part of it

use std::collections::BTreeSet;
use std::time::Duration;

use cronjob_operator::api::SCHEDULE_VALID;
use cronjob_operator::{CronJob, CronJobSpec, CronJobStatus};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::api::events::v1::Event;
use kcr_envtest::TestNamespace;
use kcr_testkit::{ManualClock, RunningManager, eventually, that_ok};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

/// How long a test waits for something the controller should do. Generous: on a loaded
/// machine a real kube-apiserver can take seconds; a passing test does not wait for it.
pub const WAIT: Duration = Duration::from_secs(30);

/// How long a test watches for something that must not happen.
pub const HOLD: Duration = Duration::from_millis(1500);

/// A CronJob controller running against a namespace of its own, on a manual clock.
pub struct Harness {
    pub ns: TestNamespace,
    pub clock: ManualClock,
    pub cronjobs: Api<CronJob>,
    pub jobs: Api<Job>,
    pub events: Api<Event>,
    running: RunningManager,
}

impl Harness {
    // ANCHOR: harness_start
    /// A namespace named after `test`, the CRD, and the controller running on a manual clock
    /// that reads the current time and then stands still.
    pub async fn start(test: &str) -> anyhow::Result<Harness> {
        let ns = TestNamespace::new(test).await?;
        // Once per test binary: CRDs are cluster-wide, and on the real backend two tests
        // installing the same CRD at once can fail (kcr-envtest replaces an existing CRD with
        // the resourceVersion it read, and a concurrent write makes that a 409).
        static CRD: OnceCell<()> = OnceCell::const_new();
        CRD.get_or_try_init(|| ns.install_crd::<CronJob>()).await?;
        let clock = ManualClock::starting_now();
        let options = kcr_testkit::options().clock(clock.clock());
        let mgr = kcr_testkit::manager_with(&ns, options).await?;
        cronjob_operator::add_to_manager(&mgr, Some(ns.namespace()))?;
        let running = RunningManager::start(mgr);
        Ok(Harness {
            cronjobs: Api::default_namespaced(ns.client()),
            jobs: Api::default_namespaced(ns.client()),
            events: Api::default_namespaced(ns.client()),
            ns,
            clock,
            running,
        })
    }
    // ANCHOR_END: harness_start

    /// Stops the manager, failing if it had failed.
    pub async fn stop(self) -> anyhow::Result<()> {
        Ok(self.running.stop().await?)
    }

    /// Creates a CronJob running `schedule` with a minimal Job template, after `tweak` has
    /// changed its spec; returns it as created (with its creation time).
    pub async fn create(
        &self,
        name: &str,
        schedule: &str,
        tweak: impl FnOnce(&mut CronJobSpec),
    ) -> anyhow::Result<CronJob> {
        let mut spec = CronJobSpec {
            schedule: schedule.into(),
            job_template: job_template(),
            ..Default::default()
        };
        tweak(&mut spec);
        let cronjob = CronJob::new(name, spec);
        Ok(self
            .cronjobs
            .create(&PostParams::default(), &cronjob)
            .await?)
    }

    /// Merges `spec` into the CronJob's spec.
    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) -> anyhow::Result<()> {
        let patch = json!({ "spec": spec });
        self.cronjobs
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Sets the clock to `t` (never backwards), firing the requeues that are then due.
    pub fn set_clock(&self, t: Timestamp) -> anyhow::Result<()> {
        Ok(self.clock.set(t)?)
    }

    /// The CronJob's status (empty when it has none yet).
    pub async fn status(&self, name: &str) -> Result<CronJobStatus, kube::Error> {
        Ok(self.cronjobs.get(name).await?.status.unwrap_or_default())
    }

    /// The names of the Jobs in the namespace, sorted.
    pub async fn job_names(&self) -> Result<BTreeSet<String>, kube::Error> {
        let jobs = self.jobs.list(&ListParams::default()).await?;
        Ok(jobs.items.iter().map(|j| j.name_any()).collect())
    }

    /// Waits until the namespace holds exactly the Jobs `names`.
    pub async fn wait_for_jobs(&self, what: &str, names: &[&str]) -> anyhow::Result<()> {
        let want: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
        eventually(what, || async {
            that_ok(self.job_names().await, |n| *n == want)
        })
        .timeout(WAIT)
        .await?;
        Ok(())
    }

    /// Waits until the status of `cronjob` lists exactly the Jobs `names` as active: the
    /// controller has seen them (and their states) in its cache.
    pub async fn wait_for_active(&self, cronjob: &str, names: &[&str]) -> anyhow::Result<()> {
        let want: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
        let active = || async {
            let status = self.status(cronjob).await?;
            Ok::<_, kube::Error>(
                status
                    .active
                    .iter()
                    .filter_map(|r| r.name.clone())
                    .collect::<BTreeSet<_>>(),
            )
        };
        eventually(
            format!("status.active of {cronjob} is {want:?}"),
            || async { that_ok(active().await, |a| *a == want) },
        )
        .timeout(WAIT)
        .await?;
        Ok(())
    }

    /// The `ScheduleValid` condition of the CronJob: (status, reason, message).
    pub async fn schedule_valid(
        &self,
        cronjob: &str,
    ) -> Result<Option<(String, String, String)>, kube::Error> {
        let status = self.status(cronjob).await?;
        let condition = status
            .conditions
            .into_iter()
            .find(|c| c.type_ == SCHEDULE_VALID);
        Ok(condition.map(|c| (c.status, c.reason, c.message)))
    }

    /// How many times an Event of `reason` was recorded about the CronJob (an Event repeated
    /// by the recorder counts its series).
    pub async fn event_count(&self, cronjob: &str, reason: &str) -> Result<i32, kube::Error> {
        let events = self.events.list(&ListParams::default()).await?;
        let about = events.items.into_iter().filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(cronjob)
        });
        Ok(about.map(|e| e.series.map_or(1, |s| s.count)).sum())
    }

    /// Marks a Job as running, as the book's test does: pods active, a start time, no
    /// Complete or Failed condition.
    pub async fn mark_running(&self, job: &str) -> anyhow::Result<()> {
        let started = self.jobs.get(job).await?.creation_timestamp();
        let status = json!({ "status": { "active": 2, "startTime": started } });
        self.jobs
            .patch_status(job, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }

    /// Marks a Job as finished ([`finish_job`]).
    pub async fn finish(&self, job: &str, succeeded: bool) -> anyhow::Result<()> {
        finish_job(&self.jobs, job, succeeded).await
    }
}

/// Marks a Job as finished: `Complete` (succeeded) or `Failed`, with the start and
/// completion times and the preceding condition (`SuccessCriteriaMet`, `FailureTarget`)
/// that kube-apiserver requires of a finished Job.
pub async fn finish_job(jobs: &Api<Job>, job: &str, succeeded: bool) -> anyhow::Result<()> {
    let current = jobs.get(job).await?;
    let started = current
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .or(current.creation_timestamp());
    let condition =
        |type_: &str| json!({ "type": type_, "status": "True", "lastTransitionTime": started });
    let status = if succeeded {
        json!({
            "active": 0, "succeeded": 1, "startTime": started, "completionTime": started,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
        })
    } else {
        json!({
            "active": 0, "failed": 1, "startTime": started,
            "conditions": [condition("FailureTarget"), condition("Failed")],
        })
    };
    jobs.patch_status(
        job,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await?;
    Ok(())
}

/// A Job template with what the API server requires and nothing more (the book's).
pub fn job_template() -> JobTemplateSpec {
    JobTemplateSpec {
        metadata: None,
        spec: Some(JobSpec {
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "test-container".into(),
                        image: Some("test-image".into()),
                        ..Default::default()
                    }],
                    restart_policy: Some("OnFailure".into()),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
    }
}

/// The creation time of `cronjob`.
pub fn created(cronjob: &CronJob) -> Timestamp {
    cronjob
        .creation_timestamp()
        .map(|t| t.0)
        .expect("the API server sets creationTimestamp")
}

/// The first whole minute strictly after `t`: the first run of `* * * * *` after it.
pub fn next_minute(t: Timestamp) -> Timestamp {
    minutes(t.as_second().div_euclid(60) + 1)
}

/// The latest whole minute at or before `t`.
pub fn minute_of(t: Timestamp) -> Timestamp {
    minutes(t.as_second().div_euclid(60))
}

fn minutes(n: i64) -> Timestamp {
    Timestamp::from_second(n * 60).expect("a time in range")
}

/// `t` plus `secs` seconds.
pub fn plus(t: Timestamp, secs: i64) -> Timestamp {
    t + SignedDuration::from_secs(secs)
}

/// The name of the Job of `cronjob`'s run at `run`.
pub fn job_name(cronjob: &str, run: Timestamp) -> String {
    format!("{cronjob}-{}", run.as_second())
}
