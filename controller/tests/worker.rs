//! Worker-loop behaviour on a paused clock with the queue fed directly: result mapping, panics,
//! timeouts, graceful shutdown, concurrency and metrics.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kcr_controller::{
    Action, Context, Controller, ControllerError, ControllerOptions, Reconciler, Terminal,
};
use kcr_queue::{RateLimiter, WorkQueue};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Deterministic exponential limiter: 1 s, 2 s, 4 s, ... per item (no jitter).
#[derive(Default)]
struct Exp {
    failures: Mutex<HashMap<String, u32>>,
}

impl RateLimiter<String> for Exp {
    fn when(&self, item: &String) -> Duration {
        let mut f = self.failures.lock();
        let n = f.entry(item.clone()).or_default();
        let d = Duration::from_secs(1 << *n);
        *n += 1;
        d
    }
    fn forget(&self, item: &String) {
        self.failures.lock().remove(item);
    }
    fn num_requeues(&self, item: &String) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

fn queue(name: &str) -> WorkQueue<String> {
    WorkQueue::builder(name)
        .rate_limiter(Exp::default())
        .build()
}

/// What a scripted reconciler should do on a call.
#[derive(Clone, Debug)]
enum Step {
    Done,
    RequeueAfter(Duration),
    Fail,
    Terminal,
    Panic,
    Sleep(Duration),
}

#[derive(Debug, Clone)]
struct Call {
    key: String,
    at: Instant,
    retries: u32,
}

/// Follows a per-key script (the last step repeats) and records every call.
#[derive(Clone, Default)]
struct Scripted {
    script: Arc<Mutex<HashMap<String, Vec<Step>>>>,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Scripted {
    fn with(self, key: &str, steps: Vec<Step>) -> Self {
        self.script.lock().insert(key.to_string(), steps);
        self
    }
    fn calls(&self, key: &str) -> Vec<Call> {
        self.calls
            .lock()
            .iter()
            .filter(|c| c.key == key)
            .cloned()
            .collect()
    }
}

impl Reconciler<String> for Scripted {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &String, ctx: &Context) -> anyhow::Result<Action> {
        let step = {
            let mut calls = self.calls.lock();
            let n = calls.iter().filter(|c| &c.key == request).count();
            calls.push(Call {
                key: request.clone(),
                at: Instant::now(),
                retries: ctx.retries(),
            });
            let script = self.script.lock();
            let steps = script.get(request).cloned().unwrap_or(vec![Step::Done]);
            steps[n.min(steps.len() - 1)].clone()
        };
        match step {
            Step::Done => Ok(Action::done()),
            Step::RequeueAfter(d) => Ok(Action::requeue_after(d)),
            Step::Fail => anyhow::bail!("transient failure"),
            Step::Terminal => Err(Terminal::msg("invalid spec").into()),
            Step::Panic => panic!("reconciler bug for {request}"),
            Step::Sleep(d) => {
                tokio::time::sleep(d).await;
                Ok(Action::done())
            }
        }
    }
}

/// Starts `controller` in a task; returns its shutdown token and join handle.
fn start<R: Reconciler<String>>(
    controller: Controller<String, R>,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), ControllerError>>,
) {
    let token = CancellationToken::new();
    let handle = tokio::spawn(controller.run(token.clone()));
    (token, handle)
}

fn gaps(calls: &[Call]) -> Vec<Duration> {
    calls.windows(2).map(|w| w[1].at - w[0].at).collect()
}

fn secs(v: &[u64]) -> Vec<Duration> {
    v.iter().map(|s| Duration::from_secs(*s)).collect()
}

