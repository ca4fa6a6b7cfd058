//! The [`Controller`]: N workers taking requests from a [`WorkQueue`], calling the
//! [`Reconciler`] and mapping each outcome back onto the queue (see the table in
//! [`reconciler`](crate::reconciler)).
//!
//! Guarantees:
//! - at most `max_concurrent_reconciles` reconciles run at once, and never two for one request
//!   (the queue hands a key to one worker at a time);
//! - a panic inside a reconcile is caught (unless [`ControllerOptions::recover_panic`] is off):
//!   the worker survives, the panic is logged with the request, counted in
//!   `controller_runtime_reconcile_panics_total`, and the request is retried with backoff;
//! - an optional per-reconcile timeout turns a reconcile that runs too long into an error;
//! - on shutdown the queue stops handing out work, in-flight reconciles finish (bounded by
//!   [`ControllerOptions::graceful_shutdown_timeout`]), and no new reconcile starts.
//!
//! Reconcilers read the time through [`Context::now`], on [`ControllerOptions::clock`]. Under a
//! [`ManualClock`](crate::ManualClock) an [`Action::requeue_after`] waits for that clock, not
//! for real time (see [`crate::clock`]).

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use kcr_queue::{WorkItem, WorkQueue};
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use futures::future::BoxFuture;

use crate::clock::Clock;
use crate::error::ControllerError;
use crate::error_policy::{ErrorAction, ErrorPolicy};
use crate::log::{LogConstructor, ReconcileInfo, default_span};
use crate::metrics::ControllerMetrics;
use crate::reason::{ReconcileReason, reason_of, with_reason, with_tag};
use crate::reconciler::{Action, Context, ContextShared, ReconcileError, Reconciler};
use crate::watch::{BoxError, Watch};

/// The bounds a queue key (a request) must satisfy to be reconciled by a [`Controller`].
pub trait Key: Hash + Eq + Clone + Send + Sync + fmt::Debug + fmt::Display + 'static {}
impl<T: Hash + Eq + Clone + Send + Sync + fmt::Debug + fmt::Display + 'static> Key for T {}

/// Default for [`ControllerOptions::cache_sync_timeout`] (as in controller-runtime).
pub const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(120);
/// Default for [`ControllerOptions::graceful_shutdown_timeout`].
pub const DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a cache-sync timeout may spend asking the API server why.
const DIAGNOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Tunables of a [`Controller`].
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Number of workers, i.e. reconciles that may run at once (for different requests).
    /// Default 1; 0 is treated as 1.
    pub max_concurrent_reconciles: usize,
    /// If set, a reconcile running longer than this is cancelled and reported as an error.
    pub reconcile_timeout: Option<Duration>,
    /// Catch panics in reconciles (default `true`). When `false`, a panic tears down the
    /// controller: [`Controller::run`] re-raises it.
    pub recover_panic: bool,
    /// How long start-up waits for every source to sync before failing.
    pub cache_sync_timeout: Duration,
    /// How long a shutdown waits for in-flight reconciles before abandoning them.
    pub graceful_shutdown_timeout: Duration,
    /// The clock reconcilers read through [`Context::now`] and [`Context::clock`]. Default: the
    /// system clock. Under a [`ManualClock`](crate::ManualClock)'s clock an
    /// [`Action::requeue_after`] adds the request back once that clock has been advanced by the
    /// delay (not on tokio time); everything else (rate-limited retries, the timeouts above)
    /// stays on real (tokio) time. See [`crate::clock`].
    pub clock: Clock,
    /// Whether the controller runs only on the leader (default `true`). A [`Manager`](crate::Manager)
    /// with leader election starts a controller without it at once, on every replica (one that
    /// only reads, or that coordinates through the API server by other means).
    pub needs_leader_election: bool,
    /// Warm up before leadership (default `false`): under a [`Manager`](crate::Manager) with
    /// leader election, the controller's watches start at once on every replica and their
    /// events enqueue requests, but its workers start only once the replica leads. A new
    /// leader then reconciles at once, with every key already queued, instead of waiting for
    /// its watches to start and replay the caches.
    ///
    /// The cost is on the standby replicas. The manager's shared cache already starts a kind's
    /// informer when a controller of it is built, on every replica (its list and watch requests
    /// and its memory are paid with or without warmup); warmup adds a queue entry per key (no
    /// object copies) and the handlers' and predicates' work for each event. It makes no
    /// extra API requests. Without leader election it changes nothing.
    pub warmup: bool,
    /// Coalesce the events of one request within this window (default `None`: off). The first
    /// event for a request schedules its reconcile `debounce` later; events for it until then
    /// fold into that one reconcile. A steady stream of events therefore still gets a
    /// reconcile every `debounce` (never starved). Requests added to
    /// [`Controller::queue`] directly, requeues and retries are not delayed; debounced adds
    /// take the default priority.
    pub debounce: Option<Duration>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            max_concurrent_reconciles: 1,
            reconcile_timeout: None,
            recover_panic: true,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            graceful_shutdown_timeout: DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT,
            clock: Clock::system(),
            needs_leader_election: true,
            warmup: false,
            debounce: None,
        }
    }
}

