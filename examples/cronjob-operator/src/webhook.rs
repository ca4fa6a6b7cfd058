//! The CronJob admission webhooks, as the kubebuilder book's `cronjob_webhook.go` has them, on
//! kcr-webhook: a [`CronJobDefaulter`] (mutating) and a [`CronJobValidator`] (validating),
//! registered on a [`WebhookServer`] by [`register`].
//!
//! - `POST /mutate-batch-example-kcr-dev-v1-cronjob` ([`MUTATE_PATH`]) on create and update:
//!   `concurrencyPolicy: Allow`, `suspend: false`, `successfulJobsHistoryLimit: 3` and
//!   `failedJobsHistoryLimit: 1` where the object leaves them out; kcr-webhook sends the API
//!   server the JSON patch of the changes.
//! - `POST /validate-batch-example-kcr-dev-v1-cronjob` ([`VALIDATE_PATH`]) on create and
//!   update: the schedule parses ([`Schedule::parse`], the controller's own parser) and the
//!   name is at most [`MAX_NAME_LENGTH`] characters. A refusal is the API server's usual
//!   `CronJob.batch.example.kcr.dev "<name>" is invalid: <field>: Invalid value: ...` with one
//!   cause per field (status 422, reason `Invalid`).
//!
//! The rules cover `cronjobs`, not `cronjobs/status`: the controller's status writes are never
//! sent to the webhooks. Deletes are not validated.

use kcr_webhook::{
    AdmissionError, AdmissionRequest, Defaulter, Denial, FieldCause, Validator, Warnings,
    WebhookError, WebhookServer,
};
use kube::ResourceExt;

use crate::api::CronJob;
use crate::schedule::Schedule;

/// Path of the defaulting webhook (kubebuilder's convention, as [`kcr_webhook::mutate_path`]
/// derives it from the group, version and kind).
pub const MUTATE_PATH: &str = "/mutate-batch-example-kcr-dev-v1-cronjob";
/// Path of the validating webhook ([`kcr_webhook::validate_path`]).
pub const VALIDATE_PATH: &str = "/validate-batch-example-kcr-dev-v1-cronjob";
/// The webhook server's default port (controller-runtime's).
pub const DEFAULT_PORT: u16 = 9443;

/// The longest CronJob name: a run's Job is named `<cronjob>-<unix time of the run>`, 11 more
/// characters, and the Job controller puts the Job's name in a label value of its Pods (at
/// most 63 characters).
pub const MAX_NAME_LENGTH: usize = 52;

// ANCHOR: defaulter
/// Sets the defaults of the fields a CronJob leaves out (the book's `Default`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CronJobDefaulter;

/// `successfulJobsHistoryLimit` when unset.
pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 3;
/// `failedJobsHistoryLimit` when unset.
pub const DEFAULT_FAILED_JOBS_HISTORY_LIMIT: i32 = 1;

impl Defaulter<CronJob> for CronJobDefaulter {
    async fn default(
        &self,
        _req: &AdmissionRequest<CronJob>,
        cronjob: &mut CronJob,
    ) -> Result<(), AdmissionError> {
        let spec = &mut cronjob.spec;
        // `concurrencyPolicy` needs nothing here: a CronJob without one reads as `Allow`
        // (`#[serde(default)]`), and the schema's `default: Allow` has the API server store it.
        spec.suspend.get_or_insert(false);
        spec.successful_jobs_history_limit
            .get_or_insert(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT);
        spec.failed_jobs_history_limit
            .get_or_insert(DEFAULT_FAILED_JOBS_HISTORY_LIMIT);
        Ok(())
    }
}
// ANCHOR_END: defaulter

// ANCHOR: validator
/// Refuses a CronJob whose schedule does not parse or whose name is too long (the book's
/// `ValidateCreate` and `ValidateUpdate`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CronJobValidator;

/// What is wrong with `cronjob`, one cause per field; empty when nothing is.
pub fn validate(cronjob: &CronJob) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let name = cronjob.name_any();
    if name.chars().count() > MAX_NAME_LENGTH {
        let detail = format!("must be no more than {MAX_NAME_LENGTH} characters");
        causes.push(FieldCause::invalid("metadata.name", &name, &detail));
    }
    let schedule = &cronjob.spec.schedule;
    if let Err(e) = Schedule::parse(schedule) {
        causes.push(FieldCause::invalid("spec.schedule", schedule, &e.reason));
    }
    causes
}

/// Allows `cronjob`, or refuses it with every cause of [`validate`].
fn check(cronjob: &CronJob) -> Result<Warnings, AdmissionError> {
    let causes = validate(cronjob);
    if causes.is_empty() {
        return Ok(Warnings::new());
    }
    Err(Denial::invalid(causes).into())
}

impl Validator<CronJob> for CronJobValidator {
    async fn validate_create(
        &self,
        _req: &AdmissionRequest<CronJob>,
        cronjob: &CronJob,
    ) -> Result<Warnings, AdmissionError> {
        check(cronjob)
    }

    async fn validate_update(
        &self,
        _req: &AdmissionRequest<CronJob>,
        _old: &CronJob,
        cronjob: &CronJob,
    ) -> Result<Warnings, AdmissionError> {
        check(cronjob)
    }
}
// ANCHOR_END: validator

