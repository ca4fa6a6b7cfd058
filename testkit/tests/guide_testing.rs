//! The test of the guide's "Testing your controller" page (`docs/guide/src/testing.md`): the
//! page's code blocks are the regions between `ANCHOR` markers here, checked to be identical
//! by `guide_snippets.rs`, so every snippet on the page compiles and runs.
//!
//! A `Ticker` counts ticks on a schedule: each reconcile that finds the next tick due counts
//! it and asks to be requeued when the following one is. A defaulting webhook fills in the
//! interval, a validating one refuses intervals under a minute. The test runs the manager in
//! the background, installs the webhooks in one call, moves a manual clock to fire the
//! scheduled reconcile, and shows with `consistently` that nothing happens in between.

// ANCHOR: types
use std::time::Duration;

use kcr_controller::clock::ManualClock;
use kcr_controller::{Action, Context, Reconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::Request;
use kcr_testkit::{RunningManager, TestWebhooks, consistently, eventually, that_ok};
use kcr_webhook::{
    AdmissionError, AdmissionRequest, Defaulter, Denial, FieldCause, ManagerWebhookExt, Validator,
    Warnings,
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Counts ticks every `interval_seconds`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(group = "guide.kcr.dev", version = "v1", kind = "Ticker", namespaced)]
#[kube(status = "TickerStatus")]
#[serde(rename_all = "camelCase")]
pub struct TickerSpec {
    /// Seconds between ticks (defaulted to an hour by the webhook).
    pub interval_seconds: Option<u64>,
}

/// What the controller has done.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TickerStatus {
    /// Ticks counted so far.
    pub ticks: u64,
    /// When the next tick is due (RFC 3339).
    pub next_tick: Option<String>,
}
// ANCHOR_END: types

// ANCHOR: reconciler
/// Counts a tick when one is due and requeues for the next.
struct Ticking {
    client: kube::Client,
}

impl Reconciler<Request> for Ticking {
    type Error = anyhow::Error;

    async fn reconcile(&self, req: &Request, ctx: &Context) -> anyhow::Result<Action> {
        let ns = req.namespace.as_deref().unwrap_or_default();
        let api: Api<Ticker> = Api::namespaced(self.client.clone(), ns);
        let Some(ticker) = api.get_opt(&req.name).await? else {
            return Ok(Action::done());
        };
        let interval = Duration::from_secs(ticker.spec.interval_seconds.unwrap_or(3600));
        // The clock comes from the context: the real one in production, a test's in tests.
        let now = ctx.now();
        let status = ticker.status.clone().unwrap_or_default();
        let due = match &status.next_tick {
            Some(next) => next.parse::<jiff::Timestamp>()?,
            None => now,
        };
        if now < due {
            // Not yet: come back when it is due.
            return Ok(Action::requeue_after(
                due.duration_since(now).unsigned_abs(),
            ));
        }
        let next = now + interval;
        let status = TickerStatus {
            ticks: status.ticks + 1,
            next_tick: Some(next.to_string()),
        };
        let patch = serde_json::json!({ "status": status });
        api.patch_status(&req.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(Action::requeue_after(interval))
    }
}
// ANCHOR_END: reconciler

// ANCHOR: webhooks
/// Fills in an hour when no interval is given.
struct DefaultInterval;

impl Defaulter<Ticker> for DefaultInterval {
    async fn default(
        &self,
        _: &AdmissionRequest<Ticker>,
        t: &mut Ticker,
    ) -> Result<(), AdmissionError> {
        t.spec.interval_seconds.get_or_insert(3600);
        Ok(())
    }
}

/// Refuses intervals under a minute.
struct AtLeastAMinute;

impl Validator<Ticker> for AtLeastAMinute {
    async fn validate_create(
        &self,
        _: &AdmissionRequest<Ticker>,
        t: &Ticker,
    ) -> Result<Warnings, AdmissionError> {
        match t.spec.interval_seconds {
            Some(s) if s < 60 => Err(Denial::invalid(vec![FieldCause::invalid(
                "spec.intervalSeconds",
                &s,
                "must be at least 60",
            )])
            .into()),
            _ => Ok(Warnings::new()),
        }
    }
}
// ANCHOR_END: webhooks

fn ticker(name: &str, interval_seconds: Option<u64>) -> Ticker {
    Ticker::new(name, TickerSpec { interval_seconds })
}

// ANCHOR: test
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticker_ticks_when_the_clock_says_so() -> anyhow::Result<()> {
    // A namespace of its own on the test binary's shared server (in process, or
    // KCR_ENVTEST_BACKEND=real for kube-apiserver and etcd), with the CRD installed.
    let ns = TestNamespace::new("ticker").await?;
    ns.install_crd_value(serde_json::to_value(Ticker::crd())?)
        .await?;

    // A manager for the test (metrics and probes off) that reads a clock the test moves.
    let clock = ManualClock::starting_now();
    let mgr = kcr_testkit::manager_with(&ns, kcr_testkit::options().clock(clock.clock())).await?;
    mgr.controller()
        .for_kind::<Ticker>(WatchOptions::new().namespace(ns.namespace()))
        .complete(Ticking {
            client: mgr.kube_client(),
        })?;

    // The webhooks: server, certificates and configurations in one call, in effect on return.
    let hooks = TestWebhooks::install(&mgr, &ns, |server| {
        mgr.webhook::<Ticker>(server)
            .defaulter(DefaultInterval)
            .validator(AtLeastAMinute)
            .complete()
    })
    .await?;

    let running = RunningManager::start(mgr);
    let tickers: Api<Ticker> = Api::default_namespaced(ns.client());

    // The validator refuses a ticker that is too fast; the defaulter fills in an hour.
    let err = tickers
        .create(&PostParams::default(), &ticker("fast", Some(5)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("must be at least 60"), "{err}");
    let created = tickers
        .create(&PostParams::default(), &ticker("hourly", None))
        .await?;
    assert_eq!(created.spec.interval_seconds, Some(3600));

    // The first tick comes at once. A failure would show the last count seen.
    let ticks = || async {
        let t = tickers.get("hourly").await?;
        Ok::<_, kube::Error>(t.status.map_or(0, |s| s.ticks))
    };
    eventually("the first tick", || async {
        that_ok(ticks().await, |n| *n == 1)
    })
    .timeout(Duration::from_secs(30))
    .await?;

    // Nothing more happens while the clock stands still, however long the test waits.
    consistently("no second tick before the hour", || async {
        that_ok(ticks().await, |n| *n == 1)
    })
    .for_duration(Duration::from_secs(1))
    .interval(Duration::from_millis(100))
    .await?;

    // An hour later (on the test's clock), the scheduled reconcile fires and ticks once.
    clock.advance(Duration::from_secs(3600));
    eventually("the second tick", || async {
        that_ok(ticks().await, |n| *n == 2)
    })
    .timeout(Duration::from_secs(30))
    .await?;
    consistently("exactly one tick per hour", || async {
        that_ok(ticks().await, |n| *n == 2)
    })
    .for_duration(Duration::from_millis(500))
    .await?;

    hooks.uninstall().await?;
    running.stop().await?;
    assert_eq!(
        tickers
            .get("hourly")
            .await?
            .status
            .unwrap_or_default()
            .ticks,
        2
    );
    Ok(())
}
// ANCHOR_END: test
