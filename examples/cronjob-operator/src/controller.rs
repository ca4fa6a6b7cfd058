//! The CronJob controller: [`add_to_manager`] wires it up, [`CronJobReconciler`] does the work.
//!
//! Each reconcile of a CronJob, as in the kubebuilder book:
//!
//! 1. lists the Jobs it owns (from the cache, through an index on the controller owner's uid)
//!    and sorts them into active, successful and failed by their `Complete`/`Failed`
//!    conditions;
//! 2. rebuilds the status from them: `active` lists the unfinished Jobs, `lastScheduleTime` is
//!    the latest `scheduled-at` annotation seen (it never goes back);
//! 3. deletes the oldest finished Jobs beyond the history limits (with background
//!    propagation, so the garbage collector removes their Pods);
//! 4. parses the schedule: one that cannot be followed is recorded (a `ScheduleValid=False`
//!    condition and a Warning Event) and returned as a terminal error, not retried;
//! 5. stops there if the CronJob is suspended;
//! 6. finds the run that is due (the latest scheduled time since the last run, or since the
//!    CronJob's creation), skips it when it is older than `startingDeadlineSeconds` (Warning
//!    Event `MissSchedule`) or when `Forbid` meets an active Job, in the cache or else on the
//!    API server (Event `JobAlreadyActive`; the run starts late once no Job is active), reads
//!    the CronJob from the API server (the cache can be behind: the run starts only if the
//!    CronJob is still there, not being deleted and not suspended), deletes the active Jobs
//!    (cached, and listed from the API server) first under `Replace`, and creates the Job
//!    `<cronjob>-<unix time of the run>` (so a run is never created twice), owned by the
//!    CronJob and annotated with its scheduled time (a Job the API server refuses, 422, is a
//!    Warning Event `FailedCreate` and a terminal error);
//! 7. writes the status if it changed and asks to be requeued when the next run is due.
//!
//! The time is read from the [`Context`] (`ctx.now()`), never from the system: a test gives
//! the manager a `ManualClock` and moves it (see `tests/`).

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kcr_controller::objects::{OwnerError, controller_of, set_controller_reference};
use kcr_controller::{Action, Context, Manager, ObjectReconciler, ReconcileError, WatchOptions};
use kcr_predicate::GenerationChanged;
use kcr_source::{IndexError, Reader, WatchScope};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};

use crate::api::{
    ConcurrencyPolicy, CronJob, CronJobStatus, GROUP, SCHEDULE_VALID, SCHEDULED_AT_ANNOTATION,
};
use crate::schedule::{Schedule, ScheduleError};

/// The controller's name (metrics, logs, the Events' reporting controller).
pub const NAME: &str = "cronjob";

/// The index of the Job cache: a Job is filed under the uid of its controller, if that is a
/// CronJob (the book's `.metadata.controller` field index, keyed by uid rather than name so
/// that a CronJob deleted and created again under the same name does not adopt the old Jobs).
const OWNER_INDEX: &str = "cronjob-owner-uid";

/// Registers the CronJob controller with `mgr`: it watches CronJobs (spec changes only: its own
/// status writes do not wake it) and the Jobs they own, in `namespace` or in every namespace.
///
/// ```no_run
/// # async fn run() -> anyhow::Result<()> {
/// let mgr = kcr_controller::Manager::new(kube::Client::try_default().await?, Default::default()).await?;
/// cronjob_operator::add_to_manager(&mgr, None)?;
/// mgr.run_until_signal().await?;
/// # Ok(()) }
/// ```
// ANCHOR: add_to_manager
pub fn add_to_manager(mgr: &Manager, namespace: Option<&str>) -> anyhow::Result<()> {
    let mut cronjobs = WatchOptions::new().predicate(GenerationChanged);
    let mut owned_jobs = WatchOptions::new();
    let mut jobs_scope = WatchScope::all();
    if let Some(ns) = namespace {
        cronjobs = cronjobs.namespace(ns);
        owned_jobs = owned_jobs.namespace(ns);
        jobs_scope = jobs_scope.namespace(ns);
    }
    // The same scope as the `owns` watch below: one informer, so the index sees every Job
    // whose event wakes the controller before the controller hears of it.
    let jobs = mgr.reader::<Job>(jobs_scope)?;
    jobs.add_index(OWNER_INDEX, |job: &Job| {
        owner_uid(job).into_iter().collect()
    })?;
    let reconciler = CronJobReconciler {
        client: mgr.kube_client(),
        jobs,
        recorder: mgr.event_recorder(NAME),
    };
    mgr.controller()
        .named(NAME)
        .for_kind::<CronJob>(cronjobs)
        .owns::<Job>(owned_jobs)
        .complete_objects(reconciler)?;
    Ok(())
}
// ANCHOR_END: add_to_manager

