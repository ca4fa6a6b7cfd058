//! The `CronJob` API (`batch.example.kcr.dev/v1`): what a user asks for ([`CronJobSpec`]) and
//! what the controller reports ([`CronJobStatus`]).
//!
//! The fields are the kubebuilder book's: a cron `schedule`, an optional
//! `startingDeadlineSeconds`, a [`ConcurrencyPolicy`], `suspend`, the `jobTemplate` each run's
//! Job is made from, and how many finished Jobs to keep. `kube::CustomResource` derives the
//! `CronJob` kind and its CustomResourceDefinition (`CronJob::crd()`, printed by
//! `cronjob-operator crd`); the OpenAPI schema comes from `schemars`, so the bounds written
//! here (`minimum: 0`) are enforced by the API server.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of [`CronJob`].
pub const GROUP: &str = "batch.example.kcr.dev";

/// The annotation on each Job that records the run it was created for (RFC 3339), from which
/// the controller reconstitutes `status.lastScheduleTime`.
pub const SCHEDULED_AT_ANNOTATION: &str = "batch.example.kcr.dev/scheduled-at";

/// The condition type telling whether `spec.schedule` is a schedule the controller can follow.
pub const SCHEDULE_VALID: &str = "ScheduleValid";

// ANCHOR: spec
/// What a CronJob should do: run a Job from `jobTemplate` at every time `schedule` names.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "batch.example.kcr.dev",
    version = "v1",
    kind = "CronJob",
    namespaced,
    doc = "Runs a Job from `spec.jobTemplate` at every time `spec.schedule` names."
)]
#[kube(status = "CronJobStatus")]
#[kube(printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule"}"#)]
#[kube(printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#)]
#[kube(
    printcolumn = r#"{"name":"Last Schedule","type":"date","jsonPath":".status.lastScheduleTime"}"#
)]
#[kube(printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// When to run, in cron format (five fields: minute, hour, day of month, month, day of
    /// week; or a nickname such as `@hourly`), in UTC.
    pub schedule: String,

    /// How late (in seconds) a run may still start after its scheduled time; a run missed by
    /// more is skipped. Unset: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,

    /// What to do when a run is due while a Job of an earlier run is still active.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,

    /// Whether to stop starting runs (Jobs already running are left alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// The Job each run creates.
    pub job_template: JobTemplateSpec,

    /// How many successful Jobs to keep (the oldest are deleted first). Unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_jobs_history_limit: Option<i32>,

    /// How many failed Jobs to keep (the oldest are deleted first). Unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_jobs_history_limit: Option<i32>,
}
// ANCHOR_END: spec

// ANCHOR: policy
/// What happens when a run is due while an earlier run's Job is still active.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Start the new Job beside the active ones.
    #[default]
    Allow,
    /// Skip the run while a Job is active (it starts late, once none is, unless its starting
    /// deadline has passed by then).
    Forbid,
    /// Delete the active Jobs, then start the new one.
    Replace,
}
// ANCHOR_END: policy

// ANCHOR: status
/// What the controller observed. Reconstituted from the owned Jobs on every reconcile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// The Jobs of this CronJob that have not finished (no `Complete` or `Failed` condition).
    #[serde(default)]
    pub active: Vec<ObjectReference>,

    /// The scheduled time of the latest run a Job was created for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,

    /// `ScheduleValid`: `False` with the reason when `spec.schedule` cannot be followed.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
// ANCHOR_END: status
