//! Error policies and debounce, on tokio's paused clock (no API server: the queue is fed
//! directly or by a hand-made watch).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kcr_controller::{
    Action, BoxError, Builder, Context, Controller, ErrorAction, ManagerError, ReconcileError,
    ReconcileReason, Reconciler, StartedWatch, Watch,
};
use kcr_queue::WorkQueue;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("not yet")]
    NotYet,
    #[error("hopeless")]
    Hopeless,
    #[error("flaky")]
    Flaky,
}

impl ReconcileError for Error {}

/// Fails each request with the error its name says, recording when and why it ran.
#[derive(Clone)]
struct Failing {
    start: Instant,
    log: Arc<Mutex<Vec<Run>>>,
}

/// One reconcile: the request, when (since the start), why, and its retry count.
type Run = (String, Duration, ReconcileReason, u32);

impl Failing {
    fn new() -> Self {
        Failing {
            start: Instant::now(),
            log: Arc::default(),
        }
    }

    fn runs(&self, name: &str) -> Vec<(Duration, ReconcileReason, u32)> {
        self.log
            .lock()
            .iter()
            .filter(|(n, ..)| n == name)
            .map(|(_, t, r, n)| (*t, r.clone(), *n))
            .collect()
    }
}

impl Reconciler<String> for Failing {
    type Error = Error;
    async fn reconcile(&self, request: &String, ctx: &Context) -> Result<Action, Error> {
        self.log.lock().push((
            request.clone(),
            self.start.elapsed(),
            ctx.reason().clone(),
            ctx.retries(),
        ));
        match request.as_str() {
            "not-yet" => Err(Error::NotYet),
            "hopeless" => Err(Error::Hopeless),
            "flaky" => Err(Error::Flaky),
            _ => Ok(Action::done()),
        }
    }
}

fn policy(error: &Error, ctx: &Context) -> ErrorAction {
    match error {
        Error::NotYet => ErrorAction::RequeueAfter(Duration::from_secs(10)),
        Error::Hopeless => ErrorAction::GiveUp,
        Error::Flaky if ctx.retries() >= 3 => ErrorAction::GiveUp,
        Error::Flaky => ErrorAction::RateLimited,
    }
}

#[tokio::test(start_paused = true)]
async fn the_error_policy_decides_requeue_after_give_up_or_backoff() {
    let reconciler = Failing::new();
    let controller = Builder::<String>::keyed()
        .named("policy")
        .error_policy(policy)
        .build(reconciler.clone())
        .unwrap();
    let queue = controller.queue().clone();
    for name in ["not-yet", "hopeless", "flaky"] {
        queue.add(name.to_string());
    }
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(35)).await;
    stop.cancel();
    task.await.unwrap().unwrap();

    // Every 10 s, as the policy says, not on the rate limiter's 5 ms backoff.
    let not_yet = reconciler.runs("not-yet");
    let times: Vec<u64> = not_yet.iter().map(|(t, ..)| t.as_secs()).collect();
    assert_eq!(times, [0, 10, 20, 30], "{not_yet:?}");
    assert_eq!(not_yet[0].1, ReconcileReason::Unknown);
    assert!(
        not_yet[1..]
            .iter()
            .all(|(_, r, _)| *r == ReconcileReason::ErrorRetry),
        "{not_yet:?}"
    );
    assert_eq!(
        not_yet.iter().map(|(.., n)| *n).collect::<Vec<_>>(),
        [0, 0, 0, 0],
        "a policy delay is not a rate-limited retry: the failure history stays as it was"
    );

    // Given up at once: once, never again.
    assert_eq!(reconciler.runs("hopeless").len(), 1);
    assert_eq!(queue.num_requeues(&"hopeless".to_string()), 0, "forgotten");

    // Backoff until the policy gives up after the third retry: four runs, within the first
    // second (5, 10, 20 ms of backoff).
    let flaky = reconciler.runs("flaky");
    assert_eq!(flaky.len(), 4, "{flaky:?}");
    assert!(flaky[3].0 < Duration::from_secs(1), "{flaky:?}");
    assert_eq!(queue.num_requeues(&"flaky".to_string()), 0, "forgotten");
}

#[test]
fn an_error_policy_of_another_error_type_is_a_build_error() {
    let err = Builder::<String>::keyed()
        .named("mismatch")
        .error_policy(|_: &kube::Error, _: &Context| ErrorAction::GiveUp)
        .build(Failing {
            start: Instant::now(),
            log: Arc::default(),
        })
        .unwrap_err();
    let ManagerError::Builder { reason } = &err else {
        panic!("{err:?}");
    };
    assert!(
        reason.contains("kube_client::error::Error") && reason.contains("error_policy::Error"),
        "{reason}"
    );
}

