//! The CronJob controller under kcr-perturb: crashes at every write, missed intermediate
//! states and stale reads, each run's end state (CronJobs and Jobs) compared with an
//! unperturbed run's, and an invariant checked after every settle.
//!
//! **Time.** The controller reads the time from its Manager's clock. Every run gets a fresh
//! `ManualClock` at [`t0`] (2030-01-01T00:00:30Z), far after the CronJob's creation (which the
//! API server stamps with the real time): the run that is due is then the latest scheduled
//! time before the clock, the same in every run, and so are the Jobs' names
//! (`<cronjob>-<unix time of the run>`). The scenario moves the clock a minute at a time; a
//! restarted incarnation (after a crash) reads the same clock. The scenario writes the Jobs'
//! times (start, completion, conditions) from the clock too, so no time of the end state
//! depends on the wall clock and the exploration needs no normaliser of its own.
//!
//! **What is checked.** The scenario ends by deleting the CronJob, whose Jobs the garbage
//! collector then removes: the end states compared are what is left (a Job the controller
//! created for a CronJob already gone stays, and differs). Along the way, after every settle,
//! the invariant: never two Jobs for one scheduled time of one CronJob, never more than one
//! active Job under `Forbid`. The scenario finishes whichever Jobs are active rather than
//! Jobs it names (see [`finish_active`]): a perturbed controller that learns of a change late
//! rightly starts a later run than the reference run does.
//!
//! **CI.** `perturbation_sample_in_process` runs a seeded sample of every class in process;
//! `full_exploration` (ignored) runs every point:
//!
//! ```text
//! cargo test --test perturbation full_exploration -- --ignored --nocapture
//! ```
//!
//! Both pin the in-process backend (as kcr-perturb's own missed-intermediate and stale-read
//! tests do): each run needs a fresh API server, which on the real backend is a control plane
//! (3 to 6 s) per run, and the perturbations are made in the controller's client, the same on
//! every server. `KCR_ENVTEST_BACKEND=real cargo test` therefore runs this file in process.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use cronjob_operator::api::SCHEDULED_AT_ANNOTATION;
use cronjob_operator::{ConcurrencyPolicy, CronJob, CronJobSpec};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use kcr_controller::{Manager, ManualClock};
use kcr_perturb::{Class, Exploration, Report, Scenario, Snapshot, manager_options};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Every run's clock starts here: 30 s into the minute whose run is due first.
fn t0() -> Timestamp {
    "2030-01-01T00:00:30Z".parse().expect("a timestamp")
}

/// The clock of the run in progress, shared by its incarnations and its scenario (runs are
/// sequential; the tests of this file take [`SERIAL`] so that one exploration runs at a time).
static CLOCK: LazyLock<Mutex<ManualClock>> = LazyLock::new(|| Mutex::new(ManualClock::new(t0())));

/// One exploration at a time in this binary ([`CLOCK`] is per process).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The operator as `cronjob-operator run` starts it, minus listeners and webhooks: the CronJob
/// controller (`add_to_manager`, the binary's own registration) on a Manager reading the run's
/// manual clock.
///
/// A new run starts on a fresh API server, with no CronJob: then this is the run's first
/// incarnation and it makes the run's clock at [`t0`]. Otherwise (a crash restarted the
/// controller) it reuses the run's clock. The check is a list, a read: reads are no
/// perturbation points. The controller writes only after a CronJob exists, so a crash (always
/// at a write) never restarts it into an empty cluster before the scenario's end.
async fn start(client: kube::Client) -> anyhow::Result<Manager> {
    let cronjobs: Api<CronJob> = Api::all(client.clone());
    let any = cronjobs.list(&ListParams::default().limit(1)).await?;
    let clock = {
        let mut slot = CLOCK.lock().unwrap_or_else(PoisonError::into_inner);
        if any.items.is_empty() {
            *slot = ManualClock::new(t0());
        }
        slot.clone()
    };
    let options = manager_options()
        .field_owner("cronjob-operator")
        .clock(clock.clock());
    let mgr = Manager::new(client, options).await?;
    cronjob_operator::add_to_manager(&mgr, None)?;
    Ok(mgr)
}

/// The CronJob of the scenario: every minute, `Forbid`, one finished Job of each kind kept.
const NAME: &str = "report";

/// `t` plus `minutes`.
fn plus_minutes(t: Timestamp, minutes: i64) -> Timestamp {
    t + SignedDuration::from_mins(minutes)
}

