//! The controller's clock on a paused tokio clock: under a manual clock `requeue_after` waits for
//! the test to advance that clock (however much tokio time passes), reconcilers read the manual
//! time through their context, and the manager hands its clock to its controllers; on the
//! default clock `requeue_after` still goes through the queue's delay on tokio time.

use std::fmt::Display;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{
    Action, Builder, Clock, Context, Controller, ControllerError, ControllerOptions, Key, Manager,
    ManagerOptions, ManualClock, Reconciler, WatchOptions,
};
use kcr_handler::{EnqueueRequestForObject, Request};
use kcr_source::{Event, StreamSource};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const HOUR: Duration = Duration::from_secs(3600);
/// Tokio time that a test lets pass to show that nothing happens meanwhile.
const A_LONG_TIME: Duration = Duration::from_secs(10 * 3600);

fn start() -> Timestamp {
    "2024-05-01T10:00:00Z".parse().unwrap()
}

/// One reconcile as seen by the reconciler.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    request: String,
    /// `ctx.now()`.
    now: Timestamp,
    /// Tokio's (paused) clock.
    at: Instant,
    manual: bool,
}

/// Returns `requeue_after(1h)` on its first reconcile and `done` afterwards; reports each
/// reconcile on a channel.
struct RequeueOnce {
    calls: AtomicUsize,
    seen: mpsc::UnboundedSender<Seen>,
}

fn requeue_once() -> (RequeueOnce, mpsc::UnboundedReceiver<Seen>) {
    let (seen, rx) = mpsc::unbounded_channel();
    let r = RequeueOnce {
        calls: AtomicUsize::new(0),
        seen,
    };
    (r, rx)
}

impl<K: Key + Display> Reconciler<K> for RequeueOnce {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &K, ctx: &Context) -> anyhow::Result<Action> {
        let first = self.calls.fetch_add(1, Ordering::SeqCst) == 0;
        let _ = self.seen.send(Seen {
            request: request.to_string(),
            now: ctx.now(),
            at: Instant::now(),
            manual: ctx.clock().is_manual(),
        });
        Ok(if first {
            Action::requeue_after(HOUR)
        } else {
            Action::done()
        })
    }
}

/// Yields until the manual clock has `n` timers armed (the worker arms the requeue right after
/// the reconcile returns); fails rather than spin forever.
async fn until_pending(manual: &ManualClock, n: usize) {
    for _ in 0..10_000 {
        if manual.pending_timers() == n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!(
        "expected {n} pending timer(s), have {}",
        manual.pending_timers()
    );
}

/// Nothing is reconciled for [`A_LONG_TIME`] of (auto-advanced) tokio time.
async fn nothing_for_a_long_time(rx: &mut mpsc::UnboundedReceiver<Seen>) {
    if let Ok(seen) = tokio::time::timeout(A_LONG_TIME, rx.recv()).await {
        panic!("unexpected reconcile: {seen:?}");
    }
}

/// The request's next reconcile, within [`A_LONG_TIME`].
async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(A_LONG_TIME, rx.recv())
        .await
        .expect("no reconcile")
        .expect("reconciler dropped")
}

/// The scenario shared by every manual-clock test: a first reconcile at the start time that
/// asks for a requeue in an hour; no reconcile on tokio time or before the hour is up on the
/// manual clock; exactly one more once it is.
async fn requeues_on_the_manual_clock(
    manual: &ManualClock,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    request: &str,
) {
    let first = next(rx).await;
    assert_eq!(first.request, request);
    assert_eq!(first.now, start(), "ctx.now() reads the manual clock");
    assert!(first.manual);

    until_pending(manual, 1).await;
    assert_eq!(manual.next_deadline(), Some(start() + HOUR));
    // Ten hours of tokio time: the requeue does not fire on it.
    nothing_for_a_long_time(rx).await;
    assert_eq!(manual.pending_timers(), 1);

    // Not yet due on the manual clock either.
    manual.advance(HOUR - Duration::from_secs(1));
    nothing_for_a_long_time(rx).await;
    assert_eq!(manual.pending_timers(), 1);

    manual.advance(Duration::from_secs(1));
    assert_eq!(manual.pending_timers(), 0);
    let second = next(rx).await;
    assert_eq!(second.request, request);
    assert_eq!(second.now, start() + HOUR);

    // Exactly once: `done` arms nothing, and more time on either clock brings nothing.
    nothing_for_a_long_time(rx).await;
    manual.advance(24 * HOUR);
    nothing_for_a_long_time(rx).await;
    assert_eq!(manual.pending_timers(), 0);
}

fn start_controller<R: Reconciler<String>>(
    controller: Controller<String, R>,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), ControllerError>>,
) {
    let token = CancellationToken::new();
    let handle = tokio::spawn(controller.run(token.clone()));
    (token, handle)
}