/// A controller: watches (sources → predicates → handler → queue) plus workers that reconcile
/// what the queue hands out. Usually made with [`Builder`](crate::Builder); this type is also
/// usable on its own with a queue fed directly.
pub struct Controller<K: Key, R: Reconciler<K>> {
    name: Arc<str>,
    queue: WorkQueue<K>,
    reconciler: Arc<R>,
    options: ControllerOptions,
    watches: Vec<Box<dyn Watch<K>>>,
    error_policy: Option<ErrorPolicy<R::Error>>,
    log_constructor: Option<LogConstructor<K>>,
    /// The primary kind's group and kind (the span's `controllerGroup` and `controllerKind`).
    group: Arc<str>,
    kind: Arc<str>,
    /// Where [`Context::event`] publishes (a manager's recorder for this controller).
    recorder: Option<kube::runtime::events::Recorder>,
}

impl<K: Key, R: Reconciler<K>> fmt::Debug for Controller<K, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("options", &self.options)
            .field("watches", &self.watches.len())
            .finish()
    }
}

impl<K: Key, R: Reconciler<K>> Controller<K, R> {
    /// A controller named `name` with a queue of the same name (default rate limiter).
    pub fn new(name: impl Into<String>, reconciler: R, options: ControllerOptions) -> Self {
        let name = name.into();
        let queue = WorkQueue::new(name.clone());
        Self::with_queue(name, queue, reconciler, options)
    }

    /// A controller using the given queue (name it after the controller so that the `workqueue_*`
    /// metrics carry the controller's name).
    pub fn with_queue(
        name: impl Into<String>,
        queue: WorkQueue<K>,
        reconciler: R,
        options: ControllerOptions,
    ) -> Self {
        Controller {
            name: Arc::from(name.into()),
            queue,
            reconciler: Arc::new(reconciler),
            options,
            watches: Vec::new(),
            error_policy: None,
            log_constructor: None,
            group: Arc::from(""),
            kind: Arc::from(""),
            recorder: None,
        }
    }