// ANCHOR: owner_uid
/// The uid of a Job's controller, when that is a CronJob of ours.
fn owner_uid(job: &Job) -> Option<String> {
    let owner = controller_of(job)?;
    let group = owner.api_version.split_once('/').map(|(g, _)| g);
    (group == Some(GROUP) && owner.kind == "CronJob").then(|| owner.uid.clone())
}
// ANCHOR_END: owner_uid

/// The longest note an Event may carry (bytes); the API server refuses longer ones.
const MAX_NOTE: usize = 1024;

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The schedule cannot be followed. Terminal: only a new spec can fix it.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The API server refused the Job made from the template (422). Terminal.
    #[error("the API server refused Job {job}: {source}")]
    InvalidJob {
        /// The Job's name.
        job: String,
        /// The refusal.
        #[source]
        source: kube::Error,
    },
    /// A request failed (retried with backoff).
    #[error("cannot {action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The owner reference could not be set (the CronJob has no uid: never for a cached one).
    #[error(transparent)]
    Owner(#[from] OwnerError),
    /// The Job index is missing (a bug in [`add_to_manager`]).
    #[error(transparent)]
    Index(#[from] IndexError),
}

// ANCHOR: errors
impl ReconcileError for Error {
    fn is_terminal(&self) -> bool {
        matches!(self, Error::Schedule(_) | Error::InvalidJob { .. })
    }
}
// ANCHOR_END: errors

/// `Err(Error::Api)` naming what was being done.
fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Api { action, source }
}

/// The HTTP status of an error the API server answered.
fn code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Reconciles one CronJob: see the [module docs](self).
pub struct CronJobReconciler {
    client: kube::Client,
    jobs: Reader<Job>,
    recorder: Recorder,
}

/// A Job's state, from its conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
    Active,
    Succeeded,
    Failed,
}

fn job_state(job: &Job) -> JobState {
    let conditions = job
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten());
    for c in conditions.filter(|c| c.status == "True") {
        match c.type_.as_str() {
            "Complete" => return JobState::Succeeded,
            "Failed" => return JobState::Failed,
            _ => {}
        }
    }
    JobState::Active
}

/// The run a Job was created for, from its annotation.
fn scheduled_time(job: &Job) -> Option<Timestamp> {
    job.annotations().get(SCHEDULED_AT_ANNOTATION)?.parse().ok()
}

/// A reference to a Job for `status.active` (without its resourceVersion, which would make
/// every change of the Job a change of the status).
fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        resource_version: None,
        ..job.object_ref(&())
    }
}

// ANCHOR: reconcile_start
impl ObjectReconciler for CronJobReconciler {
    type Object = CronJob;
    type Error = Error;