#[tokio::test(start_paused = true)]
async fn requeue_after_under_a_manual_clock_fires_when_the_clock_is_advanced() {
    let manual = ManualClock::new(start());
    let (reconciler, mut rx) = requeue_once();
    let options = ControllerOptions {
        clock: manual.clock(),
        ..Default::default()
    };
    let controller = Controller::new("manual-requeue", reconciler, options);
    let queue = controller.queue().clone();
    queue.add("a".to_string());
    let (stop, task) = start_controller(controller);

    requeues_on_the_manual_clock(&manual, &mut rx, "a").await;
    assert!(queue.is_empty() && queue.num_in_flight() == 0);

    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn requeue_after_on_the_default_clock_waits_on_tokio_time() {
    let (reconciler, mut rx) = requeue_once();
    let controller = Controller::new("system-requeue", reconciler, ControllerOptions::default());
    assert!(!controller.options().clock.is_manual());
    controller.queue().add("a".to_string());
    let (stop, task) = start_controller(controller);

    let first = next(&mut rx).await;
    assert!(!first.manual);
    // Not a second early...
    assert!(
        tokio::time::timeout(HOUR - Duration::from_secs(1), rx.recv())
            .await
            .is_err()
    );
    // ...and then, an hour after the first reconcile, on tokio time.
    let second = next(&mut rx).await;
    assert_eq!(second.at - first.at, HOUR);
    assert!(second.now >= first.now);
    nothing_for_a_long_time(&mut rx).await;

    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A client for a server that does not exist: enough for a manager that never calls it.
fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn offline_options() -> ManagerOptions {
    ManagerOptions::default()
        .metrics_bind_address("0")
        .unwrap()
        .health_probe_bind_address("0")
        .unwrap()
        .rest_client_metrics(false)
}

#[tokio::test(start_paused = true)]
async fn builders_take_the_manager_clock_unless_they_set_one() {
    let manual = ManualClock::new(start());
    let mgr = Manager::new(offline_client(), offline_options().clock(manual.clock()))
        .await
        .unwrap();
    assert!(mgr.clock().is_manual());
    assert!(!ManagerOptions::default().clock.is_manual());

    let (r, _rx) = requeue_once();
    let inherits = mgr.controller().named("inherits").build(r).unwrap();
    let clock = &inherits.options().clock;
    assert!(clock.is_manual());
    manual.advance(HOUR);
    assert_eq!(
        clock.now(),
        start() + HOUR,
        "the manager's manual clock itself"
    );

    let (r, _rx) = requeue_once();
    let pinned = mgr
        .controller()
        .named("pinned")
        .clock(Clock::system())
        .build(r)
        .unwrap();
    assert!(!pinned.options().clock.is_manual());

    // A manual clock in the options is kept over the manager's.
    let other = ManualClock::new(start() - HOUR);
    let (r, _rx) = requeue_once();
    let own = mgr
        .controller()
        .named("own")
        .options(ControllerOptions {
            clock: other.clock(),
            ..Default::default()
        })
        .build(r)
        .unwrap();
    assert_eq!(own.options().clock.now(), start() - HOUR);

    // No manager: the options' clock.
    let (r, _rx) = requeue_once();
    let alone = Builder::new().named("alone").build(r).unwrap();
    assert!(!alone.options().clock.is_manual());
}

#[tokio::test(start_paused = true)]
async fn a_controller_added_to_the_manager_requeues_on_its_clock() {
    let manual = ManualClock::new(start());
    let mgr = Manager::new(offline_client(), offline_options().clock(manual.clock()))
        .await
        .unwrap();
    let (reconciler, mut rx) = requeue_once();
    // Built by hand on the system clock: the manager gives it its own.
    let controller = Controller::new("added", reconciler, ControllerOptions::default());
    controller.queue().add("a".to_string());
    mgr.add_controller(controller).unwrap();

    let stop = CancellationToken::new();
    let mgr = Arc::new(mgr);
    let running = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    requeues_on_the_manual_clock(&manual, &mut rx, "a").await;
    stop.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_controller_completed_by_the_manager_builder_requeues_on_its_clock() {
    let manual = ManualClock::new(start());
    let mgr = Manager::new(offline_client(), offline_options().clock(manual.clock()))
        .await
        .unwrap();
    let (events, source) = futures::channel::mpsc::unbounded::<Event<ConfigMap>>();
    let (reconciler, mut rx) = requeue_once();
    mgr.controller()
        .named("completed")
        .watches(
            StreamSource::new(source).named("configmaps"),
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .complete::<RequeueOnce>(reconciler)
        .unwrap();

    let stop = CancellationToken::new();
    let mgr = Arc::new(mgr);
    let running = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("ns".into());
    cm.metadata.name = Some("a".into());
    events.unbounded_send(Event::create(cm)).unwrap();
    requeues_on_the_manual_clock(
        &manual,
        &mut rx,
        &Request::namespaced("a", "ns").to_string(),
    )
    .await;
    stop.cancel();
    running.await.unwrap().unwrap();
}

/// Requeues per a per-key script (`Some(d)`: `requeue_after(d)`, `None`: `done`; the last step
/// repeats) and reports each reconcile.
struct Script {
    steps: std::collections::HashMap<String, Vec<Option<Duration>>>,
    calls: parking_lot::Mutex<std::collections::HashMap<String, usize>>,
    seen: mpsc::UnboundedSender<Seen>,
}

impl Reconciler<String> for Script {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &String, ctx: &Context) -> anyhow::Result<Action> {
        let n = {
            let mut calls = self.calls.lock();
            let n = calls.entry(request.clone()).or_default();
            *n += 1;
            *n - 1
        };
        let steps = &self.steps[request];
        let _ = self.seen.send(Seen {
            request: request.clone(),
            now: ctx.now(),
            at: Instant::now(),
            manual: ctx.clock().is_manual(),
        });
        Ok(match steps[n.min(steps.len() - 1)] {
            Some(d) => Action::requeue_after(d),
            None => Action::done(),
        })
    }
}

/// A reconcile cancels the request's pending requeue, on the manual clock as in the queue on
/// tokio time (an immediate add cancels a delayed one): "a" asks for 1 h, then (reconciled
/// again because of an event) for 10 min; "b" for 10 min, then for 1 h; "c" for 1 h, then is
/// done. "a" and "b" come back once, when their second reconcile asked, "c" never.
async fn a_reconcile_supersedes_the_pending_requeue(manual: Option<ManualClock>) {
    const TEN_MINUTES: Duration = Duration::from_secs(600);
    let (seen, mut rx) = mpsc::unbounded_channel();
    let script = Script {
        steps: [
            ("a".to_string(), vec![Some(HOUR), Some(TEN_MINUTES), None]),
            ("b".to_string(), vec![Some(TEN_MINUTES), Some(HOUR), None]),
            ("c".to_string(), vec![Some(HOUR), None]),
        ]
        .into(),
        calls: Default::default(),
        seen,
    };
    let options = ControllerOptions {
        clock: manual.as_ref().map(ManualClock::clock).unwrap_or_default(),
        ..Default::default()
    };
    let controller = Controller::new("supersede", script, options);
    let queue = controller.queue().clone();
    let (stop, task) = start_controller(controller);

    for key in ["a", "b", "c"] {
        // Two reconciles, one after the other (the second is the "event").
        for _ in 0..2 {
            queue.add(key.to_string());
            let call = next(&mut rx).await;
            assert_eq!(call.request, key);
            // let the worker apply the outcome
            while !queue.is_empty() || queue.num_in_flight() > 0 {
                tokio::task::yield_now().await;
            }
        }
    }
    let armed = Instant::now();
    let manual_start = manual.as_ref().map(ManualClock::now);
    if let Some(manual) = &manual {
        // Every requeue is armed; the first ones are cancelled.
        assert_eq!(manual.pending_timers(), 5);
        nothing_for_a_long_time(&mut rx).await;
        manual.advance(TEN_MINUTES);
    }
    let a = next(&mut rx).await;
    assert_eq!(a.request, "a");
    if let Some(manual) = &manual {
        // b's cancelled 10 min requeue added nothing
        nothing_for_a_long_time(&mut rx).await;
        manual.advance(HOUR - TEN_MINUTES);
    }
    let b = next(&mut rx).await;
    assert_eq!(b.request, "b");
    match manual_start {
        Some(t0) => {
            assert_eq!((a.now, b.now), (t0 + TEN_MINUTES, t0 + HOUR));
        }
        None => assert_eq!((a.at - armed, b.at - armed), (TEN_MINUTES, HOUR)),
    }
    // a's and c's cancelled 1 h requeues add nothing; all are done.
    nothing_for_a_long_time(&mut rx).await;
    if let Some(manual) = &manual {
        assert_eq!(manual.pending_timers(), 0);
        manual.advance(24 * HOUR);
        nothing_for_a_long_time(&mut rx).await;
    }
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_supersedes_the_pending_requeue_on_a_manual_clock() {
    a_reconcile_supersedes_the_pending_requeue(Some(ManualClock::new(start()))).await;
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_supersedes_the_pending_requeue_on_tokio_time_too() {
    a_reconcile_supersedes_the_pending_requeue(None).await;
}