    /// Sets the recorder [`Context::event`] publishes through (a
    /// [`Manager`](crate::Manager) sets its own for the controllers it runs:
    /// [`Manager::event_recorder`](crate::Manager::event_recorder) of the controller's name).
    #[must_use]
    pub fn with_event_recorder(mut self, recorder: kube::runtime::events::Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Sets the recorder unless one is set.
    pub(crate) fn default_event_recorder(&mut self, recorder: kube::runtime::events::Recorder) {
        self.recorder.get_or_insert(recorder);
    }

    /// Sets the error policy: what happens to a request whose reconcile returned a
    /// non-terminal error (see [`crate::error_policy`]). Without one, it is retried with the
    /// rate limiter's backoff.
    #[must_use]
    pub fn with_error_policy(
        mut self,
        policy: impl Fn(&R::Error, &Context) -> ErrorAction + Send + Sync + 'static,
    ) -> Self {
        self.error_policy = Some(Arc::new(policy));
        self
    }

    /// The error policy as the builder carries it.
    pub(crate) fn set_error_policy(&mut self, policy: ErrorPolicy<R::Error>) {
        self.error_policy = Some(policy);
    }

    /// Sets the function that makes each reconcile's tracing span (see [`crate::log`]; the
    /// default is [`crate::log::default_span`]).
    #[must_use]
    pub fn with_log_constructor(
        mut self,
        constructor: impl Fn(&ReconcileInfo<'_, K>) -> tracing::Span + Send + Sync + 'static,
    ) -> Self {
        self.log_constructor = Some(Arc::new(constructor));
        self
    }

    /// The log constructor as the builder carries it.
    pub(crate) fn set_log_constructor(&mut self, constructor: LogConstructor<K>) {
        self.log_constructor = Some(constructor);
    }

    /// Names the controller's primary kind (`""` group for the core group): the
    /// `controllerGroup` and `controllerKind` of its reconcile spans. The
    /// [`Builder`](crate::Builder) sets it from [`for_kind`](crate::Builder::for_kind).
    #[must_use]
    pub fn with_primary_kind(mut self, group: &str, kind: &str) -> Self {
        self.group = Arc::from(group);
        self.kind = Arc::from(kind);
        self
    }

    /// Adds a watch (usually done by the [`Builder`](crate::Builder)).
    pub fn add_watch(&mut self, watch: Box<dyn Watch<K>>) {
        self.watches.push(watch);
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The controller's queue (clone it to enqueue requests from elsewhere).
    pub fn queue(&self) -> &WorkQueue<K> {
        &self.queue
    }

    /// The controller's options.
    pub fn options(&self) -> &ControllerOptions {
        &self.options
    }

    /// Replaces the controller's clock (the manager gives its clock to the controllers it runs).
    pub(crate) fn set_clock(&mut self, clock: Clock) {
        self.options.clock = clock;
    }

    /// Runs the controller until `shutdown` is cancelled (or the queue is shut down elsewhere):
    /// starts every watch, waits for them to sync within `cache_sync_timeout`, then runs
    /// `max_concurrent_reconciles` workers. On shutdown, stops taking work and waits for in-flight
    /// reconciles up to `graceful_shutdown_timeout`.
    ///
    /// Errors: a watch that failed to start or sync ([`ControllerError::CacheSyncTimeout`],
    /// [`ControllerError::WatchStart`]), a watch that failed while running
    /// ([`ControllerError::WatchFailed`]: it lost events it could not resync), or in-flight
    /// reconciles that outlived the shutdown timeout ([`ControllerError::ShutdownTimeout`]).
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ControllerError> {
        self.run_with_ready(shutdown, None, None).await
    }

    /// Like [`run`](Self::run), and calls `on_synced` once every watch has synced (the manager
    /// uses it for `/readyz`); with `start_workers`, the workers start only once it resolves
    /// (a warm standby waiting for leadership).
    pub(crate) async fn run_with_ready(
        self,
        shutdown: CancellationToken,
        on_synced: Option<Box<dyn FnOnce() + Send>>,
        start_workers: Option<BoxFuture<'static, ()>>,
    ) -> Result<(), ControllerError> {
        let Controller {
            name,
            queue,
            reconciler,
            options,
            watches,
            error_policy,
            log_constructor,
            group,
            kind,
            recorder,
        } = self;
        let workers = options.max_concurrent_reconciles.max(1);
        let metrics = ControllerMetrics::new(&name);
        metrics.max_concurrent.set(workers as f64);

        let debounce = options.debounce.filter(|d| !d.is_zero());
        let watch_queue = match debounce {
            Some(_) => WorkQueue::builder(format!("{name}-debounce"))
                .metrics(false)
                .build(),
            None => queue.clone(),
        };
        let mut forwarder = None;
        if let Some(window) = debounce {
            let (ingress, target) = (watch_queue.clone(), queue.clone());
            forwarder = Some(AbortOnDrop(tokio::spawn(async move {
                while let Some(item) = ingress.get().await {
                    // The reason travels on: the first event's.
                    with_tag(item.take_tag(), || {
                        target.add_after((*item).clone(), window)
                    });
                    item.done();
                }
            })));
        }
        let _stop_debounce = scopeguard_shutdown(&watch_queue, debounce.is_some());

        // Stop the watch pumps when we return, whatever the reason.
        let watch_stop = shutdown.child_token();
        let _stop_watches = watch_stop.clone().drop_guard();

        // Start every watch, then wait for all of them to sync.
        let mut pumps: Pumps = JoinSet::new();
        let mut pending_sync = Vec::with_capacity(watches.len());
        for watch in watches {
            let description = watch.describe();
            let started = watch
                .start(watch_queue.clone(), watch_stop.clone())
                .await
                .map_err(|source| ControllerError::WatchStart {
                    controller: name.to_string(),
                    watch: description.clone(),
                    source,
                })?;
            pending_sync.push((description.clone(), started.synced, started.diagnose));
            let pump = started.pump;
            pumps.spawn(async move { pump.await.map_err(|source| (description, source)) });
        }
        if !pending_sync.is_empty() {
            tracing::info!(controller = %name, watches = pending_sync.len(), "waiting for caches to sync");
            let deadline = tokio::time::Instant::now() + options.cache_sync_timeout;
            for (description, synced, diagnose) in pending_sync {
                let synced = tokio::time::timeout_at(deadline, synced);
                let Some(res) = until_stopped(synced, &shutdown, &mut pumps, &queue, &name).await?
                else {
                    return Ok(());
                };
                match res {
                    Ok(Ok(())) => {}
                    Ok(Err(reason)) => {
                        return Err(ControllerError::WatchStart {
                            controller: name.to_string(),
                            watch: description,
                            source: reason,
                        });
                    }
                    Err(_) => {
                        let diagnosis = tokio::time::timeout(DIAGNOSE_TIMEOUT, diagnose())
                            .await
                            .ok()
                            .flatten();
                        return Err(ControllerError::CacheSyncTimeout {
                            controller: name.to_string(),
                            watch: description,
                            timeout: options.cache_sync_timeout,
                            diagnosis,
                        });
                    }
                }
            }
        }
        if let Some(on_synced) = on_synced {
            on_synced();
        }
        if let Some(gate) = start_workers {
            tracing::info!(controller = %name, "caches warm; waiting for leadership to start workers");
            if until_stopped(gate, &shutdown, &mut pumps, &queue, &name)
                .await?
                .is_none()
            {
                return Ok(());
            }
        }
        tracing::info!(controller = %name, workers, "starting workers");

        let ctx_shutdown = shutdown.child_token();
        let worker = Arc::new(Worker {
            name: name.clone(),
            queue: queue.clone(),
            reconciler,
            metrics,
            reconcile_timeout: options.reconcile_timeout,
            recover_panic: options.recover_panic,
            ctx: Arc::new(ContextShared {
                controller: name.clone(),
                shutdown: ctx_shutdown.clone(),
                clock: options.clock.clone(),
                recorder,
            }),
            manual_requeues: Arc::default(),
            next_requeue: AtomicU64::new(0),
            error_policy,
            log_constructor,
            group,
            kind,
        });
        let mut set = JoinSet::new();
        for _ in 0..workers {
            let w = worker.clone();
            set.spawn(async move { w.run().await });
        }

        // Run until shutdown is requested, or every worker stopped on its own (the queue was shut
        // down elsewhere), or a worker panicked with panic recovery off, or a watch failed.
        let mut panicked = None;
        let mut failed = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                res = set.join_next() => {
                    if let Some(Err(e)) = res
                        && e.is_panic()
                    {
                        panicked = Some(e.into_panic());
                    }
                    break;
                }
                Some(res) = pumps.join_next() => {
                    // A pump that ended because its source did is no reason to stop.
                    if let Ok(Err((watch, source))) = res {
                        tracing::error!(controller = %name, %watch, error = %source, "watch failed; stopping");
                        failed = Some(ControllerError::WatchFailed {
                            controller: name.to_string(),
                            watch,
                            source,
                        });
                        break;
                    }
                }
            }
        }

        tracing::info!(controller = %name, "shutting down: no new work, waiting for in-flight reconciles");
        ctx_shutdown.cancel();
        queue.shutdown();
        pumps.abort_all();
        drop(forwarder);
        let drained = tokio::time::timeout(options.graceful_shutdown_timeout, async {
            while let Some(res) = set.join_next().await {
                if let Err(e) = res
                    && e.is_panic()
                    && panicked.is_none()
                {
                    panicked = Some(e.into_panic());
                }
            }
        })
        .await;
        if let Some(payload) = panicked {
            std::panic::resume_unwind(payload);
        }
        if let Some(error) = failed {
            set.abort_all();
            return Err(error);
        }
        match drained {
            Ok(()) => {
                tracing::info!(controller = %name, "all workers finished");
                Ok(())
            }
            Err(_) => {
                let in_flight = set.len();
                set.abort_all();
                Err(ControllerError::ShutdownTimeout {
                    controller: name.to_string(),
                    timeout: options.graceful_shutdown_timeout,
                    in_flight,
                })
            }
        }
    }
}

/// State shared by the workers of one controller.
struct Worker<K: Key, R: Reconciler<K>> {
    name: Arc<str>,
    queue: WorkQueue<K>,
    reconciler: Arc<R>,
    metrics: ControllerMetrics,
    reconcile_timeout: Option<Duration>,
    recover_panic: bool,
    ctx: Arc<ContextShared>,
    /// Under a manual clock: the token of each request's pending requeue (see
    /// [`Worker::requeue_on_manual_clock`]).
    manual_requeues: Arc<Mutex<HashMap<K, u64>>>,
    /// The next requeue token.
    next_requeue: AtomicU64,
    error_policy: Option<ErrorPolicy<R::Error>>,
    log_constructor: Option<LogConstructor<K>>,
    group: Arc<str>,
    kind: Arc<str>,
}

/// How one reconcile ended.
enum Outcome<E> {
    Ok(Action),
    Err(E),
    Panic(Box<dyn Any + Send>),
    Timeout(Duration),
}

impl<K: Key, R: Reconciler<K>> Worker<K, R> {
    async fn run(&self) {
        while let Some(item) = self.queue.get().await {
            self.process(item).await;
        }
    }

