//! The [`Reconciler`] trait, the [`Action`] a reconcile returns, the per-reconcile [`Context`] and
//! the [`ReconcileError`] classification (retryable or [`Terminal`]).
//!
//! A reconcile's outcome is mapped onto the work queue by the controller:
//!
//! | outcome | queue operation | `controller_runtime_reconcile_total{result}` |
//! |---|---|---|
//! | `Ok(Action::done())` | `forget` | `success` |
//! | `Ok(Action::requeue_after(d))` | `forget`, then `add_after(d)` (under a [`ManualClock`](crate::ManualClock): `add` once that clock is advanced by `d`) | `requeue_after` |
//! | `Err(e)`, `e.is_terminal() == false` | `add_rate_limited` (delay grows per the rate limiter) | `error` |
//! | `Err(e)`, `e.is_terminal() == true` | `forget` (never retried), counted as terminal | `error` |
//! | panic (recovered) or timeout | `add_rate_limited` | `error` |

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::clock::Clock;
use crate::reason::ReconcileReason;

/// What the controller should do with the request after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// The object is reconciled: the request's failure history is forgotten and it is not requeued
    /// (it comes back when a watched event enqueues it again).
    pub const fn done() -> Self {
        Action {
            requeue_after: None,
        }
    }

    /// Reconcile the request again after `delay`; the request's failure history is forgotten.
    pub const fn requeue_after(delay: Duration) -> Self {
        Action {
            requeue_after: Some(delay),
        }
    }

    /// The requested requeue delay, if any.
    pub const fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// Classifies a reconcile error as retryable (the default) or terminal.
///
/// A terminal error is counted (`controller_runtime_terminal_reconcile_errors_total`) and logged,
/// but the request is not retried: it returns only when a new event enqueues it. Implement this
/// for your own error enum and return `true` for the variants that retrying cannot fix (an invalid
/// spec, for instance). For `anyhow::Error` and boxed errors, wrap the cause in [`Terminal`].
pub trait ReconcileError: fmt::Debug + fmt::Display + Send + 'static {
    /// Whether retrying cannot help. Defaults to `false` (the request is retried with backoff).
    fn is_terminal(&self) -> bool {
        false
    }
}

/// A [`kcr_client::ClientError`] returned as is: terminal when retrying the same call cannot
/// succeed (a namespace the cache does not watch, a call that names no or the wrong namespace,
/// an object without a name or that does not serialize, an unknown index or a bad selector, an
/// object the API server finds invalid), retried otherwise (the API server's refusals and
/// conflicts, a cache that has not synced yet, a kind nothing watches yet).
impl ReconcileError for kcr_client::ClientError {
    fn is_terminal(&self) -> bool {
        use kcr_client::ClientError as E;
        match self {
            E::Read(_)
            | E::NamespaceRequired { .. }
            | E::NamespaceMismatch { .. }
            | E::MissingName { .. }
            | E::Serialize { .. }
            | E::Index(_)
            | E::Selector(_) => true,
            E::Api { .. } => self.is_invalid(),
            _ => false,
        }
    }
}

/// Marks an error as terminal: the controller does not retry the request.
///
/// ```
/// use kcr_controller::{ReconcileError, Terminal};
/// let err = anyhow::Error::new(Terminal::msg("spec.replicas must be positive"));
/// assert!(err.is_terminal());
/// let err = anyhow::anyhow!("API server unavailable");
/// assert!(!err.is_terminal());
/// ```
#[derive(Debug)]
pub struct Terminal {
    source: Box<dyn StdError + Send + Sync + 'static>,
}

impl Terminal {
    /// Wraps an error as terminal.
    pub fn new(source: impl Into<Box<dyn StdError + Send + Sync + 'static>>) -> Self {
        Terminal {
            source: source.into(),
        }
    }

    /// A terminal error from a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Terminal {
            source: message.to_string().into(),
        }
    }

    /// The wrapped cause.
    pub fn cause(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.source
    }
}

impl fmt::Display for Terminal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "terminal error: {}", self.source)
    }
}