    async fn reconcile(&self, cronjob: Arc<CronJob>, ctx: &Context) -> Result<Action, Error> {
        let now = ctx.now();
        let name = cronjob.name_any();
        let namespace = cronjob.namespace().unwrap_or_default();
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), &namespace);
        let spec = &cronjob.spec;
        // ANCHOR_END: reconcile_start

        // ANCHOR: list_jobs
        // 1. The Jobs this CronJob owns, oldest run first.
        let uid = cronjob.uid().unwrap_or_default();
        let mut children = self.jobs.by_index(OWNER_INDEX, &uid)?;
        children.sort_by_key(|job| {
            (
                scheduled_time(job),
                job.creation_timestamp(),
                job.name_any(),
            )
        });
        let of_state = |state| -> Vec<&Job> {
            let matching = children.iter().filter(|j| job_state(j) == state);
            matching.map(|j| &**j).collect()
        };
        let (active, succeeded, failed) = (
            of_state(JobState::Active),
            of_state(JobState::Succeeded),
            of_state(JobState::Failed),
        );
        tracing::debug!(%name, active = active.len(), succeeded = succeeded.len(), failed = failed.len(), "jobs");
        // ANCHOR_END: list_jobs

        // ANCHOR: status
        // 2. The status, rebuilt from them.
        let old_status = cronjob.status.clone().unwrap_or_default();
        let latest_job = children.iter().filter_map(|j| scheduled_time(j)).max();
        let last_run = old_status.last_schedule_time.as_ref().map(|t| t.0);
        let mut status = CronJobStatus {
            active: active.iter().map(|j| reference(j)).collect(),
            last_schedule_time: last_run.max(latest_job).map(Time),
            conditions: old_status.conditions.clone(),
        };
        // ANCHOR_END: status

        // 3. History limits: best effort, a failure is retried at the next reconcile.
        self.delete_oldest(&jobs, &succeeded, spec.successful_jobs_history_limit)
            .await;
        self.delete_oldest(&jobs, &failed, spec.failed_jobs_history_limit)
            .await;

        // ANCHOR: schedule
        // 4. The schedule: one that cannot be followed is reported and not retried.
        let parsed = Schedule::parse(&spec.schedule);
        let schedule = parsed.and_then(|s| s.next_after(now).map(|next| (s, next)));
        let (schedule, next_run) = match schedule {
            Ok(ok) => ok,
            Err(error) => {
                let message = error.to_string();
                set_schedule_valid(&mut status, &cronjob, now, Some(&message));
                self.write_status(&cronjob, &old_status, &status).await?;
                self.event(&cronjob, EventType::Warning, "InvalidSchedule", message)
                    .await;
                return Err(error.into());
            }
        };
        set_schedule_valid(&mut status, &cronjob, now, None);

        // 5. Suspended: nothing more to do until the spec changes.
        if spec.suspend == Some(true) {
            self.write_status(&cronjob, &old_status, &status).await?;
            return Ok(Action::done());
        }
        // ANCHOR_END: schedule

        // ANCHOR: run
        // 6. The run that is due, if any.
        let since = status.last_schedule_time.as_ref().map(|t| t.0);
        let since = since.or_else(|| cronjob.creation_timestamp().map(|t| t.0));
        if let Some(run) = since.and_then(|since| schedule.due(since, now)) {
            let too_late = spec.starting_deadline_seconds.is_some_and(|seconds| {
                let deadline = run.checked_add(SignedDuration::from_secs(seconds));
                deadline.is_ok_and(|deadline| deadline < now)
            });
            if too_late {
                let note = format!("missed the starting deadline of the run at {run}");
                self.event(&cronjob, EventType::Warning, "MissSchedule", note)
                    .await;
            } else if spec.concurrency_policy == ConcurrencyPolicy::Forbid
                && (!active.is_empty() || !self.active_on_server(&jobs, &uid).await?.is_empty())
            {
                // Forbid asks the API server when the cache shows no active Job: the cache can
                // be behind the controller's own create of the previous run's Job. kcr-perturb's
                // stale-read class found this (tests/perturbation.rs, README): with the Job
                // watch stream lagging, the next run started while the previous Job was active,
                // two active Jobs under Forbid.
                let note = format!(
                    "not starting the run at {run}: a Job is active and the concurrency policy is Forbid"
                );
                self.event(&cronjob, EventType::Normal, "JobAlreadyActive", note)
                    .await;
            } else {
                // The cached CronJob can be behind the API server: starting a run is the one
                // thing that cannot be taken back, so it is checked against the server first.
                // kcr-perturb's stale-read class found this (tests/perturbation.rs, README):
                // with the CronJob cache lagging, the controller started the run that a resume
                // made due after the CronJob had been deleted, a Job owned by a CronJob that
                // was gone (or it could start one after a suspend it had not seen yet).
                if !self.still_runs(&cronjob).await? {
                    return Ok(Action::done());
                }
                if spec.concurrency_policy == ConcurrencyPolicy::Replace {
                    // The active Jobs the cache knows and those only the API server knows yet.
                    for job in &active {
                        delete(&jobs, job).await?;
                    }
                    for job in &self.active_on_server(&jobs, &uid).await? {
                        delete(&jobs, job).await?;
                    }
                }
                self.create_job(&jobs, &cronjob, run).await?;
                status.last_schedule_time = Some(Time(run));
            }
        }
        // ANCHOR_END: run

        // ANCHOR: requeue
        // 7. Status, and back when the next run is due (counted from the time now, which
        // under a test's clock may have moved during this reconcile).
        self.write_status(&cronjob, &old_status, &status).await?;
        let wait = next_run.duration_since(ctx.now());
        Ok(Action::requeue_after(
            Duration::try_from(wait).unwrap_or_default(),
        ))
    }
}
// ANCHOR_END: requeue