#[tokio::test(start_paused = true)]
async fn errors_are_retried_with_growing_delays() {
    let r = Scripted::default().with("a", vec![Step::Fail, Step::Fail, Step::Fail, Step::Done]);
    let c = Controller::with_queue("retry", queue("retry"), r.clone(), Default::default());
    let q = c.queue().clone();
    q.add("a".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(60)).await;
    let calls = r.calls("a");
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!(gaps(&calls), secs(&[1, 2, 4]));
    assert_eq!(
        calls.iter().map(|c| c.retries).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    // done forgot the failure history
    assert_eq!(q.num_requeues(&"a".to_string()), 0);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn done_forgets_failures_so_backoff_restarts() {
    let r = Scripted::default().with(
        "a",
        vec![Step::Fail, Step::Fail, Step::Done, Step::Fail, Step::Done],
    );
    let c = Controller::with_queue("forget", queue("forget"), r.clone(), Default::default());
    let q = c.queue().clone();
    q.add("a".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(r.calls("a").len(), 3);
    assert_eq!(q.num_requeues(&"a".to_string()), 0);
    // a new event after success: the next failure backs off from the base delay again
    q.add("a".to_string());
    tokio::time::sleep(Duration::from_secs(30)).await;
    let calls = r.calls("a");
    assert_eq!(calls.len(), 5);
    assert_eq!(gaps(&calls)[0..2], secs(&[1, 2])[..]);
    assert_eq!(calls[4].at - calls[3].at, Duration::from_secs(1));
    assert_eq!(calls[3].retries, 0);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn requeue_after_is_honoured_and_resets_backoff() {
    let r = Scripted::default().with(
        "a",
        vec![
            Step::Fail,
            Step::RequeueAfter(Duration::from_secs(10)),
            Step::RequeueAfter(Duration::from_secs(25)),
            Step::Done,
        ],
    );
    let c = Controller::with_queue("requeue", queue("requeue"), r.clone(), Default::default());
    c.queue().add("a".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let calls = r.calls("a");
    assert_eq!(calls.len(), 4, "done ends the cycle: {calls:?}");
    assert_eq!(gaps(&calls), secs(&[1, 10, 25]));
    // requeue_after forgot the failure: the next attempt is not counted as a retry
    assert_eq!(calls[2].retries, 0);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn terminal_errors_are_not_retried() {
    let r = Scripted::default().with("a", vec![Step::Fail, Step::Terminal, Step::Done]);
    let c = Controller::with_queue("terminal", queue("terminal"), r.clone(), Default::default());
    let q = c.queue().clone();
    q.add("a".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(r.calls("a").len(), 2, "retried once, then terminal: stop");
    assert_eq!(q.num_requeues(&"a".to_string()), 0, "terminal forgets");
    // only a new event brings it back
    q.add("a".to_string());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(r.calls("a").len(), 3);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn panicking_reconciler_is_retried_and_worker_survives() {
    let r = Scripted::default().with("boom", vec![Step::Panic, Step::Panic, Step::Done]);
    let c = Controller::with_queue("panics", queue("panics"), r.clone(), Default::default());
    assert_eq!(c.options().max_concurrent_reconciles, 1);
    let q = c.queue().clone();
    q.add("boom".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(60)).await;
    let calls = r.calls("boom");
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(gaps(&calls), secs(&[1, 2]), "panics back off like errors");
    // the single worker is still alive
    q.add("other".to_string());
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(r.calls("other").len(), 1);
    assert!(!task.is_finished());
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn panics_propagate_when_recovery_is_off() {
    let r = Scripted::default().with("boom", vec![Step::Panic]);
    let opts = ControllerOptions {
        recover_panic: false,
        ..Default::default()
    };
    let c = Controller::with_queue("propagate", queue("propagate"), r.clone(), opts);
    c.queue().add("boom".to_string());
    let (_stop, task) = start(c);
    let err = task.await.expect_err("run re-raises the panic");
    assert!(err.is_panic());
    let payload = err.into_panic();
    let msg = payload
        .downcast_ref::<String>()
        .expect("panic! with format args gives a String");
    assert_eq!(msg, "reconciler bug for boom");
}

#[tokio::test(start_paused = true)]
async fn slow_reconciles_time_out_and_are_retried() {
    let r = Scripted::default().with(
        "slow",
        vec![Step::Sleep(Duration::from_secs(100)), Step::Done],
    );
    let opts = ControllerOptions {
        reconcile_timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let c = Controller::with_queue("timeouts", queue("timeouts"), r.clone(), opts);
    c.queue().add("slow".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(60)).await;
    let calls = r.calls("slow");
    assert_eq!(calls.len(), 2);
    // 5 s timeout, then the 1 s backoff
    assert_eq!(gaps(&calls), secs(&[6]));
    assert_eq!(calls[1].retries, 1);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_waits_for_in_flight_and_starts_nothing_new() {
    let r = Scripted::default()
        .with("a", vec![Step::Sleep(Duration::from_secs(10))])
        .with("b", vec![Step::Done]);
    let c = Controller::with_queue("graceful", queue("graceful"), r.clone(), Default::default());
    let q = c.queue().clone();
    q.add("a".to_string());
    q.add("b".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(r.calls("a").len(), 1, "a is in flight");
    let t0 = Instant::now();
    stop.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(
        Instant::now() - t0,
        Duration::from_secs(9),
        "run returned only once a finished"
    );
    assert!(r.calls("b").is_empty(), "no new work after shutdown began");
    assert!(q.is_shutting_down());
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_is_bounded() {
    let r = Scripted::default().with("a", vec![Step::Sleep(Duration::from_secs(1000))]);
    let opts = ControllerOptions {
        graceful_shutdown_timeout: Duration::from_secs(3),
        ..Default::default()
    };
    let c = Controller::with_queue("bounded", queue("bounded"), r.clone(), opts);
    c.queue().add("a".to_string());
    let (stop, task) = start(c);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t0 = Instant::now();
    stop.cancel();
    let err = task
        .await
        .unwrap()
        .expect_err("in-flight reconcile outlives the timeout");
    assert_eq!(Instant::now() - t0, Duration::from_secs(3));
    match err {
        ControllerError::ShutdownTimeout { in_flight, .. } => assert_eq!(in_flight, 1),
        other => panic!("unexpected error {other}"),
    }
}

/// Tracks concurrency per key and overall.
#[derive(Default)]
struct Tracker {
    running: Mutex<HashSet<String>>,
    max_running: AtomicUsize,
    overlap: AtomicUsize,
    done: Mutex<HashMap<String, usize>>,
    seed: Mutex<u64>,
}

impl Reconciler<String> for Tracker {
    type Error = String;
    async fn reconcile(&self, request: &String, _ctx: &Context) -> Result<Action, String> {
        let (pause, fail) = {
            let mut running = self.running.lock();
            if !running.insert(request.clone()) {
                self.overlap.fetch_add(1, Ordering::SeqCst);
            }
            self.max_running.fetch_max(running.len(), Ordering::SeqCst);
            let mut seed = self.seed.lock();
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 33) % 50, (*seed >> 20).is_multiple_of(10))
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
        self.running.lock().remove(request);
        if fail {
            return Err(format!("random failure of {request}"));
        }
        *self.done.lock().entry(request.clone()).or_default() += 1;
        Ok(Action::done())
    }
}

#[tokio::test(start_paused = true)]
async fn many_producers_many_workers_never_overlap_a_key() {
    for (seed, workers) in [(1u64, 4usize), (7, 8), (42, 3)] {
        let tracker = Arc::new(Tracker {
            seed: Mutex::new(seed),
            ..Default::default()
        });
        let opts = ControllerOptions {
            max_concurrent_reconciles: workers,
            ..Default::default()
        };
        let c = Controller::with_queue("concurrency", queue("concurrency"), tracker.clone(), opts);
        let q = c.queue().clone();
        let (stop, task) = start(c);
        let mut producers = Vec::new();
        for p in 0..5u64 {
            let q = q.clone();
            producers.push(tokio::spawn(async move {
                for i in 0..200u64 {
                    q.add(format!("key-{}", (i * 7 + p * 13 + seed) % 17));
                    if i % 10 == 0 {
                        tokio::time::sleep(Duration::from_millis(3 + p)).await;
                    }
                }
            }));
        }
        for p in producers {
            p.await.unwrap();
        }
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(tracker.overlap.load(Ordering::SeqCst), 0);
        let max = tracker.max_running.load(Ordering::SeqCst);
        assert!(
            max <= workers && max > 1,
            "max concurrency {max} with {workers} workers"
        );
        let reconciled = tracker.done.lock().len();
        assert_eq!(
            reconciled, 17,
            "every key eventually reconciled successfully"
        );
        assert!(q.is_empty());
        stop.cancel();
        task.await.unwrap().unwrap();
    }
}

type Metrics = Vec<(String, Vec<(String, String)>, DebugValue)>;

/// One snapshot (the debugging recorder resets values when snapshotted).
fn take(snap: &Snapshotter) -> Metrics {
    snap.snapshot()
        .into_vec()
        .into_iter()
        .map(|(ck, _, _, v)| {
            let key = ck.key();
            let labels = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            (key.name().to_string(), labels, v)
        })
        .collect()
}

fn value<'a>(m: &'a Metrics, name: &str, labels: &[(&str, &str)]) -> Option<&'a DebugValue> {
    m.iter()
        .find(|(n, ls, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| v)
}

fn counter(m: &Metrics, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
    match value(m, name, labels) {
        Some(DebugValue::Counter(c)) => Some(*c),
        _ => None,
    }
}

fn gauge(m: &Metrics, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    match value(m, name, labels) {
        Some(DebugValue::Gauge(g)) => Some(g.into_inner()),
        _ => None,
    }
}

#[test]
fn metrics_use_controller_runtime_names_and_labels() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let r = Scripted::default()
                .with("ok", vec![Step::Done])
                .with("req", vec![Step::RequeueAfter(Duration::from_secs(1000))])
                .with("fail", vec![Step::Fail, Step::Done])
                .with("term", vec![Step::Terminal])
                .with("boom", vec![Step::Panic, Step::Done]);
            let opts = ControllerOptions {
                max_concurrent_reconciles: 3,
                ..Default::default()
            };
            let c = Controller::with_queue("metered", queue("metered"), r.clone(), opts);
            let q = c.queue().clone();
            let (stop, task) = start(c);
            tokio::time::sleep(Duration::from_millis(1)).await;
            let ctl = [("controller", "metered")];
            let m = take(&snap);
            for name in [
                "controller_runtime_reconcile_errors_total",
                "controller_runtime_terminal_reconcile_errors_total",
                "controller_runtime_reconcile_panics_total",
            ] {
                assert_eq!(counter(&m, name, &ctl), Some(0), "{name} exported at zero");
            }
            for result in ["success", "error", "requeue_after"] {
                let labels = [("controller", "metered"), ("result", result)];
                assert_eq!(
                    counter(&m, "controller_runtime_reconcile_total", &labels),
                    Some(0)
                );
            }
            assert_eq!(
                gauge(&m, "controller_runtime_max_concurrent_reconciles", &ctl),
                Some(3.0)
            );

            for k in ["ok", "req", "fail", "term", "boom"] {
                q.add(k.to_string());
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
            let m = take(&snap);
            let res = |r: &str| {
                counter(
                    &m,
                    "controller_runtime_reconcile_total",
                    &[("controller", "metered"), ("result", r)],
                )
            };
            assert_eq!(res("success"), Some(3)); // ok, fail (2nd), boom (2nd)
            assert_eq!(res("requeue_after"), Some(1));
            assert_eq!(res("error"), Some(3)); // fail, term, boom
            assert_eq!(
                counter(&m, "controller_runtime_reconcile_errors_total", &ctl),
                Some(3)
            );
            assert_eq!(
                counter(
                    &m,
                    "controller_runtime_terminal_reconcile_errors_total",
                    &ctl
                ),
                Some(1)
            );
            assert_eq!(
                counter(&m, "controller_runtime_reconcile_panics_total", &ctl),
                Some(1)
            );
            assert_eq!(
                gauge(&m, "controller_runtime_active_workers", &ctl),
                Some(0.0)
            );
            match value(&m, "controller_runtime_reconcile_time_seconds", &ctl) {
                Some(DebugValue::Histogram(h)) => assert_eq!(h.len(), 7),
                other => panic!("reconcile_time_seconds: {other:?}"),
            }
            // the queue's metrics carry the controller's name
            assert!(
                m.iter().any(|(n, ls, _)| n.starts_with("workqueue_")
                    && ls.iter().any(|(k, v)| k == "name" && v == "metered")),
                "workqueue_* labelled name=metered: {:?}",
                m.iter().map(|(n, ls, _)| (n, ls)).collect::<Vec<_>>()
            );
            stop.cancel();
            task.await.unwrap().unwrap();
        })
    });
}