impl StdError for Terminal {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

impl ReconcileError for Terminal {
    fn is_terminal(&self) -> bool {
        true
    }
}

/// Whether `err` or any error in its source chain is a [`Terminal`].
fn chain_has_terminal(err: &(dyn StdError + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if e.is::<Terminal>() {
            return true;
        }
        current = e.source();
    }
    false
}

impl ReconcileError for anyhow::Error {
    fn is_terminal(&self) -> bool {
        self.chain().any(|e| e.is::<Terminal>())
    }
}

impl ReconcileError for Box<dyn StdError + Send + Sync + 'static> {
    fn is_terminal(&self) -> bool {
        chain_has_terminal(&**self)
    }
}

impl ReconcileError for std::convert::Infallible {}

/// API errors are never terminal: a conflict, a 5xx or a dropped connection is worth a retry.
impl ReconcileError for kube::Error {}

impl ReconcileError for String {}

/// Per-reconcile information handed to [`Reconciler::reconcile`].
#[derive(Debug, Clone)]
pub struct Context {
    /// Shared by every reconcile of one controller: cloning it is one atomic increment (cloning
    /// a `CancellationToken` takes a lock, which would show at high reconcile rates).
    pub(crate) shared: Arc<ContextShared>,
    pub(crate) reconcile_id: Uuid,
    pub(crate) retries: u32,
    pub(crate) reason: ReconcileReason,
}

/// The per-controller part of a [`Context`].
pub(crate) struct ContextShared {
    pub(crate) controller: Arc<str>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) clock: Clock,
    /// Where [`Context::event`] publishes.
    pub(crate) recorder: Option<kube::runtime::events::Recorder>,
}

impl std::fmt::Debug for ContextShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextShared")
            .field("controller", &self.controller)
            .field("shutdown", &self.shutdown)
            .field("clock", &self.clock)
            .field("recorder", &self.recorder.as_ref().map(|_| "Recorder"))
            .finish()
    }
}

impl Context {
    /// Builds a context by hand (for calling a reconciler directly, e.g. in a unit test), on
    /// the system clock (see [`with_clock`](Self::with_clock)).
    pub fn new(controller: impl Into<Arc<str>>) -> Self {
        Context {
            shared: Arc::new(ContextShared {
                controller: controller.into(),
                shutdown: CancellationToken::new(),
                clock: Clock::system(),
                recorder: None,
            }),
            reconcile_id: Uuid::new_v4(),
            retries: 0,
            reason: ReconcileReason::Unknown,
        }
    }

    /// This context with `reason` as its [`reason`](Self::reason) (for calling a reconciler by
    /// hand).
    #[must_use]
    pub fn with_reason(mut self, reason: ReconcileReason) -> Self {
        self.reason = reason;
        self
    }

    /// Why this reconcile runs (see [`crate::reason`]): the first trigger recorded for the
    /// request since its previous reconcile.
    pub fn reason(&self) -> &ReconcileReason {
        &self.reason
    }