    async fn process(&self, item: WorkItem<K>) {
        let request: &K = &item;
        let reconcile_id = new_reconcile_id();
        let reason = reason_of(item.take_tag());
        let info = ReconcileInfo {
            controller: &self.name,
            group: &self.group,
            kind: &self.kind,
            request,
            reconcile_id,
            reason: &reason,
        };
        let span = match &self.log_constructor {
            Some(make) => make(&info),
            None => default_span(&info),
        };
        let retries = self.queue.num_requeues(request);
        if self.ctx.clock.is_manual() {
            // This reconcile supersedes a requeue pending on the manual clock.
            self.manual_requeues.lock().remove(request);
        }
        let ctx = Context {
            shared: self.ctx.clone(),
            reconcile_id,
            retries,
            reason,
        };
        self.metrics.active_workers.increment(1.0);
        // std's clock: the histogram measures real time even on a paused tokio clock, and it is
        // cheaper than tokio's. No clock reads at all without a metrics recorder.
        let started = self.metrics.enabled.then(std::time::Instant::now);
        let outcome = self.reconcile(request, &ctx).instrument(span.clone()).await;
        if let Some(started) = started {
            self.metrics
                .reconcile_time
                .record(started.elapsed().as_secs_f64());
        }
        self.metrics.active_workers.decrement(1.0);
        self.apply(request, &ctx, outcome, &span);
        item.done();
    }