/// A watch that adds every key sent on its channel to the queue it is started with.
struct Feed(mpsc::UnboundedReceiver<String>);

impl Watch<String> for Feed {
    fn describe(&self) -> String {
        "feed".into()
    }

    fn start(
        self: Box<Self>,
        queue: WorkQueue<String>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<StartedWatch, BoxError>> {
        let mut rx = self.0;
        async move {
            let pump = async move {
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return Ok(()),
                        key = rx.recv() => match key {
                            Some(key) => queue.add(key),
                            None => return Ok(()),
                        },
                    }
                }
            };
            Ok(StartedWatch {
                pump: pump.boxed(),
                synced: async { Ok(()) }.boxed(),
                diagnose: Box::new(|| async { None }.boxed()),
            })
        }
        .boxed()
    }
}

#[tokio::test(start_paused = true)]
async fn debounce_coalesces_a_requests_events_within_the_window() {
    let reconciler = Failing::new();
    let (tx, rx) = mpsc::unbounded_channel();
    let mut controller = Controller::new(
        "debounced",
        reconciler.clone(),
        kcr_controller::ControllerOptions {
            debounce: Some(Duration::from_secs(10)),
            ..Default::default()
        },
    );
    controller.add_watch(Box::new(Feed(rx)));
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    let start = reconciler.start;
    let at = |secs: u64| tokio::time::sleep_until(start + Duration::from_secs(secs));

    tx.send("a".to_string()).unwrap(); // t = 0
    at(1).await;
    tx.send("b".to_string()).unwrap();
    at(3).await;
    tx.send("a".to_string()).unwrap();
    at(6).await;
    tx.send("a".to_string()).unwrap();
    at(12).await;
    tx.send("a".to_string()).unwrap(); // after a's first reconcile: a new window
    at(40).await;
    stop.cancel();
    task.await.unwrap().unwrap();

    let secs = |name: &str| -> Vec<u64> {
        reconciler
            .runs(name)
            .iter()
            .map(|(t, ..)| t.as_secs())
            .collect()
    };
    assert_eq!(secs("a"), [10, 22], "three events in one window, one later");
    assert_eq!(secs("b"), [11]);
}

#[tokio::test(start_paused = true)]
async fn without_debounce_every_event_after_a_reconcile_reconciles() {
    let reconciler = Failing::new();
    let (tx, rx) = mpsc::unbounded_channel();
    let mut controller = Controller::new("eager", reconciler.clone(), Default::default());
    controller.add_watch(Box::new(Feed(rx)));
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    let start = reconciler.start;
    for secs in [0, 3, 6] {
        tokio::time::sleep_until(start + Duration::from_secs(secs)).await;
        tx.send("a".to_string()).unwrap();
    }
    tokio::time::sleep_until(start + Duration::from_secs(20)).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    let secs: Vec<u64> = reconciler
        .runs("a")
        .iter()
        .map(|(t, ..)| t.as_secs())
        .collect();
    assert_eq!(secs, [0, 3, 6]);
}

/// An object reconciler of ConfigMaps that always fails with `Error::NotYet`.
struct NotYetObjects;

impl kcr_controller::ObjectReconciler for NotYetObjects {
    type Object = k8s_openapi::api::core::v1::ConfigMap;
    type Error = Error;
    async fn reconcile(&self, _object: Arc<Self::Object>, _ctx: &Context) -> Result<Action, Error> {
        Err(Error::NotYet)
    }
}

#[tokio::test]
async fn an_object_reconcilers_policy_takes_its_own_error_type() {
    let ns = kcr_envtest::TestNamespace::new("objpolicy").await.unwrap();
    let cache = kcr_source::Cache::new(ns.client());
    let built = Builder::new()
        .cache(cache.clone())
        .for_kind::<k8s_openapi::api::core::v1::ConfigMap>(kcr_controller::WatchOptions::new())
        .error_policy(policy)
        .build_objects(NotYetObjects);
    assert!(built.is_ok(), "{:?}", built.err());
    let mismatch = Builder::new()
        .cache(cache)
        .named("mismatch")
        .for_kind::<k8s_openapi::api::core::v1::ConfigMap>(kcr_controller::WatchOptions::new())
        .error_policy(|_: &kube::Error, _: &Context| ErrorAction::GiveUp)
        .build_objects(NotYetObjects);
    assert!(
        matches!(mismatch, Err(ManagerError::Builder { .. })),
        "{:?}",
        mismatch.err()
    );
}