    /// This context reading `clock` (a [`ManualClock`](crate::ManualClock)'s, typically), for
    /// calling a reconciler by hand at a time the test chooses:
    ///
    /// ```
    /// use kcr_controller::{Context, ManualClock};
    /// let manual = ManualClock::new("2024-05-01T00:00:00Z".parse().unwrap());
    /// let ctx = Context::new("cronjob").with_clock(manual.clock());
    /// assert_eq!(ctx.now(), manual.now());
    /// ```
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.shared = Arc::new(ContextShared {
            controller: self.shared.controller.clone(),
            shutdown: self.shared.shutdown.clone(),
            clock,
            recorder: self.shared.recorder.clone(),
        });
        self
    }

    /// A context that publishes [`events`](Self::event) through `recorder` (a reconciler
    /// called by hand, in a test).
    #[must_use]
    pub fn with_event_recorder(mut self, recorder: kube::runtime::events::Recorder) -> Self {
        self.shared = Arc::new(ContextShared {
            controller: self.shared.controller.clone(),
            shutdown: self.shared.shutdown.clone(),
            clock: self.shared.clock.clone(),
            recorder: Some(recorder),
        });
        self
    }

    /// The controller's name.
    pub fn controller(&self) -> &str {
        &self.shared.controller
    }

    /// A unique id for this reconcile (also recorded on the reconcile's tracing span).
    pub fn reconcile_id(&self) -> Uuid {
        self.reconcile_id
    }

    /// How many times this request has been retried after errors so far (the queue's
    /// `num_requeues`): 0 on a first attempt.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Cancelled when the controller begins a graceful shutdown. In-flight reconciles may watch it
    /// to finish early; the controller waits for them either way (up to its shutdown timeout).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shared.shutdown
    }

    /// The controller's clock ([`ControllerOptions::clock`](crate::ControllerOptions::clock)):
    /// the system clock unless a test gave the controller a
    /// [`ManualClock`](crate::ManualClock)'s. Sleep on it with [`Clock::sleep`].
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// The current time on the controller's [`clock`](Self::clock). Read the time through this
    /// (not `Timestamp::now()` or `SystemTime::now()`) in a schedule-driven reconciler, so that
    /// a test can move it.
    pub fn now(&self) -> jiff::Timestamp {
        self.shared.clock.now()
    }

    /// Publishes a Kubernetes Event about `object` (`events.k8s.io/v1`, the API a test lists;
    /// kube's recorder, which also counts repeats into an event series) through the
    /// controller's recorder: a [`Manager`](crate::Manager)'s for the controllers it runs,
    /// reporting `<event_reporter>/<controller>`. `reason` is CamelCase (`Created`,
    /// `ScaleFailed`); the action is the reason too.
    ///
    /// ```no_run
    /// # async fn demo(ctx: &kcr_controller::Context, cm: &k8s_openapi::api::core::v1::ConfigMap) -> Result<(), kcr_controller::EventError> {
    /// use kcr_controller::EventType;
    /// ctx.event(cm, EventType::Normal, "Copied", "copied into secret app-copy").await?;
    /// # Ok(()) }
    /// ```
    pub async fn event<O>(
        &self,
        object: &O,
        type_: kube::runtime::events::EventType,
        reason: &str,
        message: impl Into<String>,
    ) -> Result<(), EventError>
    where
        O: kube::Resource<DynamicType = ()>,
    {
        let Some(recorder) = &self.shared.recorder else {
            return Err(EventError::NoRecorder {
                controller: self.shared.controller.to_string(),
            });
        };
        let event = kube::runtime::events::Event {
            type_,
            reason: reason.to_owned(),
            note: Some(message.into()),
            action: reason.to_owned(),
            secondary: None,
        };
        recorder
            .publish(&event, &object.object_ref(&()))
            .await
            .map_err(|source| EventError::Publish {
                controller: self.shared.controller.to_string(),
                reason: reason.to_owned(),
                source,
            })
    }
}

/// Why [`Context::event`] published nothing.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The controller has no recorder: it runs outside a manager, and none was given
    /// ([`Controller::with_event_recorder`](crate::Controller::with_event_recorder)).
    #[error("controller {controller} has no event recorder (it runs outside a manager)")]
    NoRecorder {
        /// The controller.
        controller: String,
    },
    /// The API server refused the Event.
    #[error("controller {controller}: publishing the event {reason}: {source}")]
    Publish {
        /// The controller.
        controller: String,
        /// The event's reason.
        reason: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
}