    /// Runs the reconciler, catching panics and enforcing the timeout as configured.
    async fn reconcile(&self, request: &K, ctx: &Context) -> Outcome<R::Error> {
        let fut = self.reconciler.reconcile(request, ctx);
        let fut = async move {
            if self.recover_panic {
                match AssertUnwindSafe(fut).catch_unwind().await {
                    Ok(Ok(action)) => Outcome::Ok(action),
                    Ok(Err(e)) => Outcome::Err(e),
                    Err(payload) => Outcome::Panic(payload),
                }
            } else {
                match fut.await {
                    Ok(action) => Outcome::Ok(action),
                    Err(e) => Outcome::Err(e),
                }
            }
        };
        match self.reconcile_timeout {
            None => fut.await,
            Some(t) => tokio::time::timeout(t, fut)
                .await
                .unwrap_or(Outcome::Timeout(t)),
        }
    }

    /// Under a manual clock, arms a timer on it that adds `request` to the queue once the clock
    /// has been advanced by `delay`, and returns `true`; returns `false` on the system clock
    /// (the queue times the delay).
    ///
    /// As in the queue, where an immediate add cancels a pending delayed one, the request's next
    /// reconcile (for whatever reason) cancels the requeue: [`process`](Self::process) forgets
    /// it, and its timer then adds nothing.
    fn requeue_on_manual_clock(&self, request: &K, delay: Duration) -> bool {
        let clock = &self.ctx.clock;
        if !clock.is_manual() {
            return false;
        }
        let token = self.next_requeue.fetch_add(1, Ordering::Relaxed);
        self.manual_requeues.lock().insert(request.clone(), token);
        let queue = self.queue.clone();
        let pending = self.manual_requeues.clone();
        let request = request.clone();
        // Not under `pending`'s lock: a due timer runs at once.
        clock.schedule(delay, move || {
            let mut requeues = pending.lock();
            if requeues.get(&request) == Some(&token) {
                requeues.remove(&request);
                drop(requeues);
                with_reason(&ReconcileReason::Requeue, || queue.add(request));
            }
        })
    }

