//! The CronJob webhooks called by the API server (kcr-envtest's, on the backend
//! `KCR_ENVTEST_BACKEND` names): kcr-testkit's `TestWebhooks::install` serves
//! `cronjob_operator::webhook::register`'s webhooks from the test's manager and points the API
//! server at them, limited to the test's namespace. What a user of `kubectl` or a client sees
//! is checked as it arrives: the stored object's defaults, and the refusal's status and message.

mod support;

use cronjob_operator::CronJob;
use cronjob_operator::schedule::Schedule;
use cronjob_operator::webhook::MAX_NAME_LENGTH;
use kcr_envtest::TestNamespace;
use kcr_testkit::{RunningManager, TestWebhooks};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::response::StatusCause;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// A namespace with the CRD, and the CronJob webhooks served by a running manager and called
/// by the API server for the CronJobs of that namespace.
struct Webhooks {
    ns: TestNamespace,
    cronjobs: Api<CronJob>,
    _hooks: TestWebhooks,
    running: RunningManager,
}

impl Webhooks {
    // ANCHOR: webhook_harness
    /// A namespace named after `test`, the CRD, a manager serving the webhooks, and the API
    /// server calling them.
    async fn start(test: &str) -> anyhow::Result<Webhooks> {
        let ns = TestNamespace::new(test).await?;
        static CRD: OnceCell<()> = OnceCell::const_new();
        CRD.get_or_try_init(|| ns.install_crd::<CronJob>()).await?;
        let mgr = kcr_testkit::manager(&ns).await?;
        // The webhook configurations are in effect when `install` returns.
        let hooks = TestWebhooks::install(&mgr, &ns, cronjob_operator::webhook::register).await?;
        let running = RunningManager::start(mgr);
        Ok(Webhooks {
            cronjobs: Api::default_namespaced(ns.client()),
            ns,
            _hooks: hooks,
            running,
        })
    }
    // ANCHOR_END: webhook_harness

    /// Stops the manager, failing if it had failed.
    async fn stop(self) -> anyhow::Result<()> {
        Ok(self.running.stop().await?)
    }

    /// Creates the CronJob `name` with `spec` as written (JSON: fields left out stay out of
    /// the request, which a typed `CronJob` could not do for `concurrencyPolicy`); returns
    /// the stored object as JSON.
    async fn create_raw(&self, name: &str, spec: Value) -> Result<Value, kube::Error> {
        let resource = ApiResource::erase::<CronJob>(&());
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ns.client(), self.ns.namespace(), &resource);
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "batch.example.kcr.dev/v1", "kind": "CronJob",
            "metadata": {"name": name}, "spec": spec,
        }))
        .map_err(kube::Error::SerdeError)?;
        let created = api.create(&PostParams::default(), &object).await?;
        serde_json::to_value(created).map_err(kube::Error::SerdeError)
    }

    /// Merges `spec` into the CronJob's spec; returns the stored spec as JSON.
    async fn patch_spec(&self, name: &str, spec: Value) -> Result<Value, kube::Error> {
        let patch = json!({ "spec": spec });
        let patched = self
            .cronjobs
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        serde_json::to_value(patched.spec).map_err(kube::Error::SerdeError)
    }
}

/// A spec with a schedule and the book's Job template.
fn spec(schedule: &str) -> Value {
    json!({ "schedule": schedule, "jobTemplate": support::job_template() })
}

/// The refusal in `result`: (code, reason, message).
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason, status.message),
        other => panic!("expected the API server's refusal, got {other:?}"),
    }
}