/// Brings the state of the world in line with the desired state of one object.
///
/// The controller calls `reconcile` with the request it took from the queue; the queue guarantees
/// that one request is never reconciled by two workers at once. Implement it with an `async fn`:
///
/// ```
/// use kcr_controller::{Action, Context, Reconciler};
/// use std::time::Duration;
///
/// struct Noop;
/// impl Reconciler<String> for Noop {
///     type Error = anyhow::Error;
///     async fn reconcile(&self, request: &String, _ctx: &Context) -> Result<Action, Self::Error> {
///         if request.is_empty() {
///             anyhow::bail!("empty request");
///         }
///         Ok(Action::requeue_after(Duration::from_secs(300)))
///     }
/// }
/// ```
pub trait Reconciler<K>: Send + Sync + 'static {
    /// The error type; see [`ReconcileError`] for terminal errors.
    type Error: ReconcileError;

    /// Reconciles one request.
    fn reconcile(
        &self,
        request: &K,
        ctx: &Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

impl<K, R: Reconciler<K>> Reconciler<K> for Arc<R> {
    type Error = R::Error;

    fn reconcile(
        &self,
        request: &K,
        ctx: &Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        (**self).reconcile(request, ctx)
    }
}

/// A reconciler made from a closure that takes the request and context by value; see
/// [`reconciler_fn`].
pub struct FnReconciler<F> {
    f: F,
}

/// Makes a [`Reconciler`] from a closure `Fn(K, Context) -> impl Future<Output = Result<Action, E>>`.
///
/// ```
/// use kcr_controller::{reconciler_fn, Action, Context};
/// let r = reconciler_fn(|request: String, _ctx: Context| async move {
///     println!("reconciling {request}");
///     Ok::<_, anyhow::Error>(Action::done())
/// });
/// # let _ = r;
/// ```
pub fn reconciler_fn<K, F, Fut, E>(f: F) -> FnReconciler<F>
where
    K: Clone,
    F: Fn(K, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: ReconcileError,
{
    FnReconciler { f }
}

impl<K, F, Fut, E> Reconciler<K> for FnReconciler<F>
where
    K: Clone,
    F: Fn(K, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: ReconcileError,
{
    type Error = E;

    fn reconcile(
        &self,
        request: &K,
        ctx: &Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        (self.f)(request.clone(), ctx.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum MyError {
        #[error("bad spec")]
        BadSpec,
        #[error("api")]
        Api,
    }

    impl ReconcileError for MyError {
        fn is_terminal(&self) -> bool {
            matches!(self, MyError::BadSpec)
        }
    }

    #[test]
    fn action_constructors() {
        assert_eq!(Action::done().requeue_delay(), None);
        assert_eq!(Action::default(), Action::done());
        assert_eq!(
            Action::requeue_after(Duration::from_secs(3)).requeue_delay(),
            Some(Duration::from_secs(3))
        );
    }

    #[test]
    fn terminal_classification() {
        assert!(MyError::BadSpec.is_terminal());
        assert!(!MyError::Api.is_terminal());
        assert!(Terminal::msg("x").is_terminal());
        assert_eq!(Terminal::msg("boom").to_string(), "terminal error: boom");
        assert_eq!(Terminal::msg("boom").cause().to_string(), "boom");

        let plain = anyhow::anyhow!("plain");
        assert!(!plain.is_terminal());
        let wrapped = anyhow::Error::new(Terminal::new(MyError::Api)).context("while patching");
        assert!(wrapped.is_terminal());

        let boxed: Box<dyn StdError + Send + Sync> = Box::new(Terminal::msg("x"));
        assert!(boxed.is_terminal());
        let boxed: Box<dyn StdError + Send + Sync> = "just a string".into();
        assert!(!boxed.is_terminal());
        assert!(!String::from("s").is_terminal());
    }

    #[test]
    fn with_clock_reads_the_manual_time_and_keeps_the_rest() {
        let ctx = Context::new("c");
        assert!(!ctx.clock().is_manual());
        let before = jiff::Timestamp::now();
        assert!(ctx.now() >= before);

        let start: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let manual = crate::ManualClock::new(start);
        let token = ctx.shutdown().clone();
        let (id, retries) = (ctx.reconcile_id(), ctx.retries());
        let ctx = ctx.with_clock(manual.clock());
        assert!(ctx.clock().is_manual());
        assert_eq!(ctx.now(), start);
        manual.advance(Duration::from_secs(90));
        assert_eq!(ctx.now(), start + Duration::from_secs(90));
        assert_eq!(ctx.controller(), "c");
        assert_eq!((ctx.reconcile_id(), ctx.retries()), (id, retries));
        token.cancel();
        assert!(ctx.shutdown().is_cancelled(), "the same shutdown token");
    }

    #[tokio::test]
    async fn fn_reconciler_and_arc() {
        let r = Arc::new(reconciler_fn(|req: String, ctx: Context| async move {
            assert_eq!(ctx.controller(), "c");
            if req == "bad" {
                Err(MyError::BadSpec)
            } else {
                Ok(Action::done())
            }
        }));
        let ctx = Context::new("c");
        assert_eq!(ctx.retries(), 0);
        assert!(!ctx.shutdown().is_cancelled());
        assert_eq!(
            r.reconcile(&"ok".to_string(), &ctx).await.unwrap(),
            Action::done()
        );
        assert!(r.reconcile(&"bad".to_string(), &ctx).await.is_err());
    }
}