    /// Adds `request` back after the rate limiter's delay, as a retry after an error.
    fn retry_rate_limited(&self, request: &K) {
        with_reason(&ReconcileReason::ErrorRetry, || {
            self.queue.add_rate_limited(request.clone())
        });
    }

    /// Maps a reconcile's outcome onto the queue and the metrics.
    ///
    /// `retries` is the request's failure count when the reconcile started: when it was 0 there
    /// is nothing for `forget` to clear (only a failed reconcile of this request, which cannot
    /// run concurrently, adds failures), so a success skips the rate limiter's lock.
    fn apply(&self, request: &K, ctx: &Context, outcome: Outcome<R::Error>, span: &tracing::Span) {
        let m = &self.metrics;
        let retries = ctx.retries;
        match outcome {
            Outcome::Ok(action) => match action.requeue_delay() {
                None => {
                    if retries > 0 {
                        self.queue.forget(request);
                    }
                    m.result_success.increment(1);
                }
                Some(delay) => {
                    if retries > 0 {
                        self.queue.forget(request);
                    }
                    if !self.requeue_on_manual_clock(request, delay) {
                        with_reason(&ReconcileReason::Requeue, || {
                            self.queue.add_after(request.clone(), delay)
                        });
                    }
                    m.result_requeue_after.increment(1);
                }
            },
            Outcome::Err(e) => {
                m.count_error();
                if e.is_terminal() {
                    m.terminal_errors.increment(1);
                    self.queue.forget(request);
                    tracing::error!(parent: span, error = %e, "terminal reconciler error; not retrying");
                } else {
                    let action = self
                        .error_policy
                        .as_ref()
                        .map_or(ErrorAction::RateLimited, |policy| policy(&e, ctx));
                    match action {
                        ErrorAction::RateLimited => {
                            self.retry_rate_limited(request);
                            tracing::error!(parent: span, error = %e, "reconciler error; retrying with backoff");
                        }
                        ErrorAction::RequeueAfter(delay) => {
                            with_reason(&ReconcileReason::ErrorRetry, || {
                                self.queue.add_after(request.clone(), delay)
                            });
                            tracing::error!(parent: span, error = %e, ?delay, "reconciler error; retrying after the error policy's delay");
                        }
                        ErrorAction::GiveUp => {
                            self.queue.forget(request);
                            tracing::error!(parent: span, error = %e, "reconciler error; the error policy gives up");
                        }
                    }
                }
            }
            Outcome::Panic(payload) => {
                m.panics.increment(1);
                m.count_error();
                self.retry_rate_limited(request);
                tracing::error!(
                    parent: span,
                    request = %request,
                    panic = %panic_message(&*payload),
                    "observed a panic in reconciler; retrying with backoff"
                );
            }
            Outcome::Timeout(t) => {
                m.timeouts.increment(1);
                m.count_error();
                self.retry_rate_limited(request);
                tracing::error!(parent: span, timeout = ?t, "reconcile timed out; retrying with backoff");
            }
        }
    }
}

/// A random (version 4) UUID from a thread-local fast generator seeded from the OS: cheaper than
/// `Uuid::new_v4` (which asks the OS each time), which matters at hundreds of thousands of
/// reconciles per second. Reconcile ids label logs; they need uniqueness, not secrecy.
fn new_reconcile_id() -> Uuid {
    use rand::{Rng, SeedableRng};
    thread_local! {
        static RNG: std::cell::RefCell<rand::rngs::SmallRng> =
            std::cell::RefCell::new(rand::rngs::SmallRng::from_rng(&mut rand::rng()));
    }
    let bytes = RNG.with(|rng| rng.borrow_mut().random::<[u8; 16]>());
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// The message of a panic payload (`&str` or `String`), or a placeholder for other payloads.
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}

/// The watch pumps a controller runs: each ends with the watch's description and error when
/// its source lost events it cannot resync.
type Pumps = JoinSet<Result<(), (String, BoxError)>>;

/// Waits for `fut` while the controller starts (its caches syncing, or a warm standby waiting
/// for leadership): `Ok(None)` when `shutdown` comes first (the queue is shut down), an error
/// when a watch fails meanwhile (it lost events it cannot resync: the reason to stop, not the
/// wait it may then never finish). A pump that ended because its source did is no reason to
/// stop.
async fn until_stopped<T, K: Key>(
    fut: impl Future<Output = T>,
    shutdown: &CancellationToken,
    pumps: &mut Pumps,
    queue: &WorkQueue<K>,
    name: &str,
) -> Result<Option<T>, ControllerError> {
    let mut fut = std::pin::pin!(fut);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => {
                queue.shutdown();
                return Ok(None);
            }
            Some(done) = pumps.join_next() => {
                if let Ok(Err((watch, source))) = done {
                    queue.shutdown();
                    return Err(ControllerError::WatchFailed {
                        controller: name.to_string(),
                        watch,
                        source,
                    });
                }
            }
            res = &mut fut => return Ok(Some(res)),
        }
    }
}

/// Aborts a task when dropped (the debounce forwarder, whatever way `run` returns).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Shuts the debounce queue down when `run` returns (a no-op without debounce: the watches
/// then add to the controller's own queue, which `run` shuts down itself).
fn scopeguard_shutdown<K: Key>(queue: &WorkQueue<K>, debounced: bool) -> impl Drop + use<K> {
    struct Shutdown<K: Key>(Option<WorkQueue<K>>);
    impl<K: Key> Drop for Shutdown<K> {
        fn drop(&mut self) {
            if let Some(queue) = self.0.take() {
                queue.shutdown();
            }
        }
    }
    Shutdown(debounced.then(|| queue.clone()))
}