/// The message kube-apiserver gives a client when the validating webhook refuses `name` with
/// `causes` (`field: message`).
fn denied(name: &str, causes: &[String]) -> String {
    let list = match causes {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!(
        "admission webhook \"vcronjob-v1.batch.example.kcr.dev\" denied the request: \
         CronJob.batch.example.kcr.dev \"{name}\" is invalid: {list}"
    )
}

/// The cause the validator gives for `schedule` (the parser's own reason).
fn schedule_cause(schedule: &str) -> String {
    let reason = Schedule::parse(schedule)
        .expect_err("an invalid schedule")
        .reason;
    format!("spec.schedule: Invalid value: \"{schedule}\": {reason}")
}

// ANCHOR: defaults_test
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_defaults_are_applied_on_create() -> anyhow::Result<()> {
    let w = Webhooks::start("webhook-defaults").await?;

    // Nothing but the schedule and the template: the defaulter fills in the rest.
    let stored = w.create_raw("plain", spec("*/5 * * * *")).await?;
    let s = &stored["spec"];
    assert_eq!(s["concurrencyPolicy"], "Allow");
    assert_eq!(s["suspend"], false);
    assert_eq!(s["successfulJobsHistoryLimit"], 3);
    assert_eq!(s["failedJobsHistoryLimit"], 1);

    // What the user set is kept.
    let mut own = spec("@hourly");
    own["concurrencyPolicy"] = json!("Forbid");
    own["suspend"] = json!(true);
    own["successfulJobsHistoryLimit"] = json!(0);
    own["failedJobsHistoryLimit"] = json!(5);
    let stored = w.create_raw("own", own.clone()).await?;
    for field in [
        "concurrencyPolicy",
        "suspend",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        assert_eq!(stored["spec"][field], own[field], "{field}");
    }
    w.stop().await
}
// ANCHOR_END: defaults_test

// ANCHOR: invalid_create_test
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_schedule_or_a_long_name_is_refused_with_the_reason() -> anyhow::Result<()> {
    let w = Webhooks::start("webhook-invalid").await?;

    let (code, reason, message) = refusal(w.create_raw("bad", spec("61 * * * *")).await);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(message, denied("bad", &[schedule_cause("61 * * * *")]));

    let long = "a".repeat(MAX_NAME_LENGTH + 1);
    let (code, _, message) = refusal(w.create_raw(&long, spec("@daily")).await);
    assert_eq!(code, 422);
    let name_cause =
        format!("metadata.name: Invalid value: \"{long}\": must be no more than 52 characters");
    assert_eq!(message, denied(&long, std::slice::from_ref(&name_cause)));

    // Both at once: one cause each, listed.
    let (_, _, message) = refusal(w.create_raw(&long, spec("@fortnightly")).await);
    let both = [name_cause, schedule_cause("@fortnightly")];
    assert_eq!(message, denied(&long, &both));

    // The longest allowed name is allowed; nothing refused was stored.
    let longest = "a".repeat(MAX_NAME_LENGTH);
    w.create_raw(&longest, spec("@daily")).await?;
    let names: Vec<String> = w
        .cronjobs
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, [longest]);
    w.stop().await
}
// ANCHOR_END: invalid_create_test

// ANCHOR: update_test
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_update_passes_and_an_invalid_one_is_refused() -> anyhow::Result<()> {
    let w = Webhooks::start("webhook-update").await?;
    w.create_raw("nightly", spec("0 3 * * *")).await?;

    // A valid update; the defaulter runs on updates too, so a limit removed comes back.
    let patch = json!({"schedule": "30 2 * * MON-FRI", "successfulJobsHistoryLimit": null});
    let stored = w.patch_spec("nightly", patch).await?;
    assert_eq!(stored["schedule"], "30 2 * * MON-FRI");
    assert_eq!(stored["successfulJobsHistoryLimit"], 3);

    // An invalid one is refused with the reason, and the CronJob keeps its schedule.
    let result = w
        .patch_spec("nightly", json!({"schedule": "30 2 * *"}))
        .await;
    let (code, reason, message) = refusal(result);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(message, denied("nightly", &[schedule_cause("30 2 * *")]));
    let kept = w.cronjobs.get("nightly").await?;
    assert_eq!(kept.spec.schedule, "30 2 * * MON-FRI");
    w.stop().await
}
// ANCHOR_END: update_test

/// The refusal's details name the field of each cause, for clients that show them by field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refusal_lists_a_cause_per_field() -> anyhow::Result<()> {
    let w = Webhooks::start("webhook-causes").await?;
    let long = "b".repeat(MAX_NAME_LENGTH + 1);
    let err = w.create_raw(&long, spec("* * *")).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected the API server's refusal, got {err:?}");
    };
    let details = status.details.expect("the refusal's details");
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        (long.as_str(), "batch.example.kcr.dev", "CronJob")
    );
    let fields: Vec<(String, String)> = details
        .causes
        .into_iter()
        .map(|StatusCause { field, reason, .. }| (field, reason))
        .collect();
    assert_eq!(
        fields,
        [
            ("metadata.name".to_string(), "FieldValueInvalid".to_string()),
            ("spec.schedule".to_string(), "FieldValueInvalid".to_string()),
        ]
    );
    w.stop().await
}