impl CronJobReconciler {
    /// Deletes the oldest of `finished` (sorted oldest first) beyond `limit`.
    async fn delete_oldest(&self, jobs: &Api<Job>, finished: &[&Job], limit: Option<i32>) {
        let Some(limit) = limit else { return };
        let excess = finished
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        for job in &finished[..excess] {
            match delete(jobs, job).await {
                Ok(()) => tracing::info!(job = %job.name_any(), "deleted an old finished Job"),
                Err(e) => tracing::warn!(error = %e, "cannot delete an old finished Job"),
            }
        }
    }

    /// Creates the Job of `run`. A Job of that name already there is this run's (the name is
    /// derived from the run), not yet in the cache.
    /// The active Jobs of the CronJob with uid `uid`, listed from the API server (not the
    /// cache): only asked when a run is due and the concurrency policy depends on them.
    async fn active_on_server(&self, jobs: &Api<Job>, uid: &str) -> Result<Vec<Job>, Error> {
        let all = jobs
            .list(&ListParams::default())
            .await
            .map_err(api_error("list Jobs"))?;
        Ok(all
            .items
            .into_iter()
            .filter(|job| {
                owner_uid(job).as_deref() == Some(uid) && job_state(job) == JobState::Active
            })
            .collect())
    }

    /// Whether the CronJob, as the API server has it now, is the cached one (same uid), not
    /// being deleted and not suspended. When it is not, its change or deletion is an event
    /// still on its way to the cache, and the reconcile that event causes decides again.
    async fn still_runs(&self, cached: &CronJob) -> Result<bool, Error> {
        let name = cached.name_any();
        let api: Api<CronJob> =
            Api::namespaced(self.client.clone(), &cached.namespace().unwrap_or_default());
        let current = api
            .get_opt(&name)
            .await
            .map_err(api_error(format!("read CronJob {name}")))?;
        let runs = current.is_some_and(|c| {
            c.uid() == cached.uid()
                && c.metadata.deletion_timestamp.is_none()
                && c.spec.suspend != Some(true)
        });
        if !runs {
            tracing::info!(cronjob = %name, "not starting a run: the cache is behind the CronJob");
        }
        Ok(runs)
    }