// ANCHOR: register
/// Registers the defaulting and validating webhooks of CronJobs on `server` (the book's
/// `SetupCronJobWebhookWithManager`); returns their paths, [`MUTATE_PATH`] then
/// [`VALIDATE_PATH`].
pub fn register(server: &WebhookServer) -> Result<Vec<String>, WebhookError> {
    server
        .webhook::<CronJob>()
        .defaulter(CronJobDefaulter)
        .validator(CronJobValidator)
        .complete()
}
// ANCHOR_END: register

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConcurrencyPolicy, CronJobSpec};
    use serde_json::json;

    fn request(op: &str, object: &CronJob) -> AdmissionRequest<CronJob> {
        serde_json::from_value(json!({
            "uid": "u-1",
            "kind": {"group": "batch.example.kcr.dev", "version": "v1", "kind": "CronJob"},
            "resource": {"group": "batch.example.kcr.dev", "version": "v1", "resource": "cronjobs"},
            "name": object.name_any(),
            "namespace": "default",
            "operation": op,
            "userInfo": {"username": "tester"},
            "object": object,
            "oldObject": null,
            "dryRun": false
        }))
        .unwrap()
    }

    fn cronjob(name: &str, schedule: &str) -> CronJob {
        CronJob::new(
            name,
            CronJobSpec {
                schedule: schedule.into(),
                ..Default::default()
            },
        )
    }

    #[test]
    fn the_paths_follow_the_kubebuilder_convention() {
        let (g, v, k) = ("batch.example.kcr.dev", "v1", "CronJob");
        assert_eq!(kcr_webhook::mutate_path(g, v, k), MUTATE_PATH);
        assert_eq!(kcr_webhook::validate_path(g, v, k), VALIDATE_PATH);
    }

    #[tokio::test]
    async fn defaults_fill_what_is_unset_and_keep_what_is_set() {
        let mut c = cronjob("c", "@hourly");
        CronJobDefaulter
            .default(&request("CREATE", &c.clone()), &mut c)
            .await
            .unwrap();
        let spec = serde_json::to_value(&c.spec).unwrap();
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["successfulJobsHistoryLimit"], 3);
        assert_eq!(spec["failedJobsHistoryLimit"], 1);

        let mut set = cronjob("c", "@hourly");
        set.spec.concurrency_policy = ConcurrencyPolicy::Forbid;
        set.spec.suspend = Some(true);
        set.spec.successful_jobs_history_limit = Some(0);
        set.spec.failed_jobs_history_limit = Some(7);
        let before = set.clone();
        CronJobDefaulter
            .default(&request("UPDATE", &before), &mut set)
            .await
            .unwrap();
        assert_eq!(set.spec, before.spec);
    }

    #[tokio::test]
    async fn a_valid_cronjob_is_allowed_on_create_and_update() {
        let ok = cronjob(&"a".repeat(MAX_NAME_LENGTH), "*/5 * * * *");
        let req = request("CREATE", &ok);
        assert_eq!(
            CronJobValidator.validate_create(&req, &ok).await.unwrap(),
            Warnings::new()
        );
        let req = request("UPDATE", &ok);
        let old = cronjob(&"a".repeat(MAX_NAME_LENGTH), "not a schedule");
        assert!(
            CronJobValidator
                .validate_update(&req, &old, &ok)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_bad_schedule_and_a_long_name_are_refused_with_a_cause_each() {
        let bad = cronjob(&"a".repeat(MAX_NAME_LENGTH + 1), "61 * * * *");
        let reason = Schedule::parse("61 * * * *").unwrap_err().reason;
        let err = CronJobValidator
            .validate_create(&request("CREATE", &bad), &bad)
            .await
            .unwrap_err();
        let AdmissionError::Denied(denial) = err else {
            panic!("expected a denial, got {err}");
        };
        assert_eq!((denial.code, denial.reason.as_str()), (422, "Invalid"));
        let causes: Vec<(String, String)> = denial
            .causes
            .iter()
            .map(|c| (c.field.clone(), c.message.clone()))
            .collect();
        assert_eq!(
            causes,
            vec![
                (
                    "metadata.name".to_string(),
                    format!(
                        "Invalid value: \"{}\": must be no more than 52 characters",
                        "a".repeat(53)
                    )
                ),
                (
                    "spec.schedule".to_string(),
                    format!("Invalid value: \"61 * * * *\": {reason}")
                ),
            ]
        );
        // The same on update: the new object is what counts.
        let old = cronjob("b", "@daily");
        let mut new = old.clone();
        new.spec.schedule = "@fortnightly".into();
        let err = CronJobValidator
            .validate_update(&request("UPDATE", &new), &old, &new)
            .await
            .unwrap_err();
        let AdmissionError::Denied(denial) = err else {
            panic!("expected a denial, got {err}");
        };
        let fields: Vec<&str> = denial.causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.schedule"]);
    }

    #[test]
    fn the_longest_name_leaves_room_for_the_run_in_a_job_name() {
        // Runs until the year 2286 have ten digits.
        let run = jiff::Timestamp::from_second(9_999_999_999).unwrap();
        let job = format!("{}-{}", "a".repeat(MAX_NAME_LENGTH), run.as_second());
        assert_eq!(job.len(), 63);
    }
}
