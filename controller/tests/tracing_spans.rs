//! A tracing span per reconcile (alone in this binary: tracing's per-callsite interest cache is
//! global, so tests in other threads could race with this test's thread-local subscriber).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kcr_controller::{Action, Context, Controller, ReconcileInfo, Reconciler};
use kcr_handler::Request;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Fails the first reconcile of `ns/b`, succeeds otherwise.
#[derive(Clone, Default)]
struct FailOnce {
    failed: Arc<Mutex<HashSet<String>>>,
}

impl Reconciler<String> for FailOnce {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &String, _ctx: &Context) -> anyhow::Result<Action> {
        if request == "ns/b" && self.failed.lock().insert(request.clone()) {
            anyhow::bail!("first attempt fails");
        }
        Ok(Action::done())
    }
}

/// Records the fields of every `reconcile` span and the level of events inside them.
#[derive(Clone, Default)]
struct SpanCapture {
    spans: Arc<Mutex<Vec<HashMap<String, String>>>>,
    errors_in_span: Arc<AtomicUsize>,
}

struct FieldVisitor<'a>(&'a mut HashMap<String, String>);

impl tracing::field::Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanCapture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().name() == "reconcile" {
            let mut fields = HashMap::new();
            attrs.record(&mut FieldVisitor(&mut fields));
            self.spans.lock().push(fields);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let in_reconcile = ctx
            .event_span(event)
            .is_some_and(|s| s.name() == "reconcile");
        if in_reconcile && *event.metadata().level() == tracing::Level::ERROR {
            self.errors_in_span.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn each_reconcile_gets_a_span_with_controller_object_and_id() {
    use tracing_subscriber::layer::SubscriberExt;
    let capture = SpanCapture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let c = Controller::new("traced", FailOnce::default(), Default::default());
    c.queue().add("ns/a".to_string());
    c.queue().add("ns/b".to_string());
    let stop = CancellationToken::new();
    let task = tokio::spawn(c.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.cancel();
    task.await.unwrap().unwrap();

    let spans = capture.spans.lock().clone();
    assert_eq!(spans.len(), 3, "{spans:?}");
    for span in &spans {
        assert_eq!(span["controller"], "traced");
        assert_eq!(span["reconcileID"].len(), 36, "a UUID: {span:?}");
        assert_eq!(span["controllerGroup"], "", "no primary kind: {span:?}");
        assert_eq!(span["controllerKind"], "");
    }
    let objects: Vec<&str> = spans.iter().map(|s| s["object"].as_str()).collect();
    assert_eq!(objects, vec!["ns/a", "ns/b", "ns/b"]);
    let ids: HashSet<&str> = spans.iter().map(|s| s["reconcileID"].as_str()).collect();
    assert_eq!(ids.len(), 3, "every reconcile has its own id");
    assert_eq!(
        capture.errors_in_span.load(Ordering::SeqCst),
        1,
        "the error is logged inside the reconcile's span"
    );

    // A Request-keyed controller of a primary kind: controller-runtime's keys, namespace and
    // name apart.
    capture.spans.lock().clear();
    let c = Controller::new("deployments", RequestOk, Default::default())
        .with_primary_kind("apps", "Deployment");
    c.queue().add(Request::namespaced("web", "prod"));
    c.queue().add(Request::new("node-1", None));
    let stop = CancellationToken::new();
    let task = tokio::spawn(c.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    let spans = capture.spans.lock().clone();
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert_eq!(spans[0]["controller"], "deployments");
    assert_eq!(spans[0]["controllerGroup"], "apps");
    assert_eq!(spans[0]["controllerKind"], "Deployment");
    assert_eq!(spans[0]["namespace"], "prod");
    assert_eq!(spans[0]["name"], "web");
    assert_eq!(spans[1]["namespace"], "", "cluster-scoped: {:?}", spans[1]);
    assert_eq!(spans[1]["name"], "node-1");
    assert!(!spans[0].contains_key("object"), "{:?}", spans[0]);

    // A log constructor of the controller's own: its span and fields, with the reason.
    capture.spans.lock().clear();
    let c = Controller::new("custom", FailOnce::default(), Default::default())
        .with_log_constructor(|info: &ReconcileInfo<'_, String>| {
            tracing::info_span!(
                "reconcile",
                who = %info.controller,
                key = %info.request,
                why = %info.reason,
            )
        });
    c.queue().add("ns/b".to_string());
    let stop = CancellationToken::new();
    let task = tokio::spawn(c.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    let spans = capture.spans.lock().clone();
    assert_eq!(spans.len(), 2, "the failure and its retry: {spans:?}");
    assert_eq!(spans[0]["who"], "custom");
    assert_eq!(spans[0]["key"], "ns/b");
    assert_eq!(spans[0]["why"], "unknown", "added to the queue directly");
    assert_eq!(spans[1]["why"], "retry after error");
    assert!(!spans[0].contains_key("reconcileID"));
}

/// Succeeds at once.
struct RequestOk;

impl Reconciler<Request> for RequestOk {
    type Error = anyhow::Error;
    async fn reconcile(&self, _request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        Ok(Action::done())
    }
}