    async fn create_job(
        &self,
        jobs: &Api<Job>,
        cronjob: &CronJob,
        run: Timestamp,
    ) -> Result<(), Error> {
        let job = job_for(cronjob, run)?;
        let job_name = job.name_any();
        match jobs.create(&PostParams::default(), &job).await {
            Ok(_) => {
                tracing::info!(job = %job_name, %run, "created the Job of a run");
                Ok(())
            }
            Err(e) if code(&e) == Some(409) => Ok(()),
            Err(source) if code(&source) == Some(422) => {
                let note = match &source {
                    kube::Error::Api(status) => status.message.clone(),
                    other => other.to_string(),
                };
                self.event(cronjob, EventType::Warning, "FailedCreate", note)
                    .await;
                Err(Error::InvalidJob {
                    job: job_name,
                    source,
                })
            }
            Err(e) => Err(api_error(format!("create Job {job_name}"))(e)),
        }
    }

    /// Writes `status` unless the CronJob already has it.
    async fn write_status(
        &self,
        cronjob: &CronJob,
        old: &CronJobStatus,
        status: &CronJobStatus,
    ) -> Result<(), Error> {
        if old == status {
            return Ok(());
        }
        let name = cronjob.name_any();
        let api: Api<CronJob> = Api::namespaced(
            self.client.clone(),
            &cronjob.namespace().unwrap_or_default(),
        );
        let patch = serde_json::json!({ "status": status });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error(format!("write the status of CronJob {name}")))?;
        Ok(())
    }

    /// Records an Event on the CronJob (best effort: a failure is logged). The recorder
    /// counts repeats of the same Event in its `series` rather than writing new ones.
    async fn event(&self, cronjob: &CronJob, type_: EventType, reason: &str, note: String) {
        tracing::info!(cronjob = %cronjob.name_any(), reason, note, "event");
        let mut note = note;
        if note.len() > MAX_NOTE {
            let mut end = MAX_NOTE - 3;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push_str("...");
        }
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &cronjob.object_ref(&()))
            .await
        {
            tracing::warn!(error = %e, reason, "cannot record an Event");
        }
    }
}

/// Deletes `job` with background propagation (its Pods are removed by the garbage collector);
/// one already gone is fine.
async fn delete(jobs: &Api<Job>, job: &Job) -> Result<(), Error> {
    let name = job.name_any();
    match jobs.delete(&name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(api_error(format!("delete Job {name}"))(e)),
    }
}

// ANCHOR: job_for
/// The Job of `run`: the template's spec, labels and annotations, the scheduled time, and the
/// CronJob as its controller.
fn job_for(cronjob: &CronJob, run: Timestamp) -> Result<Job, OwnerError> {
    let template = &cronjob.spec.job_template;
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_AT_ANNOTATION.into(), run.to_string());
    let mut job = Job {
        metadata: ObjectMeta {
            name: Some(format!("{}-{}", cronjob.name_any(), run.as_second())),
            namespace: cronjob.namespace(),
            labels: template_meta.labels,
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    };
    set_controller_reference(cronjob, &mut job)?;
    Ok(job)
}
// ANCHOR_END: job_for

/// Sets the `ScheduleValid` condition: `True`, or `False` with the `problem`. Its transition
/// time is kept while its status holds.
fn set_schedule_valid(
    status: &mut CronJobStatus,
    cronjob: &CronJob,
    now: Timestamp,
    problem: Option<&str>,
) {
    let (value, reason, message) = match problem {
        None => ("True", "ValidSchedule", "the schedule is valid"),
        Some(problem) => ("False", "InvalidSchedule", problem),
    };
    let previous = status.conditions.iter().find(|c| c.type_ == SCHEDULE_VALID);
    let since = match previous {
        Some(c) if c.status == value => c.last_transition_time.clone(),
        _ => Time(now),
    };
    let condition = Condition {
        type_: SCHEDULE_VALID.into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: since,
        observed_generation: cronjob.meta().generation,
    };
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == SCHEDULE_VALID)
    {
        Some(c) => *c = condition,
        None => status.conditions.push(condition),
    }
}