/// The name of the Job of the run `minute` minutes after 2030-01-01T00:00:00Z.
fn job(minute: i64) -> String {
    let run = plus_minutes("2030-01-01T00:00:00Z".parse().expect("a timestamp"), minute);
    format!("{NAME}-{}", run.as_second())
}

/// Marks a Job finished at the clock's time, with the fields kube-apiserver's Job status
/// validation asks for (as `tests/support`'s `finish_job`, with times from the clock rather
/// than from the Job's creation, so that they are the same in every run).
async fn finish(
    jobs: &Api<Job>,
    name: &str,
    now: Timestamp,
    succeeded: bool,
) -> anyhow::Result<()> {
    let started = jobs
        .get(name)
        .await?
        .annotations()
        .get(SCHEDULED_AT_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| now.to_string());
    let now = now.to_string();
    let condition =
        |type_: &str| json!({ "type": type_, "status": "True", "lastTransitionTime": now });
    let status = if succeeded {
        json!({
            "active": 0, "succeeded": 1, "startTime": started, "completionTime": now,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
        })
    } else {
        json!({
            "active": 0, "failed": 1, "startTime": started,
            "conditions": [condition("FailureTarget"), condition("Failed")],
        })
    };
    jobs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await?;
    Ok(())
}

/// Finishes every Job that is active on the API server, as a job controller would: whichever
/// runs the CronJob controller started. (Not Jobs named after the runs the reference run
/// starts: when a perturbation makes the controller learn of something late, time has moved on
/// meanwhile, and the controller rightly starts a later run than the reference, or the same run
/// later: Kubernetes' CronJob semantics, only the latest missed run starts, and `Forbid` waits
/// for the active Job as the controller sees it.)
async fn finish_active(jobs: &Api<Job>, now: Timestamp, succeeded: bool) -> anyhow::Result<()> {
    for job in jobs.list(&ListParams::default()).await? {
        let done = job
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .any(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"));
        if !done {
            finish(jobs, &job.name_any(), now, succeeded).await?;
        }
    }
    Ok(())
}

/// A Job template with what the API server requires (the book's).
fn job_template() -> JobTemplateSpec {
    JobTemplateSpec {
        metadata: None,
        spec: Some(JobSpec {
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "report".into(),
                        image: Some("report:1".into()),
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

/// A CronJob's life: created with its first run due, a run held back by `Forbid` and started
/// late, Jobs succeeding and failing, the history limits pruning the oldest finished Jobs,
/// suspended across a due run and resumed, deleted.
async fn scenario(ctx: Scenario) -> anyhow::Result<()> {
    let clock = CLOCK.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let cronjobs: Api<CronJob> = Api::namespaced(ctx.client(), ctx.namespace());
    let jobs: Api<Job> = Api::namespaced(ctx.client(), ctx.namespace());
    let set = |minutes: i64| clock.set(plus_minutes(t0(), minutes));

    // Created at 00:00:30: the run of 00:00 is due (the latest since the creation).
    let spec = CronJobSpec {
        schedule: "* * * * *".into(),
        job_template: job_template(),
        concurrency_policy: ConcurrencyPolicy::Forbid,
        successful_jobs_history_limit: Some(1),
        failed_jobs_history_limit: Some(1),
        ..Default::default()
    };
    cronjobs
        .create(&PostParams::default(), &CronJob::new(NAME, spec))
        .await?;
    ctx.settle().await;

    // 00:01:30: the run of 00:01 is due, but the Job of 00:00 is active (Forbid): no Job.
    set(1)?;
    ctx.settle().await;

    // The Job of 00:00 succeeds: the run of 00:01 starts late.
    finish_active(&jobs, clock.now(), true).await?;
    ctx.settle().await;

    // It fails.
    finish_active(&jobs, clock.now(), false).await?;
    ctx.settle().await;

    // 00:02:30: the run of 00:02; it succeeds, and the Job of 00:00 goes (one success kept).
    set(2)?;
    ctx.settle().await;
    finish_active(&jobs, clock.now(), true).await?;
    ctx.settle().await;

    // 00:03:30: the run of 00:03; it fails, and the Job of 00:01 goes (one failure kept).
    set(3)?;
    ctx.settle().await;
    finish_active(&jobs, clock.now(), false).await?;
    ctx.settle().await;

    // Suspended across 00:04 and 00:05: no Job.
    let suspend = |on: bool| Patch::Merge(json!({ "spec": { "suspend": on } }));
    cronjobs
        .patch(NAME, &PatchParams::default(), &suspend(true))
        .await?;
    ctx.settle().await;
    set(5)?;
    ctx.settle().await;

    // Resumed at 00:05:30: the latest missed run, 00:05, starts.
    cronjobs
        .patch(NAME, &PatchParams::default(), &suspend(false))
        .await?;
    ctx.settle().await;

    // Deleted: the garbage collector takes its Jobs.
    cronjobs.delete(NAME, &DeleteParams::background()).await?;
    ctx.settle().await;
    Ok(())
}

/// The owner (a CronJob's name) and scheduled time of a Job, and whether it is active.
fn runs(snap: &Snapshot) -> Result<Vec<(String, String, String, bool)>, String> {
    let jobs = snap.typed::<Job>().map_err(|e| e.to_string())?;
    Ok(jobs
        .iter()
        .filter_map(|job| {
            let owner = job
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true) && o.kind == "CronJob")?;
            let at = job.annotations().get(SCHEDULED_AT_ANNOTATION)?.clone();
            let finished = job
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .any(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"));
            Some((owner.name.clone(), at, job.name_any(), !finished))
        })
        .collect())
}

/// Never two Jobs for one scheduled time of one CronJob (whatever their names), and never
/// more than one active Job of a CronJob whose policy is `Forbid`.
fn one_job_per_run_and_forbid_holds(snap: &Snapshot) -> Result<(), String> {
    let forbid: Vec<String> = snap
        .typed::<CronJob>()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|c| c.spec.concurrency_policy == ConcurrencyPolicy::Forbid)
        .map(|c| c.name_any())
        .collect();
    let mut per_run: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut active: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (owner, at, name, is_active) in runs(snap)? {
        if is_active {
            active.entry(owner.clone()).or_default().push(name.clone());
        }
        per_run.entry((owner, at)).or_default().push(name);
    }
    if let Some(((owner, at), names)) = per_run.iter().find(|(_, n)| n.len() > 1) {
        return Err(format!("CronJob {owner} has {names:?} for its run at {at}"));
    }
    let too_many = active
        .iter()
        .find(|(owner, names)| names.len() > 1 && forbid.contains(owner));
    if let Some((owner, names)) = too_many {
        return Err(format!(
            "CronJob {owner} (Forbid) has active Jobs {names:?}"
        ));
    }
    Ok(())
}

/// The exploration: every class, the in-process backend, CronJobs and Jobs compared.
fn exploration() -> Exploration {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .with_test_writer()
        .try_init();
    Exploration::new("cronjob")
        .server(|| {
            kcr_envtest::TestApiServer::builder()
                .backend(kcr_envtest::Backend::InProcess)
                .start()
        })
        .crd::<CronJob>()
        .controller(start)
        .scenario(scenario)
        .compare::<CronJob>()
        .compare::<Job>()
        .invariant(
            "one Job per scheduled run; at most one active Job under Forbid",
            one_job_per_run_and_forbid_holds,
        )
        .classes(Class::ALL.to_vec())
        .quiet_window(Duration::from_millis(120))
        .hold_window(Duration::from_millis(700))
        .settle_timeout(Duration::from_secs(20))
        .seed(30)
        .reproduce_with("cargo test --test perturbation perturbation_sample_in_process -- --exact")
}

fn report_and_check(report: &Report, sample: Option<usize>) {
    println!("{report}");
    let line = report.summary_line("cronjob");
    println!("{line}");
    assert!(
        line.starts_with("perturbation-run controller=cronjob points="),
        "{line}"
    );
    let only = std::env::var(kcr_perturb::ONLY_ENV).is_ok_and(|v| !v.trim().is_empty());
    if let Some(sample) = sample.filter(|_| !only) {
        assert_eq!(report.points_tried, sample.min(report.points), "{report}");
    }
    assert!(report.findings.is_empty(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perturbation_sample_in_process() {
    let _serial = SERIAL.lock().await;
    let sample = 20;
    let report = exploration().max_runs(sample).run().await.unwrap();
    let only = std::env::var(kcr_perturb::ONLY_ENV).is_ok_and(|v| !v.trim().is_empty());
    for class in Class::ALL.iter().copied().filter(|_| !only) {
        assert!(
            report.tried.iter().any(|t| t.run.class() == Some(class)),
            "the sample covers {class}: {report}"
        );
    }
    report_and_check(&report, Some(sample));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "every point: minutes; run by hand"]
async fn full_exploration() {
    let _serial = SERIAL.lock().await;
    let report = exploration().run().await.unwrap();
    report_and_check(&report, None);
}

/// The scenario's Jobs are named as [`job`] says (a check of the test's own arithmetic).
#[test]
fn job_names_encode_the_run() {
    assert_eq!(job(0), "report-1893456000");
}
